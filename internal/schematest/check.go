package schematest

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/sqlledger"
)

// Subject describes to the checks of this package one ledger
// implementation over sqlledger: the pieces of its dialect that the
// released schemas take, and how a test makes a database for it.
type Subject struct {
	// IDColumn, TableOptions and RevisionSchema are the dialect's pieces
	// as WriteV1 and WriteV2 take them.
	IDColumn, TableOptions string
	RevisionSchema         []string

	// DenseRevisions is whether the ledger numbers the changes of a DAG
	// one after the other, each one above the DAG's revision before it
	// (SQLite's counter per DAG), rather than from a sequence that may
	// skip numbers and is shared by every DAG (PostgreSQL's). With it,
	// the checks want each revision exactly; without it, above the one
	// before.
	DenseRevisions bool

	// New makes a fresh database holding nothing, removed when the test
	// ends.
	New func(t testing.TB) Database
}

// Database is one database a test made for the checks: a SQLite file, a
// PostgreSQL schema.
type Database struct {
	// Name is how the ledger's errors name the database: "schema x", a
	// file's path.
	Name string

	// Write runs write in one transaction over the database, committing
	// it if write returns nil.
	Write func(ctx context.Context, write func(DB) error) error

	// Open opens a ledger over the database with opts, as the ledger's
	// Open does.
	Open func(t testing.TB, opts Options) (Ledger, error)

	// Catalog reads the database's catalog, writing nothing.
	Catalog func(t testing.TB) Catalog

	// Snapshot, if not nil, returns what more of the database an Open
	// that refuses it must leave as it was, beyond its Catalog: the
	// bytes of a file, for one.
	Snapshot func(t testing.TB) any
}

// Options are the options of Database.Open.
type Options struct {
	// Now is the ledger's clock; nil is the ledger's own.
	Now func() time.Time
	// Existing is the ledger's Options.Existing.
	Existing bool
}

// Ledger is a ledger that Database.Open opened.
type Ledger interface {
	ledger.Ledger
	Close() error
}

// Catalog is what a database's own catalog says it holds: the rows of
// tranche_schema and the names of its tables, columns, indexes and
// sequences, whatever the dialect calls them.
type Catalog struct {
	// Versions are the versions of tranche_schema's rows in order, nil
	// if it has none or there is no such table.
	Versions []int
	// Columns are the names of each table's columns, in order, by the
	// table's name.
	Columns map[string][]string
	// Indexes are the names of the indexes, sorted; those a dialect
	// makes for its primary and unique keys are left out.
	Indexes []string
	// Sequences are the names of the sequences, sorted.
	Sequences []string
}

// HasColumn reports whether table has column.
func (c Catalog) HasColumn(table, column string) bool {
	return slices.Contains(c.Columns[table], column)
}

// HasIndex reports whether the database has the index named name.
func (c Catalog) HasIndex(name string) bool { return slices.Contains(c.Indexes, name) }

// Column returns the one column of query's rows over db, for a
// Database's Catalog.
func Column[T any](t testing.TB, db *sql.DB, query string, args ...any) []T {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), query, args...)
	if err != nil {
		t.Fatalf("reading the catalog: %v\n%s", err, query)
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		var v T
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// FileSnapshot returns the SHA-256 of each file in dir by its name, as a
// SQLite Database's Snapshot.
func FileSnapshot(t testing.TB, dir string) map[string]string {
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
		sum := sha256.Sum256(b)
		files[e.Name()] = hex.EncodeToString(sum[:])
	}
	return files
}

// allVersions are tranche_schema's versions in a database migrated to
// this release's.
func allVersions() []int { return sqlledger.SchemaVersions() }

// clock is the ledgers' clock in the checks that read times a ledger
// records: after every time in the fixtures.
var clock = time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)

