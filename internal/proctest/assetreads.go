package proctest

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/ledger"
)

// AssetsDAG returns the DAG of issue 32 in New York, named "platform":
// hourly events, their daily rollup, a monthly report of the rollup and
// a daily model of the rollup's seven days ending the day before.
func AssetsDAG(t testing.TB) (*tranche.DAG, *time.Location) {
	t.Helper()
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
	return dag, ny
}

// AssetsLedger is a ledger of the DAG of [AssetsDAG] whose assets'
// partitions over some years ending 2026-01-01 are recorded, as
// [SeedAssets] recorded them.
type AssetsLedger struct {
	DAG     *tranche.DAG
	Windows map[string]tranche.TimePartitionWindow // by asset
	IDs     map[string]string                      // each asset's DAG identity
	Records map[string]string                      // each asset's backfill
	Total   int                                    // asset partitions
}

// SeedAssets records, straight into the tables of a SQL ledger ([Seed]),
// an attempt at every partition of every asset of [AssetsDAG] over the
// given years ending 2026-01-01 (9,502 asset partitions a year: 105
// years are a million), and a backfill of each asset's window: every
// 100th partition of each asset failed, the others succeeded, each
// asset an hour after the one before it, so that nothing is stale but
// the rollup's days holding one of every 97th hour, which finished after
// its day began, the rollup's days holding a failed hour (which runs
// again first), and what reads them. With seed false it records nothing and returns what a
// ledger seeded before holds.
func SeedAssets(t testing.TB, l ledger.Ledger, db *sql.DB, prefix string, years int, seed bool) *AssetsLedger {
	t.Helper()
	dag, ny := AssetsDAG(t)
	end := time.Date(2026, 1, 1, 0, 0, 0, 0, ny)
	start := end.AddDate(-years, 0, 0)
	out := &AssetsLedger{DAG: dag, Windows: map[string]tranche.TimePartitionWindow{}, IDs: map[string]string{}, Records: map[string]string{}}
	base := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	level := map[string]int{"events": 0, "rollup": 1, "report": 2, "model": 2}
	for a := range dag.Assets() {
		g := a.Partitioning.Granularity
		w, err := tranche.WindowBetween(g, start, end)
		if err != nil {
			t.Fatal(err)
		}
		ad, err := backfill.AssetDAG(dag, a.Name, nil)
		if err != nil {
			t.Fatal(err)
		}
		id := backfill.DAGIdentity(ad, g, ny)
		out.Windows[a.Name], out.IDs[a.Name], out.Total = w, id, out.Total+w.Len()
		if seed {
			n := 0
			Seed(t, db, prefix, id, backfill.CodeVersion(ad), w, func(p tranche.TimePartition) SeedAttempt {
				started := base.Add(time.Duration(level[a.Name]) * time.Hour).Add(time.Duration(n) * time.Millisecond)
				a := SeedAttempt{State: ledger.StateSucceeded, Started: started, Finished: started.Add(time.Second)}
				switch {
				case n%100 == 0:
					a.State = ledger.StateFailed
				case g == tranche.Hour && n%97 == 0:
					a.Finished = base.Add(90 * time.Minute) // after the rollup's day began
				}
				n++
				return a
			})
		}
		r, err := l.PutBackfill(context.Background(), ledger.BackfillRecord{ID: backfill.ID(id, w, 1), DAG: id, DAGName: ad.Name, Window: w.String(), Chunk: 1, Created: base})
		if err != nil {
			t.Fatal(err)
		}
		out.Records[a.Name] = r.ID
	}
	return out
}

// EveryLatest is a ledger.Reader that hides a ledger's optional readers
// (ledger.LatestReader, ledger.BriefReader): what a reader that reads
// every latest attempt whole costs.
type EveryLatest struct{ ledger.Reader }

