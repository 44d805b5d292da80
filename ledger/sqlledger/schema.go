package sqlledger

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
)

// A migration moves the schema from the version before it to its own.
// Migrations are applied in order, forward only, all those missing in
// one transaction; tranche_schema keeps a row for each one applied.
// Never change a released migration: add another.
type migration struct {
	version     int
	description string
	statements  []string // with the dialect's {{id}} and {{table_options}}

	// dialect returns the dialect's own statements, run after the
	// others, when not nil.
	dialect func(*Dialect) []string
}

var migrations = []migration{{
	version:     1,
	description: "dags, partitions, attempts, backfills",
	statements: []string{
		// One row per DAG identity: the DAG's number in the other tables,
		// and its revision, which every claim and finish incremented
		// until version 2.
		`CREATE TABLE tranche_dags (
			id       {{id}},
			dag      TEXT NOT NULL UNIQUE,
			revision BIGINT NOT NULL
		)`,
		// One row per partition ever claimed: the number of its latest
		// attempt, so that the latest attempts of a range of partitions
		// are one join on primary keys. It is also the row a claim locks.
		`CREATE TABLE tranche_partitions (
			dag_id  BIGINT NOT NULL REFERENCES tranche_dags (id),
			start_s BIGINT NOT NULL,
			latest  INTEGER NOT NULL,
			PRIMARY KEY (dag_id, start_s)
		){{table_options}}`,
		// One row per attempt at a partition. Instants of partitions are
		// Unix seconds; instants of attempts are Unix milliseconds.
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
	},
}, {
	version:     2,
	description: "revisions from the attempts, without a counter per DAG",
	statements: []string{
		// A DAG's revision is its attempts' highest: a counter that every
		// claim and finish of the DAG incremented made them take turns,
		// each holding the counter's row until its commit was on disk.
		`CREATE INDEX tranche_attempts_revision ON tranche_attempts (dag_id, revision)`,
		`ALTER TABLE tranche_dags DROP COLUMN revision`,
	},
	dialect: func(d *Dialect) []string { return d.RevisionSchema },
}, {
	version:     3,
	description: "resumable backfills, chosen partitions, recent successes",
	statements: []string{
		// When a backfill was last canceled and resumed (NULL: never, or
		// before version 3), and the starts of its chosen partitions, in
		// Unix seconds separated by spaces ('' for a whole window).
		`ALTER TABLE tranche_backfills ADD COLUMN canceled_ms BIGINT`,
		`ALTER TABLE tranche_backfills ADD COLUMN resumed_ms BIGINT`,
		`ALTER TABLE tranche_backfills ADD COLUMN partitions TEXT NOT NULL DEFAULT ''`,
		// A DAG's successes by revision, for the estimate of a plan,
		// which reads the latest 20 however many failures followed them.
		`CREATE INDEX tranche_attempts_succeeded ON tranche_attempts (dag_id, revision, start_s) WHERE state = 'succeeded'`,
	},
}, {
	version:     4,
	description: "backfills canceled with their running partitions to stop",
	statements: []string{
		// 1 while a backfill is canceled with its running partitions to
		// stop (CancelBackfill with stopRunning); 0 otherwise, and for
		// every backfill recorded before version 4.
		`ALTER TABLE tranche_backfills ADD COLUMN stop_running INTEGER NOT NULL DEFAULT 0`,
	},
}, {
	version:     5,
	description: "indexes of running and failed attempts, for a backfill's status",
	statements: []string{
		// Why a backfill of a million partitions is not progressing: the
		// partitions running (few, whatever the backfill's size) and the
		// failure that finished last, read through these rather than
		// every attempt of the backfill's range (5 s on SQLite).
		`CREATE INDEX tranche_attempts_running ON tranche_attempts (dag_id, start_s) WHERE state = 'running'`,
		`CREATE INDEX tranche_attempts_failed ON tranche_attempts (dag_id, finished_ms) WHERE state IN ('failed', 'canceled')`,
	},
}, {
	version:     6,
	description: "cursors of the next jobs of backfills, revisions of releases",
	statements: []string{
		// One row per DAG, backfill and order (descending 1: newest
		// first) that ClaimNext handed jobs of: the start of the last
		// job it examined, in Unix seconds, and the revision at which it
		// moved there. Workers of a backfill take turns on it, so that
		// each is handed jobs the others were not.
		`CREATE TABLE tranche_cursors (
			dag_id     BIGINT NOT NULL REFERENCES tranche_dags (id),
			backfill   TEXT NOT NULL,
			descending INTEGER NOT NULL,
			start_s    BIGINT NOT NULL,
			revision   BIGINT NOT NULL,
			PRIMARY KEY (dag_id, backfill, descending)
		){{table_options}}`,
		// The revision of the DAG's last Release (0: none), which deletes
		// the attempts it withdraws, perhaps the one that held the DAG's
		// highest revision: the DAG's revision is the greatest of its
		// attempts', its cursors' and this, so that it never falls.
		`ALTER TABLE tranche_dags ADD COLUMN released BIGINT NOT NULL DEFAULT 0`,
	},
}, {
	version:     8,
	description: "DAG names of backfills, code versions of attempts",
	statements: []string{
		// The DAG's name as the backfill's last run gave it, a label
		// ('': none, or recorded before version 8).
		`ALTER TABLE tranche_backfills ADD COLUMN dag_name TEXT NOT NULL DEFAULT ''`,
		// The versions of the assets' code an attempt ran ('': none
		// declared, or recorded before version 8), by which a partition
		// whose latest success ran other code is stale.
		`ALTER TABLE tranche_attempts ADD COLUMN code_version TEXT NOT NULL DEFAULT ''`,
	},
}, {
	version:     9,
	description: "the trigger of every attempt",
	statements: []string{
		// Why an attempt ran: live, catch-up, backfill, manual (ledger.Trigger).
		// '' for the attempts recorded before version 9, which read as
		// ledger.TriggerOf('', backfill): rewriting every row of a
		// ledger of millions would hold its write lock for minutes.
		`ALTER TABLE tranche_attempts ADD COLUMN run_trigger TEXT NOT NULL DEFAULT ''`,
	},
}, {
	version:     10,
	description: "pauses of schedules",
	statements: []string{
		// One row per DAG identity whose schedule was ever paused
		// (SetSchedulePause): paused 1 while it is, who paused or last
		// resumed it and why, when (Unix milliseconds), and when it was
		// last paused. A table of its own, so that a scheduler's read
		// of it before each slot touches no row a claim locks.
		`CREATE TABLE tranche_schedule_pauses (
			dag       TEXT NOT NULL PRIMARY KEY,
			paused    INTEGER NOT NULL,
			by_whom   TEXT NOT NULL,
			note      TEXT NOT NULL,
			since_ms  BIGINT NOT NULL,
			paused_ms BIGINT
		)`,
	},
}, {
	version:     11,
	description: "limits of DAGs and the demands of their slots",
	statements: []string{
		// One row per DAG whose limit was ever set (ledger.Limiter): at
		// most max_running runs at once (0: none), who set it and why,
		// when (Unix milliseconds). The statement that starts a claim
		// reads it; a claim under a limit locks its row, so that claims
		// of a limited DAG take turns from their count to their commit.
		`CREATE TABLE tranche_limits (
			dag_id      BIGINT NOT NULL PRIMARY KEY REFERENCES tranche_dags (id),
			max_running INTEGER NOT NULL,
			by_whom     TEXT NOT NULL,
			note        TEXT NOT NULL,
			since_ms    BIGINT NOT NULL
		)`,
		// The slots of a limited DAG's schedule that wait for the limit,
		// until when their demand lasts (Unix milliseconds): while one
		// lasts, backfills of the DAG start nothing.
		`CREATE TABLE tranche_demands (
			dag_id   BIGINT NOT NULL,
			start_s  BIGINT NOT NULL,
			until_ms BIGINT NOT NULL,
			PRIMARY KEY (dag_id, start_s)
		){{table_options}}`,
	},
}, {
	version:     12,
	description: "limits shared by a group of DAGs",
	statements: []string{
		// The group whose DAGs share the limit (ledger.Limit.Group: the
		// assets of a DAG of several granularities); '' for a limit of
		// the DAG alone, as every limit set before version 12 is.
		`ALTER TABLE tranche_limits ADD COLUMN limit_group TEXT NOT NULL DEFAULT ''`,
	},
}}

