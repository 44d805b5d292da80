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

// latestRow is what a transaction reads of a partition's latest attempt.
type latestRow struct {
	latest  int // 0: no attempt yet
	attempt ledger.Attempt
}

// readLatest reads, in tx, the latest attempt of each partition starting
// at starts (Unix seconds), locking the partitions' rows with lock (the
// dialect's ClaimLock or LeaseLock). Partitions absent from the result
// have no row, a row that ClaimLock skipped, or a latest attempt that a
// transaction committed after the statement's snapshot.
func (l *Ledger) readLatest(ctx context.Context, tx *sql.Tx, dagID int64, starts []int64, lock string) (map[int64]*latestRow, error) {
	out := make(map[int64]*latestRow, len(starts))
	for batch := range slices.Chunk(starts, batchRows) {
		args := make([]any, 0, len(batch)+1)
		args = append(args, dagID)
		for _, s := range batch {
			args = append(args, s)
		}
		rows, err := l.query(ctx, tx, qReadLatest(len(batch), lock), args...)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var start int64
			var r latestRow
			var worker, state sql.NullString
			var until, rev sql.NullInt64
			var code sql.NullString
			if err := rows.Scan(&start, &r.latest, &worker, &state, &until, &rev, &code); err != nil {
				rows.Close()
				return nil, err
			}
			if r.latest > 0 && !state.Valid {
				// The partition's row names an attempt the statement does
				// not see: under READ COMMITTED, a row locked after its
				// claimer committed is read at its new version, the
				// attempts joined to it at the statement's snapshot, from
				// before that commit. The partition was just claimed:
				// leave it out, as a row being claimed.
				continue
			}
			r.attempt = ledger.Attempt{Number: r.latest, Worker: worker.String, State: ledger.State(state.String),
				LeaseUntil: time.UnixMilli(until.Int64).UTC(), Revision: rev.Int64, CodeVersion: code.String}
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

// Claim implements [ledger.Ledger].
//
// Partitions never claimed before, the common case of a backfill, get
// their row and first attempt without being read: a claim of fresh
// partitions is three statements (the partitions, which return the
// transaction's start, the attempts, and the commit) besides BEGIN, and
// for a backfill's claim not under RerunAll one more, which reads what
// other versions of its DAG did there (ledger.ClaimRequest.JudgeVersion).
// Where the dialect runs an INSERT inside WITH, a claim of one fresh
// partition without a code version is one statement, whose WHERE clause
// applies that rule too.
func (l *Ledger) Claim(ctx context.Context, req ledger.ClaimRequest) (*ledger.Lease, error) {
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
	op := "claiming " + describe(req.Partitions)
	// A fresh partition's claim is one statement outside any
	// transaction, which also tests that no other version of the DAG
	// binds it (ledger.ClaimRequest.JudgeVersion): the test and the
	// claim read one snapshot, so that another version's claim or
	// finish committed before it is seen. When it claims nothing, the
	// transaction's way judges the claim again and says why.
	if l.freshClaims(req) {
		if lease, err := l.claimFresh(ctx, op, req); lease != nil || err != nil {
			if lease != nil {
				l.held(lease)
			}
			return lease, err
		}
	}
	var lease *ledger.Lease
	var newDAG int64
	var limitedAt time.Time // when the DAG's limit refused the claim
	err := l.write(ctx, op, func(tx *sql.Tx) error {
		lease, newDAG, limitedAt = nil, 0, time.Time{}
		dagID, created, err := l.ensureDAG(ctx, tx, req.DAG)
		if err != nil {
			return err
		}
		if created {
			newDAG = dagID
		}
		// The limit's row is locked after the statement that takes the
		// revision lock shared, as in ClaimNext: locked before, a claim
		// waiting for that lock behind a Revision would hold the limit
		// from a ClaimNext that Revision waits for.
		fresh, st, err := l.insertFresh(ctx, tx, dagID, req.Backfill, starts, true)
		if err != nil {
			return err
		}
		if st.limit > 0 {
			l.limited.Store(dagID, true) // its next claim skips claimFresh
		} else {
			l.limited.Delete(dagID)
		}
		if len(fresh) == 0 { // the insert returned no start
			if st, err = l.start(ctx, tx, dagID, req.Backfill); err != nil {
				return err
			}
		}
		now := st.now
		if st.canceled {
			return ledger.CanceledError(req.Backfill)
		}
		if err := req.CheckNotBefore(now); err != nil {
			return err // judged by the clock the first statement read
		}
		v, err := l.readVersions(ctx, tx, req.Backfill, req.Policy, slices.Min(starts), slices.Max(starts))
		if err != nil {
			return err
		}
		var seen []int64 // the partitions with a row before, to read and lock
		for _, s := range starts {
			if !fresh[s] {
				seen = append(seen, s)
			}
		}
		latest, err := l.readLatest(ctx, tx, dagID, seen, l.dialect.ClaimLock)
		if err != nil {
			return err
		}
		attempts, takeovers, err := judge(req, fresh, latest, v, now, func(p tranche.TimePartition) error {
			return fmt.Errorf("%w: %s is being claimed by another worker", ledger.ErrNotClaimable, p.Key())
		})
		if err != nil {
			return err
		}
		// Judged after the partitions' histories, so that a slot held
		// or recorded elsewhere is refused as such, and demands nothing.
		if err := l.admitLimit(ctx, tx, dagID, req, st); err != nil {
			limitedAt = st.now
			return err
		}
		lease = &ledger.Lease{
			DAG: req.DAG, Backfill: req.Backfill, Worker: req.Worker, RunID: req.RunID,
			Partitions: slices.Clone(req.Partitions), Attempts: attempts,
			Until:   now.Add(req.Lease).Truncate(time.Millisecond),
			Trigger: ledger.TriggerOf(req.Trigger, req.Backfill),
			Claimed: now.Truncate(time.Millisecond),
		}
		for _, i := range takeovers {
			if err := l.takeOver(ctx, tx, dagID, req.Partitions[i], latest[starts[i]], req.Worker, st); err != nil {
				return err
			}
		}
		if err := l.insertAttempts(ctx, tx, dagID, st, []*ledger.Lease{lease}); err != nil {
			return err
		}
		if err := l.advanceLatest(ctx, tx, dagID, seen); err != nil {
			return err
		}
		if st.limit > 0 {
			if err := l.dropDemands(ctx, tx, dagID, req.Partitions); err != nil {
				return err
			}
		}
		return l.stampCodeVersion(ctx, tx, dagID, req.CodeVersion, lease)
	})
	if !limitedAt.IsZero() && req.Demands() && errors.Is(err, ledger.ErrLimited) {
		// Recorded once the claim's transaction is over: it wrote
		// nothing, and the demand must outlive it.
		if derr := l.demand(ctx, req, limitedAt); derr != nil {
			err = errors.Join(err, derr)
		}
	}
	if err != nil {
		return nil, err
	}
	if newDAG != 0 {
		l.dags.Store(req.DAG, newDAG)
	}
	l.held(lease)
	return lease, nil
}

// stampCodeVersion records version as the code version of the attempts
// leases started in tx; nothing for version "", the column's default.
func (l *Ledger) stampCodeVersion(ctx context.Context, tx *sql.Tx, dagID int64, version string, leases ...*ledger.Lease) error {
	if version == "" {
		return nil
	}
	for _, lease := range leases {
		args := []any{version, dagID, lease.RunID}
		for _, p := range lease.Partitions {
			args = append(args, p.Start.Unix())
		}
		if _, err := l.exec(ctx, tx, qStampCodeVersion(len(lease.Partitions)), args...); err != nil {
			return err
		}
	}
	return nil
}

// judge applies the claim rules to the partitions of req, at now, in a
// transaction that found those of fresh without a row and gave them one,
// and read the latest attempts of the others (readLatest) and what the
// other versions v of the DAG did there. It judges each partition as the
// in-memory ledger and a backfill's plan do: by its own history first
// (ClaimRequest.Admits), then by the other versions
// (ClaimRequest.AdmitsVersion), so that a partition the backfill's DAG
// holds is refused as held even where another version landed it. It
// returns the attempt a claim starts at each partition and the indexes
// of those it takes over, running attempts whose lease expired, or the
// error of the first partition it may not claim: claiming's for one that
// another transaction is claiming (its row was not read).
func judge(req ledger.ClaimRequest, fresh map[int64]bool, latest map[int64]*latestRow, v versionsAt, now time.Time,
	claiming func(tranche.TimePartition) error) (attempts, takeovers []int, err error) {
	attempts = make([]int, len(req.Partitions))
	for i, p := range req.Partitions {
		s := p.Start.Unix()
		if fresh[s] {
			if err := req.Admits(nil, p, now); err != nil {
				return nil, nil, err
			}
			if err := v.admit(req, p, now); err != nil {
				return nil, nil, err
			}
			attempts[i] = 1
			continue
		}
		r := latest[s]
		if r == nil {
			return nil, nil, claiming(p)
		}
		var a *ledger.Attempt
		if r.latest > 0 {
			a = &r.attempt
		}
		if err := req.Admits(a, p, now); err != nil {
			return nil, nil, err
		}
		if err := v.admit(req, p, now); err != nil {
			return nil, nil, err
		}
		attempts[i] = r.latest + 1
		if a != nil && a.State == ledger.StateRunning {
			takeovers = append(takeovers, i)
		}
	}
	return attempts, takeovers, nil
}

// versionsAt are the attempts of other versions of a backfill's DAG that
// may bind its claims (qVersions), by partition start (Unix seconds), and
// when the backfill was created.
type versionsAt struct {
	since time.Time
	at    map[int64][]ledger.Attempt
}

// readVersions reads, in tx (or outside any, when nil), the attempts of
// other versions of the DAG of backfill at partitions starting in
// [lo, hi] (Unix seconds) that may bind its claims: one statement, for
// every job of a claim. A claim outside a backfill, or under RerunAll,
// which the rule does not bind, reads nothing.
func (l *Ledger) readVersions(ctx context.Context, tx *sql.Tx, backfill string, policy ledger.RerunPolicy, lo, hi int64) (versionsAt, error) {
	var v versionsAt
	if backfill == "" || policy == ledger.RerunAll {
		return v, nil
	}
	var rows *sql.Rows
	var err error
	switch s := l.wstmts[qVersions]; {
	case tx != nil:
		rows, err = l.query(ctx, tx, qVersions, lo, hi, backfill)
	case s != nil:
		rows, err = s.QueryContext(ctx, lo, hi, backfill)
	default:
		rows, err = l.db.QueryContext(ctx, l.q(qVersions), lo, hi, backfill)
	}
	if err != nil {
		return v, err
	}
	defer rows.Close()
	for rows.Next() {
		var a ledger.Attempt
		var start, end, started, until, created int64
		var finished sql.NullInt64
		if err := rows.Scan(&start, &end, &a.DAG, &a.Number, &a.Worker, &a.State, &started, &finished, &until, &created); err != nil {
			return v, err
		}
		a.Start, a.End = time.Unix(start, 0).UTC(), time.Unix(end, 0).UTC()
		a.Started, a.LeaseUntil = time.UnixMilli(started).UTC(), time.UnixMilli(until).UTC()
		if finished.Valid {
			a.Finished = time.UnixMilli(finished.Int64).UTC()
		}
		if v.at == nil {
			v.at = map[int64][]ledger.Attempt{}
		}
		v.at[start] = append(v.at[start], a)
		v.since = time.UnixMilli(created).UTC()
	}
	return v, rows.Err()
}

// admitVersions applies ClaimRequest.AdmitsVersion to the partitions of
// req, at now, against the attempts of other versions v of its DAG.
func admitVersions(req ledger.ClaimRequest, v versionsAt, now time.Time) error {
	if len(v.at) == 0 {
		return nil
	}
	for _, p := range req.Partitions {
		if err := v.admit(req, p, now); err != nil {
			return err
		}
	}
	return nil
}

// admit applies ClaimRequest.AdmitsVersion to partition p of req, at
// now, against the attempts of the other versions at p's bounds.
func (v versionsAt) admit(req ledger.ClaimRequest, p tranche.TimePartition, now time.Time) error {
	for _, a := range v.at[p.Start.Unix()] {
		if !a.End.Equal(p.End) {
			continue // a partition of other bounds
		}
		if err := req.AdmitsVersion(&a, p, v.since, now); err != nil {
			return err
		}
	}
	return nil
}

// freshClaims reports whether claimFresh may claim req: one partition,
// no code version, where the dialect runs an INSERT inside WITH.
func (l *Ledger) freshClaims(req ledger.ClaimRequest) bool {
	return l.dialect.InsertInWith && len(req.Partitions) == 1 && req.CodeVersion == ""
}

// claimFresh claims one partition never claimed before in one statement,
// where the dialect runs an INSERT inside WITH. It returns no lease and no
// error when it cannot: the DAG or the partition has a row already, the
// backfill was canceled, or another version of the DAG binds the claim;
// Claim then takes its usual way, which tells why.
// A claim before its NotBefore, by the clock the statement read, is
// refused by the statement's answer, with no other.
func (l *Ledger) claimFresh(ctx context.Context, op string, req ledger.ClaimRequest) (*ledger.Lease, error) {
	if !l.freshClaims(req) {
		return nil, nil
	}
	dagID, err := l.dagID(ctx, nil, req.DAG)
	if err != nil || dagID == 0 {
		return nil, l.wrap(ctx, op, err)
	}
	if _, ok := l.limited.Load(dagID); ok {
		return nil, nil // the statement would claim nothing
	}
	var clock any // nil: the database's
	if l.clock != nil {
		clock = l.clock().UnixMilli()
	}
	p := req.Partitions[0]
	versions := req.Backfill // the backfill whose other versions bind the claim
	if req.Policy == ledger.RerunAll {
		versions = ""
	}
	var now int64
	var started, canceled sql.NullInt64
	err = l.retry(ctx, op, func() error {
		return l.queryRow(ctx, nil, l.dialect.qClaimFresh(), clock, dagID, p.Start.Unix(), notBeforeMillis(req.NotBefore), req.Backfill,
			p.Start.Unix(), versions, p.End.Unix(), dagID,
			p.End.Unix(), p.Key(), req.Backfill, req.RunID, req.Worker, req.Lease.Milliseconds(),
			string(ledger.TriggerOf(req.Trigger, req.Backfill)), req.Backfill).Scan(&now, &started, &canceled)
	})
	switch {
	case err != nil:
		return nil, err
	case !started.Valid && canceled.Int64 == 0:
		return nil, req.CheckNotBefore(time.UnixMilli(now).UTC())
	case !started.Valid:
		return nil, nil // canceled, which Claim's way reports, before the bound
	}
	return &ledger.Lease{
		DAG: req.DAG, Backfill: req.Backfill, Worker: req.Worker, RunID: req.RunID,
		Partitions: slices.Clone(req.Partitions), Attempts: []int{1},
		Until:   time.UnixMilli(started.Int64).UTC().Add(req.Lease).Truncate(time.Millisecond),
		Trigger: ledger.TriggerOf(req.Trigger, req.Backfill),
		Claimed: time.UnixMilli(started.Int64).UTC(),
	}, nil
}

// notBeforeMillis returns the bound of a claim's NotBefore in the Unix
// milliseconds of the ledger's clock, rounded up, so that a clock read to
// the millisecond passes it only once t has passed; nil for no bound.
func notBeforeMillis(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	ms := t.UnixMilli()
	if time.UnixMilli(ms).Before(t) {
		ms++
	}
	return ms
}

// insertFresh gives the partitions starting at starts that have no row
// one, at their first attempt, and returns their starts and, if there were
// any and withStart, the transaction's start (without, the statement
// reads no clock and takes no revision: the caller has them).
func (l *Ledger) insertFresh(ctx context.Context, tx *sql.Tx, dagID int64, backfill string, starts []int64, withStart bool) (map[int64]bool, txStart, error) {
	fresh := make(map[int64]bool, len(starts))
	var st txStart
	for batch := range slices.Chunk(starts, batchRows) {
		args := make([]any, 0, 2*len(batch)+2)
		for _, s := range batch {
			args = append(args, dagID, s)
		}
		if withStart {
			args = append(args, dagID, backfill, dagID)
		}
		rows, err := l.query(ctx, tx, l.dialect.qInsertFresh(len(batch), withStart), args...)
		if err != nil {
			return nil, st, err
		}
		for rows.Next() {
			var s int64
			var row txStart
			if withStart {
				err = row.scan(rows, &s)
			} else {
				err = rows.Scan(&s)
			}
			if err != nil {
				rows.Close()
				return nil, st, err
			}
			if len(fresh) == 0 {
				st = row // one revision for the claim; the others go unused
			}
			fresh[s] = true
		}
		if err := rows.Close(); err != nil {
			return nil, st, err
		}
		if err := rows.Err(); err != nil {
			return nil, st, err
		}
	}
	if l.clock != nil && withStart {
		st.now = time.UnixMilli(l.clock().UnixMilli()).UTC()
	}
	return fresh, st, nil
}

// takeOver fails, at st, the running attempt r of partition p, whose
// lease expired, for worker, who claims p next. It fails with an error
// matching [ledger.ErrNotClaimable] when the attempt finished since it
// was read: a finish does not lock the partition's row.
func (l *Ledger) takeOver(ctx context.Context, tx *sql.Tx, dagID int64, p tranche.TimePartition, r *latestRow, worker string, st txStart) error {
	if l.dialect.EndStalled != "" {
		if _, err := l.exec(ctx, tx, l.dialect.EndStalled, dagID, p.Start.Unix(), r.latest); err != nil {
			return err
		}
	}
	res, err := l.exec(ctx, tx, qTakeover, st.now.UnixMilli(), st.rev, ledger.TakeoverReason(r.attempt.LeaseUntil, worker), dagID, p.Start.Unix(), r.latest)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		if err == nil {
			err = fmt.Errorf("%w: %s finished while being claimed", ledger.ErrNotClaimable, p.Key())
		}
		return err
	}
	return nil
}

// insertAttempts starts, at st, the attempts that leases hold, batchRows
// to a statement.
func (l *Ledger) insertAttempts(ctx context.Context, tx *sql.Tx, dagID int64, st txStart, leases []*ledger.Lease) error {
	const width = 14 // the columns of an attempt
	args := make([]any, 0, width*min(batchRows, len(leases)))
	rows := 0
	flush := func() error {
		if rows == 0 {
			return nil
		}
		_, err := l.exec(ctx, tx, qInsertAttempts(rows), args...)
		args, rows = args[:0], 0
		return err
	}
	for _, lease := range leases {
		for i, p := range lease.Partitions {
			if rows == batchRows {
				if err := flush(); err != nil {
					return err
				}
			}
			args = append(args, dagID, p.Start.Unix(), lease.Attempts[i], p.End.Unix(), p.Key(), lease.Backfill, lease.RunID, lease.Worker,
				st.now.UnixMilli(), lease.Until.UnixMilli(), "", 0, st.rev, string(lease.Trigger))
			rows++
		}
	}
	return flush()
}

// advanceLatest moves the partitions starting at starts, which have rows,
// to their next attempt.
func (l *Ledger) advanceLatest(ctx context.Context, tx *sql.Tx, dagID int64, starts []int64) error {
	for batch := range slices.Chunk(starts, batchRows) {
		args := make([]any, 0, len(batch)+1)
		args = append(args, dagID)
		for _, s := range batch {
			args = append(args, s)
		}
		if _, err := l.exec(ctx, tx, qAdvanceLatest(len(batch)), args...); err != nil {
			return err
		}
	}
	return nil
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
