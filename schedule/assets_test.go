package schedule_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/memledger"
	"github.com/tranche-dev/tranche/schedule"
)

// platform is a DAG of hourly events and a daily rollup of them, in New
// York, from 2026-03-07: the rollup reads each hour of its day through
// Runner.Read, from what the events' runs landed.
type platform struct {
	dag    *tranche.DAG
	clock  func() time.Time
	loc    *time.Location
	runner *tranche.Runner

	mu     sync.Mutex
	landed map[string]bool // the hours whose run succeeded
	days   []dayRun
	// take is how long an hour's run takes (slept on synctest's clock);
	// fail, the hours whose next run fails.
	take map[string]time.Duration
	fail map[string]bool
}

// dayRun is a run of the rollup: its day, when it ran by the
// scheduler's clock, and how many of its hours had landed.
type dayRun struct {
	key   string
	at    time.Time
	hours int
}

func newPlatform(t testing.TB, clock func() time.Time) *platform {
	t.Helper()
	loc := mustLoad(t, "America/New_York")
	pl := &platform{clock: clock, loc: loc, landed: map[string]bool{}, take: map[string]time.Duration{}, fail: map[string]bool{}}
	first := time.Date(2026, 3, 7, 0, 0, 0, 0, loc)
	part := func(g tranche.TimeGranularity) tranche.Partitioning {
		return tranche.Partitioning{Granularity: g, Location: loc, First: first}
	}
	dag, err := tranche.NewDAG(
		tranche.Asset{Name: "events", Partitioning: part(tranche.Hour), Materialize: pl.hour},
		tranche.Asset{Name: "rollup", Deps: []string{"events"}, Partitioning: part(tranche.Day), Materialize: pl.day},
	)
	if err != nil {
		t.Fatal(err)
	}
	dag.Name = "platform"
	pl.dag = dag
	pl.runner = &tranche.Runner{Read: func(_ context.Context, asset string, p tranche.TimePartition) ([]tranche.Row, error) {
		pl.mu.Lock()
		defer pl.mu.Unlock()
		if !pl.landed[p.Key()] {
			return nil, nil // not landed: the rollup makes do (RunLate)
		}
		return []tranche.Row{{"hour": p.Key()}}, nil
	}}
	return pl
}

