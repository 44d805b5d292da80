package postgres_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver

	"github.com/tranche-dev/tranche/internal/testskip"
	"github.com/tranche-dev/tranche/ledger/postgres"
)

// The tests run against the server of TRANCHE_POSTGRES_URL, a database
// they may create schemas, roles and databases in (testserver.sh starts
// one). Without it they skip, except under CI=true, where they fail:
// there, PostgreSQL tests are never silently skipped.

// serverURL returns the test server's connection string.
func serverURL(t testing.TB) string {
	t.Helper()
	url := os.Getenv("TRANCHE_POSTGRES_URL")
	if url == "" {
		testskip.Skip(t, testskip.PostgreSQL, "TRANCHE_POSTGRES_URL is not set; start a server with eval \"$(ledger/postgres/testserver.sh start)\"")
	}
	return url
}

// serverDir returns the folder of the server testserver.sh started, for
// the tests that restart it.
func serverDir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("TRANCHE_POSTGRES_DIR")
	if dir == "" {
		testskip.Skip(t, testskip.PostgreSQLDir, "TRANCHE_POSTGRES_DIR is not set: this test restarts the server, and so needs one that testserver.sh started")
	}
	return dir
}

// admin opens a connection pool to the test server's database, closed
// when the test ends.
func admin(t testing.TB, url string) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

var schemaSeq atomic.Int64

// freshSchema creates a new empty schema, dropped with everything in it
// when the test ends, and returns its name.
func freshSchema(t testing.TB, url string) string {
	t.Helper()
	name := fmt.Sprintf("t_%d_%d_%d", os.Getpid(), time.Now().UnixMilli()%1_000_000, schemaSeq.Add(1))
	db := admin(t, url)
	if _, err := db.ExecContext(t.Context(), "CREATE SCHEMA "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := db.ExecContext(ctx, "DROP SCHEMA "+name+" CASCADE"); err != nil {
			t.Logf("dropping schema %s: %v", name, err)
		}
	})
	return name
}

// openFresh opens a ledger in a fresh schema, closed when the test ends.
func openFresh(t testing.TB, url string, opts *postgres.Options) *postgres.Ledger {
	t.Helper()
	o := postgres.Options{}
	if opts != nil {
		o = *opts
	}
	o.Schema = freshSchema(t, url)
	l, err := postgres.Open(t.Context(), url, &o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("Close = %v", err)
		}
	})
	return l
}

// withParams returns url with its query parameters set as kv says.
func withParams(t testing.TB, url string, kv ...string) string {
	t.Helper()
	if _, err := pgx.ParseConfig(url); err != nil {
		t.Fatal(err)
	}
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	for i := 0; i < len(kv); i += 2 {
		url += sep + kv[i] + "=" + kv[i+1]
		sep = "&"
	}
	return url
}
