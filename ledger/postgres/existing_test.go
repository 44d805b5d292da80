package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tranche-dev/tranche/internal/schematest"
	"github.com/tranche-dev/tranche/ledger/postgres"
	"github.com/tranche-dev/tranche/ledger/sqlledger"
)

// TestOpenExistingNoSchema opens, with Options.Existing, a schema that
// does not exist: the error matches sqlledger.ErrNoLedger and names the
// schema, and information_schema shows no schema and no table created.
func TestOpenExistingNoSchema(t *testing.T) {
	url := serverURL(t)
	db := admin(t, url)
	schema := fmt.Sprintf("t_none_%d_%d", os.Getpid(), time.Now().UnixNano()%1_000_000)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		db.ExecContext(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
	})
	l, err := postgres.Open(t.Context(), url, &postgres.Options{Schema: schema, Existing: true})
	if err == nil {
		l.Close()
		t.Fatal("Open with Existing of a missing schema succeeded")
	}
	if !errors.Is(err, sqlledger.ErrNoLedger) {
		t.Errorf("Open = %v; want an error matching sqlledger.ErrNoLedger", err)
	}
	for _, s := range []string{"schema " + schema + " does not exist", "a worker's open"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("the error lacks %q: %v", s, err)
		}
	}
	var schemas, tables int
	if err := db.QueryRow(`SELECT (SELECT count(*) FROM information_schema.schemata WHERE schema_name = $1),
		(SELECT count(*) FROM information_schema.tables WHERE table_schema = $2)`, schema, schema).Scan(&schemas, &tables); err != nil {
		t.Fatal(err)
	}
	if schemas != 0 || tables != 0 {
		t.Errorf("after the refused open, %d schemas %s and %d tables in it; want none", schemas, schema, tables)
	}
}

// TestOpenExistingEmptySchema opens, with Options.Existing, a schema
// that exists without a ledger: refused with sqlledger.ErrNoLedger, and
// no table or sequence is created in it.
func TestOpenExistingEmptySchema(t *testing.T) {
	url := serverURL(t)
	db := admin(t, url)
	schema := freshSchema(t, url)
	l, err := postgres.Open(t.Context(), url, &postgres.Options{Schema: schema, Existing: true})
	if err == nil {
		l.Close()
		t.Fatal("Open with Existing of an empty schema succeeded")
	}
	if !errors.Is(err, sqlledger.ErrNoLedger) || !strings.Contains(err.Error(), "no table tranche_schema") {
		t.Errorf("Open = %v; want an error matching sqlledger.ErrNoLedger saying there is no table tranche_schema", err)
	}
	var relations int
	if err := db.QueryRow(`SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1`, schema).Scan(&relations); err != nil {
		t.Fatal(err)
	}
	if relations != 0 {
		t.Errorf("after the refused open, %d relations in schema %s; want none", relations, schema)
	}
}

// TestOpenExistingRefuses checks schematest.CheckExistingRefuses: a
// schema of another program's table, one whose tranche_schema records
// no version and a version-3 ledger are refused with Existing, every
// relation of the schema left as it was.
func TestOpenExistingRefuses(t *testing.T) {
	schematest.CheckExistingRefuses(t, subjectOf(serverURL(t)))
}

// TestOpenExistingVersion3 checks schematest.CheckExistingVersion3: a
// version-3 ledger refused with Existing reads back at version 3, and a
// worker's Open then migrates it.
func TestOpenExistingVersion3(t *testing.T) {
	schematest.CheckExistingVersion3(t, subjectOf(serverURL(t)))
}