func (pl *platform) hour(ctx context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
	p, err := m.Partition()
	if err != nil {
		return nil, err
	}
	pl.mu.Lock()
	take := pl.take[p.Key()]
	pl.mu.Unlock()
	select {
	case <-time.After(take):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if pl.fail[p.Key()] {
		delete(pl.fail, p.Key())
		return nil, fmt.Errorf("hour %s: the source was down", p.Key())
	}
	pl.landed[p.Key()] = true
	return []tranche.Row{{"hour": p.Key()}}, nil
}

func (pl *platform) day(_ context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
	p, err := m.Partition()
	if err != nil {
		return nil, err
	}
	rows, err := m.Input("events")
	if err != nil {
		return nil, err
	}
	pl.mu.Lock()
	pl.days = append(pl.days, dayRun{key: p.Key(), at: pl.clock(), hours: len(rows)})
	pl.mu.Unlock()
	return []tranche.Row{{"day": p.Key(), "hours": len(rows)}}, nil
}

func (pl *platform) dayRuns() []dayRun {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	return slices.Clone(pl.days)
}

// states returns the states of the attempts of the asset's partitions
// starting in [from, to), oldest first, by key, as the ledger records
// them under the asset's identity (that of a backfill of it).
func (pl *platform) states(t testing.TB, l ledger.Ledger, asset string, g tranche.TimeGranularity, from, to time.Time) map[string]string {
	t.Helper()
	dag, err := backfill.AssetDAG(pl.dag, asset, pl.runner.Read)
	if err != nil {
		t.Fatal(err)
	}
	id := backfill.DAGIdentity(dag, g, pl.loc)
	out := map[string]string{}
	for a, err := range l.Latest(context.Background(), id, from, to) {
		if err != nil {
			t.Fatal(err)
		}
		h, err := l.History(context.Background(), id, a.Start)
		if err != nil {
			t.Fatal(err)
		}
		var states []string
		for _, at := range h {
			s := string(at.State)
			if at.Err != "" {
				s += " (" + at.Err + ")"
			}
			states = append(states, s)
		}
		out[a.Key] = strings.Join(states, ",")
	}
	return out
}

// TestMixedGranularities schedules hourly events and their daily rollup
// in New York from 2026-03-06 23:30 to 2026-03-08 04:00, the hour
// 2026-03-07 23:00 taking two hours to run (it lands at 03:00 EDT on
// the 8th, the spring-forward). The rollup of the 7th comes due at midnight and waits for that
// hour: under each setting of the deadline, it runs once the hour
// landed, is recorded missed, or runs without it and, when asked, again
// once it landed.
func TestMixedGranularities(t *testing.T) {
	cases := []struct {
		name       string
		wait       time.Duration
		runLate    bool
		rerunStale bool
		// runs: the rollup's runs of the 7th, each at the clock's hour
		// and with how many hours landed.
		runs   []string
		state  string // the 7th's attempts in the ledger
		missed int
	}{
		{name: "waits for its hours", runs: []string{"03:00 24"}, state: "succeeded"}, // two hours after midnight: 03:00 EDT
		{name: "deadline passed: missed", wait: time.Hour, missed: 1,
			state: "canceled (missed: upstream events 2026-03-07T23:00-05:00 (running) had not succeeded 1h0m0s after the slot came due (WaitUpstream); a backfill runs it)"},
		{name: "deadline passed: run late", wait: time.Hour, runLate: true, runs: []string{"01:00 23"}, state: "succeeded"},
		{name: "run late, then the late hour reruns it", wait: time.Hour, runLate: true, rerunStale: true,
			runs: []string{"01:00 23", "03:00 24"}, state: "succeeded,succeeded"},
		{name: "stale but not asked", wait: time.Hour, runLate: true, runs: []string{"01:00 23"}, state: "succeeded"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				loc := mustLoad(t, "America/New_York")
				clock := offsetClock(time.Date(2026, 3, 6, 23, 30, 0, 0, loc))
				pl := newPlatform(t, clock)
				pl.take["2026-03-07T23:00-05:00"] = 2 * time.Hour
				l := memledger.New(clock)
				var ev events
				s := &schedule.Scheduler{DAG: pl.dag, Ledger: l, Runner: pl.runner, Now: clock, OnEvent: ev.hook,
					WaitUpstream: c.wait, RunLate: c.runLate, RerunStale: c.rerunStale}
				runFor(t, s, 28*time.Hour+30*time.Minute) // to 2026-03-08 04:00

				var runs []string
				for _, d := range pl.dayRuns() {
					if d.key != "2026-03-07" {
						t.Errorf("rollup ran %s at %v", d.key, d.at)
						continue
					}
					// Within a heartbeat interval of the hour.
					runs = append(runs, fmt.Sprintf("%s %d", d.at.In(loc).Truncate(time.Hour).Format("15:04"), d.hours))
				}
				if !slices.Equal(runs, c.runs) {
					t.Errorf("rollup's runs of 2026-03-07: %q; want %q", runs, c.runs)
				}
				from, to := time.Date(2026, 3, 7, 0, 0, 0, 0, loc), time.Date(2026, 3, 8, 0, 0, 0, 0, loc)
				days := pl.states(t, l, "rollup", tranche.Day, from, to)
				if got := days["2026-03-07"]; got != c.state || len(days) != 1 {
					t.Errorf("rollup's attempts: %q; want 2026-03-07: %q", days, c.state)
				}
				hours := pl.states(t, l, "events", tranche.Hour, from, to)
				if len(hours) != 24 {
					t.Errorf("%d hours of 2026-03-07 recorded; want 24: %v", len(hours), hours)
				}
				for k, st := range hours {
					if st != "succeeded" {
						t.Errorf("hour %s: %s; want succeeded", k, st)
					}
				}
				st := s.Status()
				if len(st.Assets) != 2 || st.Missed != c.missed || st.Worker == "" || st.Assets[1].Worker != st.Worker {
					t.Errorf("status: %d assets, %d missed, worker %q; want 2, %d, and each asset's worker the scheduler's", len(st.Assets), st.Missed, st.Worker, c.missed)
				}
				if w := ev.of(schedule.KindWaiting); len(w) != 1 || !strings.HasPrefix(w[0], "2026-03-07 ") {
					t.Errorf("waiting events: %q; want one, of 2026-03-07", w)
				}
				if n := len(ev.of(schedule.KindStale)); (n > 0) != c.rerunStale {
					t.Errorf("%d stale events; want some only under RerunStale", n)
				}
			})
		})
	}
}

