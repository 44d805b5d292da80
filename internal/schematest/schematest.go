// Package schematest holds the ledger's released schemas and a ledger
// written at each, as fixtures for the migration tests of the SQLite and
// PostgreSQL ledgers, and the checks those tests share: a ledger's test
// describes its databases in a [Subject] and passes it to
// [CheckMigrateFromVersion1] and the other Check functions, keeping to
// itself only what is its dialect's own. A fixture is the past: it never
// changes with ledger/sqlledger/schema.go.
//
// It also holds the checks of ClaimNext and Release that the two SQL
// ledgers share beyond ledgertest's: workers handed a backfill's jobs
// through the cursor as goroutines ([CheckClaimNextConcurrent]) and as
// processes ([StartNextWorkers]), Release over a database of a Subject
// ([CheckRelease]), and the in-memory ledger's answers
// ([CheckNextSameAsMemory]).
package schematest

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/ledger"
)

// V1 returns the statements that create the schema of version 1, as
// released, with a dialect's type of database-assigned integer keys and
// options of tables keyed by a composite key (see sqlledger.Dialect's
// IDColumn and TableOptions).
func V1(idColumn, tableOptions string) []string {
	r := strings.NewReplacer("{{id}}", idColumn, "{{table_options}}", tableOptions)
	out := make([]string, len(v1))
	for i, stmt := range v1 {
		out[i] = r.Replace(stmt)
	}
	return out
}

var v1 = []string{
	`CREATE TABLE tranche_dags (
		id       {{id}},
		dag      TEXT NOT NULL UNIQUE,
		revision BIGINT NOT NULL
	)`,
	`CREATE TABLE tranche_partitions (
		dag_id  BIGINT NOT NULL REFERENCES tranche_dags (id),
		start_s BIGINT NOT NULL,
		latest  INTEGER NOT NULL,
		PRIMARY KEY (dag_id, start_s)
	){{table_options}}`,
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
	){{table_options}}`,
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

// V1DAG is the DAG of the version-1 ledger.
const V1DAG = "dag-v1"

// V1Day is the partition of the version-1 ledger's DAG i days after
// 2026-01-01.
func V1Day(i int) tranche.TimePartition {
	return tranche.PartitionOf(tranche.Day, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, i))
}

// V1Revision is the revision of V1DAG in the version-1 ledger.
const V1Revision = 7

// V1Attempts are the attempts of the version-1 ledger, as a release of
// version 1 recorded them: day 0 and 1 claimed together (revision 4),
// day 0 succeeded (5), day 1 failed (6), and day 2 claimed (7) by a
// worker that died, its lease long expired. Their Trigger is
// ledger.TriggerBackfill, as a release of version 9 or later reads them:
// version 1 kept none, and each was a backfill's.
func V1Attempts() []ledger.Attempt {
	at := func(min int) time.Time { return time.Date(2025, 12, 1, 3, min, 0, 0, time.UTC) }
	a := func(i int) ledger.Attempt {
		p := V1Day(i)
		return ledger.Attempt{DAG: V1DAG, Backfill: "bf-v1", Start: p.Start, End: p.End, Key: p.Key(),
			RunID: "run-v1", Worker: "w1", Number: 1, Trigger: ledger.TriggerBackfill}
	}
	a0, a1, a2 := a(0), a(1), a(2)
	a0.State, a0.Started, a0.Finished, a0.LeaseUntil, a0.Rows, a0.Revision = ledger.StateSucceeded, at(0), at(1), at(5), 10, 5
	a1.State, a1.Started, a1.Finished, a1.LeaseUntil, a1.Err, a1.Revision = ledger.StateFailed, at(0), at(2), at(5), "boom", 6
	a2.State, a2.Started, a2.LeaseUntil, a2.Worker, a2.Revision = ledger.StateRunning, at(3), at(8), "w2", V1Revision
	return []ledger.Attempt{a0, a1, a2}
}

// DB is what WriteV1 writes through: a *sql.DB or a *sql.Tx.
type DB interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// WriteV1 creates the schema of version 1 in db, with a dialect's
// pieces as V1 takes them, and records V1Attempts in it.
func WriteV1(ctx context.Context, db DB, idColumn, tableOptions string) error {
	for _, stmt := range V1(idColumn, tableOptions) {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("creating the version-1 schema: %w\n%s", err, stmt)
		}
	}
	var id int64
	if err := db.QueryRowContext(ctx, `INSERT INTO tranche_dags (dag, revision) VALUES ($1, $2) RETURNING id`, V1DAG, V1Revision).Scan(&id); err != nil {
		return fmt.Errorf("inserting the DAG: %w", err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO tranche_backfills VALUES ('bf-v1', 1, $1, '2026-01-01/2026-01-04', 1, 0, 0)`, V1DAG); err != nil {
		return fmt.Errorf("inserting the backfill: %w", err)
	}
	for _, a := range V1Attempts() {
		finished := sql.NullInt64{Int64: a.Finished.UnixMilli(), Valid: !a.Finished.IsZero()}
		if _, err := db.ExecContext(ctx, `INSERT INTO tranche_partitions VALUES ($1, $2, 1)`, id, a.Start.Unix()); err != nil {
			return fmt.Errorf("inserting partition %s: %w", a.Key, err)
		}
		if _, err := db.ExecContext(ctx, `INSERT INTO tranche_attempts VALUES ($1, $2, 1, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`,
			id, a.Start.Unix(), a.End.Unix(), a.Key, a.Backfill, a.RunID, a.Worker, string(a.State),
			a.Started.UnixMilli(), finished, a.LeaseUntil.UnixMilli(), a.Err, a.Rows, a.Revision); err != nil {
			return fmt.Errorf("inserting attempt %s: %w", a.Key, err)
		}
	}
	return nil
}

