package schedule_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/memledger"
	"github.com/tranche-dev/tranche/schedule"
)

// TestFirstRun: with no ordinary run of the DAG in the ledger, empty or
// holding only backfills, the scheduler starts from now: it waits for
// the next close and catches nothing up.
func TestFirstRun(t *testing.T) {
	for _, backfilled := range []bool{false, true} {
		name := "empty ledger"
		if backfilled {
			name = "backfills only"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				loc := mustLoad(t, "Europe/Paris")
				now := time.Date(2026, 3, 20, 10, 20, 0, 0, loc)
				clock := offsetClock(now)
				l := memledger.New(clock)
				w := newWork(t, tranche.Day, loc, clock)
				if backfilled {
					// Last week, by a backfill: not this scheduler's history.
					week, err := tranche.NewTimePartitionWindow(tranche.Day, now.AddDate(0, 0, -10), now.AddDate(0, 0, -4))
					if err != nil {
						t.Fatal(err)
					}
					if _, err := (&backfill.Backfill{DAG: w.dag, Window: week, Ledger: l}).Run(context.Background()); err != nil {
						t.Fatal(err)
					}
				}
				before := len(w.keys())
				var ev events
				s := &schedule.Scheduler{DAG: w.dag, Ledger: l, Now: clock, OnEvent: ev.hook}
				stop := start(t, s)
				time.Sleep(time.Minute)
				st := s.Status()
				if st.Next.Key() != "2026-03-20" || !st.NextDue.Equal(time.Date(2026, 3, 21, 0, 0, 0, 0, loc)) || st.Missed != 0 {
					t.Errorf("Status at start: next %s due %v, %d missed; want 2026-03-20 due at midnight, none missed", st.Next.Key(), st.NextDue, st.Missed)
				}
				time.Sleep(14 * time.Hour)
				stop()
				if diff := cmp.Diff([]string{"2026-03-20"}, w.keys()[before:]); diff != "" {
					t.Errorf("runs (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff([]string{"2026-03-20"}, ev.of(schedule.KindStarted)); diff != "" {
					t.Errorf("started (-want +got):\n%s", diff)
				}
				if got := ev.of(schedule.KindMissed); len(got) != 0 {
					t.Errorf("missed %v on a first run", got)
				}
			})
		})
	}
}

// TestShutdownLeavesLease: a slot running when Run's context ends is
// interrupted and left to its lease, not recorded failed; started again,
// the scheduler takes it over once the lease expires and runs it.
func TestShutdownLeavesLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := time.Date(2026, 1, 10, 0, 30, 0, 0, time.UTC)
		clock := offsetClock(base)
		l := memledger.New(clock)
		w := newWork(t, tranche.Hour, time.UTC, clock)
		var slow atomic.Bool
		slow.Store(true)
		w.take = func(string) time.Duration {
			if slow.Load() {
				return 2 * time.Hour
			}
			return time.Minute
		}
		var ev events
		s := &schedule.Scheduler{DAG: w.dag, Ledger: l, Now: clock, OnEvent: ev.hook}
		runFor(t, s, 40*time.Minute) // 00:00 starts at 01:00 and is stopped at 01:10
		if diff := cmp.Diff([]string{"2026-01-10T00:00Z live"}, ev.of(schedule.KindInterrupted)); diff != "" {
			t.Fatalf("interrupted (-want +got):\n%s", diff)
		}
		st := s.Status()
		if st.LastState != ledger.StateCanceled || !errors.Is(st.LastErr, context.Canceled) || st.Interrupted != 1 {
			t.Errorf("Status: last %s (%v), %d interrupted", st.LastState, st.LastErr, st.Interrupted)
		}
		h := history(t, l, w.dag, tranche.Hour, time.UTC, base.Add(-time.Hour), base)
		if h["2026-01-10T00:00Z"] != "[running]" {
			t.Fatalf("history after the stop: %v, want the attempt left running", h)
		}
		slow.Store(false)
		claimed := time.Now()
		var ev2 events
		s.OnEvent = ev2.hook
		runFor(t, s, 10*time.Minute)
		if diff := cmp.Diff([]string{"2026-01-10T00:00Z catch-up"}, ev2.of(schedule.KindSucceeded)); diff != "" {
			t.Errorf("after the restart, succeeded (-want +got):\n%s", diff)
		}
		h = history(t, l, w.dag, tranche.Hour, time.UTC, base.Add(-time.Hour), base)
		if h["2026-01-10T00:00Z"] != "[failed succeeded]" {
			t.Errorf("history after the restart: %v, want the left attempt taken over and a success", h)
		}
		for _, e := range ev2.list() {
			if e.Kind == schedule.KindClaimed && e.Time.Sub(claimed) < backfill.DefaultLease-backfill.DefaultLease/3 {
				t.Errorf("claimed again %v after the restart, before the lease could expire", e.Time.Sub(claimed))
			}
		}
	})
}

