package sqlite_test

import (
	"database/sql"
	"errors"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/internal/schematest"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/sqlite"
)

// writeV1 creates a version-1 ledger holding schematest.V1Attempts at
// path.
func writeV1(t *testing.T, path string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := schematest.WriteV1(t.Context(), db, "INTEGER PRIMARY KEY", " WITHOUT ROWID"); err != nil {
		t.Fatal(err)
	}
}

// TestMigrateFromVersion1 opens a ledger written at schema version 1: Open
// migrates it to the current version, keeping every attempt and the DAG's revision
// (now its attempts' highest), and the ledger goes on claiming and
// finishing from there, with revisions above the old counter's.
func TestMigrateFromVersion1(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.db")
	writeV1(t, path)
	l, err := sqlite.Open(t.Context(), path, nil)
	if err != nil {
		t.Fatalf("Open of a version-1 ledger = %v", err)
	}
	defer l.Close()
	ctx := t.Context()

	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=query_only(1)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var versions string
	if err := db.QueryRow(`SELECT group_concat(version, ' ') FROM (SELECT version FROM tranche_schema ORDER BY version)`).Scan(&versions); err != nil || versions != "1 2 3 4 5" {
		t.Errorf("tranche_schema versions %q, %v; want 1 2 3 4 5", versions, err)
	}
	var index, column int
	if err := db.QueryRow(`SELECT (SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = 'tranche_attempts_revision'),
		(SELECT count(*) FROM pragma_table_info('tranche_dags') WHERE name = 'revision')`).Scan(&index, &column); err != nil || index != 1 || column != 0 {
		t.Errorf("%d indexes tranche_attempts_revision, %d columns tranche_dags.revision, %v; want 1 and 0", index, column, err)
	}

	revision := func(want int64) {
		t.Helper()
		if got, err := l.Revision(ctx, schematest.V1DAG); err != nil || got != want {
			t.Fatalf("Revision = %d, %v; want %d", got, err, want)
		}
	}
	revision(7)
	want := schematest.V1Attempts()
	var latest []ledger.Attempt
	for a, err := range l.Latest(ctx, schematest.V1DAG, schematest.V1Day(0).Start, schematest.V1Day(10).Start) {
		if err != nil {
			t.Fatalf("Latest = %v", err)
		}
		latest = append(latest, a)
	}
	if !reflect.DeepEqual(latest, want) {
		t.Errorf("Latest after the migration:\n%+v\nwant:\n%+v", latest, want)
	}
	for _, a := range want {
		if h, err := l.History(ctx, schematest.V1DAG, a.Start); err != nil || !reflect.DeepEqual(h, []ledger.Attempt{a}) {
			t.Errorf("History(%s) = %+v, %v; want %+v", a.Key, h, err, a)
		}
	}

	// A fresh partition: its claim and its finish are revisions 8 and 9.
	req := ledger.ClaimRequest{DAG: schematest.V1DAG, Backfill: "bf-v1", Worker: "w3", RunID: "run-v2",
		Partitions: []tranche.TimePartition{schematest.V1Day(3)}, Lease: time.Minute, Policy: ledger.RerunFailed}
	lease, err := l.Claim(ctx, req)
	if err != nil {
		t.Fatalf("Claim of a fresh partition = %v", err)
	}
	if lease.Attempts[0] != 1 {
		t.Errorf("Claim of a fresh partition took attempt %d; want 1", lease.Attempts[0])
	}
	revision(8)
	if err := l.Finish(ctx, lease, []ledger.Outcome{{State: ledger.StateSucceeded, Rows: 3}}); err != nil {
		t.Fatalf("Finish = %v", err)
	}
	revision(9)

	// The failed partition runs again, and the dead worker's partition
	// is taken over: both at attempt 2, revision 10.
	req.Partitions = []tranche.TimePartition{schematest.V1Day(1), schematest.V1Day(2)}
	if lease, err = l.Claim(ctx, req); err != nil {
		t.Fatalf("Claim of the failed and the expired partitions = %v", err)
	}
	if !slices.Equal(lease.Attempts, []int{2, 2}) {
		t.Errorf("Claim of the failed and the expired partitions took attempts %v; want [2 2]", lease.Attempts)
	}
	revision(10)
	h, err := l.History(ctx, schematest.V1DAG, schematest.V1Day(2).Start)
	if err != nil || len(h) != 2 || h[0].State != ledger.StateFailed || h[0].Revision != 10 || h[1].Number != 2 || h[1].Revision != 10 {
		t.Errorf("History of the partition taken over = %+v, %v; want attempt 1 failed and attempt 2 running, both at revision 10", h, err)
	}

	// A new DAG gets its row without the dropped revision column.
	req.DAG = "dag-v2"
	if _, err := l.Claim(ctx, req); err != nil {
		t.Fatalf("Claim of a new DAG = %v", err)
	}
	if got, err := l.Revision(ctx, "dag-v2"); err != nil || got != 1 {
		t.Errorf("Revision of the new DAG = %d, %v; want 1", got, err)
	}
}

