package sqlledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The ledger's queries, written once for every dialect with $n
// placeholders, each used once and in order, so that a dialect whose
// driver wants ? may rewrite them (see [Dialect.Rebind]). Those that name a variable number of partitions are built
// for the number; Open prepares the others, and those for one partition,
// so that a claim or a finish parses no SQL.
const (
	qDAGID     = `SELECT id FROM tranche_dags WHERE dag = $1`
	qInsertDAG = `INSERT INTO tranche_dags (dag) VALUES ($1) ON CONFLICT (dag) DO NOTHING`
	// qRevision reads the revision of DAG $1 (the id given three
	// times): the greatest of its attempts' revisions, its last
	// release's and its cursors' (see the package documentation).
	qRevision = `SELECT MAX(r) FROM (
			SELECT COALESCE(MAX(revision), 0) AS r FROM tranche_attempts WHERE dag_id = $1
			UNION ALL SELECT released FROM tranche_dags WHERE id = $2
			UNION ALL SELECT COALESCE(MAX(revision), 0) FROM tranche_cursors WHERE dag_id = $3
		) AS revs`
	qBackfill  = `SELECT ` + backfillColumns + ` FROM tranche_backfills WHERE id = $1`
	qBackfills = `SELECT ` + backfillColumns + ` FROM tranche_backfills ORDER BY seq, id`

	// qRevisionIn reads the highest revision above $2 of the attempts of
	// DAG $1 at partitions starting in [$3, $4), through the index of
	// revisions: the unary plus keeps SQLite from reading the range of
	// the primary key instead, which costs the partitions of the range,
	// not the changes since $2.
	qRevisionIn = `SELECT a.revision FROM tranche_attempts a
		WHERE a.dag_id = (SELECT id FROM tranche_dags WHERE dag = $1) AND a.revision > $2
			AND +a.start_s >= $3 AND +a.start_s < $4
		ORDER BY a.revision DESC LIMIT 1`

	// qRecentSuccesses reads the latest $2 successes of DAG $1, through
	// the partial index tranche_attempts_succeeded.
	qRecentSuccesses = `SELECT ` + attemptColumns + `
		FROM tranche_attempts a
		WHERE a.dag_id = (SELECT id FROM tranche_dags WHERE dag = $1) AND a.state = 'succeeded'
		ORDER BY a.revision DESC, a.start_s DESC
		LIMIT $2`
	// Parameters outside a VALUES list of an INSERT, or a comparison with
	// a column, are cast: PostgreSQL would take them for text. Workers
	// starting the same backfill at once both insert it: ON CONFLICT lets
	// the later one wait for the first and keep its row. (SQLite needs the
	// WHERE to tell the upsert's ON from a join's.)
	qInsertBackfill = `INSERT INTO tranche_backfills (id, seq, dag, time_window, chunk, created_ms, canceled, canceled_ms, resumed_ms, partitions, stop_running, dag_name)
		SELECT CAST($1 AS TEXT), COALESCE(MAX(seq), 0) + 1, CAST($2 AS TEXT), CAST($3 AS TEXT),
			CAST($4 AS INTEGER), CAST($5 AS BIGINT), CAST($6 AS INTEGER), CAST($7 AS BIGINT), CAST($8 AS BIGINT), CAST($9 AS TEXT), CAST($10 AS INTEGER),
			CAST($11 AS TEXT)
		FROM tranche_backfills WHERE true
		ON CONFLICT (id) DO NOTHING`

	// qVersions reads the latest attempts, running or succeeded, that
	// the other versions of the DAG of backfill $3 (the identities of
	// the backfills of its non-empty DAG name) made at partitions
	// starting in [$1, $2] and that may have changed since the backfill
	// was created, with its creation: what ClaimRequest.JudgeVersion
	// judges a claim of the backfill by. A backfill without a name, or
	// whose name no other identity's backfill has, reads nothing.
	qVersions = `SELECT a.start_s, a.end_s, d.dag, a.attempt, a.worker, a.state, a.started_ms, a.finished_ms, a.lease_until_ms, b.created_ms
		FROM tranche_backfills b
		JOIN tranche_dags d ON d.dag <> b.dag AND d.dag IN (SELECT o.dag FROM tranche_backfills o WHERE o.dag_name = b.dag_name)
		JOIN tranche_attempts a ON a.dag_id = d.id AND a.start_s >= $1 AND a.start_s <= $2
		JOIN tranche_partitions p ON p.dag_id = a.dag_id AND p.start_s = a.start_s AND p.latest = a.attempt
		WHERE b.id = $3 AND b.dag_name <> '' AND a.state IN ('succeeded', 'running')
			AND COALESCE(a.finished_ms, a.lease_until_ms) >= b.created_ms`

	// qRenameBackfill sets the DAG name of backfill $2 to $1: a label,
	// which the DAG's program may change between runs.
	qRenameBackfill = `UPDATE tranche_backfills SET dag_name = $1 WHERE id = $2`

	// qTakeover fails an attempt whose lease expired, when another
	// worker takes its partition over.
	qTakeover = `UPDATE tranche_attempts SET state = 'failed', finished_ms = $1, revision = $2, error = $3
		WHERE dag_id = $4 AND start_s = $5 AND attempt = $6 AND state = 'running'`

	// qFinishEach records one outcome where the lease still holds, at
	// revision $5: a finish of many partitions, one at a time, where
	// statements cost no round trip (Dialect.InProcess).
	//
	// $6 is when the run began, in milliseconds by the clock of $4 (0
	// keeps the attempt's start), a FROM item so that it is read twice
	// (see laterStart): $4 less the run's whole milliseconds, never
	// before the instant of the finish that preceded the run.
	qFinishEach = `UPDATE tranche_attempts
		SET state = $1, error = $2, row_count = $3, finished_ms = $4, revision = $5,
			started_ms = CASE WHEN b.began > started_ms THEN b.began ELSE started_ms END
		FROM (SELECT CAST($6 AS BIGINT) AS began) AS b
		WHERE dag_id = $7 AND worker = $8 AND state = 'running' AND start_s = $9 AND attempt = $10`

	qHistory = `SELECT ` + attemptColumns + `
		FROM tranche_dags d JOIN tranche_attempts a ON a.dag_id = d.id
		WHERE d.dag = $1 AND a.start_s = $2
		ORDER BY a.attempt`

	// qAttempts reads the attempts of a range of partitions in the
	// primary key's order, a sequential read: Latest keeps each
	// partition's last, cheaper than a join seeking each partition's
	// latest attempt when partitions have few attempts, as they do.
	// The DAG's id is a subquery, not a join, so that PostgreSQL reads
	// the key's range in order and stops at the limit; after a join it
	// sorted every attempt of the range (100 times slower).
	qAttempts = `SELECT ` + attemptColumns + `
		FROM tranche_attempts a
		WHERE a.dag_id = (SELECT id FROM tranche_dags WHERE dag = $1) AND a.start_s >= $2 AND a.start_s < $3
		ORDER BY a.start_s, a.attempt
		LIMIT $4`

	// qBriefs reads the attempts of a range of partitions as qAttempts
	// does, in brief (LatestBriefs): three integers, each partition's
	// start and its attempt's state in one (start_s * 4 + the state's
	// place in briefStates), and the instant that matters of the two
	// its state leaves, since a row's every column costs (a third of the
	// time of SQLite's reading a million of them went to each).
	qBriefs = `SELECT a.start_s * 4 + CASE a.state WHEN 'running' THEN 0 WHEN 'succeeded' THEN 1 WHEN 'failed' THEN 2 ELSE 3 END,
			a.started_ms, CASE WHEN a.state = 'running' THEN a.lease_until_ms ELSE a.finished_ms END
		FROM tranche_attempts a
		WHERE a.dag_id = (SELECT id FROM tranche_dags WHERE dag = $1) AND a.start_s >= $2 AND a.start_s < $3
		ORDER BY a.start_s, a.attempt
		LIMIT $4`
)