// The schema of version 2, as released: version 1's, then these, then the
// dialect's own statements (sqlledger.Dialect's RevisionSchema), which
// WriteV2 runs after the data, as they count on from the revisions there.
var v2 = []string{
	`CREATE INDEX tranche_attempts_revision ON tranche_attempts (dag_id, revision)`,
	`ALTER TABLE tranche_dags DROP COLUMN revision`,
	`INSERT INTO tranche_schema (version, description, applied_ms) VALUES (2, 'revisions from the attempts, without a counter per DAG', 0)`,
}

// V2DAG is the DAG of the version-2 ledger.
const V2DAG = "dag-v2"

// V2Revision is the revision of V2DAG in the version-2 ledger.
const V2Revision = 6

// The backfills of the version-2 ledger: V2Canceled was canceled, V2Open
// was not.
const (
	V2Canceled = "bf-v2-canceled"
	V2Open     = "bf-v2-open"
)

// V2Backfills are the backfills of the version-2 ledger, oldest first, as
// a release of version 3 reads them: a version-2 ledger kept no time of a
// cancellation and no chosen partitions.
func V2Backfills() []ledger.BackfillRecord {
	return []ledger.BackfillRecord{
		{ID: V2Canceled, DAG: V2DAG, Window: "2026-01-01/2026-01-04", Chunk: 1, Created: time.UnixMilli(1000).UTC(), Canceled: true},
		{ID: V2Open, DAG: V2DAG, Window: "2026-01-01/2026-01-10", Chunk: 2, Created: time.UnixMilli(2000).UTC()},
	}
}

// V2Attempts are the attempts of the version-2 ledger, as a release of
// version 2 recorded them for backfill V2Canceled: day 0 succeeded
// (revision 2), day 1 failed (4), day 2 succeeded (5), and day 3 claimed
// (6) by a worker that died, its lease long expired. Their Trigger is
// ledger.TriggerBackfill, as V1Attempts' is.
func V2Attempts() []ledger.Attempt {
	at := func(min int) time.Time { return time.Date(2025, 12, 2, 4, min, 0, 0, time.UTC) }
	a := func(i int) ledger.Attempt {
		p := V1Day(i)
		return ledger.Attempt{DAG: V2DAG, Backfill: V2Canceled, Start: p.Start, End: p.End, Key: p.Key(),
			RunID: fmt.Sprintf("run-v2-%d", i), Worker: "w1", Number: 1, Trigger: ledger.TriggerBackfill}
	}
	a0, a1, a2, a3 := a(0), a(1), a(2), a(3)
	a0.State, a0.Started, a0.Finished, a0.LeaseUntil, a0.Rows, a0.Revision = ledger.StateSucceeded, at(0), at(1), at(5), 10, 2
	a1.State, a1.Started, a1.Finished, a1.LeaseUntil, a1.Err, a1.Revision = ledger.StateFailed, at(1), at(3), at(6), "boom", 4
	a2.State, a2.Started, a2.Finished, a2.LeaseUntil, a2.Rows, a2.Revision = ledger.StateSucceeded, at(3), at(7), at(8), 4, 5
	a3.State, a3.Started, a3.LeaseUntil, a3.Worker, a3.Revision = ledger.StateRunning, at(8), at(9), "w2", V2Revision
	return []ledger.Attempt{a0, a1, a2, a3}
}

