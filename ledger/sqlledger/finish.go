package sqlledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/tranche-dev/tranche/ledger"
)

var _ ledger.BatchFinisher = (*Ledger)(nil)

// FinishBatch implements [ledger.BatchFinisher].
//
// The finishes of one DAG and one worker with no work deferred to them
// are recorded together: where every lease is of one partition, by one
// UPDATE of them all (the fence in its WHERE clause, as Finish's; RETURNING
// says which it changed), a transaction of its own; otherwise in one
// transaction, by that UPDATE, or by a statement a partition where
// statements cost no round trip (Dialect.InProcess, SQLite), rolled back and
// tried again without a lease the fence let through for some of its
// partitions but not all, so that each lease is recorded all or none. A
// finish with work deferred to it ([Ledger.Defer]) is recorded by
// [Ledger.Finish], its work and its success in one transaction, as
// before. The record of each backfill finished is read once after.
func (l *Ledger) FinishBatch(ctx context.Context, batch []ledger.Finish) []error {
	errs := make([]error, len(batch))
	type group struct {
		dagID  int64
		worker string
	}
	groups := map[group][]int{}
	var order []group
	for i, f := range batch {
		lease := f.Lease
		switch {
		case lease.CheckOutcomes(f.Outcomes) != nil:
			errs[i] = lease.CheckOutcomes(f.Outcomes)
			continue
		case ctx.Err() != nil:
			errs[i] = ctx.Err()
			continue
		case len(lease.Attempts) != len(lease.Partitions):
			errs[i] = fmt.Errorf("%w: a lease of %d partitions with %d attempts", ledger.ErrFenced, len(lease.Partitions), len(lease.Attempts))
			continue
		case l.pending(lease, f.Outcomes) != nil:
			errs[i] = l.Finish(ctx, lease, f.Outcomes)
			continue
		}
		dagID, err := l.dagID(ctx, nil, lease.DAG)
		switch {
		case err != nil:
			errs[i] = l.wrap(ctx, "finishing "+describe(lease.Partitions), err)
			continue
		case dagID == 0:
			l.forget(lease)
			errs[i] = fmt.Errorf("%w: unknown DAG %s", ledger.ErrFenced, lease.DAG)
			continue
		}
		g := group{dagID, lease.Worker}
		if _, ok := groups[g]; !ok {
			order = append(order, g)
		}
		groups[g] = append(groups[g], i)
	}
	known := make([]bool, len(batch)) // Canceled set from the finish's own statement
	for _, g := range order {
		idx := groups[g]
		if len(idx) == 1 && len(batch[idx[0]].Lease.Partitions) > 1 {
			f := batch[idx[0]]
			errs[idx[0]] = l.finishPlain(ctx, "finishing "+describe(f.Lease.Partitions), g.dagID, f.Lease, f.Outcomes)
			if err := errs[idx[0]]; err == nil || errors.Is(err, ledger.ErrFenced) {
				l.forget(f.Lease)
			}
			continue
		}
		l.finishGroup(ctx, g.dagID, batch, idx, errs, known)
	}
	l.readCanceled(ctx, batch, errs, known)
	return errs
}

// readCanceled sets the Canceled field of the finishes of batch that
// were recorded by a statement that did not read it (known), reading
// each of their backfills once. A backfill that cannot be read leaves
// it false: the worker's next claim or heartbeat reads it again.
func (l *Ledger) readCanceled(ctx context.Context, batch []ledger.Finish, errs []error, known []bool) {
	canceled := map[string]bool{}
	for i, f := range batch {
		id := f.Lease.Backfill
		if errs[i] != nil || id == "" || known[i] {
			continue
		}
		if _, ok := canceled[id]; !ok {
			b, err := l.Backfill(ctx, id)
			canceled[id] = err == nil && b.Canceled
		}
		batch[i].Canceled = canceled[id]
	}
}