// attemptColumns are the columns scanAttempt reads, from tranche_attempts a.
const attemptColumns = `a.start_s, a.end_s, a.partition_key, a.backfill, a.run_id, a.worker, a.attempt, a.state,
	a.started_ms, a.finished_ms, a.lease_until_ms, a.error, a.row_count, a.revision, a.run_trigger, a.code_version`

const backfillColumns = `id, dag, time_window, chunk, created_ms, canceled, canceled_ms, resumed_ms, partitions, stop_running, dag_name`

// qCancelBackfill cancels backfill $3 at $1's time or, when NULL, the
// database's, keeping the time of a cancellation in force, and asks its
// running partitions to stop when $2 is 1 (a request that stays until
// the backfill is resumed). (An UPDATE's expressions read the row as it
// was.)
func (d *Dialect) qCancelBackfill() string {
	return `UPDATE tranche_backfills
		SET canceled = 1, canceled_ms = CASE WHEN canceled = 0 THEN COALESCE(CAST($1 AS BIGINT), ` + d.Now + `) ELSE canceled_ms END,
			stop_running = CASE WHEN CAST($2 AS INTEGER) <> 0 THEN 1 ELSE stop_running END
		WHERE id = $3`
}

// qResumeBackfill resumes backfill $2 at $1's time or, when NULL, the
// database's, if it is canceled, withdrawing a request to stop running
// partitions.
func (d *Dialect) qResumeBackfill() string {
	return `UPDATE tranche_backfills
		SET canceled = 0, stop_running = 0,
			resumed_ms = CASE WHEN canceled <> 0 THEN COALESCE(CAST($1 AS BIGINT), ` + d.Now + `) ELSE resumed_ms END
		WHERE id = $2`
}

