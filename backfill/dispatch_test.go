package backfill_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/memledger"
)

// With concurrency above 1, a failure under FailStop stops only the
// partitions after it in the backfill's order: the one before it, which
// it may have overtaken, still runs (issue 18: each job was claimed in
// its own goroutine, so the second could be claimed and fail before the
// first was claimed, which then never ran: 9 runs in 10).
func TestBackfillFailStopKeepsOrder(t *testing.T) {
	for _, order := range []backfill.Order{backfill.OldestFirst, backfill.NewestFirst} {
		t.Run(order.String(), func(t *testing.T) {
			first, second := bfDay(1).Key(), bfDay(2).Key()
			if order == backfill.NewestFirst {
				first, second = bfDay(5).Key(), bfDay(4).Key()
			}
			for try := range 20 {
				failed := make(chan struct{})
				p := &bfProbe{hook: func(ctx context.Context, target string) error {
					switch target {
					case first:
						// The first waits for the failure of the second to
						// be recorded, so that the failure always overtakes
						// it.
						select {
						case <-failed:
						case <-time.After(5 * time.Second):
							return errors.New("the second partition did not fail")
						}
					case second:
						return errors.New("boom")
					}
					return nil
				}}
				b := &backfill.Backfill{DAG: bfDAG(t, p, false), Window: bfDays(t, 1, 5), Ledger: memledger.New(nil),
					Concurrency: 2, Order: order, OnFailure: tranche.FailStop,
					OnEvent: func(_ context.Context, e tranche.Event) {
						if e.Kind == backfill.KindPartitionFailed {
							close(failed)
						}
					}}
				rep, err := b.Run(t.Context())
				if err == nil {
					t.Fatalf("try %d: Run succeeded; want the failure of %s", try, second)
				}
				if rep.Succeeded != 1 || rep.Failed != 1 || rep.NotRun != 3 {
					t.Fatalf("try %d: %s (%v, ran %v); want %s succeeded, %s failed, the other 3 not run", try, rep, err, p.Calls(), first, second)
				}
				if calls := p.Calls(); !slices.Contains(calls, first) || len(calls) != 2 {
					t.Fatalf("try %d: ran %v; want %s and %s only", try, calls, first, second)
				}
			}
		})
	}
}

// Partitions claimed ahead of their runs and never started, because a
// failure stopped the backfill before them, are released: the ledger
// holds no attempt at them, so a later run with rerun policy none runs
// them.
func TestBackfillReleasesClaimedAhead(t *testing.T) {
	l := memledger.New(nil)
	const days = 28
	fail := bfDay(20).Key()
	p := &bfProbe{hook: func(_ context.Context, target string) error {
		if target == fail {
			return errors.New("boom")
		}
		return nil
	}}
	b := &backfill.Backfill{DAG: bfDAG(t, p, false), Window: bfDays(t, 1, days), Ledger: l, Order: backfill.OldestFirst, Rerun: ledger.RerunNone}
	rep, err := b.Run(t.Context())
	if err == nil || rep.Succeeded != 19 || rep.Failed != 1 || rep.NotRun != days-20 {
		t.Fatalf("Run: %v, %s; want days 1 to 19 succeeded, 20 failed, the rest not run", err, rep)
	}
	id := backfill.DAGIdentity(bfDAG(t, p, false), tranche.Day, time.UTC)
	for d := 21; d <= days; d++ {
		if h, err := l.History(t.Context(), id, bfDay(d).Start); err != nil || len(h) != 0 {
			t.Errorf("history of day %d: %v, %v; want none: a claim ahead that never ran is released", d, h, err)
		}
	}
	rep, err = b.Run(t.Context())
	if err != nil || rep.Succeeded != days-20 || rep.Skipped != 20 {
		t.Errorf("Run again under rerun policy none: %v, %s; want the %d days not run before to run", err, rep, days-20)
	}
}

// claimCounting counts a ledger's claims, of both kinds.
type claimCounting struct {
	ledger.Ledger
	claims, next atomic.Int64
}

func (c *claimCounting) Claim(ctx context.Context, req ledger.ClaimRequest) (*ledger.Lease, error) {
	c.claims.Add(1)
	return c.Ledger.Claim(ctx, req)
}

func (c *claimCounting) ClaimNext(ctx context.Context, req ledger.NextRequest) ([]ledger.Grant, error) {
	c.next.Add(1)
	return c.Ledger.ClaimNext(ctx, req)
}

