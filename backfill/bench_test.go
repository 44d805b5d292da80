package backfill_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/memledger"
)

// bfMinuteDAG is one asset of minutes that does nothing.
func bfMinuteDAG(tb testing.TB) *tranche.DAG {
	tb.Helper()
	dag, err := tranche.NewDAG(tranche.Asset{
		Name:         "ticks",
		Partitioning: tranche.Partitioning{Granularity: tranche.Minute, Location: time.UTC},
		Materialize:  func(context.Context, *tranche.Materialization) ([]tranche.Row, error) { return nil, nil },
	})
	if err != nil {
		tb.Fatal(err)
	}
	return dag
}

// bfMinutes is the window of n minutes from 2024-01-01 in UTC.
func bfMinutes(tb testing.TB, n int) tranche.TimePartitionWindow {
	tb.Helper()
	start := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	w, err := tranche.NewTimePartitionWindow(tranche.Minute, start, start.Add(time.Duration(n-1)*time.Minute))
	if err != nil {
		tb.Fatal(err)
	}
	return w
}

// bfLiveHeap returns the bytes in use after a collection.
func bfLiveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// scanned hides the optional ledger.LatestReader of the ledger it
// wraps, so that a plan scans every partition, as it does from a ledger
// without the interface, rather than counting.
type scanned struct{ ledger.Ledger }

