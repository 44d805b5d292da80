package backfill_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/memledger"
)

// TestSkewedWorkerClock runs a worker whose clock (Backfill.Now) is five
// minutes behind, or ahead of, the ledger's, waiting for a partition
// another worker holds under a short lease: it takes the partition over
// once the lease expires by the ledger's clock, not five minutes later
// (behind: the lease would look live until its own clock passed it), and
// never before (ahead: the ledger refuses, and the history shows the
// takeover after the lease). The ledger's clock is the machine's; the
// worker's is shifted, as on another machine.
func TestSkewedWorkerClock(t *testing.T) {
	for _, skew := range []time.Duration{-5 * time.Minute, 5 * time.Minute} {
		t.Run(fmt.Sprint(skew), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := memledger.New(time.Now)
				dag := leaseDAG(t, new(tranche.MemoryDestination), func(context.Context, string) error { return nil })
				b := &backfill.Backfill{DAG: dag, Window: bfDays(t, 1, 3), Ledger: l, Worker: "skewed", WaitForOthers: true,
					Now: func() time.Time { return time.Now().Add(skew) }, Lease: time.Second, Heartbeat: 100 * time.Millisecond}
				id, err := b.ID()
				if err != nil {
					t.Fatal(err)
				}
				dagID := backfill.DAGIdentity(dag, tranche.Day, time.UTC)
				p := bfDay(2)
				const held = 500 * time.Millisecond
				if _, err := l.Claim(t.Context(), ledger.ClaimRequest{DAG: dagID, Backfill: id, Worker: "other", RunID: backfill.RunID(dagID, p.Start, p.End),
					Partitions: []tranche.TimePartition{p}, Lease: held, Policy: ledger.RerunFailed}); err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
				defer cancel()
				start := time.Now()
				rep, err := b.Run(ctx)
				took := time.Since(start)
				if err != nil || rep.Succeeded != 3 {
					t.Fatalf("Run after %v: %+v, %v; want the 3 partitions succeeded, the held one taken over once its lease expired", took, rep, err)
				}
				h, err := l.History(t.Context(), dagID, p.Start)
				if err != nil {
					t.Fatal(err)
				}
				if len(h) != 2 || h[0].Worker != "other" || h[0].State != ledger.StateFailed || h[0].Finished.Before(h[0].LeaseUntil) || h[1].Worker != "skewed" {
					t.Fatalf("history of %s: %+v; want other's attempt taken over by skewed after its lease", p.Key(), h)
				}
				if late := h[0].Finished.Sub(h[0].LeaseUntil); late > 2*time.Second {
					t.Errorf("taken over %v after the lease expired by the ledger's clock; want within a heartbeat or so", late)
				}
			})
		})
	}
}

// A run that does not wait for others settles the partitions they hold
// in one round. When every other partition is done, a worker whose
// clock is minutes behind has claimed nothing that would show it the
// ledger's clock; that round must still try the held partition whose
// lease expired, or a worker that runs again and again (as a replica
// loop does, each run shorter than a heartbeat) never takes it over.
func TestSkewedWorkerTakesOverWithoutWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := memledger.New(time.Now)
		dag := leaseDAG(t, new(tranche.MemoryDestination), func(context.Context, string) error { return nil })
		b := &backfill.Backfill{DAG: dag, Window: bfDays(t, 1, 1), Ledger: l, Worker: "behind",
			Now: func() time.Time { return time.Now().Add(-5 * time.Minute) }, Lease: time.Minute, Heartbeat: 20 * time.Second}
		id, err := b.ID()
		if err != nil {
			t.Fatal(err)
		}
		dagID := backfill.DAGIdentity(dag, tranche.Day, time.UTC)
		p := bfDay(1)
		if _, err := l.Claim(t.Context(), ledger.ClaimRequest{DAG: dagID, Backfill: id, Worker: "stopped", RunID: backfill.RunID(dagID, p.Start, p.End),
			Partitions: []tranche.TimePartition{p}, Lease: time.Millisecond, Policy: ledger.RerunFailed}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
		rep, err := b.Run(t.Context())
		if err != nil || rep.Succeeded != 1 || rep.Held != 0 {
			t.Fatalf("Run: %+v, %v; want the partition whose lease expired taken over in the one round", rep, err)
		}
	})
}