// TestMixedBeginsAtOneInstant starts the assets' schedulers of a DAG of
// two granularities a moment before midnight, and has them first look
// at the clock after it, as a loaded machine may: the hour from 23:00
// and the day, both due at midnight, came due while Run ran, and run;
// neither is taken for a slot due before the scheduler started.
func TestMixedBeginsAtOneInstant(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		loc := mustLoad(t, "America/New_York")
		clock := offsetClock(time.Date(2026, 3, 8, 0, 1, 0, 0, loc))
		var calls int
		var mu sync.Mutex
		late := func() time.Time {
			mu.Lock()
			defer mu.Unlock()
			if calls++; calls == 1 {
				return clock().Add(-2 * time.Minute) // Run begins at 23:59
			}
			return clock()
		}
		pl := newPlatform(t, clock)
		l := memledger.New(clock)
		hours, err := tranche.WindowBetween(tranche.Hour, time.Date(2026, 3, 7, 0, 0, 0, 0, loc), time.Date(2026, 3, 7, 23, 0, 0, 0, loc))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := (&backfill.Backfill{DAG: pl.dag, Ledger: l, Runner: pl.runner, Window: hours}).Run(t.Context()); err != nil {
			t.Fatal(err)
		}
		s := &schedule.Scheduler{DAG: pl.dag, Ledger: l, Runner: pl.runner, Now: late}
		runFor(t, s, 30*time.Minute)
		if got, want := pl.dayRuns(), []string{"2026-03-07 24"}; len(got) != 1 || fmt.Sprintf("%s %d", got[0].key, got[0].hours) != want[0] {
			t.Errorf("rollup's runs: %v; want %q", got, want)
		}
		if got := pl.states(t, l, "events", tranche.Hour, time.Date(2026, 3, 7, 23, 0, 0, 0, loc), time.Date(2026, 3, 8, 0, 0, 0, 0, loc)); got["2026-03-07T23:00-05:00"] != "succeeded" {
			t.Errorf("the hour from 23:00: %q; want succeeded", got)
		}
	})
}