// qStart is the first statement of a claim or a multi-partition finish:
// the database's clock, a new revision of DAG $1, whether backfill $2
// was canceled (NULL when there is no such backfill), and the limit of
// DAG $3 (qLimitOf).
func (d *Dialect) qStart() string {
	return `SELECT ` + d.Now + `, ` + d.nextRevision(1) + `, (SELECT canceled FROM tranche_backfills WHERE id = $2), ` + qLimitOf(3)
}

// qLimitOf is the limit of the DAG whose id is $n, NULL for none: a
// column of the statements that start a claim.
func qLimitOf(n int) string {
	return `(SELECT max_running FROM tranche_limits WHERE dag_id = $` + strconv.Itoa(n) + `)`
}

// qFinish records the outcomes of n partitions where the lease still
// holds: the lease's worker (the fence, $6n+4) still runs the lease's
// attempt at each. Each outcome is six values from $3: the partition's
// start, the attempt, the state, the error, the rows and how long its run
// took in whole milliseconds (Outcome.Ran, see ranMillis; -1 keeps the
// attempt's start). The
// revision is a new one of DAG $1 (a subquery of no row's, evaluated
// once); the clock is $2's or, when NULL, the database's, read once; and
// the DAG is $6n+3.
func (d *Dialect) qFinish(n int) string {
	var v strings.Builder
	for i := range n {
		if i > 0 {
			v.WriteString(", ")
		}
		p := 3 + 6*i
		fmt.Fprintf(&v, "(CAST($%d AS BIGINT), CAST($%d AS INTEGER), CAST($%d AS TEXT), CAST($%d AS TEXT), CAST($%d AS BIGINT), CAST($%d AS BIGINT))",
			p, p+1, p+2, p+3, p+4, p+5)
	}
	// VALUES names its columns column1, column2, ... in SQLite and
	// PostgreSQL alike; the clock is a FROM item, so that the finish
	// and the start it moves read one instant.
	return `UPDATE tranche_attempts
		SET state = v.column3, error = v.column4, row_count = v.column5,
			finished_ms = c.now_ms, revision = ` + d.nextRevision(1) + `,
			started_ms = ` + laterStart("c.now_ms - v.column6", "v.column6") + `
		FROM (SELECT COALESCE(CAST($2 AS BIGINT), ` + d.Now + `) AS now_ms) AS c, (VALUES ` + v.String() + `) AS v
		WHERE tranche_attempts.dag_id = $` + strconv.Itoa(3+6*n) + ` AND tranche_attempts.worker = $` + strconv.Itoa(4+6*n) + `
			AND tranche_attempts.state = 'running' AND tranche_attempts.start_s = v.column1 AND tranche_attempts.attempt = v.column2`
}

