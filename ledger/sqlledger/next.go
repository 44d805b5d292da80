package sqlledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/ledger"
)

// ClaimNext implements [ledger.Ledger], in one transaction. It locks the
// cursor of the request's DAG, backfill and order first, creating it if
// it is new, with the statement that reads the clock, takes the
// transaction's revision and tells whether the backfill was canceled, so
// that the workers of a backfill take turns from there to their commit
// and each is handed jobs the others were not. It then passes over the
// jobs at or before a cursor that moved after req.Revision, reading
// nothing of them, and claims the others in rounds of as many jobs as it
// still wants: their partitions never claimed get a row without being
// read, as Claim gives them; those with a row are read and locked with
// the dialect's ClaimLock, and a row it skips is a job another
// transaction is claiming, passed over. A round is two statements, one
// when every partition was fresh; the attempts of every job claimed are
// one more, and the move of the cursor one: a claim of 16 fresh jobs is
// six statements with BEGIN and COMMIT, whatever their chunks. Where the
// dialect runs an INSERT inside WITH (PostgreSQL), a round's one
// statement also starts the attempts of its jobs of fresh partitions and
// moves the cursor past them: four statements, three of them while the
// workers wait for the cursor. When the cursor's statement finds that
// other identities have backfills of the backfill's DAG name (a deploy),
// one more reads what those versions of the DAG did at the jobs'
// partitions since the backfill was created, for all the jobs
// (ledger.ClaimRequest.JudgeVersion); a job they bind is refused without
// a statement, and ends the round before it.
//
// A job is claimed all or none: the rows inserted for a job refused
// (another of its partitions was held) are deleted before the commit,
// and the takeovers of a job of several expired partitions run under a
// savepoint, rolled back when one of them had finished meanwhile. A
// fresh partition that a concurrent transaction is inserting too is
// waited for, as Claim waits for it: the database decides only at that
// transaction's end whether the row exists, and ClaimNext then finds it
// held (workers of one cursor never meet there: they take turns).
func (l *Ledger) ClaimNext(ctx context.Context, req ledger.NextRequest) ([]ledger.Grant, error) {
	if err := validateNext(req); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	op := fmt.Sprintf("claiming the next jobs of backfill %s from partition %s", req.Backfill, req.Jobs[0].Partitions[0].Key())
	var grants []ledger.Grant
	var passed int
	var newDAG int64
	err := l.write(ctx, op, func(tx *sql.Tx) error {
		grants, passed, newDAG = nil, 0, 0
		dagID, created, err := l.ensureDAG(ctx, tx, req.DAG)
		if err != nil {
			return err
		}
		if created {
			newDAG = dagID
		}
		cur, st, err := l.lockCursor(ctx, tx, dagID, req)
		if err != nil {
			return err
		}
		if st.canceled {
			return ledger.CanceledError(req.Backfill)
		}
		req := req // as the DAG's limit leaves it, afresh at each try
		if st.limit > 0 {
			running, demand, limit, err := l.countLimit(ctx, tx, dagID, st.now)
			if err != nil {
				return err
			}
			if req.Want = req.Allowance(limit, running, demand); req.Want == 0 {
				grants = []ledger.Grant{{Err: &ledger.LimitError{DAG: req.DAG, Max: limit, Running: running, Demand: demand}}}
				return nil // examined nothing: the cursor stays
			}
		}
		lo, hi := req.Jobs[0].Start().Unix(), req.Jobs[len(req.Jobs)-1].Start().Unix()
		if req.Descending {
			lo, hi = hi, lo
		}
		var v versionsAt
		if cur.versions {
			if v, err = l.readVersions(ctx, tx, req.Backfill, req.Policy, lo, hi+maxPartitionsSpan(req.Jobs)); err != nil {
				return err
			}
		}
		passed, grants, err = l.claimNext(ctx, tx, dagID, req, cur, st, v)
		if err != nil || req.CodeVersion == "" {
			return err
		}
		var leases []*ledger.Lease
		for _, g := range grants {
			if g.Lease != nil {
				leases = append(leases, g.Lease)
			}
		}
		return l.stampCodeVersion(ctx, tx, dagID, req.CodeVersion, leases...)
	})
	if err != nil {
		return nil, err
	}
	// The errors of the jobs passed over are written once the cursor is
	// free: formatting them while holding it made the workers wait.
	grants = append(make([]ledger.Grant, passed, passed+len(grants)), grants...)
	for i := range passed {
		grants[i].Err = ledger.PassedError(req.Jobs[i])
	}
	if newDAG != 0 {
		l.dags.Store(req.DAG, newDAG)
	}
	for _, g := range grants {
		if g.Lease != nil {
			l.held(g.Lease)
		}
	}
	return grants, nil
}