// TestClockJump: the wall clock steps forward three days (a suspended
// machine, a corrected clock): the scheduler notices within a minute,
// catches up the newest five, as a restart would, and reports the rest.
// A step back runs nothing twice.
func TestClockJump(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := time.Date(2026, 1, 10, 0, 30, 0, 0, time.UTC)
		var jump atomic.Int64
		offset := offsetClock(base)
		clock := func() time.Time { return offset().Add(time.Duration(jump.Load())) }
		w := newWork(t, tranche.Hour, time.UTC, clock)
		var ev events
		s := &schedule.Scheduler{DAG: w.dag, Ledger: memledger.New(clock), Now: clock, OnEvent: ev.hook}
		stop := start(t, s)
		time.Sleep(time.Hour) // 00:00 runs at 01:00
		jump.Store(int64(72 * time.Hour))
		time.Sleep(90 * time.Second) // at 2026-01-13T01:31:30: the scheduler looked at its clock meanwhile
		st := s.Status()
		if st.Missed != 67 {
			t.Errorf("missed %d slots, want 72 closed less 5 caught up", st.Missed)
		}
		succeeded := ev.of(schedule.KindSucceeded)
		want := []string{"2026-01-10T00:00Z live",
			"2026-01-12T20:00Z catch-up", "2026-01-12T21:00Z catch-up",
			"2026-01-12T22:00Z catch-up", "2026-01-12T23:00Z catch-up", "2026-01-13T00:00Z catch-up"}
		if diff := cmp.Diff(want, succeeded); diff != "" {
			t.Errorf("succeeded after the jump (-want +got):\n%s", diff)
		}
		// Back by two hours: the slots already run stay run.
		jump.Store(int64(70 * time.Hour))
		time.Sleep(3 * time.Hour) // the clock reads 2026-01-13T02:31:30 at the end
		stop()
		keys := w.keys()
		seen := map[string]bool{}
		for _, k := range keys {
			if seen[k] {
				t.Errorf("slot %s ran twice", k)
			}
			seen[k] = true
		}
		if last := keys[len(keys)-1]; last != "2026-01-13T01:00Z" {
			t.Errorf("the last slot run is %s, want 2026-01-13T01:00Z, which closed when the clock caught up", last)
		}
	})
}

// TestClockJumpAsRestart: a running scheduler whose clock steps from
// 02:30 to 12:30 finds ten slots due at once, as a scheduler restarted at
// 12:30 after stopping at 02:30 does; one catch-up rule holds for both:
// the newest MaxCatchUp (3) run, triggered catch-up, and the 7 older are
// reported missed. None of them is live: none came due while the
// scheduler watched its clock.
func TestClockJumpAsRestart(t *testing.T) {
	for _, restart := range []bool{false, true} {
		t.Run(map[bool]string{false: "jump", true: "restart"}[restart], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := time.Date(2026, 1, 10, 0, 30, 0, 0, time.UTC)
				var jump atomic.Int64
				offset := offsetClock(base)
				clock := func() time.Time { return offset().Add(time.Duration(jump.Load())) }
				w := newWork(t, tranche.Hour, time.UTC, clock)
				var ev events
				s := &schedule.Scheduler{DAG: w.dag, Ledger: memledger.New(clock), MaxCatchUp: 3, Now: clock, OnEvent: ev.hook}
				if restart {
					runFor(t, s, 2*time.Hour)
					jump.Store(int64(10 * time.Hour))
					runFor(t, s, 20*time.Minute)
				} else {
					stop := start(t, s)
					time.Sleep(2 * time.Hour)
					jump.Store(int64(10 * time.Hour))
					time.Sleep(20 * time.Minute)
					stop()
				}
				want := []string{"2026-01-10T00:00Z live", "2026-01-10T01:00Z live",
					"2026-01-10T09:00Z catch-up", "2026-01-10T10:00Z catch-up", "2026-01-10T11:00Z catch-up"}
				if diff := cmp.Diff(want, ev.of(schedule.KindSucceeded)); diff != "" {
					t.Errorf("succeeded (-want +got):\n%s", diff)
				}
				var missed []string
				for h := 2; h <= 8; h++ {
					missed = append(missed, fmt.Sprintf("2026-01-10T%02d:00Z", h))
				}
				if diff := cmp.Diff(missed, ev.of(schedule.KindMissed)); diff != "" {
					t.Errorf("missed (-want +got):\n%s", diff)
				}
			})
		})
	}
}