// qFinishReturning is qFinish(n) returning, for each partition it
// changed, its start, its attempt and whether its backfill was canceled,
// so that the call a worker makes anyway tells it of a cancellation.
func (d *Dialect) qFinishReturning(n int) string {
	return d.qFinish(n) + ` RETURNING tranche_attempts.start_s, tranche_attempts.attempt,
		(SELECT b.canceled FROM tranche_backfills b WHERE b.id = tranche_attempts.backfill)`
}

// laterStart is the SQL of an attempt's start once its run is known to
// have begun at began, an expression of columns, when its run's length
// ran is known (not negative): the later of the two, so that an attempt
// claimed ahead of its run reports how long it ran, and one whose
// worker's clock ran fast never starts before its claim. The clock and
// ran being whole milliseconds, truncated, began is never before the
// recorded finish of a run that ended before this one began (the
// floor of a difference is at most the difference of floors), so that a
// worker's runs one after another never overlap in the records, even
// under a millisecond apart.
func laterStart(began, ran string) string {
	return `CASE WHEN ` + ran + ` >= 0 AND ` + began + ` > started_ms THEN ` + began + ` ELSE started_ms END`
}

// ranMillis is Outcome.Ran as qFinish takes it: whole milliseconds,
// or -1 when the run's length is not known.
func ranMillis(ran time.Duration) int64 {
	if ran <= 0 {
		return -1
	}
	return ran.Milliseconds()
}

// qClaimFresh claims partition $3 of DAG $2, at its first attempt, if it
// has no row, the clock has reached $4 (NULL for no bound), backfill $5
// was not canceled and no other version of the DAG binds the claim, in
// one statement; the clock is $1's or, when NULL, the database's, read
// once, the revision a new one of DAG $9. The other versions are those
// of backfill $7 (empty for a claim the rule of deploys does not bind),
// judged as ClaimRequest.JudgeVersion judges them at the partition
// starting at $6 and ending at $8: the claim is not made when one's
// latest attempt there succeeded at or after the backfill's creation, or
// runs under a live lease claimed at or after it, so that the test and
// the claim read one snapshot. $10 to $16 are the attempt's end, key,
// backfill, run, worker, lease in milliseconds and trigger. It returns
// one row: the clock, the attempt's start, NULL when it claimed nothing,
// and whether backfill $17 was canceled (NULL when there is no such
// backfill), so that a claim refused as early needs no other statement
// to say so. A DAG with a limit (tranche_limits) claims nothing here: its
// claims count its runs in a transaction. Only for dialects with
// InsertInWith.
func (d *Dialect) qClaimFresh() string {
	return `WITH c AS (SELECT COALESCE(CAST($1 AS BIGINT), ` + d.Now + `) AS now_ms),
		p AS (
			INSERT INTO tranche_partitions (dag_id, start_s, latest)
			SELECT v.dag_id, v.start_s, 1 FROM c, (SELECT CAST($2 AS BIGINT) AS dag_id, CAST($3 AS BIGINT) AS start_s) AS v
			WHERE c.now_ms >= COALESCE(CAST($4 AS BIGINT), c.now_ms)
				AND NOT EXISTS (SELECT 1 FROM tranche_backfills WHERE id = $5 AND canceled <> 0)
				AND NOT EXISTS (SELECT 1 FROM tranche_limits WHERE dag_id = v.dag_id AND max_running > 0)
				AND NOT EXISTS (
					SELECT 1 FROM tranche_backfills b
					JOIN tranche_dags od ON od.dag <> b.dag AND od.dag IN (SELECT o.dag FROM tranche_backfills o WHERE o.dag_name = b.dag_name)
					JOIN tranche_partitions op ON op.dag_id = od.id AND op.start_s = CAST($6 AS BIGINT)
					JOIN tranche_attempts oa ON oa.dag_id = op.dag_id AND oa.start_s = op.start_s AND oa.attempt = op.latest
					WHERE b.id = $7 AND b.dag_name <> '' AND oa.end_s = CAST($8 AS BIGINT)
						AND ((oa.state = 'succeeded' AND oa.finished_ms >= b.created_ms)
							OR (oa.state = 'running' AND oa.lease_until_ms > c.now_ms AND oa.started_ms >= b.created_ms)))
			ON CONFLICT (dag_id, start_s) DO NOTHING
			RETURNING dag_id, start_s, ` + d.nextRevision(9) + ` AS rev
		),
		a AS (
			INSERT INTO tranche_attempts
				(dag_id, start_s, attempt, end_s, partition_key, backfill, run_id, worker, started_ms, lease_until_ms, error, row_count, revision, state, run_trigger)
			SELECT p.dag_id, p.start_s, 1, CAST($10 AS BIGINT), CAST($11 AS TEXT), CAST($12 AS TEXT), CAST($13 AS TEXT), CAST($14 AS TEXT),
				c.now_ms, c.now_ms + CAST($15 AS BIGINT), '', 0, p.rev, 'running', CAST($16 AS TEXT)
			FROM p, c
			RETURNING started_ms
		)
		SELECT c.now_ms, a.started_ms, (SELECT canceled FROM tranche_backfills WHERE id = $17) FROM c LEFT JOIN a ON true`
}