// validateNext checks a request of ClaimNext: tranche's rules, bounds to
// the second, as the tables keep them, and each partition named by one
// job only, which the transaction counts on.
func validateNext(req ledger.NextRequest) error {
	if err := req.Validate(); err != nil {
		return err
	}
	seen := make(map[int64]int, len(req.Jobs))
	for i, j := range req.Jobs {
		for _, p := range j.Partitions {
			if p.Start.Nanosecond() != 0 || p.End.Nanosecond() != 0 {
				return fmt.Errorf("tranche: job %d: claim of partition %v: a SQL ledger keeps partition bounds to the second", i, p)
			}
			if k, ok := seen[p.Start.Unix()]; ok && k != i {
				return fmt.Errorf("tranche: ClaimNext: partition %s is in job %d and in job %d", p.Key(), k, i)
			}
			seen[p.Start.Unix()] = i
		}
	}
	return nil
}

// cursorAt is where a cursor was when a transaction locked it.
type cursorAt struct {
	start    time.Time
	revision int64 // 0: never moved
	// versions: other identities have backfills of the backfill's DAG
	// name, whose attempts may bind its claims.
	versions bool
}

// lockCursor locks, in tx, the cursor of req, creating it if it is new,
// and returns where it is and the transaction's start.
func (l *Ledger) lockCursor(ctx context.Context, tx *sql.Tx, dagID int64, req ledger.NextRequest) (cursorAt, txStart, error) {
	var cur cursorAt
	var st txStart
	var start int64
	var versions int
	row := l.queryRow(ctx, tx, l.dialect.qLockCursor(), dagID, req.Backfill, boolInt(req.Descending), req.Jobs[0].Start().Unix(),
		req.Backfill, dagID, req.Backfill, dagID)
	if err := st.scan(row, &start, &cur.revision, &versions); err != nil {
		return cur, st, err
	}
	cur.start, cur.versions = time.Unix(start, 0).UTC(), versions != 0
	if l.clock != nil {
		st.now = time.UnixMilli(l.clock().UnixMilli()).UTC()
	}
	return cur, st, nil
}

