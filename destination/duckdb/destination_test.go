package duckdb_test

import (
	"database/sql"
	"path/filepath"
	"testing"

	_ "github.com/duckdb/duckdb-go/v2"

	"github.com/tranche-dev/tranche/destination/duckdb"
	"github.com/tranche-dev/tranche/destination/sqldest"
	"github.com/tranche-dev/tranche/internal/sqldesttest"
)

// duckdbEnv is the destinations' test suite's database: a DuckDB file,
// destinations opened on it, and a handle of the driver's own to read
// it (in the same process, which shares the open database). DuckDB
// holds no ledger: the suite skips the tests of the shared commit and
// runs its backfills on an in-memory ledger.
func duckdbEnv(t *testing.T) *sqldesttest.Env {
	path := filepath.Join(t.TempDir(), "warehouse.duckdb")
	db, err := sql.Open("duckdb", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return &sqldesttest.Env{DB: db,
		Separate: func(t *testing.T, tables ...sqldest.Table) *sqldest.Destination {
			d, err := duckdb.Open(t.Context(), path, tables...)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { d.Close() })
			if err := d.CreateTables(t.Context()); err != nil {
				t.Fatal(err)
			}
			return d.Destination
		},
	}
}

func TestDestination(t *testing.T) {
	sqldesttest.Run(t, duckdbEnv)
}

// The DuckDB destination keeps the destination contract
// (destination/destinationtest), as every shipped destination does.
func TestDestinationContract(t *testing.T) {
	sqldesttest.Contract(t, duckdbEnv)
}