// FinishesAlone implements [ledger.BatchFinisher]: a lease with work
// deferred to its finish ([Ledger.Defer]) is finished alone, its work
// and its success in one transaction.
func (l *Ledger) FinishesAlone(lease *ledger.Lease) bool {
	l.dmu.Lock()
	defer l.dmu.Unlock()
	tokens := lease.Tokens()
	for i, p := range lease.Partitions {
		if i < len(tokens) && len(l.leases[leaseKey{lease.RunID, p.Start.Unix(), tokens[i]}]) > 0 {
			return true
		}
	}
	return false
}

// partKey names a partition's attempt within a group of finishes of one
// DAG and worker.
type partKey struct {
	start   int64
	attempt int
}

// finishGroup records the finishes batch[idx] of one DAG and one worker,
// setting errs[idx[k]], and the Canceled field of those recorded by one
// statement, which reads it (known[idx[k]]).
func (l *Ledger) finishGroup(ctx context.Context, dagID int64, batch []ledger.Finish, idx []int, errs []error, known []bool) {
	// A partition's attempt named twice (a lease given twice) is
	// finished after the others, alone, and is fenced by them.
	owner := map[partKey]int{}
	var live, again []int
	for _, i := range idx {
		dup := false
		for j, p := range batch[i].Lease.Partitions {
			if _, ok := owner[partKey{p.Start.Unix(), batch[i].Lease.Attempts[j]}]; ok {
				dup = true
			}
		}
		if dup {
			again = append(again, i)
			continue
		}
		for j, p := range batch[i].Lease.Partitions {
			owner[partKey{p.Start.Unix(), batch[i].Lease.Attempts[j]}] = i
		}
		live = append(live, i)
	}
	op := fmt.Sprintf("finishing the leases of %d partitions", len(owner))
	partial := map[int]bool{} // leases the fence let through in part, left out
	var changed map[int]int
	var canceled map[int]bool
	err := l.retry(ctx, op, func() error {
		for {
			var todo []int
			for _, i := range live {
				if !partial[i] {
					todo = append(todo, i)
				}
			}
			if len(todo) == 0 {
				changed = nil
				return nil
			}
			var err error
			changed, canceled, err = l.tryFinishGroup(ctx, dagID, batch, todo, owner)
			if !errors.Is(err, errPartial) {
				return err
			}
			for _, i := range todo {
				if n := changed[i]; n > 0 && n < len(batch[i].Lease.Partitions) {
					partial[i] = true
				}
			}
		}
	})
	for _, i := range live {
		lease := batch[i].Lease
		switch {
		case err != nil:
			errs[i] = err
		case !partial[i] && changed[i] == len(lease.Partitions):
			errs[i] = nil
			batch[i].Canceled, known[i] = canceled[i]
		default:
			fenced := fmt.Errorf("%w: %d of %d partitions of the lease of worker %s changed hands", ledger.ErrFenced,
				len(lease.Partitions)-changed[i], len(lease.Partitions), lease.Worker)
			errs[i] = l.whyFenced(ctx, "finishing "+describe(lease.Partitions), lease, fenced)
		}
		if errs[i] == nil || errors.Is(errs[i], ledger.ErrFenced) {
			l.forget(lease)
		}
	}
	for _, i := range again {
		errs[i] = l.Finish(ctx, batch[i].Lease, batch[i].Outcomes)
	}
}

// errPartial says that a group's transaction was rolled back because the
// fence let some lease through for some of its partitions only.
var errPartial = errors.New("sqlledger: a lease fenced in part")