// write makes a fresh database holding the ledger of version 1, 2, 3 or
// 5 that WriteV1, WriteV2, WriteV3 or WriteV5 records.
func (s Subject) write(t testing.TB, version int) Database {
	t.Helper()
	db := s.New(t)
	err := db.Write(t.Context(), func(tx DB) error {
		switch version {
		case 1:
			return WriteV1(t.Context(), tx, s.IDColumn, s.TableOptions)
		case 2:
			return WriteV2(t.Context(), tx, s.IDColumn, s.TableOptions, s.RevisionSchema)
		case 3:
			return WriteV3(t.Context(), tx, s.IDColumn, s.TableOptions, s.RevisionSchema)
		case 5:
			return WriteV5(t.Context(), tx, s.IDColumn, s.TableOptions, s.RevisionSchema)
		}
		return fmt.Errorf("schematest: no fixture of version %d; there are 1, 2, 3 and 5", version)
	})
	if err != nil {
		t.Fatalf("writing the version-%d ledger: %v", version, err)
	}
	return db
}

// open opens a ledger over db, closed when the test ends.
func open(t testing.TB, db Database, opts Options) Ledger {
	t.Helper()
	l, err := db.Open(t, opts)
	if err != nil {
		t.Fatalf("Open of %s (Existing %v) = %v", db.Name, opts.Existing, err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("Close = %v", err)
		}
	})
	return l
}

// revisionAfter checks that the revision of a change is the one after
// prev: one above with s.DenseRevisions, above it without.
func (s Subject) revisionAfter(t testing.TB, what string, got, prev int64) {
	t.Helper()
	if s.DenseRevisions && got != prev+1 {
		t.Errorf("%s at revision %d; want %d", what, got, prev+1)
	}
	if !s.DenseRevisions && got <= prev {
		t.Errorf("%s at revision %d; want above %d", what, got, prev)
	}
}

// latest returns the attempts Latest returns of dag over the fixtures'
// days 0 to 9.
func latest(t testing.TB, l ledger.Ledger, dag string) []ledger.Attempt {
	t.Helper()
	var out []ledger.Attempt
	for a, err := range l.Latest(t.Context(), dag, V1Day(0).Start, V1Day(10).Start) {
		if err != nil {
			t.Fatalf("Latest = %v", err)
		}
		out = append(out, a)
	}
	return out
}

