package schedule_test

import (
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/tranche-dev/tranche"
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
					if got := again.of(schedule.KindMissed); len(got) != 0 || s.Status().Missed != 0 {
						t.Errorf("a restart reported %v missed again", got)
					}
					// Each slot ran once.
					keys := w.keys()
					if len(slices.Compact(slices.Clone(keys))) != len(keys) {
						t.Errorf("a slot ran twice: %v", keys)
					}
				})
			})
		}
	}
}