// tryFinishGroup records the finishes batch[todo] of one DAG and worker
// once, and returns how many partitions of each it changed (by index in
// batch), and, for those recorded by a statement that read it, whether
// their backfill was canceled; it fails with errPartial, having rolled
// everything back, when one lease changed some of its partitions but
// not all.
func (l *Ledger) tryFinishGroup(ctx context.Context, dagID int64, batch []ledger.Finish, todo []int, owner map[partKey]int) (map[int]int, map[int]bool, error) {
	changed := make(map[int]int, len(todo))
	canceled := make(map[int]bool, len(todo))
	parts, single := 0, true
	for _, i := range todo {
		parts += len(batch[i].Lease.Partitions)
		single = single && len(batch[i].Lease.Partitions) == 1
	}
	if single && parts <= batchRows {
		// No lease can be fenced in part: one statement, its own
		// transaction.
		return changed, canceled, l.finishRows(ctx, nil, dagID, batch, todo, owner, changed, canceled)
	}
	tx, err := l.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, nil, err
	}
	if l.dialect.InProcess {
		err = l.finishEach(ctx, tx, dagID, batch, todo, changed)
	} else {
		for lo := 0; lo < len(todo) && err == nil; {
			hi, n := lo, 0
			for hi < len(todo) && (hi == lo || n+len(batch[todo[hi]].Lease.Partitions) <= batchRows) {
				n += len(batch[todo[hi]].Lease.Partitions)
				hi++
			}
			err = l.finishRows(ctx, tx, dagID, batch, todo[lo:hi], owner, changed, canceled)
			lo = hi
		}
	}
	if err == nil {
		for _, i := range todo {
			if n := changed[i]; n > 0 && n < len(batch[i].Lease.Partitions) {
				err = errPartial
			}
		}
	}
	if err != nil {
		_ = tx.Rollback()
		return changed, nil, err
	}
	return changed, canceled, tx.Commit()
}

// finishRows records the finishes batch[todo] by one UPDATE (qFinish), in
// tx or, when tx is nil, as a statement of its own, counting the
// partitions it changed of each, and reading whether their backfill was
// canceled.
func (l *Ledger) finishRows(ctx context.Context, tx *sql.Tx, dagID int64, batch []ledger.Finish, todo []int, owner map[partKey]int, changed map[int]int, canceled map[int]bool) error {
	n := 0
	for _, i := range todo {
		n += len(batch[i].Lease.Partitions)
	}
	args := make([]any, 0, 6*n+4)
	args = append(args, dagID, nil) // nil: the database's clock
	if l.clock != nil {
		args[1] = l.clock().UnixMilli()
	}
	for _, i := range todo {
		lease := batch[i].Lease
		for j, o := range batch[i].Outcomes {
			args = append(args, lease.Partitions[j].Start.Unix(), lease.Attempts[j], string(o.State), o.Err, o.Rows, ranMillis(o.Ran))
		}
	}
	args = append(args, dagID, batch[todo[0]].Lease.Worker)
	query := l.qFinishOne // prepared: most finishes are of one partition
	if n > 1 {
		query = l.dialect.qFinishReturning(n)
	}
	var rows *sql.Rows
	var err error
	switch s := l.wstmts[query]; {
	case tx == nil && s != nil:
		rows, err = s.QueryContext(ctx, args...)
	case tx == nil:
		rows, err = l.db.QueryContext(ctx, l.q(query), args...)
	default:
		rows, err = l.query(ctx, tx, query, args...)
	}
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var k partKey
		var c sql.NullInt64
		if err := rows.Scan(&k.start, &k.attempt, &c); err != nil {
			return err
		}
		if i, ok := owner[k]; ok {
			changed[i]++
			canceled[i] = c.Int64 != 0
		}
	}
	return rows.Err()
}

// finishEach records the finishes batch[todo] in tx a partition at a
// time (qFinishEach), where statements cost no round trip, at one
// instant and one revision, counting the partitions it changed of each:
// a lease's first partition that the fence refuses ends its updates.
func (l *Ledger) finishEach(ctx context.Context, tx *sql.Tx, dagID int64, batch []ledger.Finish, todo []int, changed map[int]int) error {
	st, err := l.start(ctx, tx, dagID, "")
	if err != nil {
		return err
	}
	for _, i := range todo {
		lease := batch[i].Lease
		for j, o := range batch[i].Outcomes {
			var began int64 // 0: the attempt's start stays
			if o.Ran > 0 {
				began = st.now.UnixMilli() - o.Ran.Milliseconds()
			}
			res, err := l.exec(ctx, tx, qFinishEach, string(o.State), o.Err, o.Rows, st.now.UnixMilli(), st.rev, began, dagID, lease.Worker,
				lease.Partitions[j].Start.Unix(), lease.Attempts[j])
			if err != nil {
				return err
			}
			n, err := res.RowsAffected()
			if err != nil {
				return err
			}
			if n != 1 {
				break
			}
			changed[i]++
		}
	}
	return nil
}
