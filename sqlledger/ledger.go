// Package sqlledger is a [tranche.Ledger] over database/sql, written once
// for every SQL database a ledger runs on: SQLite, through the module
// github.com/tranche-dev/tranche/ledger/sqlite, and PostgreSQL. The
// databases differ only in a small [Dialect].
//
// # Schema
//
// [Open] creates the tables, or migrates them forward, in one transaction,
// and records each migration in tranche_schema; a database migrated by a
// newer release is refused with a [*SchemaError]. The tables are:
//
//	tranche_dags        id, dag (the DAG identity), revision
//	tranche_partitions  dag_id, start_s, latest (the latest attempt's number)
//	tranche_attempts    dag_id, start_s, attempt, end_s, partition_key, backfill,
//	                    run_id, worker, state, started_ms, finished_ms,
//	                    lease_until_ms, error, row_count, revision
//	tranche_backfills   id, seq, dag, time_window, chunk, created_ms, canceled
//	tranche_schema      version, description, applied_ms
//
// Partition bounds are Unix seconds; the instants of attempts are Unix
// milliseconds, so a ledger keeps them to the millisecond.
//
// # Transactions
//
// Every claim and transition is one transaction. A claim reads the
// latest attempt of each partition (locking the rows where the dialect
// says how), judges them by the ledger's clock, and records every new
// attempt or none. A heartbeat or a finish changes a partition only where
// the lease's worker still runs the lease's attempt, a condition written
// into the WHERE clause of its UPDATE, so a worker that lost its lease
// changes nothing. Leases are judged by the database's clock, read once
// per transaction, unless [Options.Now] gives another.
package sqlledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tranche-dev/tranche"
)

// Options configure [Open]. Dialect and Name are required.
type Options struct {
	// Dialect is the database's dialect, such as [SQLite].
	Dialect *Dialect

	// Name names the ledger in errors: "sqlite ledger " and the file,
	// for instance.
	Name string

	// Now, when not nil, is the clock that judges leases and stamps
	// attempts in place of the database's. Tests inject one; workers on
	// several machines should keep the database's.
	Now func() time.Time

	// Reader, when not nil, serves the ledger's reads (Latest, History,
	// Revision, Backfill, Backfills), leaving the database given to
	// [Open] its writes: for SQLite, a pool of read-only connections
	// beside the one writing connection.
	Reader *sql.DB
}

// Ledger is a [tranche.Ledger] over database/sql. It is safe for
// concurrent use, by goroutines and by processes sharing the database.
type Ledger struct {
	db, reader *sql.DB
	dialect    *Dialect
	name       string
	clock      func() time.Time

	queries sync.Map // query as written -> as rebound for the driver
	dags    sync.Map // DAG identity -> int64 id, for committed DAG rows only

	// Statements prepared by Open, by query as written: on db, run in
	// transactions, and on reader.
	wstmts, rstmts map[string]*sql.Stmt
}

var _ tranche.Ledger = (*Ledger)(nil)

// Open returns a ledger over db, creating or migrating its schema first.
// The caller keeps db (and Options.Reader) and closes them after the
// ledger's Close.
func Open(ctx context.Context, db *sql.DB, opts Options) (*Ledger, error) {
	if db == nil || opts.Dialect == nil || opts.Name == "" {
		return nil, errors.New("tranche: sqlledger.Open needs a database, a dialect and a name")
	}
	l := &Ledger{db: db, reader: opts.Reader, dialect: opts.Dialect, name: opts.Name, clock: opts.Now}
	if l.reader == nil {
		l.reader = db
	}
	if _, err := l.migrate(ctx); err != nil {
		return nil, err
	}
	if err := l.prepare(ctx); err != nil {
		return nil, l.wrap(ctx, "preparing the ledger's statements", err)
	}
	return l, nil
}

// Name returns the ledger's name, as its errors give it.
func (l *Ledger) Name() string { return l.name }

