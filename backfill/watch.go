package backfill

import (
	"context"
	"fmt"
	"iter"
	"maps"
	"slices"
	"time"

	"github.com/tranche-dev/tranche/internal/wait"
	"github.com/tranche-dev/tranche/ledger"
)

// Watch yields the status of backfill id from l once at the start and then
// each time its counts change, until the backfill is done (every
// partition succeeded), ctx ends (yielding ctx's cause) or the caller
// stops. Leases are judged against the time of each check.
//
// Watch checks l once an interval (each check starts an interval after
// the one before ended), so that watching costs a ledger a small query
// or two an interval however many partitions the backfill has: while
// nothing changes, a check reads the backfill's record and asks whether
// any of its partitions changed ([ledger.Reader.RevisionIn]); after a
// change, the same check reads the partitions that changed and counts
// again only the spans that hold them (through [ledger.LatestReader],
// where l is one), so that a status after a change comes within an
// interval of it. A daily or
// hourly schedule's watch reads every latest attempt, as StatusOf does,
// from the change that lands a former schedule's attempt among its slots.
func Watch(ctx context.Context, l ledger.Reader, id string, every time.Duration) iter.Seq2[*Status, error] {
	return func(yield func(*Status, error) bool) {
		if every <= 0 {
			yield(nil, fmt.Errorf("tranche: watch every %v; want a positive interval", every))
			return
		}
		var w *watcher
		var last *Status
		var next time.Time // when the next check may start
		for {
			if d := time.Until(next); d > 0 {
				if wait.Sleep(ctx, d) != nil {
					yield(nil, context.Cause(ctx))
					return
				}
			}
			var s *Status
			var err error
			if w == nil {
				w, s, err = newWatcher(ctx, l, id)
			} else {
				s, err = w.check(ctx)
			}
			if err != nil {
				if ctx.Err() != nil {
					err = context.Cause(ctx)
				}
				yield(nil, err)
				return
			}
			// An interval after the check ended, so that a slow one (a
			// count over a million partitions) is never followed at once
			// by another.
			next = time.Now().Add(every)
			if s != nil && (last == nil || !maps.Equal(s.Counts, last.Counts) || s.Record.Canceled != last.Record.Canceled) {
				if !yield(s, nil) || s.Done() {
					return
				}
				last = s
			}
		}
	}
}

// watchSpans is how many spans Watch keeps the counts of.
const watchSpans = 256

// A watcher follows a backfill's status through the changes of its
// partitions.
type watcher struct {
	l        ledger.Reader
	lr       ledger.LatestReader // nil: the ledger is not one, or a former schedule's attempts lie among the backfill's slots
	id       string
	base     *Status
	from, to time.Time // the starts of the attempts that may be the backfill's
	revision int64     // the DAG's revision when the counts were read

	spans  []ledger.Range         // the backfill's partitions in spans, oldest first
	counts []map[ledger.State]int // counts[i] counts the latest attempts in spans[i]
	last   *Status                // the status last returned
}