// Workers sharing one backfill never race for a partition: each lands
// once, at its first attempt, and the claims are batches, far fewer than
// the partitions.
func TestBackfillSharedByWorkers(t *testing.T) {
	for _, workers := range []int{2, 8} {
		t.Run(fmt.Sprint(workers, " workers"), func(t *testing.T) {
			l := &claimCounting{Ledger: memledger.New(nil)}
			p := new(bfProbe)
			w, err := tranche.NewTimePartitionWindow(tranche.Day, bfDay(1).Start, bfDay(1).Start.AddDate(1, 0, 0))
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			reports := make([]*backfill.Report, workers)
			for i := range workers {
				wg.Go(func() {
					b := &backfill.Backfill{DAG: bfDAG(t, p, false), Window: w, Ledger: l, Worker: fmt.Sprint("w", i), Concurrency: 2, WaitForOthers: true}
					rep, err := b.Run(t.Context())
					if err != nil {
						t.Errorf("worker %d: %v", i, err)
					}
					reports[i] = rep
				})
			}
			wg.Wait()
			calls := p.Calls()
			runs := map[string]int{}
			for _, c := range calls {
				runs[c]++
			}
			for k, n := range runs {
				if n != 1 {
					t.Errorf("%s ran %d times", k, n)
				}
			}
			if len(runs) != w.Len() {
				t.Errorf("%d partitions ran; want %d", len(runs), w.Len())
			}
			ran := 0
			for _, r := range reports {
				if r != nil {
					ran += r.Succeeded
				}
			}
			if ran != w.Len() {
				t.Errorf("the workers report %d succeeded; want %d", ran, w.Len())
			}
			id := backfill.DAGIdentity(bfDAG(t, p, false), tranche.Day, time.UTC)
			for a, err := range l.Latest(t.Context(), id, w.Start(), w.End()) {
				if err != nil || a.Number != 1 || a.State != ledger.StateSucceeded {
					t.Fatalf("latest attempt %+v, %v; want attempt 1 succeeded at every partition", a, err)
				}
			}
			if next, claims := l.next.Load(), l.claims.Load(); next+claims > int64(w.Len())/2 {
				t.Errorf("%d ClaimNext and %d Claim calls for %d partitions; want batches", next, claims, w.Len())
			}
			t.Logf("%d ClaimNext and %d Claim calls for %d partitions", l.next.Load(), l.claims.Load(), w.Len())
		})
	}
}

// readCounting is the in-memory ledger, its reads of latest attempts
// counted: whole (Latest) and in brief (LatestBriefs).
type readCounting struct {
	*memledger.Ledger
	whole, brief atomic.Int64
}

func (c *readCounting) Latest(ctx context.Context, dag string, from, to time.Time) iter.Seq2[ledger.Attempt, error] {
	c.whole.Add(1)
	return c.Ledger.Latest(ctx, dag, from, to)
}

func (c *readCounting) LatestBriefs(ctx context.Context, dag string, from, to time.Time) iter.Seq2[ledger.Brief, error] {
	c.brief.Add(1)
	return c.Ledger.LatestBriefs(ctx, dag, from, to)
}

// Workers that wait for each other read what the others hold in brief,
// where the ledger reads briefs: every worker reads each partition the
// others ran, and the holders' names and the attempts' other strings,
// which only a worker that judges the holders' leases needs, were most
// of the cost. The backfill still lands every partition once.
func TestWaitingWorkersReadBriefs(t *testing.T) {
	l := &readCounting{Ledger: memledger.New(nil)}
	p := new(bfProbe)
	w, err := tranche.NewTimePartitionWindow(tranche.Day, bfDay(1).Start, bfDay(1).Start.AddDate(1, 0, 0))
	if err != nil {
		t.Fatal(err)
	}
	const workers = 4
	var wg sync.WaitGroup
	var elsewhere atomic.Int64
	for i := range workers {
		wg.Go(func() {
			b := &backfill.Backfill{DAG: bfDAG(t, p, false), Window: w, Ledger: l, Worker: fmt.Sprint("w", i), WaitForOthers: true}
			rep, err := b.Run(t.Context())
			if err != nil {
				t.Errorf("worker %d: %v", i, err)
				return
			}
			elsewhere.Add(int64(rep.Elsewhere))
		})
	}
	wg.Wait()
	if calls := p.Calls(); len(calls) != w.Len() || len(slices.Compact(slices.Sorted(slices.Values(calls)))) != w.Len() {
		t.Errorf("%d partitions materialized; want each of %d once", len(calls), w.Len())
	}
	if elsewhere.Load() == 0 {
		t.Fatal("no worker counted a partition done elsewhere: nothing was held, the test tests nothing")
	}
	// Each worker's scan reads the year whole, in one batch: the
	// settling of what the others held reads nothing else whole.
	if whole, brief := l.whole.Load(), l.brief.Load(); whole != workers || brief == 0 {
		t.Errorf("the workers read latest attempts whole %d times and in brief %d times; want %d whole (their scans), the rest in brief", whole, brief, workers)
	}
}