// BenchmarkPlanMillionMinutes plans a backfill of 1,000,000 minutes
// against an in-memory ledger: empty, and holding a succeeded attempt
// for every tenth minute; counted through the ledger's
// ledger.LatestReader, and scanned (the -scanned cases) as from a
// ledger without it. It reports the growth of the live heap across the
// plan (which must not grow with the window: the scan streams).
func BenchmarkPlanMillionMinutes(b *testing.B) {
	const n = 1_000_000
	dag := bfMinuteDAG(b)
	w := bfMinutes(b, n)
	for _, tc := range []struct {
		name  string
		every int // a succeeded attempt every so many minutes; 0 for none
		scan  bool
	}{{"empty", 0, false}, {"tenth-succeeded", 10, false}, {"empty-scanned", 0, true}, {"tenth-succeeded-scanned", 10, true}} {
		b.Run(tc.name, func(b *testing.B) {
			mem := memledger.New(nil)
			var l ledger.Ledger = mem
			if tc.scan {
				l = scanned{mem}
			}
			if tc.every > 0 {
				dagID := backfill.DAGIdentity(dag, tranche.Minute, time.UTC)
				i := 0
				for p := range w.OldestFirst() {
					if i++; i%tc.every != 0 {
						continue
					}
					lease, err := l.Claim(context.Background(), ledger.ClaimRequest{DAG: dagID, Worker: "seed", RunID: "seed",
						Partitions: []tranche.TimePartition{p}, Lease: time.Hour, Policy: ledger.RerunAll})
					if err != nil {
						b.Fatal(err)
					}
					if err := l.Finish(context.Background(), lease, []ledger.Outcome{{State: ledger.StateSucceeded}}); err != nil {
						b.Fatal(err)
					}
				}
			}
			bf := &backfill.Backfill{DAG: dag, Window: w, Ledger: l, MaxPartitions: n}
			before := bfLiveHeap()
			b.ReportAllocs()
			var plan *backfill.Plan
			for b.Loop() {
				var err error
				if plan, err = bf.Plan(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			want := n
			if tc.every > 0 {
				want -= n / tc.every
			}
			if plan.Counts.Total != n || plan.Counts.Run != want {
				b.Fatalf("plan counts %+v", plan.Counts)
			}
			after := bfLiveHeap()
			b.ReportMetric(float64(int64(after)-int64(before))/(1<<20), "MB-live-growth")
			if int64(after)-int64(before) > 8<<20 {
				b.Errorf("live heap grew by %d bytes across the plan", int64(after)-int64(before))
			}
		})
	}
}

// BenchmarkPlanMillionMinutesPeak samples the heap in use while one
// scanned plan of 1,000,000 minutes is made, against the heap before:
// the scan holds one batch of partitions at a time.
func BenchmarkPlanMillionMinutesPeak(b *testing.B) {
	const n = 1_000_000
	bf := &backfill.Backfill{DAG: bfMinuteDAG(b), Window: bfMinutes(b, n), Ledger: scanned{memledger.New(nil)}, MaxPartitions: n}
	var peak uint64
	for b.Loop() {
		b.StopTimer()
		before := bfLiveHeap()
		done := make(chan struct{})
		sampled := make(chan uint64)
		go func() {
			var m runtime.MemStats
			var top uint64
			for {
				runtime.ReadMemStats(&m)
				top = max(top, m.HeapInuse)
				select {
				case <-done:
					sampled <- top
					return
				case <-time.After(5 * time.Millisecond):
				}
			}
		}()
		b.StartTimer()
		if _, err := bf.Plan(context.Background()); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		close(done)
		if top := <-sampled; top > before {
			peak = max(peak, top-before)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(peak)/(1<<20), "MB-peak-above-start")
}

// bfBackfill10k runs a fresh backfill of 10,000 no-op minutes.
func bfBackfill10k(b *testing.B, dag *tranche.DAG, w tranche.TimePartitionWindow) {
	bf := &backfill.Backfill{DAG: dag, Window: w, Ledger: memledger.New(nil), Worker: "bench"}
	rep, err := bf.Run(context.Background())
	if err != nil || rep.Succeeded != w.Len() {
		b.Fatalf("%v: %v", rep, err)
	}
}

// bfPlainLoop10k runs the same partitions with the runner alone.
func bfPlainLoop10k(b *testing.B, r *tranche.Runner, dag *tranche.DAG, w tranche.TimePartitionWindow) {
	for p := range w.All() {
		if _, err := r.Run(context.Background(), dag, p); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBackfill10k backfills 10,000 no-op partitions, one at a time,
// into a fresh in-memory ledger: a plan, then a claim, a lease, a run and
// a record per partition.
func BenchmarkBackfill10k(b *testing.B) {
	dag, w := bfMinuteDAG(b), bfMinutes(b, 10_000)
	b.ReportAllocs()
	for b.Loop() {
		bfBackfill10k(b, dag, w)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/10_000, "ns/partition")
}

// BenchmarkPlainRunnerLoop10k runs the same 10,000 partitions through
// Runner.Run in a plain loop, without a ledger.
func BenchmarkPlainRunnerLoop10k(b *testing.B) {
	dag, w := bfMinuteDAG(b), bfMinutes(b, 10_000)
	r := &tranche.Runner{}
	b.ReportAllocs()
	for b.Loop() {
		bfPlainLoop10k(b, r, dag, w)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/10_000, "ns/partition")
}

// BenchmarkBackfillVsPlainLoop10k alternates the two in one loop, so that
// both see the same load, and reports their ratio: what the ledger,
// claims, leases and events add to the runner.
func BenchmarkBackfillVsPlainLoop10k(b *testing.B) {
	dag, w := bfMinuteDAG(b), bfMinutes(b, 10_000)
	r := &tranche.Runner{}
	var backfill, plain time.Duration
	for b.Loop() {
		start := time.Now()
		bfBackfill10k(b, dag, w)
		mid := time.Now()
		bfPlainLoop10k(b, r, dag, w)
		backfill, plain = backfill+mid.Sub(start), plain+time.Since(mid)
	}
	n := float64(b.N) * 10_000
	b.ReportMetric(float64(backfill.Nanoseconds())/n, "ns/backfill-partition")
	b.ReportMetric(float64(plain.Nanoseconds())/n, "ns/plain-partition")
	b.ReportMetric(float64(backfill)/float64(plain), "ratio")
}
