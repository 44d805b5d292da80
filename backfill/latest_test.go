package backfill_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"math"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"pgregory.net/rapid"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/internal/proctest"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/memledger"
)

// hidden is a ledger without its optional interfaces: StatusOf, Grid and
// Plan read every latest attempt from it, the old path.
type hidden struct{ ledger.Ledger }

// The status, grid and plan of a backfill agree whether they are counted
// by the ledger (ledger.LatestReader) or read from every latest attempt,
// over random histories of claims, takeovers and finishes in and around
// the backfill, for whole windows and chosen partitions, chunks, rerun
// policies and instants: across the end of daylight saving time, so that
// cells of days hold 23, 24 or 25 hours.
func TestLatestReaderAgreesWithLatest(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	dag, err := tranche.NewDAG(tranche.Asset{Name: "hits",
		Partitioning: tranche.Partitioning{Granularity: tranche.Hour, Location: ny, AllowWindow: true},
		Materialize:  func(context.Context, *tranche.Materialization) ([]tranche.Row, error) { return nil, nil }})
	if err != nil {
		t.Fatal(err)
	}
	id := backfill.DAGIdentity(dag, tranche.Hour, ny)
	first := time.Date(2026, 10, 30, 20, 0, 0, 0, ny)
	hour := func(i int) tranche.TimePartition {
		return tranche.PartitionOf(tranche.Hour, first.Add(time.Duration(i)*time.Hour))
	}
	rapid.Check(t, func(rt *rapid.T) {
		ctx := context.Background()
		clock := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
		now := func() time.Time { return clock }
		lg := memledger.New(now)

		// A window of a few hours, in small chunks; or, one case in
		// four, one of thousands in chunks that straddle the scan's
		// batches of 4,096 partitions, with history spread over it.
		lo := rapid.IntRange(0, 40).Draw(rt, "first hour")
		n := rapid.IntRange(1, 80).Draw(rt, "hours")
		chunk := rapid.IntRange(1, 4).Draw(rt, "chunk")
		scale := 1
		if rapid.IntRange(0, 3).Draw(rt, "wide") == 0 {
			n = rapid.IntRange(4000, 9000).Draw(rt, "wide hours")
			chunk = rapid.SampledFrom([]int{2, 3, 7, 10, 1000, 2049, 4095, 4096, 4097, 5000}).Draw(rt, "wide chunk")
			scale = n / 80
		}
		b := &backfill.Backfill{DAG: dag, Ledger: lg, Worker: "planner", Now: now, ChunkSize: chunk, MaxPartitions: n,
			Rerun: rapid.SampledFrom([]ledger.RerunPolicy{ledger.RerunNone, ledger.RerunFailed, ledger.RerunAll}).Draw(rt, "rerun")}
		w, err := tranche.NewTimePartitionWindow(tranche.Hour, hour(lo).Start, hour(lo+n-1).Start)
		if err != nil {
			rt.Fatal(err)
		}
		var starts []time.Time
		if rapid.Bool().Draw(rt, "chosen") {
			for i := range n {
				if rapid.Bool().Draw(rt, "choose") || i == 0 {
					b.Partitions = append(b.Partitions, hour(lo+i))
					starts = append(starts, hour(lo+i).Start)
				}
			}
		} else {
			b.Window = w
		}
		bid, err := b.ID()
		if err != nil {
			rt.Fatal(err)
		}
		if _, err := lg.PutBackfill(ctx, ledger.BackfillRecord{ID: bid, DAG: id, Window: w.String(), Partitions: starts, Chunk: b.ChunkSize}); err != nil {
			rt.Fatal(err)
		}

		var leases []*ledger.Lease
		for range rapid.IntRange(0, 60).Draw(rt, "steps") {
			switch rapid.IntRange(0, 3).Draw(rt, "op") {
			case 0, 1:
				i := rapid.IntRange(0, 130).Draw(rt, "hour")*scale + rapid.IntRange(0, scale-1).Draw(rt, "hour within")
				ps := []tranche.TimePartition{hour(i)}
				for range rapid.IntRange(0, 3).Draw(rt, "more") {
					ps = append(ps, hour(i+len(ps)))
				}
				lease, err := lg.Claim(ctx, ledger.ClaimRequest{DAG: id, Backfill: bid, Worker: rapid.SampledFrom([]string{"a", "b"}).Draw(rt, "worker"),
					Partitions: ps, Lease: time.Minute, Policy: ledger.RerunAll, Revision: 1 << 40})
				if err == nil {
					leases = append(leases, lease)
				} else if !errors.Is(err, ledger.ErrNotClaimable) {
					rt.Fatal(err)
				}
			case 2:
				if len(leases) == 0 {
					continue
				}
				k := rapid.IntRange(0, len(leases)-1).Draw(rt, "lease")
				out := make([]ledger.Outcome, len(leases[k].Partitions))
				for i := range out {
					out[i] = ledger.Outcome{State: rapid.SampledFrom([]ledger.State{ledger.StateSucceeded, ledger.StateFailed, ledger.StateCanceled}).Draw(rt, "state"),
						Err: fmt.Sprint("boom ", i)}
				}
				if err := lg.Finish(ctx, leases[k], out); err != nil && !errors.Is(err, ledger.ErrFenced) {
					rt.Fatal(err)
				}
				leases = slices.Delete(leases, k, k+1)
			case 3:
				clock = clock.Add(time.Duration(rapid.IntRange(1, 90).Draw(rt, "seconds")) * time.Second)
			}
		}
		if rapid.Bool().Draw(rt, "canceled") {
			if err := lg.CancelBackfill(ctx, bid, ledger.CancelOptions{}); err != nil {
				rt.Fatal(err)
			}
		}

		at := clock.Add(time.Duration(rapid.IntRange(-60, 60).Draw(rt, "now offset")) * time.Second)
		proctest.RequireReadsAgree(rt, ctx, b, bid, at, rapid.IntRange(1, 90).Draw(rt, "cells"))
	})
}