// qInsertFresh gives those of n partitions (dag_id, start_s pairs from
// $1) that have no row yet one, at their first attempt, and returns, for
// each, its start and, with start, what qStart reads (the clock, a new
// revision of DAG $2n+1, whether backfill $2n+2 was canceled, the limit
// of DAG $2n+3), saving a
// claim of fresh partitions that statement. A concurrent claim of one of
// them waits for this transaction, and then finds the partition claimed.
func (d *Dialect) qInsertFresh(n int, start bool) string {
	q := `INSERT INTO tranche_partitions (dag_id, start_s, latest) VALUES ` +
		strings.ReplaceAll(tuples(1, n, 2), ")", ", 1)") + ` ON CONFLICT (dag_id, start_s) DO NOTHING
		RETURNING start_s`
	if !start {
		return q
	}
	return q + `, ` + d.Now + `, ` + d.nextRevision(2*n+1) +
		`, (SELECT canceled FROM tranche_backfills WHERE id = $` + strconv.Itoa(2*n+2) + `), ` + qLimitOf(2*n+3)
}

// qLockCursor locks the cursor of DAG $1, backfill $2 and order $3 (1:
// descending), creating it at $4 and revision 0, never moved, if it is
// new, and returns where it is and what qStart reads: the clock, a new
// revision of DAG $5, whether backfill $6 was canceled, the limit of DAG
// $8; and before the
// clock, 1 when another identity has a backfill of the DAG name of
// backfill $5 (not ”), so that a claim reads the other versions of the
// DAG (qVersions) only when there are some. Workers of one backfill take
// turns on its row, from this statement to their commit. (The update
// changes nothing but locks the row; RETURNING reads it as it was.)
func (d *Dialect) qLockCursor() string {
	return `INSERT INTO tranche_cursors (dag_id, backfill, descending, start_s, revision) VALUES ($1, $2, $3, $4, 0)
		ON CONFLICT (dag_id, backfill, descending) DO UPDATE SET revision = tranche_cursors.revision
		RETURNING start_s, revision,
			CASE WHEN EXISTS (SELECT 1 FROM tranche_backfills b JOIN tranche_backfills o ON o.dag_name = b.dag_name AND o.dag <> b.dag
				WHERE b.id = $5 AND b.dag_name <> '') THEN 1 ELSE 0 END,
			` + d.Now + `, ` + d.nextRevision(6) + `, (SELECT canceled FROM tranche_backfills WHERE id = $7), ` + qLimitOf(8)
}

