package schedule_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/ledger/memledger"
	"github.com/tranche-dev/tranche/schedule"
)

// TestCatchUp stops an hourly scheduler for several lengths of time and
// starts it again under each catch-up setting: the missed slots within
// the window run, oldest first, triggered catch-up; the older ones are
// reported missed, one event each, and counted.
func TestCatchUp(t *testing.T) {
	settings := []struct {
		name   string
		max    int
		window time.Duration
	}{
		{"default", 0, 0},
		{"none", -1, 0},
		{"two", 2, 0},
		{"within 150m", 0, 150 * time.Minute},
		{"ten within 4h30m", 10, 270 * time.Minute},
		{"within 5m", 0, 5 * time.Minute},
	}
	downtimes := []time.Duration{0, 40 * time.Minute, time.Hour, 3 * time.Hour, 8 * time.Hour, 30 * time.Hour}
	for _, set := range settings {
		for _, down := range downtimes {
			t.Run(set.name+"/"+down.String(), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					base := time.Date(2026, 1, 10, 0, 30, 0, 0, time.UTC)
					clock := offsetClock(base)
					w := newWork(t, tranche.Hour, time.UTC, clock)
					var ev events
					s := &schedule.Scheduler{DAG: w.dag, Ledger: memledger.New(clock), MaxCatchUp: set.max, CatchUpWindow: set.window,
						Now: clock, OnEvent: ev.hook}
					runFor(t, s, 3*time.Hour) // runs the slots closing at 01:00, 02:00 and 03:00, live
					stopped := clock()
					time.Sleep(down)
					restart := clock()
					runFor(t, s, 20*time.Minute) // no slot closes in these 20 minutes

					// The slots that closed while no scheduler ran, and
					// those the setting catches up, by hand.
					var missed []string
					for end := base.Truncate(time.Hour).Add(time.Hour); !end.After(restart); end = end.Add(time.Hour) {
						if end.After(stopped) {
							missed = append(missed, end.Add(-time.Hour).Format("2006-01-02T15:04Z"))
						}
					}
					n := set.max
					if n == 0 {
						n = schedule.DefaultMaxCatchUp
					}
					var caught, reported []string
					for _, key := range slices.Backward(missed) {
						end := mustTime(t, key[:16]+":00Z").Add(time.Hour)
						inWindow := set.window == 0 || !end.Before(restart.Add(-set.window))
						if n > 0 && len(caught) < n && inWindow && len(reported) == 0 {
							caught = append(caught, key+" catch-up")
						} else {
							reported = append(reported, key)
						}
					}
					slices.Reverse(caught)
					slices.Reverse(reported)
					live := []string{"2026-01-10T00:00Z live", "2026-01-10T01:00Z live", "2026-01-10T02:00Z live"}
					if diff := cmp.Diff(append(live, caught...), ev.of(schedule.KindSucceeded)); diff != "" {
						t.Errorf("succeeded slots (-want +got):\n%s", diff)
					}
					if diff := cmp.Diff(reported, ev.of(schedule.KindMissed)); diff != "" {
						t.Errorf("missed slots (-want +got):\n%s", diff)
					}
					if st := s.Status(); st.Missed != len(reported) || st.Succeeded != len(caught) {
						t.Errorf("Status: %d missed and %d succeeded; want %d and %d", st.Missed, st.Succeeded, len(reported), len(caught))
					}
					// The ledger records the missed slots canceled, saying
					// why, so that the next start reports none of them again.
					h := history(t, s.Ledger, w.dag, tranche.Hour, time.UTC, base.Add(-time.Hour), restart)
					for _, key := range reported {
						if h[key] != "[canceled]" {
							t.Errorf("history of missed slot %s: %s, want one canceled attempt", key, h[key])
						}
					}
					var again events
					s.OnEvent = again.hook
					runFor(t, s, 10*time.Minute)
					// Status.Missed is the ledger's count, not this Run's.
					if got := again.of(schedule.KindMissed); len(got) != 0 || s.Status().Missed != len(reported) {
						t.Errorf("a restart reported %v missed again, and counts %d missed; want none again, and %d", got, s.Status().Missed, len(reported))
					}
					if len(reported) > 0 {
						// A backfill runs them: no longer missed.
						first := mustTime(t, reported[0][:16]+":00Z")
						w2, err := tranche.NewTimePartitionWindow(tranche.Hour, first, mustTime(t, reported[len(reported)-1][:16]+":00Z"))
						if err != nil {
							t.Fatal(err)
						}
						if _, err := (&backfill.Backfill{DAG: w.dag, Window: w2, Ledger: s.Ledger}).Run(context.Background()); err != nil {
							t.Fatal(err)
						}
						var last events
						s.OnEvent = last.hook
						runFor(t, s, time.Minute)
						// (A slot that closed meanwhile may be missed anew.)
						if n, anew := s.Status().Missed, len(last.of(schedule.KindMissed)); n != anew {
							t.Errorf("after a backfill of the missed slots, Status.Missed %d; want %d", n, anew)
						}
					}
					// Each slot ran once, the backfill's too.
					keys := w.keys()
					if len(slices.Compact(slices.Clone(keys))) != len(keys) {
						t.Errorf("a slot ran twice: %v", keys)
					}
				})
			})
		}
	}
}