// TestMovedSchedule: a daily schedule that moves keeps its DAG's history
// (backfill.DAGIdentity): after "0 2 * * *" becomes "0 1 * * *" or the
// reverse, a day whose slot the old schedule ran is not run again. The
// scheduler and a backfill's plan agree on which slots are done.
func TestMovedSchedule(t *testing.T) {
	for _, tc := range []struct {
		from, to string
		runs     []string // the new schedule's runs: fire times
	}{
		// Earlier: the slot firing on the 13th at 01:00 covers a day the
		// old schedule had not finished; it runs, caught up.
		{"0 2 * * *", "0 1 * * *", []string{"2026-01-13T01:00:00Z", "2026-01-14T01:00:00Z"}},
		// Later: the slot firing on the 13th at 02:00 falls on a date the
		// old schedule fired on (01:00): done.
		{"0 1 * * *", "0 2 * * *", []string{"2026-01-14T02:00:00Z"}},
	} {
		t.Run(tc.from+" to "+tc.to, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				clock := offsetClock(time.Date(2026, 1, 10, 12, 0, 0, 0, time.UTC))
				l := memledger.New(clock)
				old := newWork(t, mustCron(t, tc.from), time.UTC, clock)
				runFor(t, &schedule.Scheduler{DAG: old.dag, Ledger: l, Now: clock}, 3*24*time.Hour-10*time.Hour-30*time.Minute) // to the 13th at 01:30
				g := mustCron(t, tc.to)
				moved := newWork(t, g, time.UTC, clock)
				s := &schedule.Scheduler{DAG: moved.dag, Ledger: l, Now: clock}
				stop := start(t, s)
				time.Sleep(25 * time.Hour) // to the 14th at 02:30
				stop()
				if diff := cmp.Diff(tc.runs, moved.keysUTC()); diff != "" {
					t.Errorf("the new schedule's runs (-want +got):\n%s", diff)
				}
				// A backfill of the new schedule's slots plans to run none of
				// those the scheduler left.
				w, err := tranche.SlotWindow(g, "2026-01-11", "2026-01-14", clock())
				if err != nil {
					t.Fatal(err)
				}
				plan, err := (&backfill.Backfill{DAG: moved.dag, Window: w, Ledger: l}).Plan(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				if plan.Counts.Run != 0 {
					var run []string
					for it, err := range plan.Items(context.Background()) {
						if err != nil {
							t.Fatal(err)
						}
						if it.Action == ledger.ActionRun {
							run = append(run, it.Partition.Key())
						}
					}
					t.Errorf("a backfill of %s would run %v, which the scheduler counted done", w, run)
				}
			})
		})
	}
}

// keysUTC returns the calls' keys (fire times of schedules) in UTC.
func (w *work) keysUTC() []string {
	var out []string
	for _, c := range w.callList() {
		k, err := time.Parse(time.RFC3339, c.key)
		if err != nil {
			w.t.Fatal(err)
		}
		out = append(out, k.UTC().Format(time.RFC3339))
	}
	return out
}

