package tranche_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/tranchetest"
)

func TestNewDAGMappings(t *testing.T) {
	noop := tranchetest.Noop
	at := func(g tranche.TimeGranularity, name string, deps ...string) tranche.Asset {
		return partitioned(noop(name, deps...), tranche.Partitioning{Granularity: g})
	}
	mapped := func(a tranche.Asset, m map[string]tranche.Mapping) tranche.Asset {
		a.Mappings = m
		return a
	}
	open := tranche.Mapping{Open: true}
	refused := []struct {
		name   string
		assets []tranche.Asset
		want   []string
	}{
		{"mapping of no dependency", []tranche.Asset{at(tranche.Day, "d"), mapped(at(tranche.Day, "e"), map[string]tranche.Mapping{"d": {Offset: 1}})},
			[]string{`asset "e" maps "d", which is not one of its dependencies`}},
		{"negative counts", []tranche.Asset{at(tranche.Day, "d"), mapped(at(tranche.Day, "e", "d"), map[string]tranche.Mapping{"d": {Lookback: -1}})},
			[]string{`asset "e" maps dependency "d" with Lookback -1 and Offset 0; both must be 0 or more`}},
		{"mapping of an unpartitioned dependency", []tranche.Asset{noop("u"), mapped(at(tranche.Day, "e", "u"), map[string]tranche.Mapping{"u": {Offset: 1}})},
			[]string{`asset "e" maps unpartitioned asset "u" (trailing 1 offset 1)`}},
		{"coarser without Open", []tranche.Asset{at(tranche.Day, "ref"), at(tranche.Hour, "h", "ref")},
			[]string{`asset "h" (hour) depends on asset "ref" (day): each hour partition reads the day partition holding it, which has not closed when it does; declare Mappings["ref"] = Mapping{Open: true}`}},
		{"weeks and months do not nest", []tranche.Asset{at(tranche.Week, "w"), at(tranche.Month, "m", "w")},
			[]string{`asset "m" (month) depends on asset "w" (week): week partitions do not nest in month partitions`}},
		{"two days do not nest in a week", []tranche.Asset{at(tranche.Every(2, tranche.Day), "d2"), at(tranche.Week, "w", "d2")},
			[]string{`asset "w" (week) depends on asset "d2" (2d): 2d partitions do not nest in week partitions`}},
		{"trailing into a coarser current partition", []tranche.Asset{at(tranche.Day, "ref"), mapped(at(tranche.Hour, "h", "ref"), map[string]tranche.Mapping{"ref": {Lookback: 2}})},
			[]string{`asset "h" (hour) depends on asset "ref" (day): its trailing window with offset 0 ends with the day partition holding the end of each hour partition`}},
		{"every problem at once", []tranche.Asset{at(tranche.Day, "ref"), at(tranche.Hour, "h", "ref"), at(tranche.Week, "w"), at(tranche.Month, "m", "w"),
			mapped(at(tranche.Day, "e", "ref"), map[string]tranche.Mapping{"x": {}, "ref": {Offset: -2}})},
			[]string{`asset "h" (hour) depends on asset "ref"`, `asset "m" (month) depends on asset "w"`, `asset "e" maps "x"`, `asset "e" maps dependency "ref" with Lookback 0 and Offset -2`}},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			dag, err := tranche.NewDAG(tc.assets...)
			if err == nil {
				t.Fatalf("NewDAG = %v, want an error", dag)
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("NewDAG error:\n%v\nwant it to contain %q", err, want)
				}
			}
			if n := len(tc.want); n > 1 {
				if got := len(err.(interface{ Unwrap() []error }).Unwrap()); got != n {
					t.Errorf("NewDAG joined %d errors, want %d:\n%v", got, n, err)
				}
			}
		})
	}
	accepted := []struct {
		name   string
		assets []tranche.Asset
	}{
		{"hours into a day", []tranche.Asset{at(tranche.Hour, "h"), at(tranche.Day, "d", "h")}},
		{"quarter hours into six hours", []tranche.Asset{at(tranche.Every(15, tranche.Minute), "q"), at(tranche.Every(6, tranche.Hour), "s", "q")}},
		{"days into a week, a month, a quarter and a year", []tranche.Asset{at(tranche.Day, "d"), at(tranche.Week, "w", "d"), at(tranche.Month, "m", "d"),
			at(tranche.Quarter, "q", "d"), at(tranche.Year, "y", "d")}},
		{"months into a quarter and two quarters", []tranche.Asset{at(tranche.Month, "m"), at(tranche.Quarter, "q", "m"), at(tranche.Every(2, tranche.Quarter), "h", "m")}},
		{"the day holding an hour, declared", []tranche.Asset{at(tranche.Day, "ref"), mapped(at(tranche.Hour, "h", "ref"), map[string]tranche.Mapping{"ref": open})}},
		{"the previous day from an hour", []tranche.Asset{at(tranche.Day, "ref"), mapped(at(tranche.Hour, "h", "ref"), map[string]tranche.Mapping{"ref": {Offset: 1}})}},
		{"weeks overlapping a month, declared", []tranche.Asset{at(tranche.Week, "w"), mapped(at(tranche.Month, "m", "w"), map[string]tranche.Mapping{"w": open})}},
		{"a trailing week of days", []tranche.Asset{at(tranche.Day, "d"), mapped(at(tranche.Day, "model", "d"), map[string]tranche.Mapping{"d": {Lookback: 7, Offset: 1}})}},
		{"the zero mapping spelled out", []tranche.Asset{at(tranche.Day, "d"), mapped(at(tranche.Day, "e", "d"), map[string]tranche.Mapping{"d": {}})}},
	}
	for _, tc := range accepted {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tranche.NewDAG(tc.assets...); err != nil {
				t.Fatalf("NewDAG: %v", err)
			}
		})
	}
}