// counting is a ledger that counts the calls made to it, and the ranges
// of those that take ranges.
type counting struct {
	ledger.Ledger
	lr ledger.LatestReader

	mu     sync.Mutex
	calls  map[string]int
	ranges map[string]int
	times  []time.Time // when each check came (its read of the backfill's record), for the last take
}

func newCounting(l *memledger.Ledger) *counting {
	return &counting{Ledger: l, lr: l, calls: map[string]int{}, ranges: map[string]int{}}
}

func (c *counting) count(name string, ranges int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls[name]++
	c.ranges[name] += ranges
	if name == "Backfill" {
		c.times = append(c.times, time.Now())
	}
}

// gap returns the shortest time between two checks since the last take:
// each check starts with a read of the backfill's record.
func (c *counting) gap() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	gap := time.Duration(math.MaxInt64)
	for i := 1; i < len(c.times); i++ {
		gap = min(gap, c.times[i].Sub(c.times[i-1]))
	}
	return gap
}

// waitFor waits until name has been called n times since the last take,
// polling: a loaded machine may run the watch's checks far apart, and a
// test that slept a fixed time would count too few of them.
func (c *counting) waitFor(t *testing.T, name string, n int) {
	t.Helper()
	for start := time.Now(); ; time.Sleep(time.Millisecond) {
		c.mu.Lock()
		got := c.calls[name]
		c.mu.Unlock()
		if got >= n {
			return
		}
		if time.Since(start) > time.Minute {
			t.Fatalf("%d calls of %s in a minute; want %d", got, name, n)
		}
	}
}

// take returns the counts since the last take and clears them.
func (c *counting) take() (calls, ranges map[string]int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	calls, ranges = c.calls, c.ranges
	c.calls, c.ranges, c.times = map[string]int{}, map[string]int{}, c.times[len(c.times)-min(1, len(c.times)):]
	return calls, ranges
}

func (c *counting) Latest(ctx context.Context, dag string, from, to time.Time) iter.Seq2[ledger.Attempt, error] {
	c.count("Latest", 1)
	return c.Ledger.Latest(ctx, dag, from, to)
}