// CheckMigrateFromVersion1 opens a ledger written at schema version 1:
// Open migrates it to this release's version, adding the index of
// revisions and dropping the counter of tranche_dags, keeping every
// attempt and the DAG's revision (now its attempts' highest), and the
// ledger goes on claiming and finishing from there, with revisions above
// the old counter's, and claims for a new DAG. It returns the migrated
// database, for the ledger's own assertions.
func CheckMigrateFromVersion1(t *testing.T, s Subject) Database {
	db := s.write(t, 1)
	l := open(t, db, Options{})
	ctx := t.Context()

	c := db.Catalog(t)
	if !slices.Equal(c.Versions, allVersions()) || !c.HasIndex("tranche_attempts_revision") || c.HasColumn("tranche_dags", "revision") {
		t.Errorf("tranche_schema versions %v, index tranche_attempts_revision %v, column tranche_dags.revision %v; want %v, true, false",
			c.Versions, c.HasIndex("tranche_attempts_revision"), c.HasColumn("tranche_dags", "revision"), allVersions())
	}

	revision := func() int64 {
		t.Helper()
		rev, err := l.Revision(ctx, V1DAG)
		if err != nil {
			t.Fatalf("Revision = %v", err)
		}
		return rev
	}
	if rev := revision(); rev != V1Revision {
		t.Fatalf("Revision after the migration = %d; want %d", rev, V1Revision)
	}
	want := V1Attempts()
	if got := latest(t, l, V1DAG); !reflect.DeepEqual(got, want) {
		t.Errorf("Latest after the migration:\n%+v\nwant:\n%+v", got, want)
	}
	for _, a := range want {
		if h, err := l.History(ctx, V1DAG, a.Start); err != nil || !reflect.DeepEqual(h, []ledger.Attempt{a}) {
			t.Errorf("History(%s) = %+v, %v; want %+v", a.Key, h, err, a)
		}
	}

	// A fresh partition: its claim's revision is after the old
	// counter's, its finish's after the claim's.
	req := ledger.ClaimRequest{DAG: V1DAG, Backfill: "bf-v1", Worker: "w3", RunID: "run-v2",
		Partitions: []tranche.TimePartition{V1Day(3)}, Lease: time.Minute, Policy: ledger.RerunFailed}
	lease, err := l.Claim(ctx, req)
	if err != nil {
		t.Fatalf("Claim of a fresh partition = %v", err)
	}
	if lease.Attempts[0] != 1 {
		t.Errorf("Claim of a fresh partition took attempt %d; want 1", lease.Attempts[0])
	}
	claimed := revision()
	s.revisionAfter(t, "Claim of a fresh partition", claimed, V1Revision)
	if err := l.Finish(ctx, lease, []ledger.Outcome{{State: ledger.StateSucceeded, Rows: 3}}); err != nil {
		t.Fatalf("Finish = %v", err)
	}
	finished := revision()
	s.revisionAfter(t, "Finish", finished, claimed)

	// The failed partition runs again, and the dead worker's partition
	// is taken over: both at attempt 2, at the revision after the
	// finish's.
	req.Partitions = []tranche.TimePartition{V1Day(1), V1Day(2)}
	if lease, err = l.Claim(ctx, req); err != nil {
		t.Fatalf("Claim of the failed and the expired partitions = %v", err)
	}
	if !slices.Equal(lease.Attempts, []int{2, 2}) {
		t.Errorf("Claim of the failed and the expired partitions took attempts %v; want [2 2]", lease.Attempts)
	}
	rev := revision()
	s.revisionAfter(t, "Claim of the failed and the expired partitions", rev, finished)
	h, err := l.History(ctx, V1DAG, V1Day(2).Start)
	if err != nil || len(h) != 2 || h[0].State != ledger.StateFailed || h[0].Revision != rev || h[1].Number != 2 || h[1].Revision != rev {
		t.Errorf("History of the partition taken over = %+v, %v; want attempt 1 failed and attempt 2 running, both at revision %d", h, err, rev)
	}

	// A new DAG gets its row without the dropped revision column.
	req.DAG = V2DAG
	if _, err := l.Claim(ctx, req); err != nil {
		t.Fatalf("Claim of a new DAG = %v", err)
	}
	got, err := l.Revision(ctx, V2DAG)
	if err != nil {
		t.Fatalf("Revision of the new DAG = %v", err)
	}
	s.revisionAfter(t, "Claim of a new DAG", got, 0)
	return db
}