// claimNext examines the jobs of req in tx, whose cursor was at cur, at
// st, and claims those it may until it has claimed req.Want; it returns
// how many jobs it passed over because the cursor had passed them, the
// first of req.Jobs, and a grant for each job it examined after them.
func (l *Ledger) claimNext(ctx context.Context, tx *sql.Tx, dagID int64, req ledger.NextRequest, cur cursorAt, st txStart, v versionsAt) (int, []ledger.Grant, error) {
	var grants []ledger.Grant
	passed := 0
	if cur.revision > req.Revision {
		// The jobs are in the cursor's order: those it passed are first.
		passed, _ = slices.BinarySearchFunc(req.Jobs, cur.start, func(j ledger.Job, at time.Time) int {
			if req.Before(at, j.Start()) {
				return 1
			}
			return -1
		})
	}
	i := passed
	var (
		leases  []*ledger.Lease // claimed
		start   []*ledger.Lease // claimed, their attempts not yet inserted
		seen    []int64         // the partitions claimed that had a row: their latest advances
		refused []int64         // the rows inserted for jobs refused, deleted
		moved   = -1            // the job the cursor was moved to in tx, if any
	)
	for i < len(req.Jobs) && len(leases) < req.Want {
		// A job that another version of the DAG binds is refused
		// before the round's statement, and ends the round before it,
		// so that the round's insert never starts its attempts; the
		// refusal is judged as Claim judges, its own history first.
		if c := req.Claim(req.Jobs[i]); admitVersions(c, v, st.now) != nil {
			err := l.refuseVersioned(ctx, tx, dagID, c, v, st.now)
			if !errors.Is(err, ledger.ErrNotClaimable) {
				return 0, nil, err
			}
			grants = append(grants, ledger.Grant{Err: err})
			i++
			continue
		}
		end := i + 1
		for end < min(len(req.Jobs), i+req.Want-len(leases)) && admitVersions(req.Claim(req.Jobs[end]), v, st.now) == nil {
			end++
		}
		round := req.Jobs[i:end]
		fresh, started, err := l.insertRound(ctx, tx, dagID, req, round, st)
		if err != nil {
			return 0, nil, err
		}
		if started != nil {
			moved = i + len(round) - 1
		}
		i += len(round)
		var old []int64
		for _, j := range round {
			for _, p := range j.Partitions {
				if s := p.Start.Unix(); !fresh[s] {
					old = append(old, s)
				}
			}
		}
		latest, err := l.readLatest(ctx, tx, dagID, old, l.dialect.ClaimLock)
		if err != nil {
			return 0, nil, err
		}
		for k, j := range round {
			lease, err := l.claimJob(ctx, tx, dagID, req, j, fresh, latest, st)
			if err != nil && !errors.Is(err, ledger.ErrNotClaimable) {
				return 0, nil, err
			}
			if started != nil && started[k] && lease == nil {
				return 0, nil, fmt.Errorf("job %s of fresh partitions, whose attempts started, refused: %w", j.Partitions[0].Key(), err)
			}
			grants = append(grants, ledger.Grant{Lease: lease, Err: err})
			for _, p := range j.Partitions {
				switch s := p.Start.Unix(); {
				case fresh[s] && lease == nil:
					refused = append(refused, s)
				case !fresh[s] && lease != nil:
					seen = append(seen, s)
				}
			}
			if lease != nil {
				leases = append(leases, lease)
				if started == nil || !started[k] {
					start = append(start, lease)
				}
			}
		}
	}
	for batch := range slices.Chunk(refused, batchRows) {
		args := append(make([]any, 0, len(batch)+2), dagID, 1)
		for _, s := range batch {
			args = append(args, s)
		}
		if _, err := l.exec(ctx, tx, qDeletePartitions(len(batch)), args...); err != nil {
			return 0, nil, err
		}
	}
	if err := l.insertAttempts(ctx, tx, dagID, st, start); err != nil {
		return 0, nil, err
	}
	if err := l.advanceLatest(ctx, tx, dagID, seen); err != nil {
		return 0, nil, err
	}
	// A call whose jobs the cursor had all passed leaves it where it is,
	// rather than move it back to the last of them.
	if last := passed + len(grants) - 1; len(grants) > 0 && moved != last {
		if _, err := l.exec(ctx, tx, qMoveCursor, req.Jobs[last].Start().Unix(), st.rev, dagID, req.Backfill, boolInt(req.Descending)); err != nil {
			return 0, nil, err
		}
	}
	return passed, grants, nil
}

