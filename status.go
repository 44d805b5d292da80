package tranche

import (
	"context"
	"fmt"
	"iter"
	"strings"
	"time"
)

// BackfillStatus is the state of a backfill as its ledger records it.
type BackfillStatus struct {
	Record BackfillRecord
	Window TimePartitionWindow

	// Counts counts the window's partitions by the state of their latest
	// attempt; partitions never attempted are StatePending.
	Counts map[State]int

	// Blocked says why the backfill is not progressing, if it is not:
	// partitions held by a worker, leases waiting to expire, a failure
	// that stopped it, a cancellation. Empty when it is done or running
	// freely.
	Blocked []string

	ledger Ledger
}

// Done reports whether every partition succeeded.
func (s *BackfillStatus) Done() bool { return s.Counts[StateSucceeded] == s.Window.Len() }

// String summarizes the status in one line.
func (s *BackfillStatus) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "backfill %s of %s:", s.Record.ID, s.Window)
	for _, st := range []State{StateSucceeded, StateRunning, StateFailed, StateCanceled, StatePending} {
		fmt.Fprintf(&b, " %d %s,", s.Counts[st], st)
	}
	out := strings.TrimSuffix(b.String(), ",")
	if s.Record.Canceled {
		out += " (canceled)"
	}
	return out
}

// PartitionStatus is one partition of a backfill with its latest attempt.
type PartitionStatus struct {
	Partition TimePartition
	State     State
	Latest    *Attempt // nil while pending
}

// Partitions streams the window's partitions newest first, each with its
// latest attempt as the ledger holds it now.
func (s *BackfillStatus) Partitions(ctx context.Context) iter.Seq2[PartitionStatus, error] {
	return func(yield func(PartitionStatus, error) bool) {
		for batch := range s.Window.Chunks(planBatch) {
			latest := map[int64]Attempt{}
			for a, err := range s.ledger.Latest(ctx, s.Record.DAG, batch.Start(), batch.End()) {
				if err != nil {
					yield(PartitionStatus{}, err)
					return
				}
				latest[a.Start.Unix()] = a
			}
			for p := range batch.All() {
				ps := PartitionStatus{Partition: p, State: StatePending}
				if a, ok := latest[p.Start.Unix()]; ok {
					ps.State, ps.Latest = a.State, &a
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
func StatusOf(ctx context.Context, l Ledger, id string, now time.Time) (*BackfillStatus, error) {
	record, err := l.Backfill(ctx, id)
	if err != nil {
		return nil, err
	}
	w, err := ParseTimePartitionWindow(record.Window)
	if err != nil {
		return nil, fmt.Errorf("tranche: backfill %s: its recorded window: %w", id, err)
	}
	s := &BackfillStatus{Record: record, Window: w, Counts: map[State]int{}, ledger: l}
	var held, expired []string
	var lastFailure *Attempt
	for ps, err := range s.Partitions(ctx) {
		if err != nil {
			return nil, err
		}
		s.Counts[ps.State]++
		a := ps.Latest
		switch {
		case a == nil:
		case a.State == StateRunning && now.Before(a.LeaseUntil):
			held = append(held, fmt.Sprintf("partition %s held by worker %s until %s", a.Key, a.Worker, a.LeaseUntil.Format(time.RFC3339)))
		case a.State == StateRunning:
			expired = append(expired, fmt.Sprintf("partition %s: the lease of worker %s expired at %s; the next worker to run the backfill takes it over",
				a.Key, a.Worker, a.LeaseUntil.Format(time.RFC3339)))
		case a.State == StateFailed || a.State == StateCanceled:
			if lastFailure == nil || a.Finished.After(lastFailure.Finished) {
				lastFailure = a
			}
		}
	}
	if record.Canceled {
		s.Blocked = append(s.Blocked, "canceled: workers claim nothing more")
	}
	s.Blocked = append(s.Blocked, held...)
	s.Blocked = append(s.Blocked, expired...)
	if lastFailure != nil && s.Counts[StatePending] > 0 && len(held) == 0 {
		s.Blocked = append(s.Blocked, fmt.Sprintf("stopped after the failure of partition %s by worker %s: %s",
			lastFailure.Key, lastFailure.Worker, lastFailure.Err))
	}
	return s, nil
}