// MeasureAssetsReads logs, for a ledger SeedAssets filled, the time and
// the memory allocated of: backfill.AssetsOf, the whole DAG's status by
// asset (states, blocked, stale), which `tranche status DAG`, its JSON
// and the pages' index read; beside it, the simplest alternative, the
// status of each asset's backfill (backfill.StatusOf, counted by the
// ledger, no staleness), and the grid of the hourly asset's backfill;
// with every, AssetsOf through [EveryLatest] too, whose answer must be
// the same. It fails the test when AssetsOf counts other than
// SeedAssets recorded. Each is run TRANCHE_ASSETS_RUNS times (1 if
// unset), the medians logged; TRANCHE_ASSETS_PROFILE names a file for
// the CPU profile of AssetsOf.
func MeasureAssetsReads(t testing.TB, l ledger.Ledger, al *AssetsLedger, every bool) {
	t.Helper()
	ctx := context.Background()
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	runs, _ := strconv.Atoi(os.Getenv("TRANCHE_ASSETS_RUNS"))
	runs = max(runs, 1)
	// measure runs f runs times and logs the median of its times, wall
	// and CPU, and of the memory it allocated.
	measure := func(what string, f func() error) time.Duration {
		t.Helper()
		var walls, cpus []time.Duration
		var allocs []uint64
		for range runs {
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			t0, c0 := time.Now(), CPUTime()
			if err := f(); err != nil {
				t.Fatal(err)
			}
			walls, cpus = append(walls, time.Since(t0)), append(cpus, CPUTime()-c0)
			runtime.ReadMemStats(&after)
			allocs = append(allocs, (after.TotalAlloc-before.TotalAlloc)>>20)
		}
		slices.Sort(walls)
		slices.Sort(cpus)
		slices.Sort(allocs)
		t.Logf("%s: %v (%v–%v), CPU %v, %d MB allocated (median of %d)", what, walls[runs/2].Round(time.Millisecond),
			walls[0].Round(time.Millisecond), walls[runs-1].Round(time.Millisecond), cpus[runs/2].Round(time.Millisecond), allocs[runs/2], runs)
		return walls[runs/2]
	}
	var got []backfill.AssetPlan
	assets := measure(fmt.Sprintf("AssetsOf, %d asset partitions (briefs)", al.Total), func() error {
		if f := os.Getenv("TRANCHE_ASSETS_PROFILE"); f != "" {
			out, err := os.Create(f)
			if err != nil {
				return err
			}
			defer out.Close()
			pprof.StartCPUProfile(out)
			defer pprof.StopCPUProfile()
		}
		_, plans, err := backfill.AssetsOf(ctx, l, al.DAG, now)
		got = plans
		return err
	})
	n, stale, failed := 0, 0, 0
	for _, p := range got {
		n += p.Counts.Total
		stale += p.Stale
		failed += p.States[ledger.StateFailed]
		t.Logf("  %s: %d partitions, %v, blocked %d, stale %d", p.Asset, p.Counts.Total, p.States, p.Blocked, p.Stale)
	}
	if n != al.Total || stale == 0 || failed == 0 {
		t.Errorf("AssetsOf covers %d asset partitions, %d failed, %d stale; want %d, some failed, some stale", n, failed, stale, al.Total)
	}
	alone := measure("StatusOf of each asset's backfill, counted (the simplest alternative)", func() error {
		for _, id := range al.Records {
			if _, err := backfill.StatusOf(ctx, l, id, now); err != nil {
				return err
			}
		}
		return nil
	})
	t.Logf("AssetsOf / StatusOf of each asset: %.2f", assets.Seconds()/alone.Seconds())
	measure("Grid of the hourly asset's backfill (800 cells)", func() error {
		_, _, err := backfill.GridOf(ctx, l, al.Records["events"], now, 800)
		return err
	})
	if every {
		measure("AssetsOf through every latest attempt whole", func() error {
			_, plans, err := backfill.AssetsOf(ctx, EveryLatest{l}, al.DAG, now)
			for i, p := range plans {
				if g := got[i]; p.Counts != g.Counts || p.Blocked != g.Blocked || p.Stale != g.Stale || fmt.Sprint(p.States) != fmt.Sprint(g.States) {
					t.Errorf("asset %s through Latest: %+v %v blocked %d stale %d; through briefs: %+v %v blocked %d stale %d",
						p.Asset, p.Counts, p.States, p.Blocked, p.Stale, g.Counts, g.States, g.Blocked, g.Stale)
				}
			}
			return err
		})
	}
}
