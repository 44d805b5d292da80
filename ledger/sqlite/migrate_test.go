package sqlite_test

import (
	"database/sql"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/ledger/sqlite"
)

// v1Schema is the schema of version 1, as released, with SQLite's
// expansions: a fixture of the past, never to change with
// sqlledger/schema.go.
var v1Schema = []string{
	`CREATE TABLE tranche_dags (
		id       INTEGER PRIMARY KEY,
		dag      TEXT NOT NULL UNIQUE,
		revision BIGINT NOT NULL
	)`,
	`CREATE TABLE tranche_partitions (
		dag_id  BIGINT NOT NULL REFERENCES tranche_dags (id),
		start_s BIGINT NOT NULL,
		latest  INTEGER NOT NULL,
		PRIMARY KEY (dag_id, start_s)
	) WITHOUT ROWID`,
	`CREATE TABLE tranche_attempts (
		dag_id         BIGINT NOT NULL,
		start_s        BIGINT NOT NULL,
		attempt        INTEGER NOT NULL,
		end_s          BIGINT NOT NULL,
		partition_key  TEXT NOT NULL,
		backfill       TEXT NOT NULL,
		run_id         TEXT NOT NULL,
		worker         TEXT NOT NULL,
		state          TEXT NOT NULL CHECK (state IN ('running', 'succeeded', 'failed', 'canceled')),
		started_ms     BIGINT NOT NULL,
		finished_ms    BIGINT,
		lease_until_ms BIGINT NOT NULL,
		error          TEXT NOT NULL,
		row_count      BIGINT NOT NULL,
		revision       BIGINT NOT NULL,
		PRIMARY KEY (dag_id, start_s, attempt),
		FOREIGN KEY (dag_id, start_s) REFERENCES tranche_partitions (dag_id, start_s)
	) WITHOUT ROWID`,
	`CREATE TABLE tranche_backfills (
		id         TEXT NOT NULL PRIMARY KEY,
		seq        BIGINT NOT NULL,
		dag        TEXT NOT NULL,
		time_window TEXT NOT NULL,
		chunk      INTEGER NOT NULL,
		created_ms BIGINT NOT NULL,
		canceled   INTEGER NOT NULL
	)`,
	`CREATE TABLE IF NOT EXISTS tranche_schema (
		version     INTEGER NOT NULL PRIMARY KEY,
		description TEXT NOT NULL,
		applied_ms  BIGINT NOT NULL
	)`,
	`INSERT INTO tranche_schema (version, description, applied_ms) VALUES (1, 'dags, partitions, attempts, backfills', 0)`,
}

const v1DAG = "dag-v1"

func v1Day(i int) tranche.TimePartition {
	return tranche.PartitionOf(tranche.Day, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, i))
}

// v1Attempts are the attempts of the version-1 ledger, as a release of
// version 1 recorded them: day 0 and 1 claimed together (revision 4),
// day 0 succeeded (5), day 1 failed (6), and day 2 claimed (7) by a
// worker that died, its lease long expired.
func v1Attempts() []tranche.Attempt {
	at := func(min int) time.Time { return time.Date(2025, 12, 1, 3, min, 0, 0, time.UTC) }
	a := func(i int) tranche.Attempt {
		p := v1Day(i)
		return tranche.Attempt{DAG: v1DAG, Backfill: "bf-v1", Start: p.Start, End: p.End, Key: p.Key(),
			RunID: "run-v1", Worker: "w1", Number: 1}
	}
	a0, a1, a2 := a(0), a(1), a(2)
	a0.State, a0.Started, a0.Finished, a0.LeaseUntil, a0.Rows, a0.Revision = tranche.StateSucceeded, at(0), at(1), at(5), 10, 5
	a1.State, a1.Started, a1.Finished, a1.LeaseUntil, a1.Err, a1.Revision = tranche.StateFailed, at(0), at(2), at(5), "boom", 6
	a2.State, a2.Started, a2.LeaseUntil, a2.Worker, a2.Revision = tranche.StateRunning, at(3), at(8), "w2", 7
	return []tranche.Attempt{a0, a1, a2}
}

