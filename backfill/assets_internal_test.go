package backfill

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
)

// TestMappedPartitionsAsRunner holds mappedPartitions, which plans a
// backfill of several granularities, to what tranche.Runner gives an
// asset that reads its dependency (Materialization.Inputs), for every
// day around New York's and Lord Howe's transitions and for each kind of
// mapping: the two computations must never part.
func TestMappedPartitionsAsRunner(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	lh, err := time.LoadLocation("Australia/Lord_Howe")
	if err != nil {
		t.Fatal(err)
	}
	quarter := tranche.Every(15, tranche.Minute)
	cases := []struct {
		up, down tranche.TimeGranularity
		m        tranche.Mapping
	}{
		{tranche.Hour, tranche.Day, tranche.Mapping{}},
		{quarter, tranche.Hour, tranche.Mapping{}},
		{tranche.Day, tranche.Month, tranche.Mapping{}},
		{tranche.Day, tranche.Week, tranche.Mapping{}},
		{tranche.Day, tranche.Day, tranche.Mapping{Lookback: 7, Offset: 1}},
		{tranche.Day, tranche.Day, tranche.Mapping{Offset: 1}},
		{tranche.Hour, tranche.Day, tranche.Mapping{Lookback: 24}},
		{tranche.Day, tranche.Hour, tranche.Mapping{Open: true}},
		{tranche.Day, tranche.Month, tranche.Mapping{Lookback: 3, Offset: 2}},
	}
	days := []time.Time{
		time.Date(2026, 3, 8, 12, 0, 0, 0, ny), time.Date(2026, 11, 1, 12, 0, 0, 0, ny), time.Date(2024, 11, 3, 12, 0, 0, 0, ny),
		time.Date(2026, 4, 5, 12, 0, 0, 0, lh), time.Date(2026, 10, 4, 12, 0, 0, 0, lh),
	}
	first := time.Date(2026, 3, 3, 0, 0, 0, 0, ny) // some windows reach before it
	for _, c := range cases {
		for _, day := range days {
			for _, f := range []time.Time{{}, first} {
				d := tranche.PartitionOf(c.down, day)
				if c.up == c.down && d.Start.Before(f) {
					continue // the runner runs up for d itself, which is before its first
				}
				name := fmt.Sprintf("%v<-%v %+v %s first=%v", c.down, c.up, c.m, d.Key(), !f.IsZero())
				var got []string
				dag, err := tranche.NewDAG(
					tranche.Asset{Name: "up", Partitioning: tranche.Partitioning{Granularity: c.up, Location: day.Location(), First: f},
						Materialize: func(context.Context, *tranche.Materialization) ([]tranche.Row, error) { return nil, nil }},
					tranche.Asset{Name: "down", Deps: []string{"up"}, Mappings: map[string]tranche.Mapping{"up": c.m},
						Partitioning: tranche.Partitioning{Granularity: c.down, Location: day.Location()},
						Materialize: func(_ context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
							in, err := m.Inputs("up")
							for _, b := range in {
								got = append(got, b.Partition.Key())
							}
							return nil, err
						}})
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				r := &tranche.Runner{Read: func(context.Context, string, tranche.TimePartition) ([]tranche.Row, error) { return nil, nil }}
				if _, err := r.Run(context.Background(), dag, d); err != nil {
					t.Fatalf("%s: run: %v", name, err)
				}
				var fs time.Time
				if !f.IsZero() {
					fs = tranche.PartitionOf(c.up, f).Start
				}
				var want []string
				for _, p := range mappedPartitions(c.m, c.up, fs, d) {
					want = append(want, p.Key())
				}
				if !slices.Equal(got, want) {
					t.Errorf("%s: runner reads %v, mappedPartitions says %v", name, got, want)
				}
			}
		}
	}
}

