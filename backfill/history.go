package backfill

import (
	"context"
	"fmt"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/internal/slotmatch"
	"github.com/tranche-dev/tranche/ledger"
)

// changedIn reports whether an attempt of dag that matches a partition of
// w by m's rule changed after revision rev: whether a plan of w is stale.
// changed reports whether an attempt starting in [from, to) changed after
// rev.
//
// For a schedule matched by fire, m.span reaches two days (or three
// hours) beyond w, where the neighbouring slots start: the live
// schedule's slot right after a window that ends yesterday among them,
// whose run must not make the plan stale. Schedules of one identity fire
// on the same days, once a day (or in the same hours, once an hour), so
// an attempt that starts in a partition of w fires on the day of that
// partition's fire or of the next one's: from the end of w's first
// partition to the start of its last, a change is taken to match, and
// that middle, however long, is one question. (Where a zone moves its
// clock by half an hour, one hourly schedule may skip an hour another
// fires in, and a change there that matches nothing makes the plan stale
// all the same, as every change in the span once did.) The two edges,
// the first and last partitions with what lies beyond them, hold a
// handful of slots: those are read when they changed, and each changed
// attempt is matched.
func changedIn(ctx context.Context, l ledger.Reader, dag string, m slotmatch.Matcher, w tranche.TimePartitionWindow, rev int64,
	changed func(from, to time.Time) (bool, error)) (bool, error) {
	from, to := m.Span(w.Start(), w.End())
	if !m.ByFire() {
		return changed(from, to)
	}
	edges := []ledger.Range{{From: from, To: to}}
	if head, tail := w.Oldest().End, w.Newest().Start; head.Before(tail) {
		if ok, err := changed(head, tail); err != nil || ok {
			return ok, err
		}
		edges = []ledger.Range{{From: from, To: head}, {From: tail, To: to}}
	}
	for _, e := range edges {
		ok, err := changed(e.From, e.To)
		if err != nil {
			return false, err
		}
		if !ok {
			continue
		}
		for a, err := range l.Latest(ctx, dag, e.From, e.To) {
			if err != nil {
				return false, fmt.Errorf("tranche: reading ledger: %w", err)
			}
			if a.Revision > rev && m.Matches(w, a) {
				return true, nil
			}
		}
	}
	return false, nil
}