// writeV1 creates a version-1 ledger holding v1Attempts at path.
func writeV1(t *testing.T, path string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, stmt := range v1Schema {
		if _, err := db.Exec(stmt); err != nil {
			t.Fatalf("creating the version-1 schema: %v\n%s", err, stmt)
		}
	}
	var id int64
	if err := db.QueryRow(`INSERT INTO tranche_dags (dag, revision) VALUES (?, 7) RETURNING id`, v1DAG).Scan(&id); err != nil {
		t.Fatalf("inserting the DAG: %v", err)
	}
	if _, err := db.Exec(`INSERT INTO tranche_backfills VALUES ('bf-v1', 1, ?, '2026-01-01/2026-01-04', 1, 0, 0)`, v1DAG); err != nil {
		t.Fatalf("inserting the backfill: %v", err)
	}
	for _, a := range v1Attempts() {
		finished := sql.NullInt64{Int64: a.Finished.UnixMilli(), Valid: !a.Finished.IsZero()}
		if _, err := db.Exec(`INSERT INTO tranche_partitions VALUES (?, ?, 1)`, id, a.Start.Unix()); err != nil {
			t.Fatalf("inserting partition %s: %v", a.Key, err)
		}
		if _, err := db.Exec(`INSERT INTO tranche_attempts VALUES (?, ?, 1, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			id, a.Start.Unix(), a.End.Unix(), a.Key, a.Backfill, a.RunID, a.Worker, string(a.State),
			a.Started.UnixMilli(), finished, a.LeaseUntil.UnixMilli(), a.Err, a.Rows, a.Revision); err != nil {
			t.Fatalf("inserting attempt %s: %v", a.Key, err)
		}
	}
}

// TestMigrateFromVersion1 opens a ledger written at schema version 1: Open
// migrates it to version 2, keeping every attempt and the DAG's revision
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
	if err := db.QueryRow(`SELECT group_concat(version, ' ') FROM (SELECT version FROM tranche_schema ORDER BY version)`).Scan(&versions); err != nil || versions != "1 2" {
		t.Errorf("tranche_schema versions %q, %v; want 1 2", versions, err)
	}
	var index, column int
	if err := db.QueryRow(`SELECT (SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = 'tranche_attempts_revision'),
		(SELECT count(*) FROM pragma_table_info('tranche_dags') WHERE name = 'revision')`).Scan(&index, &column); err != nil || index != 1 || column != 0 {
		t.Errorf("%d indexes tranche_attempts_revision, %d columns tranche_dags.revision, %v; want 1 and 0", index, column, err)
	}

	revision := func(want int64) {
		t.Helper()
		if got, err := l.Revision(ctx, v1DAG); err != nil || got != want {
			t.Fatalf("Revision = %d, %v; want %d", got, err, want)
		}
	}
	revision(7)
	want := v1Attempts()
	var latest []tranche.Attempt
	for a, err := range l.Latest(ctx, v1DAG, v1Day(0).Start, v1Day(10).Start) {
		if err != nil {
			t.Fatalf("Latest = %v", err)
		}
		latest = append(latest, a)
	}
	if !reflect.DeepEqual(latest, want) {
		t.Errorf("Latest after the migration:\n%+v\nwant:\n%+v", latest, want)
	}
	for _, a := range want {
		if h, err := l.History(ctx, v1DAG, a.Start); err != nil || !reflect.DeepEqual(h, []tranche.Attempt{a}) {
			t.Errorf("History(%s) = %+v, %v; want %+v", a.Key, h, err, a)
		}
	}

	// A fresh partition: its claim and its finish are revisions 8 and 9.
	req := tranche.ClaimRequest{DAG: v1DAG, Backfill: "bf-v1", Worker: "w3", RunID: "run-v2",
		Partitions: []tranche.TimePartition{v1Day(3)}, Lease: time.Minute, Policy: tranche.RerunFailed}
	lease, err := l.Claim(ctx, req)
	if err != nil {
		t.Fatalf("Claim of a fresh partition = %v", err)
	}
	if lease.Attempts[0] != 1 {
		t.Errorf("Claim of a fresh partition took attempt %d; want 1", lease.Attempts[0])
	}
	revision(8)
	if err := l.Finish(ctx, lease, []tranche.Outcome{{State: tranche.StateSucceeded, Rows: 3}}); err != nil {
		t.Fatalf("Finish = %v", err)
	}
	revision(9)

	// The failed partition runs again, and the dead worker's partition
	// is taken over: both at attempt 2, revision 10.
	req.Partitions = []tranche.TimePartition{v1Day(1), v1Day(2)}
	if lease, err = l.Claim(ctx, req); err != nil {
		t.Fatalf("Claim of the failed and the expired partitions = %v", err)
	}
	if !slices.Equal(lease.Attempts, []int{2, 2}) {
		t.Errorf("Claim of the failed and the expired partitions took attempts %v; want [2 2]", lease.Attempts)
	}
	revision(10)
	h, err := l.History(ctx, v1DAG, v1Day(2).Start)
	if err != nil || len(h) != 2 || h[0].State != tranche.StateFailed || h[0].Revision != 10 || h[1].Number != 2 || h[1].Revision != 10 {
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