// WriteV2 creates the schema of version 2 in db, with a dialect's pieces
// as V1 takes them and its revisionSchema (sqlledger.Dialect's
// RevisionSchema), and records V2Backfills and V2Attempts in it.
func WriteV2(ctx context.Context, db DB, idColumn, tableOptions string, revisionSchema []string) error {
	for _, stmt := range append(V1(idColumn, tableOptions), v2...) {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("creating the version-2 schema: %w\n%s", err, stmt)
		}
	}
	var id int64
	if err := db.QueryRowContext(ctx, `INSERT INTO tranche_dags (dag) VALUES ($1) RETURNING id`, V2DAG).Scan(&id); err != nil {
		return fmt.Errorf("inserting the DAG: %w", err)
	}
	for i, b := range V2Backfills() {
		canceled := 0
		if b.Canceled {
			canceled = 1
		}
		if _, err := db.ExecContext(ctx, `INSERT INTO tranche_backfills VALUES ($1, $2, $3, $4, $5, $6, $7)`,
			b.ID, i+1, b.DAG, b.Window, b.Chunk, b.Created.UnixMilli(), canceled); err != nil {
			return fmt.Errorf("inserting backfill %s: %w", b.ID, err)
		}
	}
	for _, a := range V2Attempts() {
		finished := sql.NullInt64{Int64: a.Finished.UnixMilli(), Valid: !a.Finished.IsZero()}
		if _, err := db.ExecContext(ctx, `INSERT INTO tranche_partitions VALUES ($1, $2, 1)`, id, a.Start.Unix()); err != nil {
			return fmt.Errorf("inserting partition %s: %w", a.Key, err)
		}
		if _, err := db.ExecContext(ctx, `INSERT INTO tranche_attempts VALUES ($1, $2, 1, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`,
			id, a.Start.Unix(), a.End.Unix(), a.Key, a.Backfill, a.RunID, a.Worker, string(a.State),
			a.Started.UnixMilli(), finished, a.LeaseUntil.UnixMilli(), a.Err, a.Rows, a.Revision); err != nil {
			return fmt.Errorf("inserting attempt %s: %w", a.Key, err)
		}
	}
	for _, stmt := range revisionSchema {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("creating the dialect's revision schema: %w\n%s", err, stmt)
		}
	}
	return nil
}

// V2PostgresRevisions are the statements of the PostgreSQL dialect's
// revision schema as version 2 released them: WriteV2's revisionSchema
// for PostgreSQL.
var V2PostgresRevisions = []string{
	`CREATE SEQUENCE tranche_revisions AS BIGINT CACHE 1`,
	`SELECT setval('tranche_revisions', (SELECT COALESCE(MAX(revision), 0) + 1 FROM tranche_attempts), false)`,
}

// The schema of version 3, as released: version 2's, then these.
var v3 = []string{
	`ALTER TABLE tranche_backfills ADD COLUMN canceled_ms BIGINT`,
	`ALTER TABLE tranche_backfills ADD COLUMN resumed_ms BIGINT`,
	`ALTER TABLE tranche_backfills ADD COLUMN partitions TEXT NOT NULL DEFAULT ''`,
	`CREATE INDEX tranche_attempts_succeeded ON tranche_attempts (dag_id, revision, start_s) WHERE state = 'succeeded'`,
	`INSERT INTO tranche_schema (version, description, applied_ms) VALUES (3, 'resumable backfills, chosen partitions, recent successes', 0)`,
}

// The backfills the version-3 ledger adds to the version-2 ledger's:
// V3Canceled was canceled at a recorded time after a resume, V3Chosen is
// a backfill of chosen partitions, not canceled.
const (
	V3Canceled = "bf-v3-canceled"
	V3Chosen   = "bf-v3-chosen"
)