// q returns query rebound for the driver.
func (l *Ledger) q(query string) string {
	if l.dialect.Rebind == nil {
		return query
	}
	if v, ok := l.queries.Load(query); ok {
		return v.(string)
	}
	r := l.dialect.rebind(query)
	l.queries.Store(query, r)
	return r
}

// maxTries bounds how often a transaction is tried when the dialect calls
// its failure retryable.
const maxTries = 8

// write runs f in a write transaction, committing when it returns nil,
// and tries again a few times when the dialect says a failure was a
// transient conflict. afterCommit, when not nil, runs after the commit.
func (l *Ledger) write(ctx context.Context, op string, f func(tx *sql.Tx) error) error {
	var err error
	for try := 1; ; try++ {
		err = l.tryWrite(ctx, f)
		if err == nil {
			return nil
		}
		if _, _, retry := l.dialect.classify(err); !retry || try == maxTries || ctx.Err() != nil {
			break
		}
		time.Sleep(time.Duration(try*try) * time.Millisecond)
	}
	return l.wrap(ctx, op, err)
}

func (l *Ledger) tryWrite(ctx context.Context, f func(tx *sql.Tx) error) error {
	tx, err := l.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := f(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// now reads the ledger's clock: Options.Now, or the database's.
func (l *Ledger) now(ctx context.Context, tx *sql.Tx) (time.Time, error) {
	if l.clock != nil {
		return time.UnixMilli(l.clock().UnixMilli()).UTC(), nil
	}
	var ms int64
	if err := l.queryRow(ctx, tx, l.qNow()).Scan(&ms); err != nil {
		return time.Time{}, err
	}
	return time.UnixMilli(ms).UTC(), nil
}

// dagID returns the id of a DAG identity, or 0 if it has none yet,
// reading in tx.
func (l *Ledger) dagID(ctx context.Context, tx *sql.Tx, dag string) (int64, error) {
	if v, ok := l.dags.Load(dag); ok {
		return v.(int64), nil
	}
	var id int64
	err := l.queryRow(ctx, tx, qDAGID, dag).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	l.dags.Store(dag, id) // read, so committed
	return id, nil
}

// ensureDAG returns the id of a DAG identity, creating its row in tx if
// needed; created says the id is not committed yet.
func (l *Ledger) ensureDAG(ctx context.Context, tx *sql.Tx, dag string) (id int64, created bool, err error) {
	if id, err = l.dagID(ctx, tx, dag); err != nil || id != 0 {
		return id, false, err
	}
	if _, err := l.exec(ctx, tx, qInsertDAG, dag); err != nil {
		return 0, false, err
	}
	err = l.queryRow(ctx, tx, qDAGID, dag).Scan(&id)
	return id, true, err
}

// bump increments a DAG's revision and returns the new one.
func (l *Ledger) bump(ctx context.Context, tx *sql.Tx, dagID int64) (int64, error) {
	var rev int64
	err := l.queryRow(ctx, tx, qBump, dagID).Scan(&rev)
	return rev, err
}

// batchRows bounds the partitions one statement names, keeping every
// statement within the parameter limits of SQLite and PostgreSQL.
const batchRows = 500

// params returns "$from, $from+1, ..., $from+n-1".
func params(from, n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("$" + strconv.Itoa(from+i))
	}
	return b.String()
}

// tuples returns n parenthesized groups of width placeholders from $from.
func tuples(from, n, width int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(" + params(from+i*width, width) + ")")
	}
	return b.String()
}

// latestRow is what a transaction reads of a partition's latest attempt.
type latestRow struct {
	latest  int // 0: no attempt yet
	attempt tranche.Attempt
}

