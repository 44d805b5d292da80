package sqlite_test

import (
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/tranche-dev/tranche/destination/sqldest"
	"github.com/tranche-dev/tranche/internal/sqldesttest"
	"github.com/tranche-dev/tranche/ledger/sqlite"
)

// sqliteEnv is the destinations' test suite's database: a ledger file,
// destinations sharing it, and a separate destination on the same file
// (its own connection, its own transactions).
func sqliteEnv(t *testing.T) *sqldesttest.Env {
	path := filepath.Join(t.TempDir(), "ledger.db")
	l, err := sqlite.Open(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	create := func(t *testing.T, d *sqlite.Destination, err error) *sqldest.Destination {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		if err := d.CreateTables(t.Context()); err != nil {
			t.Fatal(err)
		}
		return d.Destination
	}
	return &sqldesttest.Env{Ledger: l.Ledger, DB: db,
		Shared: func(t *testing.T, tables ...sqldest.Table) *sqldest.Destination {
			d, err := sqlite.NewDestination(t.Context(), l, tables...)
			return create(t, d, err)
		},
		Separate: func(t *testing.T, tables ...sqldest.Table) *sqldest.Destination {
			d, err := sqlite.OpenDestination(t.Context(), path, nil, tables...)
			return create(t, d, err)
		},
	}
}

func TestDestination(t *testing.T) {
	sqldesttest.Run(t, sqliteEnv)
}

// The SQLite destination keeps the destination contract
// (destination/destinationtest), as every shipped destination does.
func TestDestinationContract(t *testing.T) {
	sqldesttest.Contract(t, sqliteEnv)
}