// TestMixedStaleReload shares a ledger between backfills and the
// scheduler of hourly events and their daily rollup: a backfill lands
// March 7 and 8 (New York), the scheduler then runs the hour from
// 2026-03-09 23:00 and the 9th, and not the days the backfill landed;
// then three hours of the 8th are reloaded (a backfill of the events
// alone, rerun all). Under RerunStale the scheduler finds the 8th stale
// and runs it again, and a backfill's plan then finds nothing stale;
// otherwise the 8th is left stale, for a backfill to rerun.
func TestMixedStaleReload(t *testing.T) {
	for _, rerun := range []bool{false, true} {
		t.Run(fmt.Sprint("RerunStale=", rerun), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := t.Context()
				loc := mustLoad(t, "America/New_York")
				clock := offsetClock(time.Date(2026, 3, 9, 23, 30, 0, 0, loc))
				pl := newPlatform(t, clock)
				l := memledger.New(clock)
				hours, err := tranche.WindowBetween(tranche.Hour, time.Date(2026, 3, 7, 0, 0, 0, 0, loc), time.Date(2026, 3, 9, 23, 0, 0, 0, loc)) // to 22:00
				if err != nil {
					t.Fatal(err)
				}
				if _, err := (&backfill.Backfill{DAG: pl.dag, Window: hours, Ledger: l, Runner: pl.runner}).Run(ctx); err != nil {
					t.Fatal(err)
				}
				s := &schedule.Scheduler{DAG: pl.dag, Ledger: l, Runner: pl.runner, Now: clock, RerunStale: rerun}
				stop := start(t, s)
				time.Sleep(time.Hour) // to 00:30 on the 10th: the hour from 23:00 and the 9th run

				events, err := backfill.AssetDAG(pl.dag, "events", pl.runner.Read)
				if err != nil {
					t.Fatal(err)
				}
				reload, err := tranche.WindowBetween(tranche.Hour, time.Date(2026, 3, 8, 5, 0, 0, 0, loc), time.Date(2026, 3, 8, 7, 0, 0, 0, loc))
				if err != nil {
					t.Fatal(err)
				}
				if _, err := (&backfill.Backfill{DAG: events, Window: reload, Ledger: l, Runner: pl.runner, Rerun: ledger.RerunAll}).Run(ctx); err != nil {
					t.Fatal(err)
				}
				time.Sleep(15 * time.Second) // a heartbeat interval (10 s), and the run
				stop()

				var runs []string
				for _, d := range pl.dayRuns() {
					runs = append(runs, d.key)
				}
				slices.Sort(runs[:min(2, len(runs))]) // the backfill's, at once
				want := []string{"2026-03-07", "2026-03-08", "2026-03-09"}
				if rerun {
					want = append(want, "2026-03-08")
				}
				if !slices.Equal(runs, want) {
					t.Errorf("rollup's runs: %q; want %q", runs, want)
				}
				days, err := tranche.WindowBetween(tranche.Day, time.Date(2026, 3, 7, 0, 0, 0, 0, loc), time.Date(2026, 3, 9, 0, 0, 0, 0, loc))
				if err != nil {
					t.Fatal(err)
				}
				plan, err := (&backfill.Backfill{DAG: pl.dag, Window: days, Ledger: l, Runner: pl.runner, Rerun: ledger.RerunStale}).Plan(ctx)
				if err != nil {
					t.Fatal(err)
				}
				stale := -1
				for _, ap := range plan.Assets {
					if ap.Asset == "rollup" {
						stale = ap.Stale
					}
				}
				if want := map[bool]int{false: 1, true: 0}[rerun]; stale != want {
					t.Errorf("the plan finds %d stale days; want %d", stale, want)
				}
			})
		})
	}
}

// TestMixedPause pauses a scheduler of two granularities, which needs
// no Runner to: each asset's schedule is paused in the ledger, under the
// identity its scheduler reads.
func TestMixedPause(t *testing.T) {
	ctx := t.Context()
	pl := newPlatform(t, time.Now)
	l := memledger.New(nil)
	if _, err := (&schedule.Scheduler{DAG: pl.dag, Ledger: l}).Pause(ctx, "ops", "reload"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		asset string
		g     tranche.TimeGranularity
	}{{"events", tranche.Hour}, {"rollup", tranche.Day}} {
		dag, err := backfill.AssetDAG(pl.dag, c.asset, nil)
		if err != nil {
			t.Fatal(err)
		}
		p, err := l.SchedulePause(ctx, backfill.DAGIdentity(dag, c.g, pl.loc))
		if err != nil {
			t.Fatal(err)
		}
		if !p.Paused || p.By != "ops" {
			t.Errorf("asset %s: pause %+v; want paused by ops", c.asset, p)
		}
	}
}