// V3Backfills are the backfills of the version-3 ledger, oldest first, as
// a release of version 4 reads them: V2Backfills, then V3Canceled and
// V3Chosen; a version-3 ledger kept no request to stop running
// partitions, so none has StopRunning.
func V3Backfills() []ledger.BackfillRecord {
	return append(V2Backfills(),
		ledger.BackfillRecord{ID: V3Canceled, DAG: V2DAG, Window: "2026-01-01/2026-01-04", Chunk: 1, Created: time.UnixMilli(3000).UTC(),
			Canceled: true, CanceledAt: time.UnixMilli(5000).UTC(), ResumedAt: time.UnixMilli(4000).UTC()},
		ledger.BackfillRecord{ID: V3Chosen, DAG: V2DAG, Window: "2026-01-01/2026-01-10", Chunk: 1, Created: time.UnixMilli(6000).UTC(),
			Partitions: []time.Time{V1Day(1).Start, V1Day(3).Start}},
	)
}

// WriteV3 creates the schema of version 3 in db, with a dialect's pieces
// as WriteV2 takes them, and records V2Attempts and V3Backfills in it.
func WriteV3(ctx context.Context, db DB, idColumn, tableOptions string, revisionSchema []string) error {
	if err := WriteV2(ctx, db, idColumn, tableOptions, revisionSchema); err != nil {
		return err
	}
	for _, stmt := range v3 {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("creating the version-3 schema: %w\n%s", err, stmt)
		}
	}
	bs := V3Backfills()
	for i, b := range bs[len(V2Backfills()):] {
		canceled := 0
		if b.Canceled {
			canceled = 1
		}
		var partitions []string
		for _, t := range b.Partitions {
			partitions = append(partitions, fmt.Sprint(t.Unix()))
		}
		if _, err := db.ExecContext(ctx, `INSERT INTO tranche_backfills (id, seq, dag, time_window, chunk, created_ms, canceled, canceled_ms, resumed_ms, partitions)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
			b.ID, len(V2Backfills())+i+1, b.DAG, b.Window, b.Chunk, b.Created.UnixMilli(), canceled,
			sql.NullInt64{Int64: b.CanceledAt.UnixMilli(), Valid: !b.CanceledAt.IsZero()},
			sql.NullInt64{Int64: b.ResumedAt.UnixMilli(), Valid: !b.ResumedAt.IsZero()},
			strings.Join(partitions, " ")); err != nil {
			return fmt.Errorf("inserting backfill %s: %w", b.ID, err)
		}
	}
	return nil
}

// The schema of versions 4 and 5, as released: version 3's, then these.
var v4v5 = []string{
	`ALTER TABLE tranche_backfills ADD COLUMN stop_running INTEGER NOT NULL DEFAULT 0`,
	`INSERT INTO tranche_schema (version, description, applied_ms) VALUES (4, 'backfills canceled with their running partitions to stop', 0)`,
	`CREATE INDEX tranche_attempts_running ON tranche_attempts (dag_id, start_s) WHERE state = 'running'`,
	`CREATE INDEX tranche_attempts_failed ON tranche_attempts (dag_id, finished_ms) WHERE state IN ('failed', 'canceled')`,
	`INSERT INTO tranche_schema (version, description, applied_ms) VALUES (5, 'indexes of running and failed attempts, for a backfill''s status', 0)`,
}

// V5Backfills are the backfills of the version-5 ledger, oldest first:
// V3Backfills, V3Canceled asked to stop its running partitions.
func V5Backfills() []ledger.BackfillRecord {
	bs := V3Backfills()
	bs[2].StopRunning = true
	return bs
}

// WriteV5 creates the schema of version 5 in db, with a dialect's pieces
// as WriteV2 takes them, and records V2Attempts and V5Backfills in it.
func WriteV5(ctx context.Context, db DB, idColumn, tableOptions string, revisionSchema []string) error {
	if err := WriteV3(ctx, db, idColumn, tableOptions, revisionSchema); err != nil {
		return err
	}
	for _, stmt := range v4v5 {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("creating the version-5 schema: %w\n%s", err, stmt)
		}
	}
	if _, err := db.ExecContext(ctx, `UPDATE tranche_backfills SET stop_running = 1 WHERE id = $1`, V3Canceled); err != nil {
		return fmt.Errorf("asking backfill %s to stop its running partitions: %w", V3Canceled, err)
	}
	return nil
}
