package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/internal/assettest"
	"github.com/tranche-dev/tranche/ledger"
)

// BenchmarkMixedPlanYear plans a year (March 2026 to February 2027, New
// York) of the DAG of issue 32: 8,760 hours, 365 rollup days, 12
// months and 365 model days, 9,502 asset partitions, on SQLite, before
// anything ran ("empty") and once all succeeded ("recorded", and under
// rerun policy stale, which judges every partition's reads). Beside it,
// the simplest alternative a user has: one DAG per granularity (hourly
// events; the daily rollup and model; the monthly report), planned one
// after the other over the same year, all succeeded. Goal: under 100 ms.
//
//	go test -run '^$' -bench MixedPlanYear -count 5 ./ledger/sqlite
func BenchmarkMixedPlanYear(b *testing.B) {
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), "ledger.db")
	var l ledger.Ledger
	p := assettest.New(b, func(tb testing.TB, now func() time.Time) ledger.Ledger {
		l = openLedgerAt(tb, path, now)
		return l
	})
	year, err := tranche.NewTimePartitionWindow(tranche.Day, time.Date(2026, 3, 1, 0, 0, 0, 0, p.NY), time.Date(2027, 2, 28, 0, 0, 0, 0, p.NY))
	if err != nil {
		b.Fatal(err)
	}
	// CPU time too, which other work on the machine inflates less than
	// the wall clock's.
	plan := func(b *testing.B, bf *backfill.Backfill, run int) {
		b.Helper()
		var cpu time.Duration
		n := 0
		for b.Loop() {
			c0 := cpuTime()
			pl, err := bf.Plan(ctx)
			if err != nil {
				b.Fatal(err)
			}
			cpu += cpuTime() - c0
			n++
			if pl.Counts.Total != 9502 || pl.Counts.Run != run {
				b.Fatalf("plan counts %+v, want 9502 of which %d run", pl.Counts, run)
			}
		}
		b.ReportMetric(float64(cpu.Microseconds())/1000/float64(n), "cpu-ms")
	}
	b.Run("empty", func(b *testing.B) { plan(b, p.Backfill(year, ""), 9502) })
	if rep, err := p.Backfill(year, "").Run(ctx); err != nil || rep.Succeeded != 9502 {
		b.Fatalf("filling: %v, %v", rep, err)
	}
	b.Run("recorded", func(b *testing.B) { plan(b, p.Backfill(year, ""), 0) })
	b.Run("recorded-stale", func(b *testing.B) { plan(b, p.Backfill(year, ledger.RerunStale), 0) })

	// One DAG per granularity, each a uniform backfill's plan.
	noop := func(context.Context, *tranche.Materialization) ([]tranche.Row, error) { return nil, nil }
	part := func(g tranche.TimeGranularity) tranche.Partitioning {
		return tranche.Partitioning{Granularity: g, Location: p.NY}
	}
	must := func(d *tranche.DAG, err error) *tranche.DAG {
		if err != nil {
			b.Fatal(err)
		}
		return d
	}
	hourly := must(tranche.NewDAG(tranche.Asset{Name: "events", Partitioning: part(tranche.Hour), Materialize: noop}))
	daily := must(tranche.NewDAG(tranche.Asset{Name: "rollup", Partitioning: part(tranche.Day), Materialize: noop},
		tranche.Asset{Name: "model", Deps: []string{"rollup"}, Partitioning: part(tranche.Day), Materialize: noop}))
	monthly := must(tranche.NewDAG(tranche.Asset{Name: "report", Partitioning: part(tranche.Month), Materialize: noop}))
	var alone []*backfill.Backfill
	for _, d := range []struct {
		dag  *tranche.DAG
		g    tranche.TimeGranularity
		last time.Time
	}{{hourly, tranche.Hour, time.Date(2027, 2, 28, 23, 0, 0, 0, p.NY)}, {daily, tranche.Day, year.End().Add(-time.Hour)}, {monthly, tranche.Month, year.End().Add(-time.Hour)}} {
		w, err := tranche.NewTimePartitionWindow(d.g, year.Start(), d.last)
		if err != nil {
			b.Fatal(err)
		}
		bf := &backfill.Backfill{DAG: d.dag, Window: w, Ledger: l, Worker: "w1", Concurrency: 4}
		if _, err := bf.Run(ctx); err != nil {
			b.Fatal(err)
		}
		alone = append(alone, bf)
	}
	b.Run("per-granularity-dags", func(b *testing.B) {
		var cpu time.Duration
		n := 0
		for b.Loop() {
			c0 := cpuTime()
			n++
			total := 0
			for _, bf := range alone {
				pl, err := bf.Plan(ctx)
				if err != nil {
					b.Fatal(err)
				}
				total += pl.Counts.Total
			}
			cpu += cpuTime() - c0
			if total != 8760+365+12 {
				b.Fatalf("%d partitions planned", total)
			}
		}
		b.ReportMetric(float64(cpu.Microseconds())/1000/float64(n), "cpu-ms")
	})
}
