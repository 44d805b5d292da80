package backfill

import (
	"errors"
	"fmt"
	"iter"
	"slices"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/internal/zone"
)

// selection is what a backfill covers: every partition of a window, or
// chosen partitions of it, as runs of adjacent ones.
type selection struct {
	window tranche.TimePartitionWindow   // the window, or the span from the oldest chosen partition to the newest
	runs   []tranche.TimePartitionWindow // the chosen partitions, oldest run first; nil for the whole window
	total  int                           // the partitions covered
}

// chosen reports whether the selection holds chosen partitions.
func (s *selection) chosen() bool { return s.runs != nil }

// starts returns the starts of the chosen partitions, oldest first; nil
// for a whole window.
func (s *selection) starts() []time.Time {
	if !s.chosen() {
		return nil
	}
	out := make([]time.Time, 0, s.total)
	for _, w := range s.runs {
		for p := range w.OldestFirst() {
			out = append(out, p.Start)
		}
	}
	return out
}

// windows yields the selection's windows (the whole window, or each run)
// in order.
func (s *selection) windows(order Order) iter.Seq[tranche.TimePartitionWindow] {
	return func(yield func(tranche.TimePartitionWindow) bool) {
		if !s.chosen() {
			yield(s.window)
			return
		}
		for i := range s.runs {
			w := s.runs[len(s.runs)-1-i]
			if order == OldestFirst {
				w = s.runs[i]
			}
			if !yield(w) {
				return
			}
		}
	}
}

// selectionOf returns the selection of ps, sorted partitions of one
// granularity and location, each once: runs of adjacent partitions.
func selectionOf(ps []tranche.TimePartition) (selection, error) {
	g := ps[0].Granularity
	var s selection
	first := 0
	for i := 1; i <= len(ps); i++ {
		if i < len(ps) && ps[i].Start.Equal(ps[i-1].End) {
			continue
		}
		w, err := tranche.NewTimePartitionWindow(g, ps[first].Start, ps[i-1].Start)
		if err != nil {
			return selection{}, err
		}
		s.runs = append(s.runs, w)
		first = i
	}
	var err error
	if s.window, err = tranche.NewTimePartitionWindow(g, ps[0].Start, ps[len(ps)-1].Start); err != nil {
		return selection{}, err
	}
	s.total = len(ps)
	return s, nil
}

// selection validates Window and Partitions and returns what the backfill
// covers, reporting every problem, and with limit, the most partitions it
// may cover.
func (b *Backfill) selection(limit int) (selection, []error) {
	if len(b.Partitions) == 0 {
		switch n := b.Window.Len(); {
		case n == 0:
			return selection{}, []error{errors.New("tranche: backfill: empty window: give a window of at least one partition")}
		case limit > 0 && n > limit:
			return selection{}, []error{fmt.Errorf("tranche: backfill: window %s holds %d partitions, more than the limit of %d; split it, or raise MaxPartitions", b.Window, n, limit)}
		}
		return selection{window: b.Window, total: b.Window.Len()}, nil
	}
	var errs []error
	g, loc := b.Partitions[0].Granularity, b.Partitions[0].Start.Location()
	if b.Window.Len() > 0 {
		g, loc = b.Window.Granularity(), b.Window.Location()
	}
	for i, p := range b.Partitions {
		switch {
		case !p.Granularity.IsValid() || !p.Start.Before(p.End):
			errs = append(errs, fmt.Errorf("tranche: backfill: Partitions[%d], %v: not a partition", i, p))
		case p.Granularity != g || !zone.Same(p.Start.Location(), loc):
			errs = append(errs, fmt.Errorf("tranche: backfill: Partitions[%d], %s, is a partition of %v in %v; want one of %v in %v, as the others",
				i, p.Key(), p.Granularity, p.Start.Location(), g, loc))
		case !tranche.PartitionOf(g, p.Start).Equal(p):
			errs = append(errs, fmt.Errorf("tranche: backfill: Partitions[%d], %v, is not a partition of %v; the partition at its start is %v",
				i, p, g, tranche.PartitionOf(g, p.Start)))
		case b.Window.Len() > 0 && !b.Window.Contains(p.Start):
			errs = append(errs, fmt.Errorf("tranche: backfill: Partitions[%d], %s, lies outside window %s", i, p.Key(), b.Window))
		}
	}
	if len(errs) > 0 {
		return selection{}, errs
	}
	ps := sortPartitions(slices.Clone(b.Partitions))
	if limit > 0 && len(ps) > limit {
		return selection{}, []error{fmt.Errorf("tranche: backfill: %d chosen partitions, more than the limit of %d; split them, or raise MaxPartitions", len(ps), limit)}
	}
	s, err := selectionOf(ps)
	if err != nil {
		return selection{}, []error{fmt.Errorf("tranche: backfill: %w", err)}
	}
	return s, nil
}

// sortPartitions sorts ps by start and drops repetitions, in place.
func sortPartitions(ps []tranche.TimePartition) []tranche.TimePartition {
	slices.SortFunc(ps, func(a, b tranche.TimePartition) int { return a.Start.Compare(b.Start) })
	return slices.CompactFunc(ps, func(a, b tranche.TimePartition) bool { return a.Start.Equal(b.Start) })
}

// length is p's length, which varies across DST transitions and calendar
// months.
func length(p tranche.TimePartition) time.Duration { return p.End.Sub(p.Start) }