// TestEvents: every event of a slot's run reaches OnEvent with the slot's
// trigger, the Runner's own hook sees them with it too (a field of the
// event, no attribute added), and a hook that
// panics is recovered into the status while the slots go on.
func TestEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := time.Date(2026, 1, 10, 0, 30, 0, 0, time.UTC)
		clock := offsetClock(base)
		w := newWork(t, tranche.Hour, time.UTC, clock)
		var ev, runnerEv events
		var panics atomic.Int32
		hook := func(ctx context.Context, e tranche.Event) {
			ev.hook(ctx, e)
			if e.Kind == schedule.KindClaimed {
				panics.Add(1)
				panic("a broken hook")
			}
		}
		s := &schedule.Scheduler{DAG: w.dag, Ledger: memledger.New(clock), Now: clock, OnEvent: hook,
			Runner: &tranche.Runner{OnEvent: runnerEv.hook}}
		runFor(t, s, 2*time.Hour+time.Minute)
		if got := len(ev.of(schedule.KindSucceeded)); got != 2 || panics.Load() != 2 {
			t.Fatalf("%d slots succeeded, the hook panicked %d times; want 2 and 2", got, panics.Load())
		}
		st := s.Status()
		var pe *tranche.PanicError
		if !errors.As(st.HookErr, &pe) || pe.Value != "a broken hook" || !strings.Contains(pe.Where, string(schedule.KindClaimed)) {
			t.Errorf("Status.HookErr = %v, want the hook's panic on %s", st.HookErr, schedule.KindClaimed)
		}
		runKinds := map[tranche.Kind]bool{}
		for _, e := range ev.list() {
			switch e.Kind {
			case schedule.KindStarted, schedule.KindStopped:
				if schedule.TriggerOf(e) != "" {
					t.Errorf("%s carries a trigger", e.Kind)
				}
			default:
				if schedule.TriggerOf(e) != ledger.TriggerLive {
					t.Errorf("%s %s: trigger %q, want live", e.Kind, e.Target, schedule.TriggerOf(e))
				}
				if strings.HasPrefix(string(e.Kind), "run.") || strings.HasPrefix(string(e.Kind), "asset.") {
					runKinds[e.Kind] = true
				}
			}
		}
		if !runKinds[tranche.KindRunStarted] || !runKinds[tranche.KindAssetSucceeded] || !runKinds[tranche.KindRunSucceeded] {
			t.Errorf("OnEvent saw run kinds %v, want the runs' events", runKinds)
		}
		for _, e := range runnerEv.list() {
			if schedule.TriggerOf(e) != ledger.TriggerLive || len(e.Attrs) != 0 {
				t.Errorf("the Runner's hook got %s with trigger %q and attributes %v; want live and none", e.Kind, e.Trigger, e.Attrs)
			}
		}
		if len(runnerEv.list()) == 0 {
			t.Error("the Runner's own hook saw nothing")
		}
		want := []tranche.Kind{schedule.KindStarted, schedule.KindClaimed, tranche.KindRunStarted}
		if got := ev.list(); len(got) < 3 || got[0].Kind != want[0] || got[1].Kind != want[1] || got[2].Kind != want[2] {
			t.Errorf("first events %v, want %v", got[:min(3, len(got))], want)
		}
		if last := ev.list()[len(ev.list())-1]; last.Kind != schedule.KindStopped {
			t.Errorf("last event %s, want %s", last.Kind, schedule.KindStopped)
		}
	})
}

// TestAcceleratedClock: a clock that runs sixty times the system's pace,
// given as Now and After, runs a day of hourly slots in 24 minutes, each
// at its close on that clock. The ledger's clock runs at the system's
// pace, as leases need, a day ahead of the accelerated one's start, so
// that the accelerated calendar never overtakes it: the ledger would
// refuse a slot that has not closed by its clock.
func TestAcceleratedClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const rate = 60
		base, t0 := time.Date(2026, 1, 10, 0, 30, 0, 0, time.UTC), time.Now()
		now := func() time.Time { return base.Add(time.Since(t0) * rate) }
		after := func(d time.Duration) <-chan time.Time { return time.After(d / rate) }
		w := newWork(t, tranche.Hour, time.UTC, now)
		s := &schedule.Scheduler{DAG: w.dag, Ledger: memledger.New(offsetClock(base.Add(24 * time.Hour))), Now: now, After: after}
		runFor(t, s, 24*time.Minute)
		calls := w.callList()
		if len(calls) != 24 {
			t.Fatalf("%d slots ran in 24 minutes at 60 times the pace, want 24", len(calls))
		}
		for _, c := range calls {
			p, err := tranche.ParsePartitionKey(tranche.Hour, c.key, time.UTC)
			if err != nil {
				t.Fatal(err)
			}
			if late := c.at.Sub(p.End); late < 0 || late >= rate*time.Millisecond {
				t.Errorf("slot %s ran at %v, %v after its close", c.key, c.at, late)
			}
		}
	})
}