// qClaimRound claims the jobs of a round of ClaimNext whose partitions
// are all fresh, in one statement, for dialects with InsertInWith: it
// gives those of n partitions ((start, end, key, run, job) from $1: the
// job is the partition's job's index in the round) that have no row
// one, at their first attempt, in DAG $5n+1, and returns their starts;
// it starts the attempts of the jobs all of whose partitions it gave a
// row (DAG $5n+2, backfill $5n+3, worker $5n+4, started at $5n+5, lease
// until $5n+6, revision $5n+7, trigger $5n+8); and it moves the cursor
// of DAG $5n+11, backfill $5n+12 and order $5n+13 to start $5n+9 at
// revision $5n+10.
func qClaimRound(n int) string {
	var v strings.Builder
	for i := range n {
		if i > 0 {
			v.WriteString(", ")
		}
		p := 1 + 5*i
		fmt.Fprintf(&v, "(CAST($%d AS BIGINT), CAST($%d AS BIGINT), CAST($%d AS TEXT), CAST($%d AS TEXT), CAST($%d AS INTEGER))", p, p+1, p+2, p+3, p+4)
	}
	k := func(i int) string { return "$" + strconv.Itoa(5*n+i) }
	return `WITH v (start_s, end_s, partition_key, run_id, job) AS (VALUES ` + v.String() + `),
		p AS (
			INSERT INTO tranche_partitions (dag_id, start_s, latest)
			SELECT CAST(` + k(1) + ` AS BIGINT), v.start_s, 1 FROM v
			ON CONFLICT (dag_id, start_s) DO NOTHING
			RETURNING start_s
		),
		whole AS (
			SELECT v.job FROM v LEFT JOIN p ON p.start_s = v.start_s GROUP BY v.job HAVING COUNT(p.start_s) = COUNT(*)
		),
		a AS (
			INSERT INTO tranche_attempts
				(dag_id, start_s, attempt, end_s, partition_key, backfill, run_id, worker, started_ms, lease_until_ms, error, row_count, revision, state, run_trigger)
			SELECT CAST(` + k(2) + ` AS BIGINT), v.start_s, 1, v.end_s, v.partition_key, CAST(` + k(3) + ` AS TEXT), v.run_id, CAST(` + k(4) + ` AS TEXT),
				CAST(` + k(5) + ` AS BIGINT), CAST(` + k(6) + ` AS BIGINT), '', 0, CAST(` + k(7) + ` AS BIGINT), 'running', CAST(` + k(8) + ` AS TEXT)
			FROM v JOIN whole ON whole.job = v.job
		),
		c AS (
			UPDATE tranche_cursors SET start_s = ` + k(9) + `, revision = ` + k(10) + `
			WHERE dag_id = ` + k(11) + ` AND backfill = ` + k(12) + ` AND descending = ` + k(13) + `
		)
		SELECT start_s FROM p`
}

// qMoveCursor moves the cursor of DAG $3, backfill $4 and order $5 to
// start $1 at revision $2.
const qMoveCursor = `UPDATE tranche_cursors SET start_s = $1, revision = $2 WHERE dag_id = $3 AND backfill = $4 AND descending = $5`

// qDeletePartitions deletes the rows of n partitions of DAG $1 (starts
// from $3) whose latest attempt is $2: the rows a claim inserted for a
// job it then refused (latest 1, no attempt yet), or those a release
// left without an attempt (latest 0).
func qDeletePartitions(n int) string {
	return `DELETE FROM tranche_partitions WHERE dag_id = $1 AND latest = $2 AND start_s IN (` + params(3, n) + `)`
}

