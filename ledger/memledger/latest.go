package memledger

import (
	"context"
	"iter"
	"slices"
	"time"

	"github.com/tranche-dev/tranche/ledger"
)

var _ ledger.LatestReader = (*Ledger)(nil)

// latestIn calls f with the index of each range of ranges and the latest
// attempt of each partition of d starting in it, oldest first, with l.mu
// held.
func (d *memoryDAG) latestIn(ranges []ledger.Range, f func(i int, a *ledger.Attempt)) {
	starts := d.sortedStarts()
	for i, r := range ranges {
		k, _ := slices.BinarySearch(starts, r.From.UnixNano())
		for end := r.To.UnixNano(); k < len(starts) && starts[k] < end; k++ {
			h := d.history[starts[k]]
			f(i, &h[len(h)-1])
		}
	}
}

// CountLatest implements [ledger.LatestReader]: it reads every latest
// attempt of the ranges, which in memory costs no more than counting.
func (l *Ledger) CountLatest(ctx context.Context, req ledger.CountRequest) ([]ledger.LatestCount, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	d := l.dags[req.DAG]
	if d == nil {
		return nil, nil
	}
	sum := map[ledger.LatestCount]int{}
	d.latestIn(req.Ranges, func(i int, a *ledger.Attempt) {
		c := ledger.CountOf(i, *a, req)
		c.N = 0
		sum[c]++
	})
	out := make([]ledger.LatestCount, 0, len(sum))
	for c, n := range sum {
		c.N = n
		out = append(out, c)
	}
	return out, nil
}

// FindLatest implements [ledger.LatestReader].
func (l *Ledger) FindLatest(ctx context.Context, req ledger.FindRequest) iter.Seq2[ledger.Attempt, error] {
	return func(yield func(ledger.Attempt, error) bool) {
		if err := ctx.Err(); err != nil {
			yield(ledger.Attempt{}, err)
			return
		}
		var found []ledger.Attempt
		l.mu.Lock()
		if d := l.dags[req.DAG]; d != nil && len(req.States) > 0 {
			d.latestIn(req.Ranges, func(_ int, a *ledger.Attempt) {
				if slices.Contains(req.States, a.State) {
					found = append(found, *a)
				}
			})
		}
		l.mu.Unlock()
		if req.Newest > 0 {
			slices.SortStableFunc(found, ledger.FinishedLater)
			found = found[:min(req.Newest, len(found))]
		}
		for _, a := range found {
			if !yield(a, nil) {
				return
			}
		}
	}
}

// ChangedIn implements [ledger.LatestReader]: it reads the changes after
// after, from the log of changes.
func (l *Ledger) ChangedIn(ctx context.Context, dag string, from, to time.Time, after int64) ([]time.Time, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	d := l.dags[dag]
	if d == nil {
		return nil, nil
	}
	lo, hi := from.UnixNano(), to.UnixNano()
	var starts []int64
	for c := range d.changes.backward { // the latest change first
		if c.rev <= after {
			break
		}
		if c.start >= lo && c.start < hi && d.recorded(c) {
			starts = append(starts, c.start)
		}
	}
	slices.Sort(starts)
	starts = slices.Compact(starts)
	out := make([]time.Time, len(starts))
	for i, s := range starts {
		out[i] = d.history[s][0].Start
	}
	return out, nil
}

var _ ledger.BriefReader = (*Ledger)(nil)

// LatestBriefs implements [ledger.BriefReader] through Latest, which in
// memory costs no more.
func (l *Ledger) LatestBriefs(ctx context.Context, dag string, from, to time.Time) iter.Seq2[ledger.Brief, error] {
	return func(yield func(ledger.Brief, error) bool) {
		for a, err := range l.Latest(ctx, dag, from, to) {
			if !yield(ledger.BriefOf(a), err) || err != nil {
				return
			}
		}
	}
}