func (c *counting) Backfill(ctx context.Context, id string) (ledger.BackfillRecord, error) {
	c.count("Backfill", 0)
	return c.Ledger.Backfill(ctx, id)
}

func (c *counting) Revision(ctx context.Context, dag string) (int64, error) {
	c.count("Revision", 0)
	return c.Ledger.Revision(ctx, dag)
}

func (c *counting) RevisionIn(ctx context.Context, dag string, from, to time.Time, after int64) (int64, error) {
	c.count("RevisionIn", 1)
	return c.Ledger.RevisionIn(ctx, dag, from, to, after)
}

func (c *counting) CountLatest(ctx context.Context, req ledger.CountRequest) ([]ledger.LatestCount, error) {
	c.count("CountLatest", len(req.Ranges))
	return c.lr.CountLatest(ctx, req)
}

func (c *counting) FindLatest(ctx context.Context, req ledger.FindRequest) iter.Seq2[ledger.Attempt, error] {
	c.count("FindLatest", len(req.Ranges))
	return c.lr.FindLatest(ctx, req)
}

func (c *counting) ChangedIn(ctx context.Context, dag string, from, to time.Time, after int64) ([]time.Time, error) {
	c.count("ChangedIn", 1)
	return c.lr.ChangedIn(ctx, dag, from, to, after)
}