// qRewindLatest moves n partitions of DAG $1 ((start_s, latest) pairs
// from $2) back to the attempt before their latest, where their latest
// is the one named: the first statement of a release, which locks the
// partitions' rows before their attempts, in the order of a claim.
func qRewindLatest(n int) string {
	return `UPDATE tranche_partitions SET latest = latest - 1 WHERE dag_id = $1 AND (start_s, latest) IN (VALUES ` + pairs(2, n) + `)`
}

// qWithdraw deletes n attempts ((start_s, attempt) pairs from $3) of DAG
// $1 that worker $2 still runs: the fence of a release.
func qWithdraw(n int) string {
	return `DELETE FROM tranche_attempts WHERE dag_id = $1 AND worker = $2 AND state = 'running' AND (start_s, attempt) IN (VALUES ` +
		pairs(3, n) + `)`
}

// qReleased records revision $1 as the last release of DAG $2, unless a
// later release recorded a higher one ($3 is $1 again).
const qReleased = `UPDATE tranche_dags SET released = $1 WHERE id = $2 AND released < $3`

// qReadLatest reads the latest attempt of n partitions of DAG $1 (starts
// from $2), locking their rows with lock, the dialect's ClaimLock or
// LeaseLock.
func qReadLatest(n int, lock string) string {
	return `SELECT p.start_s, p.latest, a.worker, a.state, a.lease_until_ms, a.revision, a.code_version
		FROM tranche_partitions p
		LEFT JOIN tranche_attempts a ON a.dag_id = p.dag_id AND a.start_s = p.start_s AND a.attempt = p.latest
		WHERE p.dag_id = $1 AND p.start_s IN (` + params(2, n) + `)` + lock
}

// qStampCodeVersion sets the code version of the running attempts of
// run $3 of DAG $2 at the n partitions starting at $4 on to $1.
func qStampCodeVersion(n int) string {
	return `UPDATE tranche_attempts SET code_version = CAST($1 AS TEXT)
		WHERE dag_id = $2 AND run_id = $3 AND state = 'running' AND start_s IN (` + params(4, n) + `)`
}

// qInsertAttempts starts n attempts, 14 columns each from $1.
func qInsertAttempts(n int) string {
	return `INSERT INTO tranche_attempts
		(dag_id, start_s, attempt, end_s, partition_key, backfill, run_id, worker, started_ms, lease_until_ms, error, row_count, revision, run_trigger, state)
		VALUES ` + strings.ReplaceAll(tuples(1, n, 14), ")", ", 'running')")
}

// qAdvanceLatest moves n partitions of DAG $1 (starts from $2) to their
// next attempt.
func qAdvanceLatest(n int) string {
	return `UPDATE tranche_partitions SET latest = latest + 1 WHERE dag_id = $1 AND start_s IN (` + params(2, n) + `)`
}

// qHeartbeat extends to $1 the lease of n attempts ((start_s, attempt)
// pairs from $4) of DAG $2 that worker $3 still runs: the fence.
func qHeartbeat(n int) string {
	return `UPDATE tranche_attempts SET lease_until_ms = $1
		WHERE dag_id = $2 AND worker = $3 AND state = 'running' AND (start_s, attempt) IN (VALUES ` +
		pairs(4, n) + `)`
}

// pairs returns n (start_s, attempt) pairs of placeholders from $from,
// cast for PostgreSQL, which would take a VALUES list's parameters for
// text.
func pairs(from, n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "(CAST($%d AS BIGINT), CAST($%d AS INTEGER))", from+2*i, from+2*i+1)
	}
	return b.String()
}

