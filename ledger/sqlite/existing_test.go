package sqlite_test

import (
	"database/sql"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tranche-dev/tranche/internal/schematest"
	"github.com/tranche-dev/tranche/ledger/sqlite"
	"github.com/tranche-dev/tranche/ledger/sqlledger"
)

// TestOpenExistingRefuses opens, with Options.Existing, files that hold
// no ledger at this release's version: each is refused with the error
// its case names, and the file is left as it was, byte for byte, with no
// file created beside it. A missing and an empty file are SQLite's own
// cases; the others are schematest.CheckExistingRefuses's.
func TestOpenExistingRefuses(t *testing.T) {
	tests := []struct {
		name string
		make func(t *testing.T, path string) // nil: no file
		want []string
	}{
		{name: "missing", want: []string{"no such file", "a worker's open"}},
		{name: "empty", make: func(t *testing.T, path string) {
			f, err := os.Create(path)
			if err != nil {
				t.Fatal(err)
			}
			f.Close()
		}, want: []string{"the file is empty", "a worker's open"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "ledger.db")
			if tt.make != nil {
				tt.make(t, path)
			}
			before := schematest.FileSnapshot(t, dir)
			l, err := sqlite.Open(t.Context(), path, &sqlite.Options{Existing: true})
			if err == nil {
				l.Close()
				t.Fatal("Open with Existing succeeded; want an error")
			}
			if !errors.Is(err, sqlledger.ErrNoLedger) {
				t.Errorf("Open = %v; want an error matching %v", err, sqlledger.ErrNoLedger)
			}
			for _, s := range append(tt.want, path) {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("the error lacks %q: %v", s, err)
				}
			}
			if after := schematest.FileSnapshot(t, dir); !maps.Equal(before, after) {
				t.Errorf("the folder changed: before %v, after %v", before, after)
			}
		})
	}
	schematest.CheckExistingRefuses(t, subject)
}

// TestOpenExistingVersion3Unchanged checks
// schematest.CheckExistingVersion3: a version-3 ledger refused with
// Existing reads back at version 3, and a worker's Open then migrates
// it.
func TestOpenExistingVersion3Unchanged(t *testing.T) { schematest.CheckExistingVersion3(t, subject) }

// TestOpenRefusesOthersTables opens, without options, a database of
// another program (tables and a view of its own, no ledger): it is
// refused with an error matching sqlledger.ErrNoLedger that names its
// tables, and the folder is left as it was, byte for byte, in its
// journal mode. With Options.Shared the ledger is created beside the
// tables, which keep their rows; the ledger then opens without it.
func TestOpenRefusesOthersTables(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "app.db")
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)`,
		`CREATE TABLE orders (id INTEGER PRIMARY KEY AUTOINCREMENT, customer INTEGER)`, // AUTOINCREMENT adds sqlite_sequence
		`CREATE VIEW big_orders AS SELECT * FROM orders`,
		`INSERT INTO customers VALUES (1, 'Ada')`,
		`INSERT INTO orders (customer) VALUES (1)`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()

	before := schematest.FileSnapshot(t, dir)
	for _, opts := range []*sqlite.Options{nil, {Synchronous: "FULL"}} {
		l, err := sqlite.Open(t.Context(), path, opts)
		if err == nil {
			l.Close()
			t.Fatalf("Open(%+v) of another program's database succeeded; want a refusal", opts)
		}
		if !errors.Is(err, sqlledger.ErrNoLedger) {
			t.Errorf("Open = %v; want an error matching %v", err, sqlledger.ErrNoLedger)
		}
		for _, s := range []string{path, `tables of its own ("big_orders", "customers", "orders")`, "nothing was written", "Options.Shared"} {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("the error lacks %q: %v", s, err)
			}
		}
		if after := schematest.FileSnapshot(t, dir); !maps.Equal(before, after) {
			t.Errorf("the folder changed: before %v, after %v", before, after)
		}
	}

	l, err := sqlite.Open(t.Context(), path, &sqlite.Options{Shared: true})
	if err != nil {
		t.Fatalf("Open with Shared: %v", err)
	}
	l.Close()
	l, err = sqlite.Open(t.Context(), path, nil)
	if err != nil {
		t.Fatalf("Open of the shared database, now a ledger: %v", err)
	}
	l.Close()
	db, err = sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var name string
	err = db.QueryRow(`SELECT name FROM customers WHERE id = 1`).Scan(&name)
	if err != nil || name != "Ada" {
		t.Errorf("the application's row after the ledger was added: %q, %v", name, err)
	}
}