// TestUnitSpansAsMappedPartitions holds the places in a dependency's
// span that a backfill of several granularities plans each partition to
// read (assetUnits, which steps through the span rather than through
// partitions) to mappedPartitions, partition by partition, for each
// kind of mapping over windows around New York's and Lord Howe's
// transitions, with and without a first partition of the dependency
// inside the window.
func TestUnitSpansAsMappedPartitions(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	lh, err := time.LoadLocation("Australia/Lord_Howe")
	if err != nil {
		t.Fatal(err)
	}
	quarter := tranche.Every(15, tranche.Minute)
	cases := []struct {
		up, down tranche.TimeGranularity
		m        tranche.Mapping
	}{
		{tranche.Hour, tranche.Day, tranche.Mapping{}},
		{quarter, tranche.Hour, tranche.Mapping{}},
		{tranche.Day, tranche.Month, tranche.Mapping{}},
		{tranche.Day, tranche.Week, tranche.Mapping{}},
		{tranche.Day, tranche.Day, tranche.Mapping{Lookback: 7, Offset: 1}},
		{tranche.Day, tranche.Day, tranche.Mapping{Offset: 1}},
		{tranche.Hour, tranche.Day, tranche.Mapping{Lookback: 24}},
		{tranche.Day, tranche.Hour, tranche.Mapping{Open: true}},
		{tranche.Day, tranche.Month, tranche.Mapping{Lookback: 3, Offset: 2}},
		{tranche.Hour, tranche.Hour, tranche.Mapping{Lookback: 5, Offset: 3}},
	}
	windows := []struct{ from, to time.Time }{
		{time.Date(2026, 2, 20, 0, 0, 0, 0, ny), time.Date(2026, 4, 20, 0, 0, 0, 0, ny)},
		{time.Date(2026, 10, 20, 0, 0, 0, 0, ny), time.Date(2026, 12, 5, 0, 0, 0, 0, ny)},
		{time.Date(2026, 3, 28, 0, 0, 0, 0, lh), time.Date(2026, 5, 12, 0, 0, 0, 0, lh)},
		{time.Date(2026, 9, 1, 0, 0, 0, 0, lh), time.Date(2026, 10, 11, 0, 0, 0, 0, lh)},
	}
	noop := func(context.Context, *tranche.Materialization) ([]tranche.Row, error) { return nil, nil }
	for _, c := range cases {
		for _, win := range windows {
			loc := win.from.Location()
			for _, first := range []time.Time{{}, win.from.AddDate(0, 0, 3).Add(5 * time.Hour)} {
				name := fmt.Sprintf("%v<-%v %+v %s first=%v", c.down, c.up, c.m, win.from.Format("2006-01-02 MST"), !first.IsZero())
				dag, err := tranche.NewDAG(
					tranche.Asset{Name: "up", Partitioning: tranche.Partitioning{Granularity: c.up, Location: loc, First: first}, Materialize: noop},
					tranche.Asset{Name: "down", Deps: []string{"up"}, Mappings: map[string]tranche.Mapping{"up": c.m},
						Partitioning: tranche.Partitioning{Granularity: c.down, Location: loc}, Materialize: noop})
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				g, _, err := PartitioningOf(dag) // the finer
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				w, err := tranche.WindowBetween(g, win.from, win.to)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				b := &Backfill{DAG: dag}
				units, err := b.assetUnits(w)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				up, down := units[0], units[1]
				if down.n == 0 {
					t.Fatalf("%s: no partition of down in %v", name, w)
				}
				d := down.deps[0]
				k := 0
				for p := range down.window.OldestFirst() {
					var want, got []string
					for _, q := range mappedPartitions(c.m, up.g, up.first, p) {
						want = append(want, q.Key())
					}
					for _, s := range up.span[d.lo[k]:d.hi[k]] {
						got = append(got, up.key(s))
					}
					if !slices.Equal(got, want) {
						t.Errorf("%s: %s reads %v in the plan, mappedPartitions says %v", name, p.Key(), got, want)
					}
					k++
				}
			}
		}
	}
}