// prepare prepares the ledger's fixed queries: on the writing database
// those that transactions run, on the reader those that reads run.
func (l *Ledger) prepare(ctx context.Context) error {
	l.wstmts, l.rstmts = map[string]*sql.Stmt{}, map[string]*sql.Stmt{}
	l.qFinishOne = l.dialect.qFinishReturning(1)
	writes := []string{l.qNow(), l.dialect.qStart(), l.dialect.qFinish(1), l.qFinishOne, qDAGID, qInsertDAG, qRevision, qBackfill,
		l.dialect.qCancelBackfill(), l.dialect.qResumeBackfill(), qInsertBackfill,
		qTakeover, qFinishEach, l.dialect.qInsertFresh(1, true), qReadLatest(1, l.dialect.ClaimLock), qReadLatest(1, l.dialect.LeaseLock), qInsertAttempts(1), qAdvanceLatest(1), qHeartbeat(1),
		l.dialect.qLockCursor(), qMoveCursor, qReleased, qVersions, qRewindLatest(1), qWithdraw(1), qDeletePartitions(1)}
	if l.dialect.InsertInWith {
		writes = append(writes, l.dialect.qClaimFresh())
	}
	reads := []string{qDAGID, qRevision, qBackfill, qBackfills, qHistory, qAttempts, qBriefs, qRevisionIn, qRecentSuccesses, qChangedIn}
	for _, set := range []struct {
		db    *sql.DB
		into  map[string]*sql.Stmt
		query []string
	}{{l.db, l.wstmts, writes}, {l.reader, l.rstmts, reads}} {
		for _, q := range set.query {
			s, err := set.db.PrepareContext(ctx, l.q(q))
			if err != nil {
				return errors.Join(err, l.Close())
			}
			set.into[q] = s
		}
	}
	return nil
}

// Close releases the ledger's prepared statements. The databases stay
// open: they are the caller's.
func (l *Ledger) Close() error {
	var errs []error
	for _, m := range []map[string]*sql.Stmt{l.wstmts, l.rstmts} {
		for q, s := range m {
			errs = append(errs, s.Close())
			delete(m, q)
		}
	}
	return errors.Join(errs...)
}

func (l *Ledger) qNow() string { return "SELECT " + l.dialect.Now }

// exec, query and queryRow run a query in tx, prepared if Open prepared
// it. Without a transaction (tx nil), they run a statement that is a
// transaction of its own.
func (l *Ledger) exec(ctx context.Context, tx *sql.Tx, query string, args ...any) (sql.Result, error) {
	s := l.wstmts[query]
	switch {
	case tx == nil && s != nil:
		return s.ExecContext(ctx, args...)
	case tx == nil:
		return l.db.ExecContext(ctx, l.q(query), args...)
	case s != nil:
		return tx.StmtContext(ctx, s).ExecContext(ctx, args...)
	}
	return tx.ExecContext(ctx, l.q(query), args...)
}

func (l *Ledger) query(ctx context.Context, tx *sql.Tx, query string, args ...any) (*sql.Rows, error) {
	if s := l.wstmts[query]; s != nil {
		return tx.StmtContext(ctx, s).QueryContext(ctx, args...)
	}
	return tx.QueryContext(ctx, l.q(query), args...)
}

func (l *Ledger) queryRow(ctx context.Context, tx *sql.Tx, query string, args ...any) *sql.Row {
	s := l.wstmts[query]
	switch {
	case tx == nil && s != nil:
		return s.QueryRowContext(ctx, args...)
	case tx == nil:
		return l.db.QueryRowContext(ctx, l.q(query), args...)
	case s != nil:
		return tx.StmtContext(ctx, s).QueryRowContext(ctx, args...)
	}
	return tx.QueryRowContext(ctx, l.q(query), args...)
}

// read and readRow run a query on the reader, prepared if Open prepared
// it.
func (l *Ledger) readRows(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if s := l.rstmts[query]; s != nil {
		return s.QueryContext(ctx, args...)
	}
	return l.reader.QueryContext(ctx, l.q(query), args...)
}

func (l *Ledger) readRow(ctx context.Context, query string, args ...any) *sql.Row {
	if s := l.rstmts[query]; s != nil {
		return s.QueryRowContext(ctx, args...)
	}
	return l.reader.QueryRowContext(ctx, l.q(query), args...)
}