// CheckMigrateFromVersion2 opens a ledger written at schema version 2:
// Open migrates it to this release's version, adding the columns of
// version 3 to tranche_backfills and the index of successes, keeping
// every attempt and backfill (the canceled one without a time of its
// cancellation, which version 2 did not keep), and the ledger reads its
// recent successes, resumes the canceled backfill and goes on claiming
// for it, at revisions after version 2's. It returns the migrated
// database, for the ledger's own assertions.
func CheckMigrateFromVersion2(t *testing.T, s Subject) Database {
	db := s.write(t, 2)
	l := open(t, db, Options{Now: func() time.Time { return clock }})
	ctx := t.Context()

	c := db.Catalog(t)
	columns := 0
	for _, col := range []string{"canceled_ms", "resumed_ms", "partitions"} {
		if c.HasColumn("tranche_backfills", col) {
			columns++
		}
	}
	if !slices.Equal(c.Versions, allVersions()) || !c.HasIndex("tranche_attempts_succeeded") || columns != 3 {
		t.Errorf("tranche_schema versions %v, index tranche_attempts_succeeded %v, %d new columns of tranche_backfills; want %v, true, 3",
			c.Versions, c.HasIndex("tranche_attempts_succeeded"), columns, allVersions())
	}

	if bs, err := l.Backfills(ctx); err != nil || !reflect.DeepEqual(bs, V2Backfills()) {
		t.Errorf("Backfills after the migration = %+v, %v; want %+v", bs, err, V2Backfills())
	}
	want := V2Attempts()
	if got := latest(t, l, V2DAG); !reflect.DeepEqual(got, want) {
		t.Errorf("Latest after the migration:\n%+v\nwant:\n%+v", got, want)
	}
	if got, err := l.RecentSuccesses(ctx, V2DAG, 20); err != nil || !reflect.DeepEqual(got, []ledger.Attempt{want[2], want[0]}) {
		t.Errorf("RecentSuccesses after the migration = %+v, %v; want days 2 and 0", got, err)
	}
	if rev, err := l.RevisionIn(ctx, V2DAG, V1Day(0).Start, V1Day(2).Start, 0); err != nil || rev != 4 {
		t.Errorf("RevisionIn of days 0 and 1 = %d, %v; want 4", rev, err)
	}

	// The canceled backfill refuses claims until it is resumed.
	req := ledger.ClaimRequest{DAG: V2DAG, Backfill: V2Canceled, Worker: "w3", RunID: "run-v3",
		Partitions: []tranche.TimePartition{V1Day(1)}, Lease: time.Minute, Policy: ledger.RerunFailed}
	if _, err := l.Claim(ctx, req); !errors.Is(err, ledger.ErrNotClaimable) {
		t.Errorf("Claim for the canceled backfill = %v; want ErrNotClaimable", err)
	}
	if err := l.ResumeBackfill(ctx, V2Canceled); err != nil {
		t.Fatalf("ResumeBackfill = %v", err)
	}
	resumed := V2Backfills()[0]
	resumed.Canceled, resumed.ResumedAt = false, clock
	if b, err := l.Backfill(ctx, V2Canceled); err != nil || !reflect.DeepEqual(b, resumed) {
		t.Errorf("Backfill after ResumeBackfill = %+v, %v; want %+v", b, err, resumed)
	}
	lease, err := l.Claim(ctx, req)
	if err != nil || lease.Attempts[0] != 2 {
		t.Fatalf("Claim of the failed day for the resumed backfill = %+v, %v; want attempt 2", lease, err)
	}
	rev, err := l.Revision(ctx, V2DAG)
	if err != nil {
		t.Fatalf("Revision after the claim = %v", err)
	}
	s.revisionAfter(t, "Claim of the failed day for the resumed backfill", rev, V2Revision)
	if err := l.CancelBackfill(ctx, V2Open, ledger.CancelOptions{}); err != nil {
		t.Fatalf("CancelBackfill(%s) = %v", V2Open, err)
	}
	canceled := V2Backfills()[1]
	canceled.Canceled, canceled.CanceledAt = true, clock
	if b, err := l.Backfill(ctx, V2Open); err != nil || !reflect.DeepEqual(b, canceled) {
		t.Errorf("Backfill after CancelBackfill = %+v, %v; want %+v", b, err, canceled)
	}
	return db
}

