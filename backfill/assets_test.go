package backfill_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/internal/assettest"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/memledger"
)

// TestMixedGranularities runs the backfills of a DAG of several
// granularities (internal/assettest) on memledger: each asset's
// partitions once, in dependency order, blocked and rerun when what
// they read failed, rerun when it was materialized again.
func TestMixedGranularities(t *testing.T) {
	assettest.Run(t, func(_ testing.TB, now func() time.Time) ledger.Ledger { return memledger.New(now) })
}

// TestMixedGranularitiesProperty checks, for random failures of every
// asset's partitions, that a backfill of several granularities runs
// exactly what a model of the mappings says can land, and the rerun of
// failed partitions exactly the rest (internal/assettest.Property).
func TestMixedGranularitiesProperty(t *testing.T) {
	assettest.Property(t, func(_ testing.TB, now func() time.Time) ledger.Ledger { return memledger.New(now) })
}

// TestMixedCanceled cancels a backfill of several granularities while
// its first wave runs, and between its two waves: Run returns its
// report, with the partitions not run counted, and an error matching the
// cancellation, as a backfill of one granularity does.
func TestMixedCanceled(t *testing.T) {
	for _, between := range []bool{false, true} {
		t.Run(fmt.Sprintf("between waves %v", between), func(t *testing.T) {
			out := new(tranche.MemoryDestination)
			part := func(g tranche.TimeGranularity) tranche.Partitioning {
				return tranche.Partitioning{Granularity: g, Location: time.UTC, Column: "at"}
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var hours atomic.Int32
			mat := func(_ context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
				p, err := m.Partition()
				return []tranche.Row{{"at": p.Start}}, err
			}
			dag, err := tranche.NewDAG(
				tranche.Asset{Name: "hours", Partitioning: part(tranche.Hour), Destinations: []tranche.Destination{out},
					Materialize: func(ctx context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
						if hours.Add(1) == 3 && !between {
							cancel()
						}
						return mat(ctx, m)
					}},
				tranche.Asset{Name: "days", Deps: []string{"hours"}, Partitioning: part(tranche.Day), Destinations: []tranche.Destination{out},
					Materialize: mat},
			)
			if err != nil {
				t.Fatal(err)
			}
			dag.Name = "mixed"
			runner := &tranche.Runner{Read: func(_ context.Context, asset string, p tranche.TimePartition) ([]tranche.Row, error) {
				rows, _ := out.Rows(asset, p.Key())
				return rows, nil
			}}
			day := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
			w, err := tranche.NewTimePartitionWindow(tranche.Day, day, day)
			if err != nil {
				t.Fatal(err)
			}
			b := &backfill.Backfill{DAG: dag, Window: w, Ledger: memledger.New(nil), Runner: runner, Concurrency: 1,
				OnEvent: func(_ context.Context, e tranche.Event) {
					if between && e.Kind == backfill.KindSucceeded {
						cancel() // the hours' backfill ended
					}
				}}
			rep, err := b.Run(ctx)
			if !errors.Is(err, context.Canceled) {
				t.Errorf("err = %v, want one matching context.Canceled", err)
			}
			if rep == nil {
				t.Fatal("no report")
			}
			if rep.Total != 25 || rep.Succeeded+rep.Failed+rep.NotRun != 25 || rep.NotRun == 0 {
				t.Errorf("report: total %d, succeeded %d, failed %d, not run %d; want 25, every one counted, some not run",
					rep.Total, rep.Succeeded, rep.Failed, rep.NotRun)
			}
		})
	}
}

// TestMixedCanceledInLedger cancels, in the ledger, the backfill of the
// first wave's asset of a backfill of several granularities (what an
// operator sees running, `tranche cancel`): no later wave starts, as a
// cancel stops every partition not yet started, and Run returns an
// error matching ErrBackfillCanceled; Resume runs the rest.
func TestMixedCanceledInLedger(t *testing.T) {
	out := new(tranche.MemoryDestination)
	part := func(g tranche.TimeGranularity) tranche.Partitioning {
		return tranche.Partitioning{Granularity: g, Location: time.UTC, Column: "at"}
	}
	var days atomic.Int32
	mat := func(_ context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
		p, err := m.Partition()
		return []tranche.Row{{"at": p.Start}}, err
	}
	dag, err := tranche.NewDAG(
		tranche.Asset{Name: "hours", Partitioning: part(tranche.Hour), Destinations: []tranche.Destination{out}, Materialize: mat},
		tranche.Asset{Name: "days", Deps: []string{"hours"}, Partitioning: part(tranche.Day), Destinations: []tranche.Destination{out},
			Materialize: func(ctx context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
				days.Add(1)
				return mat(ctx, m)
			}},
	)
	if err != nil {
		t.Fatal(err)
	}
	dag.Name = "mixed"
	runner := &tranche.Runner{Read: func(_ context.Context, asset string, p tranche.TimePartition) ([]tranche.Row, error) {
		rows, _ := out.Rows(asset, p.Key())
		return rows, nil
	}}
	first := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	w, err := tranche.NewTimePartitionWindow(tranche.Day, first, first.AddDate(0, 0, 1))
	if err != nil {
		t.Fatal(err)
	}
	l := memledger.New(nil)
	var once sync.Once
	b := &backfill.Backfill{DAG: dag, Window: w, Ledger: l, Runner: runner, Concurrency: 1, Order: backfill.OldestFirst,
		OnEvent: func(ctx context.Context, e tranche.Event) {
			// Once the hours of the first day have landed, the operator
			// cancels the backfill they see running.
			if e.Kind == backfill.KindPartitionSucceeded && e.Partition.Start.Equal(first.Add(23*time.Hour)) {
				once.Do(func() {
					if err := l.CancelBackfill(ctx, e.Backfill, ledger.CancelOptions{}); err != nil {
						t.Error(err)
					}
				})
			}
		}}
	rep, err := b.Run(context.Background())
	if !errors.Is(err, backfill.ErrBackfillCanceled) {
		t.Errorf("err = %v, want one matching ErrBackfillCanceled", err)
	}
	if n := days.Load(); n != 0 {
		t.Errorf("%d days ran after the backfill was canceled (report %v)", n, rep)
	}
	// Resumed, it runs the rest.
	if rep, err := b.Resume(context.Background()); err != nil || days.Load() != 2 {
		t.Errorf("Resume = %v, %v, %d days run; want both days", rep, err, days.Load())
	}
}
