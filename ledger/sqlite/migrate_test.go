package sqlite_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/tranche-dev/tranche/internal/schematest"
	"github.com/tranche-dev/tranche/ledger/sqlite"
)

// subject describes SQLite's databases to schematest's checks: each a
// file in a folder of its own, its revisions a counter per DAG.
var subject = schematest.Subject{
	IDColumn:       "INTEGER PRIMARY KEY",
	TableOptions:   " WITHOUT ROWID",
	DenseRevisions: true,
	New:            newFile,
}

// newFile returns a Database of a file not yet created, ledger.db in a
// folder of its own, whose Snapshot is every file in the folder.
func newFile(t testing.TB) schematest.Database {
	dir := t.TempDir()
	path := filepath.Join(dir, "ledger.db")
	return schematest.Database{
		Name: path,
		Write: func(ctx context.Context, write func(schematest.DB) error) error {
			db, err := sql.Open("sqlite", "file:"+path)
			if err != nil {
				return err
			}
			defer db.Close()
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			defer tx.Rollback()
			if err := write(tx); err != nil {
				return err
			}
			return tx.Commit()
		},
		Open: func(t testing.TB, opts schematest.Options) (schematest.Ledger, error) {
			l, err := sqlite.Open(t.Context(), path, &sqlite.Options{Now: opts.Now, Existing: opts.Existing})
			if err != nil {
				return nil, err
			}
			return l, nil
		},
		Catalog:  func(t testing.TB) schematest.Catalog { return catalog(t, path) },
		Snapshot: func(t testing.TB) any { return schematest.FileSnapshot(t, dir) },
	}
}

// catalog reads the catalog of the file at path through a connection
// that cannot write: sqlite_master and pragma_table_info, leaving out
// the indexes SQLite makes for keys, which have no SQL.
func catalog(t testing.TB, path string) schematest.Catalog {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=query_only(1)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	c := schematest.Catalog{
		Columns: map[string][]string{},
		Indexes: schematest.Column[string](t, db, `SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL ORDER BY name`),
	}
	for _, table := range schematest.Column[string](t, db, `SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name`) {
		c.Columns[table] = schematest.Column[string](t, db, `SELECT name FROM pragma_table_info(?) ORDER BY cid`, table)
	}
	if _, ok := c.Columns["tranche_schema"]; ok {
		c.Versions = schematest.Column[int](t, db, `SELECT version FROM tranche_schema ORDER BY version`)
	}
	return c
}

// TestMigrateFromVersion1 checks schematest.CheckMigrateFromVersion1:
// a version-1 ledger migrates, and its revisions go on from the old
// counter's, each the one after the one before.
func TestMigrateFromVersion1(t *testing.T) { schematest.CheckMigrateFromVersion1(t, subject) }

// TestMigrateFromVersion2 checks schematest.CheckMigrateFromVersion2.
func TestMigrateFromVersion2(t *testing.T) { schematest.CheckMigrateFromVersion2(t, subject) }

// TestMigrateFromVersion3 checks schematest.CheckMigrateFromVersion3.
func TestMigrateFromVersion3(t *testing.T) { schematest.CheckMigrateFromVersion3(t, subject) }

// TestMigrateConcurrently checks schematest.CheckMigrateConcurrently:
// processes sharing a file start together, and SQLite's Opens meet in its
// write lock and busy timeout.
func TestMigrateConcurrently(t *testing.T) { schematest.CheckMigrateConcurrently(t, subject, 8) }

// TestMigrateFromVersion5 checks schematest.CheckMigrateFromVersion5:
// the cursors' table and the revision of releases, with ClaimNext and
// Release over the migrated history at revisions one after the other.
func TestMigrateFromVersion5(t *testing.T) { schematest.CheckMigrateFromVersion5(t, subject) }