// insertRound gives the partitions of the jobs of a round that have no
// row one, at their first attempt, and returns their starts. Where the
// dialect runs an INSERT inside WITH, and the round names no more than
// batchRows partitions, it is one statement that also starts the attempts
// of the jobs all of whose partitions were fresh, at st (started[k] for
// round[k]), and moves the cursor to the round's last job: the common
// case of a backfill, whose claim is then that statement. Otherwise
// started is nil, and the caller starts every attempt.
func (l *Ledger) insertRound(ctx context.Context, tx *sql.Tx, dagID int64, req ledger.NextRequest, round []ledger.Job, st txStart) (fresh map[int64]bool, started []bool, err error) {
	n := 0
	for _, j := range round {
		n += len(j.Partitions)
	}
	if !l.dialect.InsertInWith || n > batchRows {
		var starts []int64
		for _, j := range round {
			for _, p := range j.Partitions {
				starts = append(starts, p.Start.Unix())
			}
		}
		fresh, _, err = l.insertFresh(ctx, tx, dagID, req.Backfill, starts, false)
		return fresh, nil, err
	}
	args := make([]any, 0, 5*n+13)
	for k, j := range round {
		for _, p := range j.Partitions {
			args = append(args, p.Start.Unix(), p.End.Unix(), p.Key(), j.RunID, k)
		}
	}
	until := st.now.Add(req.Lease).Truncate(time.Millisecond)
	args = append(args, dagID, dagID, req.Backfill, req.Worker, st.now.UnixMilli(), until.UnixMilli(), st.rev,
		string(ledger.TriggerOf(req.Trigger, req.Backfill)),
		round[len(round)-1].Start().Unix(), st.rev, dagID, req.Backfill, boolInt(req.Descending))
	rows, err := l.query(ctx, tx, qClaimRound(n), args...)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	fresh = make(map[int64]bool, n)
	for rows.Next() {
		var s int64
		if err := rows.Scan(&s); err != nil {
			return nil, nil, err
		}
		fresh[s] = true
	}
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	started = make([]bool, len(round))
	for k, j := range round {
		started[k] = !slices.ContainsFunc(j.Partitions, func(p tranche.TimePartition) bool { return !fresh[p.Start.Unix()] })
	}
	return fresh, started, rows.Close()
}

// refuseVersioned returns the error of claim c, one that the other
// versions v of its DAG bind (admitVersions), as judge gives it: each
// partition by its own history first, read in tx without a lock, then by
// v; it matches ErrNotClaimable unless the read fails.
func (l *Ledger) refuseVersioned(ctx context.Context, tx *sql.Tx, dagID int64, c ledger.ClaimRequest, v versionsAt, now time.Time) error {
	starts := make([]int64, len(c.Partitions))
	for i, p := range c.Partitions {
		starts[i] = p.Start.Unix()
	}
	latest, err := l.readLatest(ctx, tx, dagID, starts, "")
	if err != nil {
		return err
	}
	for _, p := range c.Partitions {
		var a *ledger.Attempt
		if r := latest[p.Start.Unix()]; r != nil && r.latest > 0 {
			a = &r.attempt
		}
		if err := c.Admits(a, p, now); err != nil {
			return err
		}
		if err := v.admit(c, p, now); err != nil {
			return err
		}
	}
	return admitVersions(c, v, now)
}

// claimJob judges job j of req as Claim judges its partitions, and takes
// over those whose lease expired; it returns the lease that claims j, or
// the error, matching [ledger.ErrNotClaimable], that says why not. The
// caller inserts the lease's attempts.
func (l *Ledger) claimJob(ctx context.Context, tx *sql.Tx, dagID int64, req ledger.NextRequest, j ledger.Job,
	fresh map[int64]bool, latest map[int64]*latestRow, st txStart) (*ledger.Lease, error) {
	c := req.Claim(j)
	attempts, takeovers, err := judge(c, fresh, latest, versionsAt{}, st.now, func(tranche.TimePartition) error { return ledger.PassedError(j) })
	if err != nil {
		return nil, err
	}
	// A takeover that finds its attempt finished refuses the job; those
	// of the job before it are undone.
	savepoint := len(takeovers) > 1
	if savepoint {
		if _, err := l.exec(ctx, tx, "SAVEPOINT tranche_job"); err != nil {
			return nil, err
		}
	}
	for _, i := range takeovers {
		p := j.Partitions[i]
		if err := l.takeOver(ctx, tx, dagID, p, latest[p.Start.Unix()], req.Worker, st); err != nil {
			if savepoint && errors.Is(err, ledger.ErrNotClaimable) {
				if _, rerr := l.exec(ctx, tx, "ROLLBACK TO SAVEPOINT tranche_job"); rerr != nil {
					return nil, rerr
				}
			}
			return nil, err
		}
	}
	if savepoint {
		if _, err := l.exec(ctx, tx, "RELEASE SAVEPOINT tranche_job"); err != nil {
			return nil, err
		}
	}
	return &ledger.Lease{
		DAG: req.DAG, Backfill: req.Backfill, Worker: req.Worker, RunID: j.RunID,
		Partitions: slices.Clone(j.Partitions), Attempts: attempts,
		Until:   st.now.Add(req.Lease).Truncate(time.Millisecond),
		Trigger: ledger.TriggerOf(req.Trigger, req.Backfill),
		Claimed: st.now.Truncate(time.Millisecond),
	}, nil
}

