package sqlledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/tranche-dev/tranche/ledger"
)

func scanAttempt(rows *sql.Rows, dag string) (ledger.Attempt, error) {
	a := ledger.Attempt{DAG: dag}
	var start, end, started, until int64
	var finished sql.NullInt64
	var state, trigger string
	err := rows.Scan(&start, &end, &a.Key, &a.Backfill, &a.RunID, &a.Worker, &a.Number, &state,
		&started, &finished, &until, &a.Err, &a.Rows, &a.Revision, &trigger, &a.CodeVersion)
	a.Trigger = ledger.TriggerOf(ledger.Trigger(trigger), a.Backfill)
	a.Start, a.End = time.Unix(start, 0).UTC(), time.Unix(end, 0).UTC()
	a.State = ledger.State(state)
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
const latestPage = 4096

// Latest implements [ledger.Ledger]. It reads a page of attempts at a
// time, in the order of the primary key, and keeps each partition's last;
// it holds no connection while the loop body runs.
func (l *Ledger) Latest(ctx context.Context, dag string, from, to time.Time) iter.Seq2[ledger.Attempt, error] {
	return latestIn(ctx, l, dag, from, to, qAttempts, latestPage,
		func(rows *sql.Rows) (ledger.Attempt, int64, error) {
			a, err := scanAttempt(rows, dag)
			return a, a.Start.Unix(), err
		},
		func(a ledger.Attempt) ledger.Attempt { return a })
}

var _ ledger.BriefReader = (*Ledger)(nil)

// briefStates are the states of qBriefs' codes, in order.
var briefStates = [4]ledger.State{ledger.StateRunning, ledger.StateSucceeded, ledger.StateFailed, ledger.StateCanceled}

// LatestBriefs implements [ledger.BriefReader], a page of attempts at a
// time as Latest reads them, each of three integers.
func (l *Ledger) LatestBriefs(ctx context.Context, dag string, from, to time.Time) iter.Seq2[ledger.Brief, error] {
	return latestIn(ctx, l, dag, from, to, qBriefs, latestPage,
		func(rows *sql.Rows) (ledger.Brief, int64, error) {
			// Scanned into interfaces, the drivers' own values: into
			// integers, database/sql converts each through reflection, a
			// quarter of the client's time of reading a million.
			var k, s, at any
			if err := rows.Scan(&k, &s, &at); err != nil {
				return ledger.Brief{}, 0, err
			}
			key, ok1 := k.(int64)
			started, ok2 := s.(int64)
			until, ok3 := at.(int64)
			if !ok1 || !ok2 || !ok3 && at != nil {
				return ledger.Brief{}, 0, fmt.Errorf("tranche: a brief of an attempt of DAG %s reads %T, %T, %T; want integers", dag, k, s, at)
			}
			b := ledger.Brief{Start: time.Unix(key>>2, 0).UTC(), State: briefStates[key&3], Started: time.UnixMilli(started).UTC()}
			switch {
			case at == nil:
			case b.State == ledger.StateRunning:
				b.LeaseUntil = time.UnixMilli(until).UTC()
			default:
				b.Finished = time.UnixMilli(until).UTC()
			}
			return b, key >> 2, nil
		},
		ledger.BriefOf)
}

// latestIn yields the latest of the rows of each partition of dag whose
// start lies in [from, to), read by query (whose parameters are the DAG,
// the bounds in Unix seconds and the page's length) a page at a time in
// the order of the primary key: scan reads a row and its partition's
// start, and of reads a row from a partition's whole attempt, for a
// partition whose attempts fill a page. It holds no connection while the
// loop body runs.
func latestIn[T any](ctx context.Context, l *Ledger, dag string, from, to time.Time, query string, pageLen int,
	scan func(*sql.Rows) (T, int64, error), of func(ledger.Attempt) T) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		var zero T
		next, end := ceilUnix(from), ceilUnix(to)
		page := make([]T, 0, pageLen)
		starts := make([]int64, 0, pageLen)
		for next < end {
			if err := ctx.Err(); err != nil {
				yield(zero, err)
				return
			}
			page, starts = page[:0], starts[:0]
			read := 0
			err := l.read(ctx, "reading the latest attempts of DAG "+dag, func() error {
				rows, err := l.readRows(ctx, query, dag, next, end, pageLen)
				if err != nil {
					return err
				}
				defer rows.Close()
				for rows.Next() {
					a, start, err := scan(rows)
					if err != nil {
						return err
					}
					read++
					if n := len(page); n > 0 && starts[n-1] == start {
						page[n-1] = a // a later attempt at the same partition
					} else {
						page, starts = append(page, a), append(starts, start)
					}
				}
				return rows.Err()
			})
			if err != nil {
				yield(zero, err)
				return
			}
			full := read == pageLen
			if full && len(page) > 0 {
				// The last partition's attempts may go on in the next
				// page: read it again from there.
				last := starts[len(starts)-1]
				if len(page) == 1 {
					// One partition filled the page: its latest attempt
					// is its history's last.
					h, err := l.History(ctx, dag, time.Unix(last, 0))
					if err != nil {
						yield(zero, err)
						return
					}
					page[0] = of(h[len(h)-1])
					next = last + 1
				} else {
					page = page[:len(page)-1]
					next = last
				}
			}
			for _, a := range page {
				if !yield(a, nil) {
					return
				}
			}
			if !full {
				return
			}
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

// History implements [ledger.Ledger].
func (l *Ledger) History(ctx context.Context, dag string, start time.Time) ([]ledger.Attempt, error) {
	if start.Nanosecond() != 0 {
		return nil, ctx.Err() // no partition starts there
	}
	return l.readAttempts(ctx, "reading the history of "+start.Format(time.RFC3339), dag, qHistory, dag, start.Unix())
}

// readAttempts reads the attempts of DAG dag that query selects (its
// columns attemptColumns), in its order.
func (l *Ledger) readAttempts(ctx context.Context, op, dag, query string, args ...any) ([]ledger.Attempt, error) {
	var out []ledger.Attempt
	err := l.read(ctx, op, func() error {
		rows, err := l.readRows(ctx, query, args...)
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

// Revision implements [ledger.Ledger]: the highest revision of the
// DAG's attempts, its cursors and its last release, once the dialect's
// RevisionBarrier has waited for the transactions that hold a lower one.
func (l *Ledger) Revision(ctx context.Context, dag string) (int64, error) {
	op := "reading the revision of DAG " + dag
	var rev int64
	if l.dialect.RevisionBarrier == "" {
		err := l.read(ctx, op, func() error {
			var id int64
			err := l.readRow(ctx, qDAGID, dag).Scan(&id)
			if errors.Is(err, sql.ErrNoRows) {
				return nil
			}
			if err != nil {
				return err
			}
			return l.readRow(ctx, qRevision, id, id, id).Scan(&rev)
		})
		return rev, err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	// The barrier takes a lock and writes nothing: a ledger opened
	// read-only runs it too.
	err := l.retry(ctx, op, func() error {
		return l.tryWrite(ctx, func(tx *sql.Tx) error {
			id, err := l.dagID(ctx, tx, dag)
			if err != nil || id == 0 {
				return err
			}
			if _, err := l.exec(ctx, tx, l.dialect.RevisionBarrier, id); err != nil {
				return err
			}
			return l.queryRow(ctx, tx, qRevision, id, id, id).Scan(&rev)
		})
	})
	return rev, err
}

// millis returns t to the millisecond in UTC, as the ledger keeps it; the
// zero time stays zero.
func millis(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return time.UnixMilli(t.UnixMilli()).UTC()
}

// RevisionIn implements [ledger.Ledger]: it reads the index of
// revisions from the highest down to after, so that it costs the changes
// after after, whatever the range.
func (l *Ledger) RevisionIn(ctx context.Context, dag string, from, to time.Time, after int64) (int64, error) {
	var rev int64
	err := l.read(ctx, "reading the revision of DAG "+dag+" from "+from.Format(time.RFC3339)+" to "+to.Format(time.RFC3339), func() error {
		err := l.readRow(ctx, qRevisionIn, dag, after, ceilUnix(from), ceilUnix(to)).Scan(&rev)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		return err
	})
	return rev, err
}

// RecentSuccesses implements [ledger.Ledger], through the index of the
// DAG's successes.
func (l *Ledger) RecentSuccesses(ctx context.Context, dag string, n int) ([]ledger.Attempt, error) {
	if n < 1 {
		return nil, ctx.Err()
	}
	return l.readAttempts(ctx, "reading the recent successes of DAG "+dag, dag, qRecentSuccesses, dag, n)
}