// readLatest reads, in tx, the latest attempt of each partition starting
// at starts (Unix seconds), locking the partitions' rows as the dialect
// says. Partitions absent from the result have no row, or a row locked by
// another transaction.
func (l *Ledger) readLatest(ctx context.Context, tx *sql.Tx, dagID int64, starts []int64) (map[int64]*latestRow, error) {
	out := make(map[int64]*latestRow, len(starts))
	for batch := range slices.Chunk(starts, batchRows) {
		args := make([]any, 0, len(batch)+1)
		args = append(args, dagID)
		for _, s := range batch {
			args = append(args, s)
		}
		rows, err := l.query(ctx, tx, l.qReadLatest(len(batch)), args...)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var start int64
			var r latestRow
			var worker, state sql.NullString
			var until, rev sql.NullInt64
			if err := rows.Scan(&start, &r.latest, &worker, &state, &until, &rev); err != nil {
				rows.Close()
				return nil, err
			}
			r.attempt = tranche.Attempt{Number: r.latest, Worker: worker.String, State: tranche.State(state.String),
				LeaseUntil: time.UnixMilli(until.Int64).UTC(), Revision: rev.Int64}
			out[start] = &r
		}
		if err := rows.Close(); err != nil {
			return nil, err
		}
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// errClaimedElsewhere marks a partition row another transaction holds
// locked; see Dialect.LockRows.
var errClaimedElsewhere = errors.New("sqlledger: partition row locked by another transaction")

// Claim implements [tranche.Ledger].
func (l *Ledger) Claim(ctx context.Context, req tranche.ClaimRequest) (*tranche.Lease, error) {
	if err := validateClaim(req); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	n := len(req.Partitions)
	starts := make([]int64, n)
	for i, p := range req.Partitions {
		starts[i] = p.Start.Unix()
	}
	var lease *tranche.Lease
	var newDAG int64
	err := l.write(ctx, "claiming "+describe(req.Partitions), func(tx *sql.Tx) error {
		lease, newDAG = nil, 0
		if req.Backfill != "" {
			var canceled int
			err := l.queryRow(ctx, tx, qCanceled, req.Backfill).Scan(&canceled)
			switch {
			case err == nil && canceled != 0:
				return fmt.Errorf("%w: backfill %s was canceled", tranche.ErrNotClaimable, req.Backfill)
			case err != nil && !errors.Is(err, sql.ErrNoRows):
				return err
			}
		}
		now, err := l.now(ctx, tx)
		if err != nil {
			return err
		}
		dagID, created, err := l.ensureDAG(ctx, tx, req.DAG)
		if err != nil {
			return err
		}
		if created {
			newDAG = dagID
		}
		// Every partition gets a row to lock; a new one has no attempt.
		for batch := range slices.Chunk(starts, batchRows) {
			args := make([]any, 0, 2*len(batch))
			for _, s := range batch {
				args = append(args, dagID, s)
			}
			if _, err := l.exec(ctx, tx, qInsertPartitions(len(batch)), args...); err != nil {
				return err
			}
		}
		latest, err := l.readLatest(ctx, tx, dagID, starts)
		if err != nil {
			return err
		}
		for i, p := range req.Partitions {
			r := latest[starts[i]]
			if r == nil {
				return fmt.Errorf("%w: %s is being claimed by another worker", tranche.ErrNotClaimable, p.Key())
			}
			var a *tranche.Attempt
			if r.latest > 0 {
				a = &r.attempt
			}
			if err := claimable(a, p, req, now); err != nil {
				return err
			}
		}
		rev, err := l.bump(ctx, tx, dagID)
		if err != nil {
			return err
		}
		lease = &tranche.Lease{
			DAG: req.DAG, Backfill: req.Backfill, Worker: req.Worker, RunID: req.RunID,
			Partitions: slices.Clone(req.Partitions), Attempts: make([]int, n),
			Until: now.Add(req.Lease).Truncate(time.Millisecond),
		}
		for i := range req.Partitions {
			r := latest[starts[i]]
			lease.Attempts[i] = r.latest + 1
			if r.latest > 0 && r.attempt.State == tranche.StateRunning { // taken over after its lease expired
				if _, err := l.exec(ctx, tx, qTakeover, now.UnixMilli(), rev, takenOver(r.attempt.LeaseUntil, req.Worker), dagID, starts[i], r.latest); err != nil {
					return err
				}
			}
		}
		const width = 13
		for lo := 0; lo < n; lo += batchRows {
			hi := min(n, lo+batchRows)
			args := make([]any, 0, (hi-lo)*width)
			for i := lo; i < hi; i++ {
				p := req.Partitions[i]
				args = append(args, dagID, starts[i], lease.Attempts[i], p.End.Unix(), p.Key(), req.Backfill, req.RunID, req.Worker,
					now.UnixMilli(), lease.Until.UnixMilli(), "", 0, rev)
			}
			if _, err := l.exec(ctx, tx, qInsertAttempts(hi-lo), args...); err != nil {
				return err
			}
			args = append(args[:0], dagID)
			for i := lo; i < hi; i++ {
				args = append(args, starts[i])
			}
			if _, err := l.exec(ctx, tx, qAdvanceLatest(hi-lo), args...); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if newDAG != 0 {
		l.dags.Store(req.DAG, newDAG)
	}
	return lease, nil
}

// describe names partitions in an operation's description.
func describe(ps []tranche.TimePartition) string {
	switch len(ps) {
	case 0:
		return "no partitions"
	case 1:
		return "partition " + ps[0].Key()
	}
	return fmt.Sprintf("%d partitions from %s", len(ps), ps[0].Key())
}

// checkLease reads the lease's partitions in tx and applies the fencing
// rule to each; it returns the DAG's id.
func (l *Ledger) checkLease(ctx context.Context, tx *sql.Tx, lease *tranche.Lease) (int64, []int64, error) {
	if len(lease.Attempts) != len(lease.Partitions) || len(lease.Partitions) == 0 {
		return 0, nil, fmt.Errorf("%w: a lease of %d partitions with %d attempts", tranche.ErrFenced, len(lease.Partitions), len(lease.Attempts))
	}
	dagID, err := l.dagID(ctx, tx, lease.DAG)
	if err != nil {
		return 0, nil, err
	}
	if dagID == 0 {
		return 0, nil, fmt.Errorf("%w: unknown DAG %s", tranche.ErrFenced, lease.DAG)
	}
	starts := make([]int64, len(lease.Partitions))
	for i, p := range lease.Partitions {
		starts[i] = p.Start.Unix()
	}
	latest, err := l.readLatest(ctx, tx, dagID, starts)
	if err != nil {
		return 0, nil, err
	}
	for i := range lease.Partitions {
		var a *tranche.Attempt
		if r := latest[starts[i]]; r != nil && r.latest > 0 {
			a = &r.attempt
		}
		if err := fenced(a, lease, i); err != nil {
			return 0, nil, err
		}
	}
	return dagID, starts, nil
}

// Heartbeat implements [tranche.Ledger].
func (l *Ledger) Heartbeat(ctx context.Context, lease *tranche.Lease, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var until time.Time
	err := l.write(ctx, "renewing the lease on "+describe(lease.Partitions), func(tx *sql.Tx) error {
		dagID, starts, err := l.checkLease(ctx, tx, lease)
		if err != nil {
			return err
		}
		now, err := l.now(ctx, tx)
		if err != nil {
			return err
		}
		until = now.Add(d).Truncate(time.Millisecond)
		for lo := 0; lo < len(starts); lo += batchRows {
			hi := min(len(starts), lo+batchRows)
			args := []any{until.UnixMilli(), dagID, lease.Worker}
			for i := lo; i < hi; i++ {
				args = append(args, starts[i], lease.Attempts[i])
			}
			res, err := l.exec(ctx, tx, qHeartbeat(hi-lo), args...)
			if err := changed(res, err, hi-lo, lease); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	lease.Until = until
	return nil
}

// changed checks that an UPDATE fenced by the lease changed want rows.
func changed(res sql.Result, err error, want int, lease *tranche.Lease) error {
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n != int64(want) {
		return fmt.Errorf("%w: %d of %d partitions of the lease of worker %s changed hands", tranche.ErrFenced, int64(want)-n, want, lease.Worker)
	}
	return nil
}

// Finish implements [tranche.Ledger].
func (l *Ledger) Finish(ctx context.Context, lease *tranche.Lease, outcomes []tranche.Outcome) error {
	if err := validateFinish(lease, outcomes); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return l.write(ctx, "finishing "+describe(lease.Partitions), func(tx *sql.Tx) error {
		dagID, starts, err := l.checkLease(ctx, tx, lease)
		if err != nil {
			return err
		}
		now, err := l.now(ctx, tx)
		if err != nil {
			return err
		}
		rev, err := l.bump(ctx, tx, dagID)
		if err != nil {
			return err
		}
		// Outcomes differ by partition: one UPDATE each.
		for i, o := range outcomes {
			res, err := l.exec(ctx, tx, qFinish, string(o.State), o.Err, o.Rows, now.UnixMilli(), rev, dagID, lease.Worker, starts[i], lease.Attempts[i])
			if err := changed(res, err, 1, lease); err != nil {
				return err
			}
		}
		return nil
	})
}

func scanAttempt(rows *sql.Rows, dag string) (tranche.Attempt, error) {
	a := tranche.Attempt{DAG: dag}
	var start, end, started, until int64
	var finished sql.NullInt64
	var state string
	err := rows.Scan(&start, &end, &a.Key, &a.Backfill, &a.RunID, &a.Worker, &a.Number, &state,
		&started, &finished, &until, &a.Err, &a.Rows, &a.Revision)
	a.Start, a.End = time.Unix(start, 0).UTC(), time.Unix(end, 0).UTC()
	a.State = tranche.State(state)
	a.Started, a.LeaseUntil = time.UnixMilli(started).UTC(), time.UnixMilli(until).UTC()
	if finished.Valid {
		a.Finished = time.UnixMilli(finished.Int64).UTC()
	}
	return a, err
}

// ceilUnix returns the first whole second at or after t.
func ceilUnix(t time.Time) int64 {
	s := t.Unix()
	if t.Nanosecond() > 0 {
		s++
	}
	return s
}

// latestPage is how many attempts Latest reads per query.
const latestPage = 1024

// Latest implements [tranche.Ledger]. It reads a page of attempts at a
// time and holds no connection while the loop body runs.
func (l *Ledger) Latest(ctx context.Context, dag string, from, to time.Time) iter.Seq2[tranche.Attempt, error] {
	return func(yield func(tranche.Attempt, error) bool) {
		next, end := ceilUnix(from), ceilUnix(to)
		page := make([]tranche.Attempt, 0, latestPage)
		for next < end {
			if err := ctx.Err(); err != nil {
				yield(tranche.Attempt{}, err)
				return
			}
			page = page[:0]
			err := l.read(ctx, "reading the latest attempts of DAG "+dag, func() error {
				rows, err := l.readRows(ctx, qLatest, dag, next, end, latestPage)
				if err != nil {
					return err
				}
				defer rows.Close()
				for rows.Next() {
					a, err := scanAttempt(rows, dag)
					if err != nil {
						return err
					}
					page = append(page, a)
				}
				return rows.Err()
			})
			if err != nil {
				yield(tranche.Attempt{}, err)
				return
			}
			for _, a := range page {
				if !yield(a, nil) {
					return
				}
			}
			if len(page) < latestPage {
				return
			}
			next = page[len(page)-1].Start.Unix() + 1
		}
	}
}

// read runs a read, wrapping its failure.
func (l *Ledger) read(ctx context.Context, op string, f func() error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return l.wrap(ctx, op, f())
}

// History implements [tranche.Ledger].
func (l *Ledger) History(ctx context.Context, dag string, start time.Time) ([]tranche.Attempt, error) {
	var out []tranche.Attempt
	err := l.read(ctx, "reading the history of "+start.Format(time.RFC3339), func() error {
		if start.Nanosecond() != 0 {
			return nil // no partition starts there
		}
		rows, err := l.readRows(ctx, qHistory, dag, start.Unix())
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			a, err := scanAttempt(rows, dag)
			if err != nil {
				return err
			}
			out = append(out, a)
		}
		return rows.Err()
	})
	return out, err
}

// Revision implements [tranche.Ledger].
func (l *Ledger) Revision(ctx context.Context, dag string) (int64, error) {
	var rev int64
	err := l.read(ctx, "reading the revision of DAG "+dag, func() error {
		err := l.readRow(ctx, qRevision, dag).Scan(&rev)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		return err
	})
	return rev, err
}

func scanBackfill(row interface{ Scan(...any) error }) (tranche.BackfillRecord, error) {
	var b tranche.BackfillRecord
	var created int64
	var canceled int
	err := row.Scan(&b.ID, &b.DAG, &b.Window, &b.Chunk, &created, &canceled)
	b.Created, b.Canceled = time.UnixMilli(created).UTC(), canceled != 0
	return b, err
}

// PutBackfill implements [tranche.Ledger]. Created is kept to the
// millisecond.
func (l *Ledger) PutBackfill(ctx context.Context, b tranche.BackfillRecord) (tranche.BackfillRecord, error) {
	if err := ctx.Err(); err != nil {
		return tranche.BackfillRecord{}, err
	}
	if b.ID == "" {
		return tranche.BackfillRecord{}, fmt.Errorf("tranche: PutBackfill without an id")
	}
	var stored tranche.BackfillRecord
	err := l.write(ctx, "recording backfill "+b.ID, func(tx *sql.Tx) error {
		var err error
		stored, err = scanBackfill(l.queryRow(ctx, tx, qBackfill, b.ID))
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		created := b.Created
		if created.IsZero() {
			if created, err = l.now(ctx, tx); err != nil {
				return err
			}
		}
		canceled := 0
		if b.Canceled {
			canceled = 1
		}
		if _, err := l.exec(ctx, tx, qInsertBackfill, b.ID, b.DAG, b.Window, b.Chunk, created.UnixMilli(), canceled); err != nil {
			return err
		}
		stored = b
		stored.Created = time.UnixMilli(created.UnixMilli()).UTC()
		return nil
	})
	return stored, err
}

// Backfill implements [tranche.Ledger].
func (l *Ledger) Backfill(ctx context.Context, id string) (tranche.BackfillRecord, error) {
	var b tranche.BackfillRecord
	err := l.read(ctx, "reading backfill "+id, func() error {
		var err error
		b, err = scanBackfill(l.readRow(ctx, qBackfill, id))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%w %q", tranche.ErrUnknownBackfill, id)
		}
		return err
	})
	return b, err
}

// Backfills implements [tranche.Ledger].
func (l *Ledger) Backfills(ctx context.Context) ([]tranche.BackfillRecord, error) {
	var out []tranche.BackfillRecord
	err := l.read(ctx, "reading the backfills", func() error {
		rows, err := l.readRows(ctx, qBackfills)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			b, err := scanBackfill(rows)
			if err != nil {
				return err
			}
			out = append(out, b)
		}
		return rows.Err()
	})
	return out, err
}

// CancelBackfill implements [tranche.Ledger].
func (l *Ledger) CancelBackfill(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return l.write(ctx, "canceling backfill "+id, func(tx *sql.Tx) error {
		res, err := l.exec(ctx, tx, qCancelBackfill, id)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			if err == nil {
				err = fmt.Errorf("%w %q", tranche.ErrUnknownBackfill, id)
			}
			return err
		}
		return nil
	})
}