// Watch on a running backfill of 100,000 partitions calls the ledger at
// most once an interval, and costs it two point reads a check while
// nothing changes (the record, and RevisionIn
// over the backfill's range), and after a change reads the partitions
// that changed and counts again only the spans that hold them: never
// every latest attempt.
func TestWatchReadsOnlyChanges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 100_000
		dag, w := proctest.Hourly(t, n)
		id := backfill.DAGIdentity(dag, tranche.Hour, time.UTC)
		mem := memledger.New(nil)
		l := newCounting(mem)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		bid := backfill.ID(id, w, 1)
		if _, err := mem.PutBackfill(ctx, ledger.BackfillRecord{ID: bid, DAG: id, Window: w.String(), Chunk: 1}); err != nil {
			t.Fatal(err)
		}
		// Half the window done.
		half, err := tranche.NewTimePartitionWindow(tranche.Hour, w.Start(), w.Start().Add(n/2*time.Hour-time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		proctest.Fill(t, mem, id, half, "host-1")

		const every = 2 * time.Millisecond
		statuses := make(chan *backfill.Status)
		go func() {
			defer close(statuses)
			for s, err := range backfill.Watch(ctx, l, bid, every) {
				if err != nil {
					return
				}
				statuses <- s
			}
		}()
		first := <-statuses
		if got := first.Counts[ledger.StatePending]; got != n/2 {
			t.Fatalf("first status: %v; want %d pending", first.Counts, n/2)
		}
		calls, ranges := l.take()
		// One count of the window in the watch's 256 spans (of 391 hours,
		// "400" below), each of which a change may count again alone.
		if calls["Latest"] != 0 || calls["CountLatest"] != 1 || ranges["CountLatest"] != 256 {
			t.Errorf("the first status: calls %v, ranges %v; want one CountLatest of the window's 256 spans, no Latest", calls, ranges)
		}

		// Nothing changes: each check is a Backfill and a RevisionIn, each
		// check at least an interval after the one before.
		l.waitFor(t, "RevisionIn", 5)
		if gap := l.gap(); gap < every {
			t.Errorf("checks %v apart; want at most one an interval (%v)", gap, every)
		}
		calls, _ = l.take()
		checks := calls["RevisionIn"]
		if checks < 5 || calls["Backfill"] > checks+1 || len(calls) > 2 {
			t.Errorf("while nothing changed: calls %v; want a Backfill and a RevisionIn a check, nothing else", calls)
		}

		// A worker runs ten partitions of the second half: each change is
		// read, and one span of 400 partitions counted again.
		next := tranche.PartitionOf(tranche.Hour, w.Start().Add(n/2*time.Hour))
		for i := range 10 {
			p := tranche.PartitionOf(tranche.Hour, next.Start.Add(time.Duration(i)*time.Hour))
			lease, err := mem.Claim(ctx, ledger.ClaimRequest{DAG: id, Backfill: bid, Worker: "w", Partitions: []tranche.TimePartition{p}, Lease: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			if err := mem.Finish(ctx, lease, []ledger.Outcome{{State: ledger.StateSucceeded}}); err != nil {
				t.Fatal(err)
			}
			for s := range statuses {
				if s.Counts[ledger.StateSucceeded] == n/2-n/20+i+1 {
					break
				}
			}
		}
		if gap := l.gap(); gap < every {
			t.Errorf("while a worker ran: checks %v apart; want at most one an interval (%v)", gap, every)
		}
		calls, ranges = l.take()
		if calls["Latest"] != 0 || calls["ChangedIn"] == 0 || ranges["CountLatest"] > calls["ChangedIn"] {
			t.Errorf("while a worker ran: calls %v, ranges %v; want no Latest, and a span counted again per change at most", calls, ranges)
		}
		cancel()
		for range statuses {
		}
	})
}

// A plan in chunks counts each chunk through CountLatest and reads
// partition by partition only the chunks whose counts leave their runs
// open: none for a history that fails every tenth partition (each chunk
// of ten then holds one partition to run), and the one chunk that holds
// two partitions to run among others.
func TestChunkedPlanReadsOnlyMixedChunks(t *testing.T) {
	const n = 20_000
	dag, err := tranche.NewDAG(tranche.Asset{Name: "events",
		Partitioning: tranche.Partitioning{Granularity: tranche.Hour, Location: time.UTC, AllowWindow: true},
		Materialize:  func(context.Context, *tranche.Materialization) ([]tranche.Row, error) { return nil, nil }})
	if err != nil {
		t.Fatal(err)
	}
	_, w := proctest.Hourly(t, n)
	id := backfill.DAGIdentity(dag, tranche.Hour, time.UTC)
	mem := memledger.New(nil)
	proctest.Fill(t, mem, id, w, "host-1")
	l := newCounting(mem)
	b := &backfill.Backfill{DAG: dag, Window: w, Ledger: l, ChunkSize: 10}
	ctx := t.Context()

	plan, err := b.Plan(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := (backfill.PlanCounts{Total: n, Run: n / 10, SkipSucceeded: n - n/10, Runs: n / 10}); plan.Counts != want {
		t.Errorf("plan counts %+v; want %+v", plan.Counts, want)
	}
	if calls, _ := l.take(); calls["Latest"] != 0 || calls["CountLatest"] == 0 {
		t.Errorf("a plan whose chunks each hold one partition to run: calls %v; want CountLatest, no Latest", calls)
	}

	// One more failure, in the middle of a chunk: that chunk splits into
	// two runs, and is the only one read.
	p := tranche.PartitionOf(tranche.Hour, w.Start().Add(5005*time.Hour))
	lease, err := mem.Claim(ctx, ledger.ClaimRequest{DAG: id, Worker: "w", Partitions: []tranche.TimePartition{p}, Lease: time.Minute, Policy: ledger.RerunAll, Revision: 1 << 40})
	if err != nil {
		t.Fatal(err)
	}
	if err := mem.Finish(ctx, lease, []ledger.Outcome{{State: ledger.StateFailed, Err: "boom"}}); err != nil {
		t.Fatal(err)
	}
	l.take()
	plan, err = b.Plan(ctx)
	if err != nil {
		t.Fatal(err)
	}
	slow, err := (&backfill.Backfill{DAG: dag, Window: w, Ledger: hidden{mem}, ChunkSize: 10}).Plan(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if plan.Counts != slow.Counts || plan.Counts.Run != n/10+1 {
		t.Errorf("plan counts %+v; read from every attempt %+v, with %d to run", plan.Counts, slow.Counts, n/10+1)
	}
	if calls, _ := l.take(); calls["Latest"] != 1 {
		t.Errorf("a plan with one chunk of two runs: calls %v; want one Latest", calls)
	}
}