// SchemaVersion is the version of the newest schema this release knows. A
// database at a newer version is refused with a [*SchemaError].
var SchemaVersion = migrations[len(migrations)-1].version

// SchemaVersions returns the versions of the migrations this release
// applies, oldest first: what tranche_schema holds once a ledger is
// migrated to [SchemaVersion].
func SchemaVersions() []int {
	v := make([]int, len(migrations))
	for i, m := range migrations {
		v[i] = m.version
	}
	return v
}

const createSchemaTable = `CREATE TABLE IF NOT EXISTS tranche_schema (
	version     INTEGER NOT NULL PRIMARY KEY,
	description TEXT NOT NULL,
	applied_ms  BIGINT NOT NULL
)`

// migrate brings the schema up to date in one transaction, refusing a
// newer one. It returns the version found before.
//
// It reads the version first, outside any transaction, and writes only
// when the schema is behind: the write transaction takes SQLite's write
// lock (PostgreSQL's advisory lock of migrations), which a worker paused
// in a claim or a finish may hold for as long as it is stopped, and a
// second worker's open of a current ledger must not wait for it, nor
// fail at the busy timeout.
func (l *Ledger) migrate(ctx context.Context) (found int, err error) {
	if found, ok := l.currentVersion(ctx); ok {
		if found > SchemaVersion {
			return found, &SchemaError{Ledger: l.name, Found: found, Known: SchemaVersion}
		}
		if found == SchemaVersion {
			return found, nil
		}
	}
	err = l.write(ctx, "migrating the schema", func(tx *sql.Tx) error {
		if l.dialect.LockSchema != "" {
			if _, err := tx.ExecContext(ctx, l.dialect.LockSchema); err != nil {
				return err
			}
		}
		exists := false
		if l.dialect.HasTable != "" {
			if err := tx.QueryRowContext(ctx, l.q(l.dialect.HasTable), "tranche_schema").Scan(&exists); err != nil {
				return err
			}
		}
		if !exists {
			if _, err := tx.ExecContext(ctx, createSchemaTable); err != nil {
				return err
			}
		}
		if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM tranche_schema`).Scan(&found); err != nil {
			return err
		}
		if found > SchemaVersion {
			return &SchemaError{Ledger: l.name, Found: found, Known: SchemaVersion}
		}
		if found == SchemaVersion {
			return nil
		}
		now, err := l.now(ctx, tx)
		if err != nil {
			return err
		}
		for _, m := range migrations {
			if m.version <= found {
				continue // applied already
			}
			stmts := m.statements
			if m.dialect != nil {
				stmts = append(slices.Clip(stmts), m.dialect(l.dialect)...)
			}
			for _, stmt := range stmts {
				if _, err := tx.ExecContext(ctx, l.dialect.ddl(stmt)); err != nil {
					return fmt.Errorf("migration %d (%s): %w", m.version, m.description, err)
				}
			}
			if _, err := tx.ExecContext(ctx, l.q(`INSERT INTO tranche_schema (version, description, applied_ms) VALUES ($1, $2, $3)`),
				m.version, m.description, now.UnixMilli()); err != nil {
				return err
			}
		}
		return nil
	})
	return found, err
}

// currentVersion reads the schema's version on the writing database,
// outside any transaction; ok is false when it could not be read (no
// ledger yet, a dialect without HasTable, any failure), which the
// migration's transaction then reads again under its lock.
func (l *Ledger) currentVersion(ctx context.Context) (found int, ok bool) {
	if l.dialect.HasTable != "" {
		var exists bool
		if err := l.db.QueryRowContext(ctx, l.q(l.dialect.HasTable), "tranche_schema").Scan(&exists); err != nil || !exists {
			return 0, false
		}
	}
	if err := l.db.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM tranche_schema`).Scan(&found); err != nil {
		return 0, false
	}
	return found, true
}

// checkSchema refuses, for [Options.Existing], a database without a
// ledger or with a ledger at another version than [SchemaVersion],
// reading only.
func (l *Ledger) checkSchema(ctx context.Context) error {
	var exists bool
	if err := l.reader.QueryRowContext(ctx, l.q(l.dialect.HasTable), "tranche_schema").Scan(&exists); err != nil {
		return l.wrap(ctx, "reading the schema version", err)
	}
	if !exists {
		return fmt.Errorf("tranche: %s: %w: the database has no table tranche_schema; a ledger is created by a worker's open (a program running a backfill), never by a command that reads or amends one", l.name, ErrNoLedger)
	}
	var found int
	if err := l.reader.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM tranche_schema`).Scan(&found); err != nil {
		return l.wrap(ctx, "reading the schema version", err)
	}
	switch {
	case found == 0:
		return fmt.Errorf("tranche: %s: %w: the table tranche_schema records no version; a ledger is created by a worker's open (a program running a backfill), never by a command that reads or amends one", l.name, ErrNoLedger)
	case found != SchemaVersion:
		return &SchemaError{Ledger: l.name, Found: found, Known: SchemaVersion}
	}
	return nil
}