// CheckMigrateFromVersion3 opens a ledger written at schema version 3:
// Open migrates it to this release's version, adding
// tranche_backfills.stop_running and the indexes of running and failed
// attempts, keeping every backfill (with its times of cancellation and
// resumption and its chosen partitions, none asked to stop its running
// partitions), and the ledger cancels with stopRunning and resumes from
// there. It returns the migrated database, for the ledger's own
// assertions.
func CheckMigrateFromVersion3(t *testing.T, s Subject) Database {
	db := s.write(t, 3)
	l := open(t, db, Options{Now: func() time.Time { return clock }})
	ctx := t.Context()

	c := db.Catalog(t)
	if !slices.Equal(c.Versions, allVersions()) || !c.HasColumn("tranche_backfills", "stop_running") ||
		!c.HasIndex("tranche_attempts_running") || !c.HasIndex("tranche_attempts_failed") {
		t.Errorf("tranche_schema versions %v, column tranche_backfills.stop_running %v, indexes tranche_attempts_running %v and _failed %v; want %v and all true",
			c.Versions, c.HasColumn("tranche_backfills", "stop_running"), c.HasIndex("tranche_attempts_running"), c.HasIndex("tranche_attempts_failed"), allVersions())
	}

	want := V3Backfills()
	if bs, err := l.Backfills(ctx); err != nil || !reflect.DeepEqual(bs, want) {
		t.Errorf("Backfills after the migration = %+v, %v; want %+v", bs, err, want)
	}
	canceled, chosen := want[2], want[3]
	for _, id := range []string{V3Canceled, V3Chosen} {
		if err := l.CancelBackfill(ctx, id, ledger.CancelOptions{StopRunning: true}); err != nil {
			t.Fatalf("CancelBackfill(%s, stopRunning) = %v", id, err)
		}
	}
	canceled.StopRunning = true // canceled already: it keeps its time
	chosen.Canceled, chosen.CanceledAt, chosen.StopRunning = true, clock, true
	for _, b := range []ledger.BackfillRecord{canceled, chosen} {
		if got, err := l.Backfill(ctx, b.ID); err != nil || !reflect.DeepEqual(got, b) {
			t.Errorf("Backfill after CancelBackfill with stopRunning = %+v, %v; want %+v", got, err, b)
		}
	}
	if err := l.ResumeBackfill(ctx, V3Chosen); err != nil {
		t.Fatalf("ResumeBackfill(%s) = %v", V3Chosen, err)
	}
	chosen.Canceled, chosen.StopRunning, chosen.ResumedAt = false, false, clock
	if got, err := l.Backfill(ctx, V3Chosen); err != nil || !reflect.DeepEqual(got, chosen) {
		t.Errorf("Backfill after ResumeBackfill = %+v, %v; want %+v", got, err, chosen)
	}
	return db
}

// CheckMigrateConcurrently opens a version-1 ledger n times at once,
// from as many goroutines, as workers starting together do: each Open
// succeeds and reads the DAG's revision, and each migration is applied
// once.
func CheckMigrateConcurrently(t *testing.T, s Subject, n int) {
	db := s.write(t, 1)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			l, err := db.Open(t, Options{})
			if err != nil {
				t.Errorf("Open %d = %v", i, err)
				return
			}
			defer l.Close()
			if rev, err := l.Revision(t.Context(), V1DAG); err != nil || rev != V1Revision {
				t.Errorf("Open %d: Revision = %d, %v; want %d", i, rev, err, V1Revision)
			}
		})
	}
	close(start)
	wg.Wait()
	if v := db.Catalog(t).Versions; !slices.Equal(v, allVersions()) {
		t.Errorf("tranche_schema holds versions %v; want %v, each applied once", v, allVersions())
	}
}

// CheckExistingRefuses opens with Options.Existing, in subtests, databases
// that hold no ledger at this release's version: one of another
// program's table, one whose tranche_schema records no version, and
// ledgers at versions 3 and 5, the release before this one's. Each is refused with an error that matches
// sqlledger.ErrNoLedger or is a *sqlledger.SchemaError, names the
// database and says to open it without Options.Existing, and the
// database is left as it was: its Catalog, and its Snapshot if it has
// one.
func CheckExistingRefuses(t *testing.T, s Subject) {
	tests := []struct {
		name  string
		write func(t testing.TB) Database
		is    error // the sentinel matched, or nil for a *SchemaError
		found int   // the *SchemaError's Found
		want  []string
	}{
		{name: "other database", write: func(t testing.TB) Database {
			return s.exec(t, `CREATE TABLE orders (id INTEGER PRIMARY KEY)`)
		}, is: sqlledger.ErrNoLedger, want: []string{"no table tranche_schema"}},
		{name: "no version", write: func(t testing.TB) Database {
			return s.exec(t, `CREATE TABLE tranche_schema (version INTEGER NOT NULL PRIMARY KEY, description TEXT NOT NULL, applied_ms BIGINT NOT NULL)`)
		}, is: sqlledger.ErrNoLedger, want: []string{"records no version"}},
		{name: "version 3", write: func(t testing.TB) Database { return s.write(t, 3) },
			found: 3, want: []string{"version 3, older than version"}},
		{name: "version 5", write: func(t testing.TB) Database { return s.write(t, 5) },
			found: 5, want: []string{"version 5, older than version"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := tt.write(t)
			catalog := db.Catalog(t)
			var before any
			if db.Snapshot != nil {
				before = db.Snapshot(t)
			}
			l, err := db.Open(t, Options{Existing: true})
			if err == nil {
				l.Close()
				t.Fatal("Open with Existing succeeded; want an error")
			}
			if db.Snapshot != nil {
				if after := db.Snapshot(t); !reflect.DeepEqual(before, after) {
					t.Errorf("the refused open changed the database: before %v, after %v", before, after)
				}
			}
			if after := db.Catalog(t); !reflect.DeepEqual(catalog, after) {
				t.Errorf("the refused open changed the catalog: before %+v, after %+v", catalog, after)
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
			for _, want := range append(tt.want, "a worker's open", db.Name) {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the error lacks %q: %v", want, err)
				}
			}
		})
	}
}

