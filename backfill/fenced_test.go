package backfill_test

import (
	"context"
	"errors"
	"iter"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/memledger"
)

// TestFencedWaitsForTaker: under WaitForOthers (and FailContinue: under
// FailStop the failure stops the run), a worker fenced from a
// partition (its heartbeats did not reach the ledger, its lease expired
// and another worker took the partition over) reports the failure as
// any worker does (a partition.failed event matching ErrFenced), and
// then waits for the worker that took the partition over, as for any
// partition held elsewhere: until that worker finishes it, when the
// partition stays failed here and Run returns ErrFenced; or, should that
// worker die, until its lease expires, when it takes the partition over
// in turn, runs it, and counts it by that run, succeeded. A run used to
// return at once, leaving a dead worker's partition running until the
// next run of the backfill. A worker whose lease lapsed by its own clock
// with no other worker taking the partition over (its heartbeats hang)
// fails it as before, and does not run it again in the same run.
//
// Each case runs with the held partitions read whole (Reader.Latest)
// and in brief (ledger.BriefReader), which tells no attempt's worker.
func TestFencedWaitsForTaker(t *testing.T) {
	for _, c := range []struct{ taker, reads string }{
		{"finishes", "whole"}, {"dies", "whole"}, {"none", "whole"},
		{"finishes", "brief"}, {"dies", "brief"}, {"none", "brief"},
	} {
		taker := c.taker
		t.Run(taker+"/"+c.reads, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mem := memledger.New(time.Now)
				gated := &bfGatedLedger{Ledger: mem}
				var hang atomic.Bool
				var l ledger.Ledger = gated
				if taker == "none" {
					l = &faultyLedger{Ledger: mem, hang: func(*ledger.Lease) bool { return hang.Load() }}
				}
				if c.reads == "brief" {
					l = briefing{Ledger: l, mem: mem}
				}
				entered := make(chan struct{})
				var calls atomic.Int64
				dag := leaseDAG(t, new(tranche.MemoryDestination), func(ctx context.Context, _ string) error {
					if calls.Add(1) > 1 {
						return nil
					}
					close(entered)
					<-ctx.Done() // until the worker learns that it was fenced
					return context.Cause(ctx)
				})
				var mu sync.Mutex
				var failed []error
				a := &backfill.Backfill{DAG: dag, Window: bfDays(t, 1, 1), Ledger: l, Worker: "A", WaitForOthers: true, OnFailure: tranche.FailContinue,
					Lease: time.Second, Heartbeat: 100 * time.Millisecond, OnEvent: func(_ context.Context, e tranche.Event) {
						if e.Kind == backfill.KindPartitionFailed {
							mu.Lock()
							failed = append(failed, e.Err)
							mu.Unlock()
						}
					}}
				id, err := a.ID()
				if err != nil {
					t.Fatal(err)
				}
				type result struct {
					rep *backfill.Report
					err error
					at  time.Time
				}
				done := make(chan result, 1)
				go func() {
					rep, err := a.Run(t.Context())
					done <- result{rep, err, time.Now()}
				}()
				<-entered
				dagID := backfill.DAGIdentity(dag, tranche.Day, time.UTC)
				p := bfDay(1)
				if taker == "none" {
					hang.Store(true)
					r := <-done
					if !errors.Is(r.err, tranche.ErrFenced) {
						t.Errorf("A: %v; want ErrFenced", r.err)
					}
					bfCheckReport(t, r.rep, backfill.Report{Total: 1, Failed: 1})
					if h, err := mem.History(t.Context(), dagID, p.Start); err != nil || len(h) != 1 || calls.Load() != 1 {
						t.Errorf("history %+v (%v), %d runs; want A's one attempt, not run again", h, err, calls.Load())
					}
					return
				}
				gated.drop.Store(true)
				time.Sleep(1500 * time.Millisecond) // A's lease expires
				lease, err := mem.Claim(t.Context(), ledger.ClaimRequest{DAG: dagID, Backfill: id, Worker: "B", RunID: backfill.RunID(dagID, p.Start, p.End),
					Partitions: []tranche.TimePartition{p}, Lease: 2 * time.Second, Policy: ledger.RerunFailed})
				if err != nil {
					t.Fatalf("B's takeover: %v", err)
				}
				gated.drop.Store(false) // A's next heartbeat finds B's attempt
				var finished time.Time
				if taker == "finishes" {
					time.Sleep(time.Second)
					if err := mem.Finish(t.Context(), lease, []ledger.Outcome{{State: ledger.StateSucceeded}}); err != nil {
						t.Fatal(err)
					}
					finished = time.Now()
				}
				var r result
				select {
				case r = <-done:
				case <-time.After(time.Minute):
					t.Fatal("A still running a minute later")
				}
				mu.Lock()
				if len(failed) != 1 || !errors.Is(failed[0], tranche.ErrFenced) {
					t.Errorf("A's partition.failed events: %v; want one, matching ErrFenced", failed)
				}
				mu.Unlock()
				h, err := mem.History(t.Context(), dagID, p.Start)
				if err != nil {
					t.Fatal(err)
				}
				if taker == "finishes" {
					if !errors.Is(r.err, tranche.ErrFenced) {
						t.Errorf("A: %v; want ErrFenced", r.err)
					}
					if r.at.Before(finished) {
						t.Errorf("A returned %v before B finished the partition; want it to wait for B", finished.Sub(r.at))
					}
					bfCheckReport(t, r.rep, backfill.Report{Total: 1, Failed: 1})
					if len(h) != 2 || h[1].Worker != "B" || h[1].State != ledger.StateSucceeded {
						t.Errorf("history %+v; want A's attempt taken over by B's, succeeded", h)
					}
					return
				}
				if r.err != nil {
					t.Errorf("A: %v; want nil, the partition taken over from B and run", r.err)
				}
				bfCheckReport(t, r.rep, backfill.Report{Total: 1, Succeeded: 1})
				if len(h) != 3 || h[1].Worker != "B" || h[1].State != ledger.StateFailed || h[1].Finished.Before(h[1].LeaseUntil) ||
					h[2].Worker != "A" || h[2].State != ledger.StateSucceeded {
					t.Errorf("history %+v; want B's attempt taken over by A once its lease expired, and A's succeeded", h)
				}
			})
		})
	}
}

// briefing gives a wrapped in-memory ledger its reads in brief back.
type briefing struct {
	ledger.Ledger
	mem *memledger.Ledger
}

func (b briefing) LatestBriefs(ctx context.Context, dag string, from, to time.Time) iter.Seq2[ledger.Brief, error] {
	return b.mem.LatestBriefs(ctx, dag, from, to)
}