// TestMixedOpenCoarser schedules hours that read their day's reference
// data (Mapping{Open: true}): an hour runs at its close, not once its
// day, which closes after it, has landed.
func TestMixedOpenCoarser(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		loc := mustLoad(t, "America/New_York")
		clock := offsetClock(time.Date(2026, 3, 7, 0, 30, 0, 0, loc))
		first := time.Date(2026, 3, 7, 0, 0, 0, 0, loc)
		var mu sync.Mutex
		var hours []string
		dag, err := tranche.NewDAG(
			tranche.Asset{Name: "ref", Partitioning: tranche.Partitioning{Granularity: tranche.Day, Location: loc, First: first},
				Materialize: func(context.Context, *tranche.Materialization) ([]tranche.Row, error) { return nil, nil }},
			tranche.Asset{Name: "events", Deps: []string{"ref"}, Partitioning: tranche.Partitioning{Granularity: tranche.Hour, Location: loc, First: first},
				Mappings: map[string]tranche.Mapping{"ref": {Open: true}},
				Materialize: func(_ context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
					p, err := m.Partition()
					if err != nil {
						return nil, err
					}
					mu.Lock()
					hours = append(hours, p.Key()+" "+clock().Sub(p.End).Truncate(time.Minute).String())
					mu.Unlock()
					return nil, nil
				}},
		)
		if err != nil {
			t.Fatal(err)
		}
		read := func(context.Context, string, tranche.TimePartition) ([]tranche.Row, error) { return nil, nil }
		s := &schedule.Scheduler{DAG: dag, Ledger: memledger.New(clock), Runner: &tranche.Runner{Read: read}, Now: clock}
		runFor(t, s, 3*time.Hour)
		want := []string{"2026-03-07T00:00-05:00 0s", "2026-03-07T01:00-05:00 0s", "2026-03-07T02:00-05:00 0s"}
		if !slices.Equal(hours, want) {
			t.Errorf("hours run, each with its lag after its close: %q; want %q", hours, want)
		}
	})
}

// TestMixedFailedHourBackfilled fails the hour 2026-03-07 23:00 (New
// York): the 7th's rollup waits for it, a backfill of the hours (rerun
// failed, its default) runs it again at 02:00, and the rollup then runs
// live, with its 24 hours.
func TestMixedFailedHourBackfilled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		loc := mustLoad(t, "America/New_York")
		clock := offsetClock(time.Date(2026, 3, 6, 23, 30, 0, 0, loc))
		pl := newPlatform(t, clock)
		pl.fail["2026-03-07T23:00-05:00"] = true
		l := memledger.New(clock)
		s := &schedule.Scheduler{DAG: pl.dag, Ledger: l, Runner: pl.runner, Now: clock}
		stop := start(t, s)
		time.Sleep(26*time.Hour + 30*time.Minute) // to 2026-03-08 02:00 EST, 03:00 EDT
		if runs := pl.dayRuns(); len(runs) != 0 {
			t.Fatalf("the rollup ran before its failed hour was rerun: %+v", runs)
		}
		events, err := backfill.AssetDAG(pl.dag, "events", pl.runner.Read)
		if err != nil {
			t.Fatal(err)
		}
		day, err := tranche.WindowBetween(tranche.Hour, time.Date(2026, 3, 7, 0, 0, 0, 0, loc), time.Date(2026, 3, 8, 0, 0, 0, 0, loc))
		if err != nil {
			t.Fatal(err)
		}
		rep, err := (&backfill.Backfill{DAG: events, Window: day, Ledger: l, Runner: pl.runner}).Run(t.Context())
		if err != nil || rep.Succeeded != 1 {
			t.Fatalf("backfill of the 7th's hours: %v, %+v; want the failed hour run", err, rep)
		}
		time.Sleep(20 * time.Second) // two heartbeat intervals
		stop()
		runs := pl.dayRuns()
		if len(runs) != 1 || runs[0].key != "2026-03-07" || runs[0].hours != 24 {
			t.Errorf("rollup's runs: %+v; want 2026-03-07 once, with 24 hours", runs)
		}
		if got := pl.states(t, l, "rollup", tranche.Day, day.Start(), day.End())["2026-03-07"]; got != "succeeded" {
			t.Errorf("the 7th's rollup: %q; want succeeded", got)
		}
	})
}
