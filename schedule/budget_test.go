package schedule_test

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/ledger/memledger"
	"github.com/tranche-dev/tranche/schedule"
)

// TestBudgetLiveFirst runs an hourly scheduler beside a backfill of the
// two days before it, both in one budget, each backfill partition taking
// 7 minutes from 00:30: the slot 00:00, which closes at 01:00 while the
// backfill's partitions started at 00:58 run, starts as soon as one of
// them ends, before the backfill's next partition, even one that waits
// in the budget all along.
func TestBudgetLiveFirst(t *testing.T) {
	for _, tc := range []struct {
		name        string
		budget      int      // 0: none
		concurrency int      // the backfill's
		calls       []string // the runs that start from 00:55 to 01:10, in order
	}{
		{
			// The backfill's second job waits in the budget throughout;
			// the live slot goes ahead of it.
			name: "budget 1", budget: 1, concurrency: 2,
			calls: []string{"backfill at 00:58", "live at 01:05", "backfill at 01:06"},
		},
		{
			name: "budget 2", budget: 2, concurrency: 2,
			calls: []string{"backfill at 00:58", "backfill at 00:58", "backfill at 01:05", "live at 01:05", "backfill at 01:06"},
		},
		{
			// Without a budget the slot runs at its close, beside the
			// backfill's partition.
			name: "no budget", concurrency: 1,
			calls: []string{"backfill at 00:58", "live at 01:00", "backfill at 01:05"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := time.Date(2026, 1, 10, 0, 30, 0, 0, time.UTC)
				clock := offsetClock(base)
				l := memledger.New(clock)
				w := newWork(t, tranche.Hour, time.UTC, clock)
				live := tranche.PartitionOf(tranche.Hour, base)
				w.take = func(key string) time.Duration {
					if key == live.Key() {
						return time.Minute
					}
					return 7 * time.Minute
				}
				var budget *backfill.Budget
				if tc.budget > 0 {
					budget = backfill.NewBudget(tc.budget)
				}
				var ev events
				s := &schedule.Scheduler{DAG: w.dag, Ledger: l, Budget: budget, Now: clock, OnEvent: ev.hook}
				stop := start(t, s)
				window, err := tranche.WindowBetween(tranche.Hour, live.Start.Add(-48*time.Hour), live.Start)
				if err != nil {
					t.Fatal(err)
				}
				bf := &backfill.Backfill{DAG: w.dag, Ledger: l, Window: window, Budget: budget, Concurrency: tc.concurrency}
				ctx, cancel := context.WithCancel(t.Context())
				done := make(chan error, 1)
				go func() { _, err := bf.Run(ctx); done <- err }()
				time.Sleep(time.Hour) // to 01:30
				cancel()
				stop()
				if err := <-done; err != nil && ctx.Err() == nil {
					t.Fatalf("backfill: %v", err)
				}
				var got []string
				var started time.Time
				for _, c := range w.callList() {
					who := "backfill"
					if c.key == live.Key() {
						who, started = "live", c.at
					}
					if hm := c.at.Format("15:04"); hm >= "00:55" && hm < "01:10" {
						got = append(got, who+" at "+hm)
					}
				}
				// Runs that start at one instant start in any order.
				slices.SortFunc(got, func(a, b string) int {
					return cmp.Or(strings.Compare(a[len(a)-5:], b[len(b)-5:]), strings.Compare(a, b))
				})
				if diff := gocmp.Diff(tc.calls, got); diff != "" {
					t.Errorf("runs from 00:55 to 01:10 (-want +got):\n%s", diff)
				}
				if diff := gocmp.Diff([]string{live.Key() + " live"}, ev.of(schedule.KindSucceeded)); diff != "" {
					t.Errorf("succeeded (-want +got):\n%s", diff)
				}
				if st := s.Status(); st.Last != live || !st.LastStart.Equal(started) {
					t.Errorf("Status: last %s started %v; want %s, started %v: the scheduler's own run, when it began", st.Last.Key(), st.LastStart, live.Key(), started)
				}
			})
		})
	}
}

// TestBudgetWaitCanceled: a slot whose Run ends while it waits for a
// place never ran, so its claim is withdrawn rather than left to its
// lease: the next scheduler's catch-up runs it at once.
func TestBudgetWaitCanceled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := time.Date(2026, 1, 9, 23, 30, 0, 0, time.UTC)
		clock := offsetClock(base)
		l := memledger.New(clock)
		w := newWork(t, tranche.Hour, time.UTC, clock)
		budget := backfill.NewBudget(1)
		var ev events
		s := &schedule.Scheduler{DAG: w.dag, Ledger: l, Budget: budget, Now: clock, OnEvent: ev.hook}
		stop := start(t, s)
		time.Sleep(40 * time.Minute) // 23:00 ran at 00:00
		// A backfill's partition takes the place, and runs on.
		if err := budget.Acquire(t.Context()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Hour) // to 01:10: 00:00, claimed at 01:00, waits
		stop()
		if diff := gocmp.Diff([]string{"2026-01-10T00:00Z live"}, ev.of(schedule.KindInterrupted)); diff != "" {
			t.Errorf("interrupted (-want +got):\n%s", diff)
		}
		h := history(t, l, w.dag, tranche.Hour, time.UTC, base.Add(-time.Hour), base.Add(2*time.Hour))
		if diff := gocmp.Diff(map[string]string{"2026-01-09T23:00Z": "[succeeded]"}, h); diff != "" {
			t.Errorf("history after the canceled wait (-want +got):\n%s", diff)
		}
		if st := s.Status(); st.Interrupted != 1 || st.Succeeded != 1 {
			t.Errorf("Status: %d interrupted, %d succeeded; want 1 and 1", st.Interrupted, st.Succeeded)
		}
		budget.Release()
		s2 := &schedule.Scheduler{DAG: w.dag, Ledger: l, Budget: budget, Now: clock, Worker: "w2"}
		runFor(t, s2, time.Minute)
		var got []string
		for _, c := range w.callList() {
			got = append(got, c.key[11:16]+" at "+c.at.Format("15:04:05"))
		}
		if diff := gocmp.Diff([]string{"23:00 at 00:00:00", "00:00 at 01:10:00"}, got); diff != "" {
			t.Errorf("runs (-want +got):\n%s", diff)
		}
	})
}