// exec makes a fresh database and runs stmt in it.
func (s Subject) exec(t testing.TB, stmt string) Database {
	t.Helper()
	db := s.New(t)
	if err := db.Write(t.Context(), func(tx DB) error {
		_, err := tx.ExecContext(t.Context(), stmt)
		return err
	}); err != nil {
		t.Fatalf("%s: %v", stmt, err)
	}
	return db
}

// CheckExistingVersion3 opens a version-3 ledger with Options.Existing,
// refused, and reads it back at version 3 without
// tranche_backfills.stop_running; a worker's Open then migrates it, and
// an Open with Existing after reads its backfills and cancels one.
func CheckExistingVersion3(t *testing.T, s Subject) {
	db := s.write(t, 3)
	ctx := t.Context()
	l, err := db.Open(t, Options{Existing: true})
	if err == nil {
		l.Close()
		t.Fatal("Open with Existing of a version-3 ledger succeeded")
	}
	if se, ok := errors.AsType[*sqlledger.SchemaError](err); !ok || se.Found != 3 || se.Known != sqlledger.SchemaVersion {
		t.Errorf("Open = %v; want a *SchemaError of Found 3, Known %d", err, sqlledger.SchemaVersion)
	}
	if !strings.Contains(err.Error(), "older than version") || !strings.Contains(err.Error(), db.Name) {
		t.Errorf("the error does not say the ledger is older, naming %s: %v", db.Name, err)
	}
	if c := db.Catalog(t); !slices.Equal(c.Versions, []int{1, 2, 3}) || c.HasColumn("tranche_backfills", "stop_running") {
		t.Errorf("after the refused open, versions %v and column tranche_backfills.stop_running %v; want [1 2 3] and false",
			c.Versions, c.HasColumn("tranche_backfills", "stop_running"))
	}

	worker, err := db.Open(t, Options{})
	if err != nil {
		t.Fatalf("Open without Existing = %v", err)
	}
	if err := worker.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
	if v := db.Catalog(t).Versions; !slices.Equal(v, allVersions()) {
		t.Errorf("tranche_schema versions after a worker's open %v; want %v", v, allVersions())
	}
	l = open(t, db, Options{Existing: true})
	if bs, err := l.Backfills(ctx); err != nil || !reflect.DeepEqual(bs, V3Backfills()) {
		t.Errorf("Backfills = %+v, %v; want %+v", bs, err, V3Backfills())
	}
	if err := l.CancelBackfill(ctx, V3Chosen, ledger.CancelOptions{}); err != nil {
		t.Errorf("CancelBackfill through a ledger opened with Existing = %v", err)
	}
}

