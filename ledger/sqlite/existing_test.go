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
	"github.com/tranche-dev/tranche/sqlledger"
)

// TestOpenExistingRefuses opens, with Options.Existing, files that hold
// no ledger at this release's version: each is refused with the error
// its case names, and the file is left as it was, byte for byte, with no
// file created beside it.
func TestOpenExistingRefuses(t *testing.T) {
	tests := []struct {
		name  string
		make  func(t *testing.T, path string) // nil: no file
		is    error                           // the sentinel matched, or nil for a *SchemaError
		found int                             // the *SchemaError's Found
		want  []string
	}{
		{name: "missing", is: sqlledger.ErrNoLedger, want: []string{"no such file", "without Options.Existing"}},
		{name: "empty", make: func(t *testing.T, path string) {
			f, err := os.Create(path)
			if err != nil {
				t.Fatal(err)
			}
			f.Close()
		}, is: sqlledger.ErrNoLedger, want: []string{"the file is empty", "without Options.Existing"}},
		{name: "other database", make: func(t *testing.T, path string) {
			execSQL(t, path, `CREATE TABLE orders (id INTEGER PRIMARY KEY)`)
		}, is: sqlledger.ErrNoLedger, want: []string{"no table tranche_schema", "without Options.Existing"}},
		{name: "no version", make: func(t *testing.T, path string) {
			execSQL(t, path, `CREATE TABLE tranche_schema (version INTEGER NOT NULL PRIMARY KEY, description TEXT NOT NULL, applied_ms BIGINT NOT NULL)`)
		}, is: sqlledger.ErrNoLedger, want: []string{"records no version"}},
		{name: "version 3", make: func(t *testing.T, path string) {
			db := openRaw(t, path)
			defer db.Close()
			if err := schematest.WriteV3(t.Context(), db, "INTEGER PRIMARY KEY", " WITHOUT ROWID", nil); err != nil {
				t.Fatal(err)
			}
		}, found: 3, want: []string{"version 3, older than version", "without Options.Existing"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "ledger.db")
			if tt.make != nil {
				tt.make(t, path)
			}
			before := readDir(t, dir)
			l, err := sqlite.Open(t.Context(), path, &sqlite.Options{Existing: true})
			if err == nil {
				l.Close()
				t.Fatal("Open with Existing succeeded; want an error")
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("Open = %v; want an error matching %v", err, tt.is)
			}
			if tt.is == nil {
				se, ok := errors.AsType[*sqlledger.SchemaError](err)
				if !ok || se.Found != tt.found || se.Known != sqlledger.SchemaVersion {
					t.Errorf("Open = %v; want a *SchemaError of Found %d, Known %d", err, tt.found, sqlledger.SchemaVersion)
				}
			}
			for _, s := range append(tt.want, path) {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("the error lacks %q: %v", s, err)
				}
			}
			if after := readDir(t, dir); !maps.Equal(before, after) {
				t.Errorf("the folder changed: before %v, after %v", names(before), names(after))
			}
		})
	}
}

// TestOpenExistingVersion3Unchanged refuses a version-3 ledger with
// Existing and reads it back at version 3; a worker's Open then
// migrates it.
func TestOpenExistingVersion3Unchanged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.db")
	func() {
		db := openRaw(t, path)
		defer db.Close()
		if err := schematest.WriteV3(t.Context(), db, "INTEGER PRIMARY KEY", " WITHOUT ROWID", nil); err != nil {
			t.Fatal(err)
		}
	}()
	if _, err := sqlite.Open(t.Context(), path, &sqlite.Options{Existing: true}); err == nil {
		t.Fatal("Open with Existing of a version-3 ledger succeeded")
	}
	if v := versions(t, path); v != "1 2 3" {
		t.Errorf("tranche_schema versions after the refused open %q; want 1 2 3", v)
	}
	l, err := sqlite.Open(t.Context(), path, nil)
	if err != nil {
		t.Fatalf("Open without Existing = %v", err)
	}
	l.Close()
	if v := versions(t, path); v != "1 2 3 4 5" {
		t.Errorf("tranche_schema versions after a worker's open %q; want 1 2 3 4 5", v)
	}
	l, err = sqlite.Open(t.Context(), path, &sqlite.Options{Existing: true})
	if err != nil {
		t.Fatalf("Open with Existing of the migrated ledger = %v", err)
	}
	defer l.Close()
	if bs, err := l.Backfills(t.Context()); err != nil || len(bs) != len(schematest.V3Backfills()) {
		t.Errorf("Backfills = %d, %v; want %d", len(bs), err, len(schematest.V3Backfills()))
	}
	if err := l.CancelBackfill(t.Context(), schematest.V3Chosen, false); err != nil {
		t.Errorf("CancelBackfill through a ledger opened with Existing = %v", err)
	}
}

func openRaw(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func execSQL(t *testing.T, path, stmt string) {
	t.Helper()
	db := openRaw(t, path)
	defer db.Close()
	if _, err := db.Exec(stmt); err != nil {
		t.Fatal(err)
	}
}

func versions(t *testing.T, path string) string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=query_only(1)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var v string
	if err := db.QueryRow(`SELECT group_concat(version, ' ') FROM (SELECT version FROM tranche_schema ORDER BY version)`).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// readDir returns the contents of the files in dir by name.
func readDir(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		files[e.Name()] = string(b)
	}
	return files
}

func names(files map[string]string) []string {
	var out []string
	for k, v := range files {
		out = append(out, k+" ("+itoa(len(v))+" bytes)")
	}
	return out
}