// TestMigrateFromVersion2 opens a ledger written at schema version 2:
// Open migrates it to the current version, keeping every attempt and backfill (the
// canceled one without a time of its cancellation, which version 2 did
// not keep), and the ledger reads its recent successes, resumes the
// canceled backfill and goes on claiming for it.
func TestMigrateFromVersion2(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.db")
	func() {
		db, err := sql.Open("sqlite", "file:"+path)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if err := schematest.WriteV2(t.Context(), db, "INTEGER PRIMARY KEY", " WITHOUT ROWID", nil); err != nil {
			t.Fatal(err)
		}
	}()
	clock := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	l, err := sqlite.Open(t.Context(), path, &sqlite.Options{Now: func() time.Time { return clock }})
	if err != nil {
		t.Fatalf("Open of a version-2 ledger = %v", err)
	}
	defer l.Close()
	ctx := t.Context()

	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=query_only(1)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var versions string
	var index, columns int
	if err := db.QueryRow(`SELECT (SELECT group_concat(version, ' ') FROM (SELECT version FROM tranche_schema ORDER BY version)),
		(SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = 'tranche_attempts_succeeded'),
		(SELECT count(*) FROM pragma_table_info('tranche_backfills') WHERE name IN ('canceled_ms', 'resumed_ms', 'partitions'))`).Scan(&versions, &index, &columns); err != nil {
		t.Fatal(err)
	}
	if versions != "1 2 3 4 5" || index != 1 || columns != 3 {
		t.Errorf("tranche_schema versions %q, %d indexes tranche_attempts_succeeded, %d new columns of tranche_backfills; want 1 2 3 4 5, 1 and 3", versions, index, columns)
	}

	if bs, err := l.Backfills(ctx); err != nil || !reflect.DeepEqual(bs, schematest.V2Backfills()) {
		t.Errorf("Backfills after the migration = %+v, %v; want %+v", bs, err, schematest.V2Backfills())
	}
	want := schematest.V2Attempts()
	var latest []ledger.Attempt
	for a, err := range l.Latest(ctx, schematest.V2DAG, schematest.V1Day(0).Start, schematest.V1Day(10).Start) {
		if err != nil {
			t.Fatalf("Latest = %v", err)
		}
		latest = append(latest, a)
	}
	if !reflect.DeepEqual(latest, want) {
		t.Errorf("Latest after the migration:\n%+v\nwant:\n%+v", latest, want)
	}
	if got, err := l.RecentSuccesses(ctx, schematest.V2DAG, 20); err != nil || !reflect.DeepEqual(got, []ledger.Attempt{want[2], want[0]}) {
		t.Errorf("RecentSuccesses after the migration = %+v, %v; want days 2 and 0", got, err)
	}
	if rev, err := l.RevisionIn(ctx, schematest.V2DAG, schematest.V1Day(0).Start, schematest.V1Day(2).Start, 0); err != nil || rev != 4 {
		t.Errorf("RevisionIn of days 0 and 1 = %d, %v; want 4", rev, err)
	}

	// The canceled backfill refuses claims until it is resumed.
	req := ledger.ClaimRequest{DAG: schematest.V2DAG, Backfill: schematest.V2Canceled, Worker: "w3", RunID: "run-v3",
		Partitions: []tranche.TimePartition{schematest.V1Day(1)}, Lease: time.Minute, Policy: ledger.RerunFailed}
	if _, err := l.Claim(ctx, req); !errors.Is(err, ledger.ErrNotClaimable) {
		t.Errorf("Claim for the canceled backfill = %v; want ErrNotClaimable", err)
	}
	if err := l.ResumeBackfill(ctx, schematest.V2Canceled); err != nil {
		t.Fatalf("ResumeBackfill = %v", err)
	}
	resumed := schematest.V2Backfills()[0]
	resumed.Canceled, resumed.ResumedAt = false, clock
	if b, err := l.Backfill(ctx, schematest.V2Canceled); err != nil || !reflect.DeepEqual(b, resumed) {
		t.Errorf("Backfill after ResumeBackfill = %+v, %v; want %+v", b, err, resumed)
	}
	lease, err := l.Claim(ctx, req)
	if err != nil || lease.Attempts[0] != 2 {
		t.Fatalf("Claim of the failed day for the resumed backfill = %+v, %v; want attempt 2", lease, err)
	}
	if rev, err := l.Revision(ctx, schematest.V2DAG); err != nil || rev != schematest.V2Revision+1 {
		t.Errorf("Revision after the claim = %d, %v; want %d", rev, err, schematest.V2Revision+1)
	}
	if err := l.CancelBackfill(ctx, schematest.V2Open, false); err != nil {
		t.Fatal(err)
	}
	canceled := schematest.V2Backfills()[1]
	canceled.Canceled, canceled.CanceledAt = true, clock
	if b, err := l.Backfill(ctx, schematest.V2Open); err != nil || !reflect.DeepEqual(b, canceled) {
		t.Errorf("Backfill after CancelBackfill = %+v, %v; want %+v", b, err, canceled)
	}
}