// CheckMigrateFromVersion5 opens a ledger written at schema version 5,
// the release before ClaimNext: Open migrates it to this release's
// version, adding tranche_cursors and tranche_dags.released, and keeps
// every attempt, every backfill and the DAG's revision. ClaimNext then
// hands a worker the next jobs of a backfill over that history (the
// failed day again, the dead worker's day taken over, a fresh day; the
// succeeded day refused), a second worker whose plan is older than that
// is passed over them, and Release of the second worker's lease, whose
// attempt holds the DAG's highest revision, withdraws it without the
// revision falling. It returns the migrated database, for the ledger's
// own assertions.
//
// It also checks version 9's triggers: the attempts recorded before read
// as their backfill's, and those claimed after keep their claim's.
func CheckMigrateFromVersion5(t *testing.T, s Subject) Database {
	db := s.write(t, 5)
	l := open(t, db, Options{Now: func() time.Time { return clock }})
	ctx := t.Context()

	c := db.Catalog(t)
	cursors := []string{"dag_id", "backfill", "descending", "start_s", "revision"}
	if !slices.Equal(c.Versions, allVersions()) || !slices.Equal(c.Columns["tranche_cursors"], cursors) || !c.HasColumn("tranche_dags", "released") {
		t.Errorf("tranche_schema versions %v, columns of tranche_cursors %v, column tranche_dags.released %v; want %v, %v, true",
			c.Versions, c.Columns["tranche_cursors"], c.HasColumn("tranche_dags", "released"), allVersions(), cursors)
	}
	if bs, err := l.Backfills(ctx); err != nil || !reflect.DeepEqual(bs, V5Backfills()) {
		t.Errorf("Backfills after the migration = %+v, %v; want %+v", bs, err, V5Backfills())
	}
	if got := latest(t, l, V2DAG); !reflect.DeepEqual(got, V2Attempts()) {
		t.Errorf("Latest after the migration:\n%+v\nwant:\n%+v", got, V2Attempts())
	}
	// Version 8: a backfill recorded before has no DAG name until a run
	// names it, which keeps the rest of its record.
	if !c.HasColumn("tranche_backfills", "dag_name") || !c.HasColumn("tranche_attempts", "code_version") {
		t.Errorf("columns tranche_backfills.dag_name %v, tranche_attempts.code_version %v; want both", c.HasColumn("tranche_backfills", "dag_name"), c.HasColumn("tranche_attempts", "code_version"))
	}
	named := V5Backfills()[0]
	named.DAGName = "events"
	if got, err := l.PutBackfill(ctx, named); err != nil || !reflect.DeepEqual(got, named) {
		t.Errorf("PutBackfill naming a migrated backfill = %+v, %v; want %+v", got, err, named)
	}
	if got, err := l.Backfill(ctx, named.ID); err != nil || !reflect.DeepEqual(got, named) {
		t.Errorf("Backfill after naming it = %+v, %v; want %+v", got, err, named)
	}
	revision := func() int64 {
		t.Helper()
		rev, err := l.Revision(ctx, V2DAG)
		if err != nil {
			t.Fatalf("Revision = %v", err)
		}
		return rev
	}
	if rev := revision(); rev != V2Revision {
		t.Fatalf("Revision after the migration = %d; want %d", rev, V2Revision)
	}

	jobs := func(days ...int) []ledger.Job {
		var out []ledger.Job
		for _, d := range days {
			out = append(out, ledger.Job{RunID: fmt.Sprintf("run-v6-%d", d), Partitions: []tranche.TimePartition{V1Day(d)}})
		}
		return out
	}
	req := ledger.NextRequest{DAG: V2DAG, Backfill: V2Open, Worker: "w3", Jobs: jobs(1, 2, 3, 4), Want: 3,
		Lease: time.Minute, Policy: ledger.RerunFailed, Revision: V2Revision}
	grants, err := l.ClaimNext(ctx, req)
	if err != nil {
		t.Fatalf("ClaimNext over the migrated history = %v", err)
	}
	var got []string
	for i, g := range grants {
		got = append(got, grantString(req.Jobs[i], g))
	}
	want := []string{"attempt [2]", "refused", "attempt [2]", "attempt [1]"}
	if !slices.Equal(got, want) {
		t.Fatalf("ClaimNext of days 1 to 4 over the migrated history: %v (%v); want %v: the failed day again, the succeeded day refused, the expired day taken over, the fresh day",
			got, grants, want)
	}
	claimed := revision()
	s.revisionAfter(t, "ClaimNext", claimed, V2Revision)
	h, err := l.History(ctx, V2DAG, V1Day(3).Start)
	if err != nil || len(h) != 2 || h[0].State != ledger.StateFailed || h[0].Revision != claimed || h[1].Worker != "w3" || h[1].State != ledger.StateRunning {
		t.Errorf("History of the day taken over = %+v, %v; want attempt 1 failed at revision %d and attempt 2 of w3 running", h, err, claimed)
	}

	// A worker whose plan was made before the cursor moved is passed
	// over the jobs it was handed for w3, unread, and gets the next.
	req.Worker, req.Jobs, req.Want = "w4", jobs(1, 2, 3, 4, 5), 1
	grants, err = l.ClaimNext(ctx, req)
	if err != nil {
		t.Fatalf("ClaimNext of an older plan = %v", err)
	}
	got = got[:0]
	for i, g := range grants {
		got = append(got, grantString(req.Jobs[i], g))
	}
	if want := []string{"passed", "passed", "passed", "passed", "attempt [1]"}; !slices.Equal(got, want) {
		t.Fatalf("ClaimNext of an older plan: %v; want %v", got, want)
	}
	moved := revision()
	s.revisionAfter(t, "the second ClaimNext", moved, claimed)

	// Its attempt holds the DAG's highest revision: the release deletes
	// it, and the DAG's revision goes on above it.
	if err := l.Release(ctx, grants[4].Lease); err != nil {
		t.Fatalf("Release = %v", err)
	}
	if h, err := l.History(ctx, V2DAG, V1Day(5).Start); err != nil || len(h) != 0 {
		t.Errorf("History of the released day = %+v, %v; want none", h, err)
	}
	released := revision()
	s.revisionAfter(t, "Release", released, moved)
	if rev, err := l.RevisionIn(ctx, V2DAG, V1Day(5).Start, V1Day(6).Start, V2Revision); err != nil || rev != 0 {
		t.Errorf("RevisionIn of the released day = %d, %v; want 0: a release is no change of its partitions", rev, err)
	}

	// Triggers (version 9): the attempts recorded before read as their
	// backfill's, those claimed after keep the claim's, and an ordinary
	// run without one reads as manual.
	for _, c := range []struct {
		day     int
		trigger ledger.Trigger
		want    ledger.Trigger
	}{{6, ledger.TriggerLive, ledger.TriggerLive}, {7, ledger.TriggerCatchUp, ledger.TriggerCatchUp}, {8, "", ledger.TriggerManual}} {
		lease, err := l.Claim(ctx, ledger.ClaimRequest{DAG: V2DAG, Worker: "w5", RunID: "run-v9", Partitions: []tranche.TimePartition{V1Day(c.day)},
			Lease: time.Minute, Policy: ledger.RerunNone, Trigger: c.trigger})
		if err != nil {
			t.Fatalf("Claim of day %d with trigger %q = %v", c.day, c.trigger, err)
		}
		if lease.Trigger != c.want {
			t.Errorf("Claim of day %d with trigger %q: lease's trigger %q; want %q", c.day, c.trigger, lease.Trigger, c.want)
		}
		if h, err := l.History(ctx, V2DAG, V1Day(c.day).Start); err != nil || len(h) != 1 || h[0].Trigger != c.want {
			t.Errorf("History of day %d claimed with trigger %q = %+v, %v; want one attempt of trigger %q", c.day, c.trigger, h, err, c.want)
		}
	}
	if h, err := l.History(ctx, V2DAG, V1Day(0).Start); err != nil || len(h) != 1 || h[0].Trigger != ledger.TriggerBackfill {
		t.Errorf("History of an attempt recorded at version 5 = %+v, %v; want trigger %q", h, err, ledger.TriggerBackfill)
	}
	return db
}

// grantString says what ClaimNext did with job j: "attempt [n ...]",
// "passed" (ledger.PassedError), or "refused".
func grantString(j ledger.Job, g ledger.Grant) string {
	switch {
	case g.Lease != nil:
		return fmt.Sprintf("attempt %v", g.Lease.Attempts)
	case g.Err != nil && g.Err.Error() == ledger.PassedError(j).Error():
		return "passed"
	case errors.Is(g.Err, ledger.ErrNotClaimable):
		return "refused"
	}
	return fmt.Sprintf("error %v", g.Err)
}