// recorder is an asset function that records the partitions it is
// called with and returns one row per partition, holding its key, and
// what it read of each dependency, by partition.
type recorder struct {
	mu     sync.Mutex
	called map[string][]string            // asset → the keys it ran for, in call order
	read   map[string]map[string][]string // asset → dependency → the keys of the batches it read
}

func newRecorder() *recorder {
	return &recorder{called: map[string][]string{}, read: map[string]map[string][]string{}}
}

func (r *recorder) asset(name string, p tranche.Partitioning, deps ...string) tranche.Asset {
	p.Column = "key"
	return tranche.Asset{Name: name, Deps: deps, Partitioning: p, Materialize: func(ctx context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
		var rows []tranche.Row
		var keys []string
		for q := range m.Window().OldestFirst() {
			rows = append(rows, tranche.Row{"key": q.Key()})
			keys = append(keys, q.Key())
		}
		read := map[string][]string{}
		for _, dep := range deps {
			batches, err := m.Inputs(dep)
			if err != nil {
				return nil, err
			}
			all, err := m.Input(dep)
			if err != nil {
				return nil, err
			}
			n := 0
			for _, b := range batches {
				read[dep] = append(read[dep], b.Partition.Key())
				if len(b.Rows) != 1 || b.Rows[0]["key"] != b.Partition.Key() {
					return nil, fmt.Errorf("%s read %s of %s: rows %v", name, b.Partition.Key(), dep, b.Rows)
				}
				n += len(b.Rows)
			}
			if len(all) != n {
				return nil, fmt.Errorf("%s: Input(%q) has %d rows, Inputs %d", name, dep, len(all), n)
			}
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		r.called[name] = append(r.called[name], keys...)
		if len(read) > 0 {
			if r.read[name] == nil {
				r.read[name] = map[string][]string{}
			}
			for dep, ks := range read {
				r.read[name][dep] = append(r.read[name][dep], ks...)
			}
		}
		return rows, nil
	}}
}

func mustZone(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func mustKey(t testing.TB, g tranche.TimeGranularity, key string, loc *time.Location) tranche.TimePartition {
	t.Helper()
	p, err := tranche.ParsePartitionKey(g, key, loc)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRunMapsHoursIntoDay: a run of a New York day runs its hourly
// dependency for each of its 23, 24 or 25 hours first, and the day reads
// them all, each with its partition; the monthly report downstream,
// which the day does not hold, is skipped.
func TestRunMapsHoursIntoDay(t *testing.T) {
	ny := mustZone(t, "America/New_York")
	for _, tc := range []struct {
		day   string
		hours int
		twice string // a local hour that occurs twice, or ""
	}{
		{"2024-03-10", 23, ""},
		{"2024-06-15", 24, ""},
		{"2024-11-03", 25, "2024-11-03T01:00"},
	} {
		t.Run(tc.day, func(t *testing.T) {
			rec := newRecorder()
			dag, err := tranche.NewDAG(
				rec.asset("hourly", tranche.Partitioning{Granularity: tranche.Hour}),
				rec.asset("daily", tranche.Partitioning{Granularity: tranche.Day}, "hourly"),
				rec.asset("monthly", tranche.Partitioning{Granularity: tranche.Month}, "daily"),
			)
			if err != nil {
				t.Fatal(err)
			}
			d := mustKey(t, tranche.Day, tc.day, ny)
			res, err := (&tranche.Runner{}).Run(context.Background(), dag, d)
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for h := d.Start; h.Before(d.End); h = h.Add(time.Hour) {
				want = append(want, tranche.PartitionOf(tranche.Hour, h).Key())
			}
			if len(want) != tc.hours {
				t.Fatalf("the day has %d hours by the clock, want %d", len(want), tc.hours)
			}
			got := slices.Clone(rec.called["hourly"])
			slices.Sort(got)
			sorted := slices.Clone(want)
			slices.Sort(sorted)
			if diff := cmp.Diff(sorted, got); diff != "" {
				t.Errorf("hourly ran for (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(want, rec.read["daily"]["hourly"]); diff != "" {
				t.Errorf("daily read (-want +got):\n%s", diff)
			}
			if tc.twice != "" {
				n := 0
				for _, k := range want {
					if strings.HasPrefix(k, tc.twice) {
						n++
					}
				}
				if n != 2 {
					t.Errorf("local %s read %d times, want 2 (-04:00 then -05:00)", tc.twice, n)
				}
			}
			if diff := cmp.Diff([]string{tc.day}, rec.called["daily"]); diff != "" {
				t.Errorf("daily ran for (-want +got):\n%s", diff)
			}
			if len(rec.called["monthly"]) != 0 {
				t.Errorf("monthly ran for %v, want nothing", rec.called["monthly"])
			}
			if diff := cmp.Diff([]string{"hourly", "daily"}, res.Succeeded); diff != "" {
				t.Errorf("Succeeded (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{"monthly"}, res.Skipped); diff != "" {
				t.Errorf("Skipped (-want +got):\n%s", diff)
			}
			h := assetResult(res, "hourly")
			if h.Attempts != tc.hours || h.Rows != tc.hours || len(h.RowsByPartition) != tc.hours {
				t.Errorf("hourly's result: %d attempts, %d rows, %d partitions; want %d of each", h.Attempts, h.Rows, len(h.RowsByPartition), tc.hours)
			}
			if m := assetResult(res, "monthly"); !errors.Is(m.Err, tranche.ErrSkip) || !strings.Contains(m.Err.Error(), `asset "monthly" (month) not run: the run's target `+tc.day+` holds none of its partitions`) {
				t.Errorf("monthly's error: %v", m.Err)
			}
		})
	}
}

// TestRunTrailingWindow: a seven-day trailing model reads the seven days
// before its own, which the run materializes, with their hours, each
// once, before the model; a month run of a month of days.
func TestRunTrailingWindow(t *testing.T) {
	berlin := mustZone(t, "Europe/Berlin")
	rec := newRecorder()
	dag, err := tranche.NewDAG(
		rec.asset("hourly", tranche.Partitioning{Granularity: tranche.Hour}),
		rec.asset("daily", tranche.Partitioning{Granularity: tranche.Day}, "hourly"),
		func() tranche.Asset {
			a := rec.asset("model", tranche.Partitioning{Granularity: tranche.Day}, "daily")
			a.Mappings = map[string]tranche.Mapping{"daily": {Lookback: 7, Offset: 1}}
			return a
		}(),
	)
	if err != nil {
		t.Fatal(err)
	}
	d := mustKey(t, tranche.Day, "2024-04-02", berlin)
	var mu sync.Mutex
	var order []string
	r := &tranche.Runner{MaxConcurrentAssets: 4, OnEvent: func(_ context.Context, e tranche.Event) {
		if e.Kind == tranche.KindAssetSucceeded {
			mu.Lock()
			order = append(order, e.Asset+" "+e.Target)
			mu.Unlock()
		}
	}}
	if _, err := r.Run(context.Background(), dag, d); err != nil {
		t.Fatal(err)
	}
	want := []string{"2024-03-26", "2024-03-27", "2024-03-28", "2024-03-29", "2024-03-30", "2024-03-31", "2024-04-01"}
	if diff := cmp.Diff(want, rec.read["model"]["daily"]); diff != "" {
		t.Errorf("model read (-want +got):\n%s", diff)
	}
	days := slices.Clone(rec.called["daily"])
	slices.Sort(days)
	if diff := cmp.Diff(append(slices.Clone(want), "2024-04-02"), days); diff != "" {
		t.Errorf("daily ran for (-want +got):\n%s", diff)
	}
	// 8 days of hours, Berlin's 2024-03-31 has 23.
	if n := len(rec.called["hourly"]); n != 8*24-1 {
		t.Errorf("hourly ran %d times, want %d", n, 8*24-1)
	}
	if n := len(rec.read["daily"]["hourly"]); n != 8*24-1 {
		t.Errorf("the days read %d hours, want %d", n, 8*24-1)
	}
	// Each partition once, each before what reads it.
	pos := map[string]int{}
	for i, o := range order {
		if _, dup := pos[o]; dup {
			t.Errorf("%s ran twice", o)
		}
		pos[o] = i
	}
	for _, d := range want {
		if pos["model 2024-04-02"] < pos["daily "+d] {
			t.Errorf("the model ran before day %s it reads: %v", d, order)
		}
	}
	for h := range slices.Values(rec.called["hourly"]) {
		hp := mustKey(t, tranche.Hour, h, berlin)
		dk := "daily " + tranche.PartitionOf(tranche.Day, hp.Start).Key()
		if pos["hourly "+h] > pos[dk] {
			t.Errorf("hour %s ran after its day", h)
		}
	}
}

// TestRunOpenMapping: an hour that reads its day's reference data, which
// has not closed, declared Open, gets the day run first; Offset 1 reads
// the day before.
func TestRunOpenMapping(t *testing.T) {
	for _, tc := range []struct {
		m    tranche.Mapping
		want string
	}{
		{tranche.Mapping{Open: true}, "2026-03-08"},
		{tranche.Mapping{Offset: 1}, "2026-03-07"},
	} {
		rec := newRecorder()
		h := rec.asset("h", tranche.Partitioning{Granularity: tranche.Hour}, "ref")
		h.Mappings = map[string]tranche.Mapping{"ref": tc.m}
		dag, err := tranche.NewDAG(rec.asset("ref", tranche.Partitioning{Granularity: tranche.Day}), h)
		if err != nil {
			t.Fatal(err)
		}
		hour := mustKey(t, tranche.Hour, "2026-03-08T05:00Z", time.UTC)
		if _, err := (&tranche.Runner{}).Run(context.Background(), dag, hour); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{tc.want}, rec.read["h"]["ref"]); diff != "" {
			t.Errorf("%+v: h read (-want +got):\n%s", tc.m, diff)
		}
	}
}

// TestRunReadsMappedPartitions: with Runner.Read, a run materializes its
// target's partitions only and reads the rest.
func TestRunReadsMappedPartitions(t *testing.T) {
	rec := newRecorder()
	model := rec.asset("model", tranche.Partitioning{Granularity: tranche.Day}, "daily", "hourly")
	model.Mappings = map[string]tranche.Mapping{"daily": {Lookback: 3, Offset: 1}, "hourly": {Lookback: 2}}
	dag, err := tranche.NewDAG(
		rec.asset("hourly", tranche.Partitioning{Granularity: tranche.Hour}),
		rec.asset("daily", tranche.Partitioning{Granularity: tranche.Day}, "hourly"),
		model,
	)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var reads []string
	r := &tranche.Runner{Read: func(ctx context.Context, asset string, p tranche.TimePartition) ([]tranche.Row, error) {
		mu.Lock()
		defer mu.Unlock()
		reads = append(reads, asset+" "+p.Key())
		return []tranche.Row{{"key": p.Key()}}, nil
	}}
	d := mustKey(t, tranche.Day, "2026-01-10", time.UTC)
	if _, err := r.Run(context.Background(), dag, d); err != nil {
		t.Fatal(err)
	}
	if len(rec.called["hourly"]) != 0 {
		t.Errorf("hourly ran for %v, want it read", rec.called["hourly"])
	}
	if diff := cmp.Diff([]string{"2026-01-10"}, rec.called["daily"]); diff != "" {
		t.Errorf("daily ran for (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"2026-01-07", "2026-01-08", "2026-01-09"}, rec.read["model"]["daily"]); diff != "" {
		t.Errorf("model read of daily (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"2026-01-10T22:00Z", "2026-01-10T23:00Z"}, rec.read["model"]["hourly"]); diff != "" {
		t.Errorf("model read of hourly (-want +got):\n%s", diff)
	}
	slices.Sort(reads)
	if len(reads) != 24+3+2 {
		t.Errorf("Read called %d times, want 29 (24 hours of the day, 3 days, 2 hours): %v", len(reads), reads)
	}
	failing := &tranche.Runner{Read: func(context.Context, string, tranche.TimePartition) ([]tranche.Row, error) {
		return nil, errors.New("warehouse down")
	}}
	if _, err := failing.Run(context.Background(), dag, d); err == nil || !strings.Contains(err.Error(), "reading partition 2026-01-10T00:00Z of dependency \"hourly\": warehouse down") {
		t.Errorf("a failed read: %v", err)
	}
}

// TestRunMappedFailure: an hour that fails fails its day's run, which
// names the hour, and cancels the day.
func TestRunMappedFailure(t *testing.T) {
	hourly := tranche.Asset{Name: "hourly", Partitioning: tranche.Partitioning{Granularity: tranche.Hour}, Materialize: func(ctx context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
		p, err := m.Partition()
		if err != nil {
			return nil, err
		}
		if p.Start.Hour() == 5 {
			return nil, errors.New("late file")
		}
		return nil, nil
	}}
	dag, err := tranche.NewDAG(hourly, partitioned(tranchetest.Noop("daily", "hourly"), tranche.Partitioning{Granularity: tranche.Day}))
	if err != nil {
		t.Fatal(err)
	}
	res, err := (&tranche.Runner{MaxConcurrentAssets: 1}).Run(context.Background(), dag, day(8))
	if err == nil || !strings.Contains(err.Error(), `asset "hourly" failed for 2026-01-08T05:00Z`) {
		t.Fatalf("Run error: %v", err)
	}
	if res.State != tranche.StateFailed || !slices.Equal(res.Failed, []string{"hourly"}) || !slices.Equal(res.Canceled, []string{"daily"}) {
		t.Errorf("result: %s, failed %v, canceled %v", res.State, res.Failed, res.Canceled)
	}
	if h := assetResult(res, "hourly"); h.Attempts != 6 {
		t.Errorf("hourly made %d attempts, want 6 (fail-fast after 05:00)", h.Attempts)
	}
}

// TestRunMappedWindow: a window run of days whose hourly dependency
// allows windows runs the hours as one window, and each day reads its own.
func TestRunMappedWindow(t *testing.T) {
	rec := newRecorder()
	dag, err := tranche.NewDAG(
		rec.asset("hourly", tranche.Partitioning{Granularity: tranche.Hour, AllowWindow: true}),
		rec.asset("daily", tranche.Partitioning{Granularity: tranche.Day, AllowWindow: true}, "hourly"),
	)
	if err != nil {
		t.Fatal(err)
	}
	ny := mustZone(t, "America/New_York")
	w, err := tranche.NewTimePartitionWindow(tranche.Day, time.Date(2024, 3, 9, 0, 0, 0, 0, ny), time.Date(2024, 3, 11, 0, 0, 0, 0, ny))
	if err != nil {
		t.Fatal(err)
	}
	res, err := (&tranche.Runner{}).Run(context.Background(), dag, w)
	if err != nil {
		t.Fatal(err)
	}
	if h := assetResult(res, "hourly"); h.Attempts != 1 || h.Rows != 71 {
		t.Errorf("hourly: %d calls, %d rows; want 1 call of 71 hours (24+23+24)", h.Attempts, h.Rows)
	}
	if n := len(rec.read["daily"]["hourly"]); n != 71 {
		t.Errorf("daily read %d hours, want 71", n)
	}
}

// TestRunScheduleSlotMapping: a cron slot reads the hours of its window;
// a slot that ends inside an hour must declare Open.
func TestRunScheduleSlotMapping(t *testing.T) {
	for _, tc := range []struct {
		expr, fire string
		open       bool
		want       int    // hours read
		err        string // or the run's error
	}{
		{"0 2 * * *", "2026-03-08T02:00:00Z", false, 24, ""},
		{"30 2 * * *", "2026-03-08T02:30:00Z", false, 0, `asset "slot" reads hour partition 2026-03-08T02:00Z of its dependency, which ends after its own partition`},
		{"30 2 * * *", "2026-03-08T02:30:00Z", true, 25, ""},
	} {
		g, err := tranche.ParseCron(tc.expr)
		if err != nil {
			t.Fatal(err)
		}
		rec := newRecorder()
		slot := rec.asset("slot", tranche.Partitioning{Granularity: g}, "hourly")
		slot.Mappings = map[string]tranche.Mapping{"hourly": {Open: tc.open}}
		dag, err := tranche.NewDAG(rec.asset("hourly", tranche.Partitioning{Granularity: tranche.Hour}), slot)
		if err != nil {
			t.Fatal(err)
		}
		fire, _ := time.Parse(time.RFC3339, tc.fire)
		p, err := tranche.SlotAt(g, fire)
		if err != nil {
			t.Fatal(err)
		}
		_, err = (&tranche.Runner{}).Run(context.Background(), dag, p)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: Run error %v, want %q", tc.expr, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.expr, err)
		}
		if n := len(rec.read["slot"]["hourly"]); n != tc.want {
			t.Errorf("%s: the slot read %d hours, want %d", tc.expr, n, tc.want)
		}
	}
}

// TestRunFencedWritesOnlyTarget: a fenced run (a backfill's) of a day
// whose model reads the two days before writes the target's partitions
// only, with its token; the days before feed the model unwritten.
func TestRunFencedWritesOnlyTarget(t *testing.T) {
	for _, window := range []bool{false, true} {
		t.Run(fmt.Sprintf("AllowWindow=%v", window), func(t *testing.T) { fencedWritesOnlyTarget(t, window) })
	}
}

func fencedWritesOnlyTarget(t *testing.T, window bool) {
	rec := newRecorder()
	dst := new(tranche.MemoryDestination)
	daily := rec.asset("daily", tranche.Partitioning{Granularity: tranche.Day, AllowWindow: window})
	daily.Destinations = []tranche.Destination{dst}
	model := rec.asset("model", tranche.Partitioning{Granularity: tranche.Day}, "daily")
	model.Mappings = map[string]tranche.Mapping{"daily": {Lookback: 2, Offset: 1}}
	model.Destinations = []tranche.Destination{dst}
	dag, err := tranche.NewDAG(daily, model)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tranche.RunWithTokens(&tranche.Runner{}, context.Background(), dag, day(10), "fenced", []int64{7 << 20}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"2026-01-08", "2026-01-09"}, rec.read["model"]["daily"]); diff != "" {
		t.Errorf("model read (-want +got):\n%s", diff)
	}
	for _, a := range []string{"daily", "model"} {
		if diff := cmp.Diff([]string{"2026-01-10"}, dst.Keys(a)); diff != "" {
			t.Errorf("%s written (-want +got):\n%s", a, diff)
		}
	}
	// Unfenced, the run writes every partition it materialized.
	if _, err := (&tranche.Runner{}).Run(context.Background(), dag, day(10)); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"2026-01-08", "2026-01-09", "2026-01-10"}, dst.Keys("daily")); diff != "" {
		t.Errorf("daily written (-want +got):\n%s", diff)
	}
}