// Release implements [ledger.Ledger], in one transaction: it moves each
// partition's latest attempt back to the one before the lease's (locking
// the partitions' rows first, as a claim does), deletes the lease's
// attempts where its worker still runs them (the fence, in the WHERE
// clause, as Finish's), deletes the rows of partitions left without an
// attempt, and records the release's revision on the DAG, so that the
// DAG's revision does not fall when the attempt deleted held the
// highest. When the fence holds for fewer than all the partitions,
// nothing is changed, and a read of the partitions tells why.
func (l *Ledger) Release(ctx context.Context, lease *ledger.Lease) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(lease.Attempts) != len(lease.Partitions) || len(lease.Partitions) == 0 {
		return fmt.Errorf("%w: a lease of %d partitions with %d attempts", ledger.ErrFenced, len(lease.Partitions), len(lease.Attempts))
	}
	op := "releasing " + describe(lease.Partitions)
	dagID, err := l.dagID(ctx, nil, lease.DAG)
	if err != nil {
		return l.wrap(ctx, op, err)
	}
	if dagID == 0 {
		l.forget(lease)
		return fmt.Errorf("%w: unknown DAG %s", ledger.ErrFenced, lease.DAG)
	}
	var fenced error
	err = l.write(ctx, op, func(tx *sql.Tx) error {
		fenced = nil
		st, err := l.start(ctx, tx, dagID, "")
		if err != nil {
			return err
		}
		var firsts []int64 // the partitions left without an attempt
		for lo := 0; lo < len(lease.Partitions); lo += batchRows {
			hi := min(len(lease.Partitions), lo+batchRows)
			rewind := []any{dagID}
			withdraw := []any{dagID, lease.Worker}
			for i := lo; i < hi; i++ {
				s := lease.Partitions[i].Start.Unix()
				rewind = append(rewind, s, lease.Attempts[i])
				withdraw = append(withdraw, s, lease.Attempts[i])
				if lease.Attempts[i] == 1 {
					firsts = append(firsts, s)
				}
			}
			for _, stmt := range []struct {
				query string
				args  []any
			}{{qRewindLatest(hi - lo), rewind}, {qWithdraw(hi - lo), withdraw}} {
				res, err := l.exec(ctx, tx, stmt.query, stmt.args...)
				if err != nil {
					return err
				}
				if fenced = changed(res, nil, hi-lo, lease); fenced != nil {
					return fenced
				}
			}
		}
		for batch := range slices.Chunk(firsts, batchRows) {
			args := append(make([]any, 0, len(batch)+2), dagID, 0)
			for _, s := range batch {
				args = append(args, s)
			}
			if _, err := l.exec(ctx, tx, qDeletePartitions(len(batch)), args...); err != nil {
				return err
			}
		}
		_, err = l.exec(ctx, tx, qReleased, st.rev, dagID, st.rev)
		return err
	})
	if fenced != nil && errors.Is(err, ledger.ErrFenced) {
		err = l.whyFenced(ctx, op, lease, fenced)
	}
	if err == nil || errors.Is(err, ledger.ErrFenced) {
		// Withdrawn, or taken over or finished: its deferred work can
		// never commit.
		l.forget(lease)
	}
	return err
}

// maxPartitionsSpan is how far, in seconds, the last partition of a job
// of jobs starts after the job does: the reach of a chunk beyond its
// start.
func maxPartitionsSpan(jobs []ledger.Job) int64 {
	var span int64
	for _, j := range jobs {
		span = max(span, j.Partitions[len(j.Partitions)-1].Start.Unix()-j.Start().Unix())
	}
	return span
}