// TestInvalid: a Scheduler that cannot run is refused before anything
// runs, with every reason at once.
func TestInvalid(t *testing.T) {
	ny, paris := mustLoad(t, "America/New_York"), mustLoad(t, "Europe/Paris")
	asset := func(name string, p tranche.Partitioning) tranche.Asset {
		return tranche.Asset{Name: name, Partitioning: p, Materialize: func(context.Context, *tranche.Materialization) ([]tranche.Row, error) { return nil, nil }}
	}
	dag := func(assets ...tranche.Asset) *tranche.DAG {
		d, err := tranche.NewDAG(assets...)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	daily := dag(asset("a", tranche.Partitioning{Granularity: tranche.Day, Location: ny}))
	// A zone named as the host's is, with daylight saving time: the name
	// "Local" means another calendar on another host.
	data, err := os.ReadFile("/usr/share/zoneinfo/America/New_York")
	if err != nil {
		t.Skipf("no zone database: %v", err)
	}
	local, err := time.LoadLocationFromTZData("Local", data)
	if err != nil {
		t.Fatal(err)
	}
	l := memledger.New(nil)
	for _, tc := range []struct {
		name string
		s    *schedule.Scheduler
		want []string
	}{
		{"nothing", &schedule.Scheduler{}, []string{"no DAG", "no Ledger"}},
		// An Open whose error was dropped.
		{"nil ledger", &schedule.Scheduler{DAG: daily, Ledger: (*memledger.Ledger)(nil)}, []string{"nil *memledger.Ledger"}},
		{"unpartitioned", &schedule.Scheduler{DAG: dag(asset("a", tranche.Partitioning{Granularity: tranche.Day}), asset("b", tranche.Partitioning{})), Ledger: l},
			[]string{`unpartitioned assets "b"`}},
		{"no partitions", &schedule.Scheduler{DAG: dag(), Ledger: l}, []string{"no asset is partitioned"}},
		{"two granularities", &schedule.Scheduler{DAG: dag(asset("a", tranche.Partitioning{Granularity: tranche.Day}), asset("b", tranche.Partitioning{Granularity: tranche.Hour})), Ledger: l},
			[]string{"several granularities", "Runner.Read"}}, // runs them asset by asset, reading through Runner.Read
		{"two zones", &schedule.Scheduler{DAG: daily, Ledger: l, Location: paris}, []string{"give one zone"}},
		{"CRON_TZ and an asset's zone", &schedule.Scheduler{DAG: dag(asset("a", tranche.Partitioning{Granularity: mustCron(t, "CRON_TZ=Europe/Paris 0 2 * * *"), Location: ny})), Ledger: l},
			[]string{"fires in Europe/Paris"}},
		{"the host's zone", &schedule.Scheduler{DAG: dag(asset("a", tranche.Partitioning{Granularity: tranche.Day})), Ledger: l, Location: local},
			[]string{"time.Local"}},
		{"policies", &schedule.Scheduler{DAG: daily, Ledger: l, Overlap: "later", Delay: -time.Hour, CatchUpWindow: -time.Minute, Lease: time.Second, Heartbeat: time.Second},
			[]string{`unknown overlap policy "later"`, "delay -1h0m0s", "catch-up window -1m0s", "longer than the heartbeat"}},
		{"negative queue", &schedule.Scheduler{DAG: daily, Ledger: l, MaxQueue: -1}, []string{"max queue -1"}},
		{"queue bound under skip", &schedule.Scheduler{DAG: daily, Ledger: l, MaxQueue: 3, Overlap: schedule.OverlapSkip}, []string{"max queue 3 under overlap policy skip"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.s.Run(context.Background())
			if err == nil {
				t.Fatal("Run returned nil")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
	t.Run("running", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := &schedule.Scheduler{DAG: daily, Ledger: memledger.New(nil)}
			stop := start(t, s)
			time.Sleep(time.Second)
			if err := s.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "while the scheduler runs") {
				t.Errorf("a second Run: %v", err)
			}
			stop()
		})
	})
}

// TestAssetsFirst: the slots before the DAG's first partition (the
// latest of its assets' Partitioning.First) are not scheduled, missed or
// reported: the first slot run is the first the assets take.
func TestAssetsFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		now := time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC)
		clock := offsetClock(now)
		var ran []string
		dag, err := tranche.NewDAG(
			tranche.Asset{Name: "a", Partitioning: tranche.Partitioning{Granularity: tranche.Day, First: now.AddDate(0, 0, -30)},
				Materialize: func(context.Context, *tranche.Materialization) ([]tranche.Row, error) { return nil, nil }},
			tranche.Asset{Name: "b", Deps: []string{"a"}, Partitioning: tranche.Partitioning{Granularity: tranche.Day, First: now.Add(36 * time.Hour)},
				Materialize: func(_ context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
					p, err := m.Partition()
					ran = append(ran, p.Key())
					return nil, err
				}},
		)
		if err != nil {
			t.Fatal(err)
		}
		var ev events
		s := &schedule.Scheduler{DAG: dag, Ledger: memledger.New(clock), Now: clock, OnEvent: ev.hook}
		runFor(t, s, 4*24*time.Hour)
		if diff := cmp.Diff([]string{"2026-05-05", "2026-05-06", "2026-05-07"}, ran); diff != "" {
			t.Errorf("runs (-want +got):\n%s", diff)
		}
		if got := append(ev.of(schedule.KindFailed), ev.of(schedule.KindMissed)...); len(got) != 0 {
			t.Errorf("failed or missed: %v", got)
		}
	})
}