// TestMigrateFromVersion3 opens a ledger written at schema version 3:
// Open migrates it to the current version, keeping every backfill (with its times
// of cancellation and resumption and its chosen partitions, none asked
// to stop its running partitions), and the ledger cancels with
// stopRunning and resumes from there.
func TestMigrateFromVersion3(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.db")
	func() {
		db, err := sql.Open("sqlite", "file:"+path)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if err := schematest.WriteV3(t.Context(), db, "INTEGER PRIMARY KEY", " WITHOUT ROWID", nil); err != nil {
			t.Fatal(err)
		}
	}()
	clock := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	l, err := sqlite.Open(t.Context(), path, &sqlite.Options{Now: func() time.Time { return clock }})
	if err != nil {
		t.Fatalf("Open of a version-3 ledger = %v", err)
	}
	defer l.Close()

	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=query_only(1)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var versions string
	var columns int
	if err := db.QueryRow(`SELECT (SELECT group_concat(version, ' ') FROM (SELECT version FROM tranche_schema ORDER BY version)),
		(SELECT count(*) FROM pragma_table_info('tranche_backfills') WHERE name = 'stop_running')
		+ (SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name IN ('tranche_attempts_running', 'tranche_attempts_failed'))`).Scan(&versions, &columns); err != nil {
		t.Fatal(err)
	}
	if versions != "1 2 3 4 5" || columns != 3 {
		t.Errorf("tranche_schema versions %q, %d of tranche_backfills.stop_running and the indexes tranche_attempts_running and _failed; want 1 2 3 4 5 and 3", versions, columns)
	}
	checkV3(t, l)
}

// checkV3 checks a ledger migrated from schematest's version-3 ledger:
// its backfills as recorded, then a cancellation with stopRunning of
// the canceled and the chosen backfills and the resumption of one, at
// the ledger's clock, 2026-02-01.
func checkV3(t *testing.T, l ledger.Ledger) {
	t.Helper()
	ctx := t.Context()
	clock := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	want := schematest.V3Backfills()
	if bs, err := l.Backfills(ctx); err != nil || !reflect.DeepEqual(bs, want) {
		t.Errorf("Backfills after the migration = %+v, %v; want %+v", bs, err, want)
	}
	canceled, chosen := want[2], want[3]
	for _, id := range []string{schematest.V3Canceled, schematest.V3Chosen} {
		if err := l.CancelBackfill(ctx, id, true); err != nil {
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
	if err := l.ResumeBackfill(ctx, schematest.V3Chosen); err != nil {
		t.Fatal(err)
	}
	chosen.Canceled, chosen.StopRunning, chosen.ResumedAt = false, false, clock
	if got, err := l.Backfill(ctx, schematest.V3Chosen); err != nil || !reflect.DeepEqual(got, chosen) {
		t.Errorf("Backfill after ResumeBackfill = %+v, %v; want %+v", got, err, chosen)
	}
}
