package sqlite_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/internal/proctest"
	"github.com/tranche-dev/tranche/ledger"
)

// TestAssetsReads measures the reads of a DAG of several granularities
// (hourly events, daily rollup and 7-day model, monthly report, in New
// York) whose assets' partitions over TRANCHE_ASSETS_YEARS years (9,502
// a year: 105 years are a million) are recorded, a tenth failed
// (proctest.Fill): backfill.AssetsOf, the whole DAG's status with its
// blocked and stale partitions, which reads every latest attempt; and
// StatusOf and Grid of the hourly asset's backfill, which count them.
//
//	TRANCHE_ASSETS_YEARS=10 go test -run 'TestAssetsReads$' -v ./ledger/sqlite
func TestAssetsReads(t *testing.T) {
	years, _ := strconv.Atoi(os.Getenv("TRANCHE_ASSETS_YEARS"))
	if years < 1 {
		t.Skip("set TRANCHE_ASSETS_YEARS to measure the reads of a DAG of several granularities over that many years")
	}
	ctx := context.Background()
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	noop := func(context.Context, *tranche.Materialization) ([]tranche.Row, error) { return nil, nil }
	part := func(g tranche.TimeGranularity) tranche.Partitioning {
		return tranche.Partitioning{Granularity: g, Location: ny}
	}
	dag, err := tranche.NewDAG(
		tranche.Asset{Name: "events", Partitioning: part(tranche.Hour), Materialize: noop},
		tranche.Asset{Name: "rollup", Deps: []string{"events"}, Partitioning: part(tranche.Day), Materialize: noop},
		tranche.Asset{Name: "report", Deps: []string{"rollup"}, Partitioning: part(tranche.Month), Materialize: noop},
		tranche.Asset{Name: "model", Deps: []string{"rollup"}, Partitioning: part(tranche.Day), Materialize: noop,
			Mappings: map[string]tranche.Mapping{"rollup": {Lookback: 7, Offset: 1}}},
	)
	if err != nil {
		t.Fatal(err)
	}
	dag.Name = "platform"
	end := time.Date(2026, 1, 1, 0, 0, 0, 0, ny)
	start := end.AddDate(-years, 0, 0)
	w, err := tranche.WindowBetween(tranche.Day, start, end)
	if err != nil {
		t.Fatal(err)
	}
	l := openLedgerAt(t, filepath.Join(t.TempDir(), "assets.db"), nil)
	b := &backfill.Backfill{DAG: dag, Window: w, Ledger: l, Runner: &tranche.Runner{Read: func(context.Context, string, tranche.TimePartition) ([]tranche.Row, error) { return nil, nil }},
		MaxPartitions: 10_000_000}
	plan, err := b.Plan(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var hourly string
	t0 := time.Now()
	for _, a := range plan.Assets {
		aw, err := tranche.WindowBetween(a.Granularity, start, end)
		if err != nil {
			t.Fatal(err)
		}
		proctest.Fill(t, l, a.DAG, aw, "host-12345")
		r, err := l.PutBackfill(ctx, ledger.BackfillRecord{ID: backfill.ID(a.DAG, aw, 1), DAG: a.DAG, DAGName: a.DAGName, Window: aw.String(), Chunk: 1, Created: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		if a.Asset == "events" {
			hourly = r.ID
		}
	}
	t.Logf("filled %d asset partitions in %v", plan.Counts.Total, time.Since(t0).Round(time.Millisecond))
	measure := func(what string, f func() error) {
		t.Helper()
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		t0 := time.Now()
		if err := f(); err != nil {
			t.Fatal(err)
		}
		took := time.Since(t0)
		runtime.ReadMemStats(&after)
		t.Logf("%s: %v, %d MB allocated", what, took.Round(time.Millisecond), (after.TotalAlloc-before.TotalAlloc)>>20)
	}
	measure("AssetsOf (every latest attempt of every asset)", func() error {
		_, plans, err := backfill.AssetsOf(ctx, l, dag, time.Now())
		n := 0
		for _, p := range plans {
			n += p.Counts.Total
		}
		if err == nil && n != plan.Counts.Total {
			t.Errorf("AssetsOf covers %d asset partitions, want %d", n, plan.Counts.Total)
		}
		return err
	})
	measure("StatusOf the hourly asset's backfill", func() error {
		_, err := backfill.StatusOf(ctx, l, hourly, time.Now())
		return err
	})
	measure("Grid of the hourly asset's backfill", func() error {
		_, _, err := backfill.GridOf(ctx, l, hourly, time.Now(), 800)
		return err
	})
	measure("Plan of the whole DAG", func() error {
		_, err := b.Plan(ctx)
		return err
	})
}
