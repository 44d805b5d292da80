package backfill

import (
	"context"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/ledger"
)

// Status is the state of a backfill as its ledger records it.
type Status struct {
	Record ledger.BackfillRecord
	// Window is the backfill's window: for chosen partitions
	// (Record.Partitions), the span from the oldest to the newest.
	Window tranche.TimePartitionWindow

	// Counts counts the backfill's partitions by the state of their
	// latest attempt, matched as plans match them (a moved schedule's
	// slots by their fire); partitions never attempted are
	// StatePending.
	Counts map[ledger.State]int

	// Blocked says why the backfill is not progressing, if it is not:
	// partitions held by a worker, leases waiting to expire, a failure
	// that stopped it, a cancellation. Empty when it is done or running
	// freely.
	Blocked []string

	ledger ledger.Ledger
	sel    selection
	match  matcher
}

// Done reports whether every partition succeeded.
func (s *Status) Done() bool { return s.Counts[ledger.StateSucceeded] == s.sel.total }

// String summarizes the status in one line.
func (s *Status) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "backfill %s of %s:", s.Record.ID, s.Window)
	for _, st := range []ledger.State{ledger.StateSucceeded, ledger.StateRunning, ledger.StateFailed, ledger.StateCanceled, ledger.StatePending} {
		fmt.Fprintf(&b, " %d %s,", s.Counts[st], st)
	}
	out := strings.TrimSuffix(b.String(), ",")
	if s.Record.Canceled {
		out += " (canceled)"
	}
	return out
}

// statusOf returns the status of a backfill of the window and chosen
// partitions the record holds.
func statusOf(l ledger.Ledger, record ledger.BackfillRecord) (*Status, error) {
	w, err := tranche.ParseTimePartitionWindow(record.Window)
	if err != nil {
		return nil, fmt.Errorf("tranche: backfill %s: its recorded window: %w", record.ID, err)
	}
	sel := selection{window: w, total: w.Len()}
	if len(record.Partitions) > 0 {
		ps := make([]tranche.TimePartition, len(record.Partitions))
		for i, start := range record.Partitions {
			ps[i] = tranche.PartitionOf(w.Granularity(), start.In(w.Location()))
			if !ps[i].Start.Equal(start) || !w.Contains(start) {
				return nil, fmt.Errorf("tranche: backfill %s: its recorded partition %s is not a partition of window %s", record.ID, start.Format(time.RFC3339), w)
			}
		}
		if sel, err = selectionOf(sortPartitions(ps)); err != nil {
			return nil, fmt.Errorf("tranche: backfill %s: its recorded partitions: %w", record.ID, err)
		}
	}
	return &Status{Record: record, Window: sel.window, Counts: map[ledger.State]int{}, ledger: l, sel: sel,
		match: newMatcher(w.Granularity(), w.Location())}, nil
}

// PartitionStatus is one partition of a backfill with its latest attempt.
type PartitionStatus struct {
	Partition tranche.TimePartition
	State     ledger.State
	Latest    *ledger.Attempt // nil while pending
}

// Partitions streams the backfill's partitions newest first, each with
// its latest attempt as the ledger holds it now.
func (s *Status) Partitions(ctx context.Context) iter.Seq2[PartitionStatus, error] {
	return func(yield func(PartitionStatus, error) bool) {
		cfg := config{selection: s.sel}
		for batch := range cfg.batches(planBatch, NewestFirst) {
			parts := slices.Collect(batch.OldestFirst())
			latest := make([]*ledger.Attempt, len(parts))
			if err := readLatest(ctx, s.ledger, s.Record.DAG, s.match, parts, latest); err != nil {
				yield(PartitionStatus{}, err)
				return
			}
			for i := len(parts) - 1; i >= 0; i-- {
				ps := PartitionStatus{Partition: parts[i], State: ledger.StatePending}
				if a := latest[i]; a != nil {
					ps.State, ps.Latest = a.State, a
				}
				if !yield(ps, nil) {
					return
				}
			}
		}
	}
}

// StatusOf reads the state of backfill id from l, judging leases against
// now: counts per state, and why it is not progressing.
func StatusOf(ctx context.Context, l ledger.Ledger, id string, now time.Time) (*Status, error) {
	record, err := l.Backfill(ctx, id)
	if err != nil {
		return nil, err
	}
	s, err := statusOf(l, record)
	if err != nil {
		return nil, err
	}
	var held, expired []string
	var lastFailure *ledger.Attempt
	for ps, err := range s.Partitions(ctx) {
		if err != nil {
			return nil, err
		}
		s.Counts[ps.State]++
		a := ps.Latest
		switch {
		case a == nil:
		case a.State == ledger.StateRunning && now.Before(a.LeaseUntil):
			held = append(held, fmt.Sprintf("partition %s held by worker %s until %s", a.Key, a.Worker, a.LeaseUntil.Format(time.RFC3339)))
		case a.State == ledger.StateRunning:
			expired = append(expired, fmt.Sprintf("partition %s: the lease of worker %s expired at %s; the next worker to run the backfill takes it over",
				a.Key, a.Worker, a.LeaseUntil.Format(time.RFC3339)))
		case a.State == ledger.StateFailed || a.State == ledger.StateCanceled:
			if lastFailure == nil || a.Finished.After(lastFailure.Finished) {
				lastFailure = a
			}
		}
	}
	if record.Canceled {
		s.Blocked = append(s.Blocked, "canceled: workers claim nothing more until it is resumed (Backfill.Resume)")
	}
	s.Blocked = append(s.Blocked, held...)
	s.Blocked = append(s.Blocked, expired...)
	if lastFailure != nil && s.Counts[ledger.StatePending] > 0 && len(held) == 0 {
		s.Blocked = append(s.Blocked, fmt.Sprintf("stopped after the failure of partition %s by worker %s: %s",
			lastFailure.Key, lastFailure.Worker, lastFailure.Err))
	}
	return s, nil
}

// Watch yields the status of backfill id from l once at the start and then
// each time its counts change, checking every interval, until the backfill
// is done (every partition succeeded), ctx ends (yielding ctx's cause) or
// the caller stops. Leases are judged against the time of each check.
func Watch(ctx context.Context, l ledger.Ledger, id string, every time.Duration) iter.Seq2[*Status, error] {
	return func(yield func(*Status, error) bool) {
		if every <= 0 {
			yield(nil, fmt.Errorf("tranche: watch every %v; want a positive interval", every))
			return
		}
		tick := time.NewTicker(every)
		defer tick.Stop()
		var last *Status
		for {
			s, err := StatusOf(ctx, l, id, time.Now())
			if err != nil {
				yield(nil, err)
				return
			}
			if last == nil || !maps.Equal(s.Counts, last.Counts) || s.Record.Canceled != last.Record.Canceled {
				if !yield(s, nil) || s.Done() {
					return
				}
				last = s
			}
			select {
			case <-ctx.Done():
				yield(nil, context.Cause(ctx))
				return
			case <-tick.C:
			}
		}
	}
}