// TestManualRunKeepsMissed: the scheduler runs 00:00 and 01:00, is down
// from 02:30 to 06:30, and an operator runs 04:00 by hand
// (backfill.RunRecorded) meanwhile. A manual run counts for its own slot
// only: the restart catches up after the newest slot the scheduler ran,
// so 02:00 and 03:00 run, or, beyond the catch-up window, are reported
// missed; 04:00 is not run again.
func TestManualRunKeepsMissed(t *testing.T) {
	for _, tc := range []struct {
		max               int
		succeeded, missed []string
	}{
		{0, []string{"2026-01-10T02:00Z catch-up", "2026-01-10T03:00Z catch-up", "2026-01-10T05:00Z catch-up"}, nil},
		{2, []string{"2026-01-10T05:00Z catch-up"}, []string{"2026-01-10T02:00Z", "2026-01-10T03:00Z"}},
	} {
		t.Run(fmt.Sprint("max ", tc.max), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := time.Date(2026, 1, 10, 0, 30, 0, 0, time.UTC)
				clock := offsetClock(base)
				w := newWork(t, tranche.Hour, time.UTC, clock)
				l := memledger.New(clock)
				var ev events
				s := &schedule.Scheduler{DAG: w.dag, Ledger: l, MaxCatchUp: tc.max, Now: clock, OnEvent: ev.hook}
				runFor(t, s, 2*time.Hour) // 00:00 and 01:00, live
				time.Sleep(3 * time.Hour) // 05:30
				manual := tranche.PartitionOf(tranche.Hour, time.Date(2026, 1, 10, 4, 0, 0, 0, time.UTC))
				if _, err := backfill.RunRecorded(context.Background(), l, nil, w.dag, manual, "operator"); err != nil {
					t.Fatal(err)
				}
				time.Sleep(time.Hour) // 06:30
				var after events
				s.OnEvent = after.hook
				runFor(t, s, 20*time.Minute)
				if diff := cmp.Diff(tc.succeeded, after.of(schedule.KindSucceeded)); diff != "" {
					t.Errorf("succeeded after the restart (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(tc.missed, after.of(schedule.KindMissed)); diff != "" {
					t.Errorf("missed after the restart (-want +got):\n%s", diff)
				}
				if got := s.Status().Missed; got != len(tc.missed) {
					t.Errorf("Status.Missed %d, want %d", got, len(tc.missed))
				}
				if n := slices.Index(w.keys(), manual.Key()); n < 0 || slices.Index(w.keys()[n+1:], manual.Key()) >= 0 {
					t.Errorf("the manual slot ran %v; want once, by hand", w.keys())
				}
			})
		})
	}
}
