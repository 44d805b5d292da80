package postgres_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/address"
	"github.com/tranche-dev/tranche/ledger/postgres"
)

// TestReadOnlyRole opens a ledger as a role allowed only SELECT on its
// tables: with address.AccessRead (OpenReader) its backfills and
// attempts are read through a reader that has no method that writes; with AccessWrite the server refuses the write, and the error
// names the role and what to grant. The tables are unchanged.
func TestReadOnlyRole(t *testing.T) {
	url := serverURL(t)
	db := admin(t, url)
	schema := freshSchema(t, url)
	owner, err := postgres.Open(t.Context(), url, &postgres.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close()
	created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := owner.PutBackfill(t.Context(), ledger.BackfillRecord{ID: "b1", DAG: "d1", Window: "day 2026-01-01..2026-01-02 UTC", Chunk: 1, Created: created}); err != nil {
		t.Fatal(err)
	}
	name, roleURL := role(t, url)
	for _, grant := range []string{"GRANT USAGE ON SCHEMA " + schema + " TO " + name, "GRANT SELECT ON ALL TABLES IN SCHEMA " + schema + " TO " + name} {
		if _, err := db.ExecContext(t.Context(), grant); err != nil {
			t.Fatal(err)
		}
	}
	addr, err := address.Parse(roleURL + "&schema=" + schema)
	if err != nil {
		t.Fatal(err)
	}
	ro, err := postgres.OpenLedger(t.Context(), addr, address.AccessRead)
	if err != nil {
		t.Fatalf("OpenLedger(AccessRead) as a SELECT-only role: %v", err)
	}
	defer ro.(*postgres.Reader).Close()
	bs, err := ro.Backfills(t.Context())
	if err != nil || len(bs) != 1 || bs[0].ID != "b1" {
		t.Errorf("Backfills = %v, %v; want b1", bs, err)
	}
	if _, err := ro.Revision(t.Context(), "d1"); err != nil {
		t.Errorf("Revision: %v", err)
	}
	for _, err := range ro.Latest(t.Context(), "d1", created, created.AddDate(0, 0, 2)) {
		if err != nil {
			t.Errorf("Latest: %v", err)
		}
	}
	if _, err := ro.History(t.Context(), "d1", created); err != nil {
		t.Errorf("History: %v", err)
	}
	if _, ok := ro.(ledger.Writer); ok {
		t.Errorf("OpenLedger(AccessRead) = %T, a ledger.Writer; want a reader alone", ro)
	}

	rw, err := postgres.OpenLedger(t.Context(), addr, address.AccessWrite)
	if err != nil {
		t.Fatalf("OpenLedger(AccessWrite) as a SELECT-only role: %v", err)
	}
	defer rw.(*postgres.Ledger).Close()
	err = rw.(*postgres.Ledger).CancelBackfill(t.Context(), "b1", ledger.CancelOptions{})
	if !errors.Is(err, postgres.ErrPermission) || !strings.Contains(err.Error(), "role "+name) || !strings.Contains(err.Error(), "UPDATE") {
		t.Errorf("CancelBackfill as a SELECT-only role = %v; want ErrPermission naming the role and the privileges", err)
	}
	b, err := owner.Backfill(t.Context(), "b1")
	if err != nil || b.Canceled {
		t.Errorf("after the refused cancels, the backfill is %+v, %v; want it not canceled", b, err)
	}
}

// TestOpenLedgerKeyValues opens a ledger by a postgres: key=value
// address, whose host, port, database and schema are all taken.
func TestOpenLedgerKeyValues(t *testing.T) {
	url := serverURL(t)
	schema := freshSchema(t, url)
	owner, err := postgres.Open(t.Context(), url, &postgres.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close()
	if _, err := owner.PutBackfill(t.Context(), ledger.BackfillRecord{ID: "kv", DAG: "d1", Window: "day 2026-01-01..2026-01-02 UTC", Chunk: 1, Created: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	kv := fmt.Sprintf("postgres:host=%s port=%d dbname=%s user=%s sslmode=disable schema=%s", cfg.Host, cfg.Port, cfg.Database, cfg.User, schema)
	addr, err := address.Parse(kv)
	if err != nil {
		t.Fatal(err)
	}
	l, err := postgres.OpenLedger(t.Context(), addr, address.AccessRead)
	if err != nil {
		t.Fatalf("OpenLedger(%s): %v", kv, err)
	}
	defer l.(*postgres.Reader).Close()
	if bs, err := l.Backfills(t.Context()); err != nil || len(bs) != 1 || bs[0].ID != "kv" {
		t.Errorf("Backfills = %v, %v; want the schema's backfill kv", bs, err)
	}
	// A host that does not exist is tried, not left for the default.
	bad, _ := address.Parse("postgres:host=127.0.0.1 port=1 dbname=x connect_timeout=2")
	if _, err := postgres.OpenLedger(t.Context(), bad, address.AccessRead); !errors.Is(err, postgres.ErrConnect) || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Errorf("OpenLedger of port 1 = %v; want ErrConnect naming 127.0.0.1:1", err)
	}
}