// newWatcher reads the backfill's status and returns a watcher of it.
func newWatcher(ctx context.Context, l ledger.Reader, id string) (*watcher, *Status, error) {
	record, err := l.Backfill(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	base, err := statusOf(l, record)
	if err != nil {
		return nil, nil, err
	}
	w := &watcher{l: l, id: id, base: base}
	w.from, w.to = base.match.Span(base.sel.window.Start(), base.sel.window.End())
	// The revision before the counts: a change it misses has a later
	// revision, which the next check sees.
	if w.revision, err = l.Revision(ctx, record.DAG); err != nil {
		return nil, nil, fmt.Errorf("tranche: reading ledger revision: %w", err)
	}
	lr, ok, err := base.latestReader(ctx)
	if err != nil {
		return nil, nil, err
	}
	if !ok {
		s, err := StatusOf(ctx, l, id, time.Now())
		return w, s, err
	}
	w.lr = lr
	per := max(1, (base.sel.total+watchSpans-1)/watchSpans)
	for win := range base.sel.windows(OldestFirst) {
		for cw := range win.Chunks(per) {
			w.spans = append(w.spans, ledger.Range{From: cw.Start(), To: cw.End()})
		}
	}
	slices.SortFunc(w.spans, func(a, b ledger.Range) int { return a.From.Compare(b.From) }) // Chunks yields newest first
	w.counts = make([]map[ledger.State]int, len(w.spans))
	all := make([]int, len(w.spans))
	for i := range all {
		all[i] = i
	}
	if err := w.recount(ctx, all); err != nil {
		return nil, nil, err
	}
	s, err := w.status(ctx, record)
	return w, s, err
}

// recount reads again the counts of the spans whose indexes are given.
func (w *watcher) recount(ctx context.Context, spans []int) error {
	req := ledger.CountRequest{DAG: w.base.Record.DAG}
	for _, i := range spans {
		req.Ranges = append(req.Ranges, w.spans[i])
		w.counts[i] = map[ledger.State]int{}
	}
	counts, err := w.lr.CountLatest(ctx, req)
	if err != nil {
		return fmt.Errorf("tranche: reading ledger: %w", err)
	}
	for _, c := range counts {
		w.counts[spans[c.Range]][c.State] += c.N
	}
	return nil
}

// status returns the backfill's status from the spans' counts, explained
// as StatusOf explains it, or nil when neither its counts nor its
// cancellation changed since the status last returned.
func (w *watcher) status(ctx context.Context, record ledger.BackfillRecord) (*Status, error) {
	s := *w.base
	s.Record, s.Counts, s.Blocked = record, map[ledger.State]int{}, nil
	attempted := 0
	for _, c := range w.counts {
		for st, n := range c {
			if n > 0 {
				s.Counts[st] += n
				attempted += n
			}
		}
	}
	if n := s.sel.total - attempted; n > 0 {
		s.Counts[ledger.StatePending] = n
	}
	if w.last != nil && maps.Equal(s.Counts, w.last.Counts) && s.Record.Canceled == w.last.Record.Canceled {
		return nil, nil
	}
	if err := s.explain(ctx, w.lr, time.Now()); err != nil {
		return nil, err
	}
	w.last = &s
	return &s, nil
}

// check returns the backfill's status if it may have changed since the
// last check, or nil.
func (w *watcher) check(ctx context.Context) (*Status, error) {
	record, err := w.l.Backfill(ctx, w.id)
	if err != nil {
		return nil, err
	}
	changed, err := w.l.RevisionIn(ctx, record.DAG, w.from, w.to, w.revision)
	if err != nil {
		return nil, fmt.Errorf("tranche: reading ledger: %w", err)
	}
	if changed == 0 {
		if record.Canceled == w.base.Record.Canceled {
			return nil, nil
		}
		w.base.Record = record
		if w.lr == nil {
			return StatusOf(ctx, w.l, w.id, time.Now())
		}
		return w.status(ctx, record)
	}
	w.base.Record = record
	if w.lr == nil {
		if w.revision, err = w.l.Revision(ctx, record.DAG); err != nil {
			return nil, fmt.Errorf("tranche: reading ledger revision: %w", err)
		}
		return StatusOf(ctx, w.l, w.id, time.Now())
	}
	// The watermark first, then the changes up to it and any after.
	revision, err := w.l.Revision(ctx, record.DAG)
	if err != nil {
		return nil, fmt.Errorf("tranche: reading ledger revision: %w", err)
	}
	starts, err := w.lr.ChangedIn(ctx, record.DAG, w.from, w.to, w.revision)
	if err != nil {
		return nil, fmt.Errorf("tranche: reading ledger: %w", err)
	}
	if w.base.match.ByFire() && slices.ContainsFunc(starts, func(t time.Time) bool { return !w.base.sel.slotStart(t) }) {
		// A former schedule's slot, matched by its fire: from now on,
		// as StatusOf, read every latest attempt.
		w.lr, w.revision = nil, revision
		return StatusOf(ctx, w.l, w.id, time.Now())
	}
	var touched []int
	for _, t := range starts {
		i, found := slices.BinarySearchFunc(w.spans, t, func(r ledger.Range, t time.Time) int { return r.From.Compare(t) })
		if !found {
			i--
		}
		if i >= 0 && w.spans[i].Contains(t) && (len(touched) == 0 || touched[len(touched)-1] != i) {
			touched = append(touched, i)
		}
	}
	if len(touched) > 0 {
		if err := w.recount(ctx, touched); err != nil {
			return nil, err
		}
	}
	w.revision = revision
	return w.status(ctx, record)
}
