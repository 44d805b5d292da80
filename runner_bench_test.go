package tranche_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
)

// The runner's benchmarks, each beside the simplest alternative: a plain
// loop calling the same functions. See BENCHMARKS.md, "Runner".

const benchPartitions = 10_000

func noop(context.Context, *tranche.Materialization) ([]tranche.Row, error) { return nil, nil }

// benchDAG returns n independent no-op daily assets.
func benchDAG(b *testing.B, n int, fn func(context.Context, *tranche.Materialization) ([]tranche.Row, error)) *tranche.DAG {
	assets := make([]tranche.Asset, n)
	for i := range assets {
		assets[i] = tranche.Asset{
			Name:         fmt.Sprintf("asset%03d", i),
			Partitioning: tranche.Partitioning{Granularity: tranche.Day},
			Materialize:  fn,
		}
	}
	dag, err := tranche.NewDAG(assets...)
	if err != nil {
		b.Fatal(err)
	}
	return dag
}

func benchWindow(b *testing.B) tranche.TimePartitionWindow {
	w, err := tranche.NewTimePartitionWindow(tranche.Day, jan1, jan1.AddDate(0, 0, benchPartitions-1))
	if err != nil || w.Len() != benchPartitions {
		b.Fatal(w.Len(), err)
	}
	return w
}

// BenchmarkRunNoop runs a DAG of no-op assets once per partition of a
// 10,000-day window: the runner's overhead per asset run.
func BenchmarkRunNoop(b *testing.B) {
	for _, n := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("assets=%d", n), func(b *testing.B) {
			dag, w := benchDAG(b, n, noop), benchWindow(b)
			r := tranche.Runner{}
			b.ReportAllocs()
			for b.Loop() {
				for p := range w.All() {
					if _, err := r.Run(ctxT, dag, p); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchPartitions*n), "ns/asset-run")
		})
	}
}

// BenchmarkPlainLoop calls the same no-op functions in a loop over the
// same partitions.
func BenchmarkPlainLoop(b *testing.B) {
	for _, n := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("assets=%d", n), func(b *testing.B) {
			fns := make([]func(context.Context, *tranche.Materialization) ([]tranche.Row, error), n)
			for i := range fns {
				fns[i] = noop
			}
			w := benchWindow(b)
			b.ReportAllocs()
			for b.Loop() {
				for range w.All() {
					for _, fn := range fns {
						if _, err := fn(ctxT, nil); err != nil {
							b.Fatal(err)
						}
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchPartitions*n), "ns/asset-run")
		})
	}
}

// BenchmarkRunEvents is BenchmarkRunNoop with 10 assets and a no-op hook
// receiving every event.
func BenchmarkRunEvents(b *testing.B) {
	for _, hook := range []struct {
		name string
		fn   func(context.Context, tranche.Event)
	}{{"hook=none", nil}, {"hook=noop", func(context.Context, tranche.Event) {}}} {
		b.Run(hook.name, func(b *testing.B) {
			dag, w := benchDAG(b, 10, noop), benchWindow(b)
			r := tranche.Runner{OnEvent: hook.fn}
			b.ReportAllocs()
			for b.Loop() {
				for p := range w.All() {
					if _, err := r.Run(ctxT, dag, p); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchPartitions*10), "ns/asset-run")
		})
	}
}

