package backfill

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/memledger"
)

// TestSortHeldProbesLeaseEndedAtAttemptsClock: before any claim has
// shown the ledger's clock, a held partition whose lease ends exactly at
// the latest time the attempts read show (a lease is live only before its
// end, as ledger.ClaimRequest.Judge says) is tried at once, not left to
// wait zero, which made settleHeld read the ledger in a loop for up to a
// heartbeat interval.
func TestSortHeldProbesLeaseEndedAtAttemptsClock(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 1, 10, 0, 0, 0, 0, time.UTC)
	clock := t0
	l := memledger.New(func() time.Time { return clock })
	w, err := tranche.NewTimePartitionWindow(tranche.Day, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	parts := slices.Collect(w.All())
	const dag, lease = "dag", time.Minute
	held, err := l.Claim(ctx, ledger.ClaimRequest{DAG: dag, Worker: "other", RunID: "r1", Partitions: parts[:1], Lease: lease})
	if err != nil {
		t.Fatal(err)
	}
	done, err := l.Claim(ctx, ledger.ClaimRequest{DAG: dag, Worker: "other", RunID: "r2", Partitions: parts[1:2], Lease: lease})
	if err != nil {
		t.Fatal(err)
	}
	clock = held.Until // the second finishes as the first's lease ends
	if err := l.Finish(ctx, done, []ledger.Outcome{{State: ledger.StateSucceeded}}); err != nil {
		t.Fatal(err)
	}
	x := &execution{
		b:      &Backfill{Ledger: l, Now: func() time.Time { return t0 }},
		cfg:    &config{dag: dag, lease: lease, heartbeat: time.Hour, selection: selection{window: w, total: len(parts)}},
		probed: time.Now(),
	}
	run, waiting, wait, err := x.sortHeld(ctx, []int64{parts[0].Start.UnixNano(), parts[1].Start.UnixNano()}, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(run) != 1 || !run[0].p.Start.Equal(parts[0].Start) {
		t.Fatalf("run %v, waiting %d for %v: want %s tried, its lease ended by the attempts' clock", run, len(waiting), wait, parts[0].Key())
	}
}