// BenchmarkRunConcurrency runs 1,000 independent assets that each wait
// 1 ms, at concurrency 1 and 64.
func BenchmarkRunConcurrency(b *testing.B) {
	wait := func(context.Context, *tranche.Materialization) ([]tranche.Row, error) {
		time.Sleep(time.Millisecond)
		return nil, nil
	}
	dag := benchDAG(b, 1000, wait)
	p := tranche.PartitionOf(tranche.Day, jan1)
	for _, c := range []int{1, 64} {
		b.Run(fmt.Sprintf("concurrency=%d", c), func(b *testing.B) {
			r := tranche.Runner{MaxConcurrentAssets: c}
			for b.Loop() {
				if _, err := r.Run(ctxT, dag, p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRunnerSideBySide alternates the two sides of each comparison
// in one loop, a chunk at a time, so that both see the same load on a
// shared machine, and reports each side and their ratio:
//
//   - noop/assets=N: the runner against a plain loop calling the same
//     no-op functions, over 10,000 daily partitions;
//   - events: runs of 10 no-op assets with a no-op hook against runs
//     without a hook;
//   - concurrency: 1,000 assets waiting 1 ms each, at concurrency 1
//     against concurrency 64.
func BenchmarkRunnerSideBySide(b *testing.B) {
	w := benchWindow(b)
	for _, n := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("noop/assets=%d", n), func(b *testing.B) {
			dag := benchDAG(b, n, noop)
			fns := make([]func(context.Context, *tranche.Materialization) ([]tranche.Row, error), n)
			for i := range fns {
				fns[i] = noop
			}
			var r tranche.Runner
			var runner, plain time.Duration
			for b.Loop() {
				for chunk := range w.Chunks(100) {
					t0 := time.Now()
					for p := range chunk.All() {
						if _, err := r.Run(ctxT, dag, p); err != nil {
							b.Fatal(err)
						}
					}
					t1 := time.Now()
					for range chunk.All() {
						for _, fn := range fns {
							if _, err := fn(ctxT, nil); err != nil {
								b.Fatal(err)
							}
						}
					}
					t2 := time.Now()
					runner, plain = runner+t1.Sub(t0), plain+t2.Sub(t1)
				}
			}
			runs := float64(b.N * benchPartitions * n)
			b.ReportMetric(float64(runner)/runs, "runner-ns/asset-run")
			b.ReportMetric(float64(plain)/runs, "loop-ns/asset-run")
			b.ReportMetric(float64(runner)/float64(plain), "runner/loop")
		})
	}
	b.Run("events", func(b *testing.B) {
		dag := benchDAG(b, 10, noop)
		quiet, hooked := tranche.Runner{}, tranche.Runner{OnEvent: func(context.Context, tranche.Event) {}}
		var without, with time.Duration
		for b.Loop() {
			for chunk := range w.Chunks(100) {
				t0 := time.Now()
				for p := range chunk.All() {
					if _, err := quiet.Run(ctxT, dag, p); err != nil {
						b.Fatal(err)
					}
				}
				t1 := time.Now()
				for p := range chunk.All() {
					if _, err := hooked.Run(ctxT, dag, p); err != nil {
						b.Fatal(err)
					}
				}
				t2 := time.Now()
				without, with = without+t1.Sub(t0), with+t2.Sub(t1)
			}
		}
		runs := float64(b.N * benchPartitions * 10)
		b.ReportMetric(float64(without)/runs, "nohook-ns/asset-run")
		b.ReportMetric(float64(with)/runs, "hook-ns/asset-run")
		b.ReportMetric(float64(with)/float64(without), "hook/nohook")
	})
	b.Run("concurrency", func(b *testing.B) {
		wait := func(context.Context, *tranche.Materialization) ([]tranche.Row, error) {
			time.Sleep(time.Millisecond)
			return nil, nil
		}
		dag := benchDAG(b, 1000, wait)
		p := tranche.PartitionOf(tranche.Day, jan1)
		one, many := tranche.Runner{MaxConcurrentAssets: 1}, tranche.Runner{MaxConcurrentAssets: 64}
		var slow, fast time.Duration
		for b.Loop() {
			t0 := time.Now()
			if _, err := one.Run(ctxT, dag, p); err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			if _, err := many.Run(ctxT, dag, p); err != nil {
				b.Fatal(err)
			}
			t2 := time.Now()
			slow, fast = slow+t1.Sub(t0), fast+t2.Sub(t1)
		}
		b.ReportMetric(float64(slow)/float64(b.N)/1e6, "c1-ms/run")
		b.ReportMetric(float64(fast)/float64(b.N)/1e6, "c64-ms/run")
		b.ReportMetric(float64(slow)/float64(fast), "c1/c64")
	})
}
