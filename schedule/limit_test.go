package schedule_test

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/memledger"
	"github.com/tranche-dev/tranche/schedule"
)

// TestLimitLiveFirst is TestBudgetLiveFirst with the DAG's limit held in
// the ledger instead of a Budget of one process: an hourly scheduler (or
// two replicas) beside a backfill of the two days before it (one worker
// or two, each a Backfill of its own as another process would run it),
// each backfill partition taking 7 minutes from 00:30. The slot 00:00,
// which closes at 01:00 while the backfill's partitions started at
// 00:58 run, starts as soon as one of them ends, before the backfill's
// next partition, and never more runs than the limit overlap.
func TestLimitLiveFirst(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		limit                int // 0: none
		concurrency          int // each worker's
		replicas, workers    int
		calls                []string // the runs that start from 00:55 to 01:10, in order; nil: not checked
		liveAt               string   // when the live slot starts
		limitedEvents, noMax bool
	}{
		{
			name: "limit 1", limit: 1, concurrency: 2, replicas: 1, workers: 1,
			calls:  []string{"backfill at 00:58", "live at 01:05", "backfill at 01:06"},
			liveAt: "01:05", limitedEvents: true,
		},
		{
			name: "limit 2", limit: 2, concurrency: 2, replicas: 1, workers: 1,
			calls:  []string{"backfill at 00:58", "backfill at 00:58", "backfill at 01:05", "live at 01:05", "backfill at 01:06"},
			liveAt: "01:05", limitedEvents: true,
		},
		{
			name: "limit 2, two replicas and two workers", limit: 2, concurrency: 2, replicas: 2, workers: 2,
			liveAt: "01:05", limitedEvents: true,
		},
		{
			// Without a limit the slot runs at its close, beside the
			// backfill's partitions.
			name: "no limit", concurrency: 1, replicas: 1, workers: 1,
			calls:  []string{"backfill at 00:58", "live at 01:00", "backfill at 01:05"},
			liveAt: "01:00", noMax: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := time.Date(2026, 1, 10, 0, 30, 0, 0, time.UTC)
				clock := offsetClock(base)
				l := memledger.New(clock)
				w := newWork(t, tranche.Hour, time.UTC, clock)
				live := tranche.PartitionOf(tranche.Hour, base)
				take := func(key string) time.Duration {
					if key == live.Key() {
						return time.Minute
					}
					return 7 * time.Minute
				}
				w.take = take
				if tc.limit > 0 {
					if _, err := l.SetLimit(t.Context(), backfill.DAGIdentity(w.dag, tranche.Hour, time.UTC), ledger.Limit{Max: tc.limit, By: "test"}); err != nil {
						t.Fatal(err)
					}
				}
				var ev events
				var stops []func()
				for i := range tc.replicas {
					s := &schedule.Scheduler{DAG: w.dag, Ledger: l, Now: clock, OnEvent: ev.hook, Worker: fmt.Sprintf("replica-%d", i)}
					stops = append(stops, start(t, s))
				}
				window, err := tranche.WindowBetween(tranche.Hour, live.Start.Add(-48*time.Hour), live.Start)
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithCancel(t.Context())
				var wg sync.WaitGroup
				var bfEvents events
				for i := range tc.workers {
					bf := &backfill.Backfill{DAG: w.dag, Ledger: l, Window: window, Concurrency: tc.concurrency,
						Worker: fmt.Sprintf("worker-%d", i), OnEvent: bfEvents.hook}
					wg.Go(func() {
						if _, err := bf.Run(ctx); err != nil && ctx.Err() == nil {
							t.Errorf("backfill: %v", err)
						}
					})
				}
				time.Sleep(time.Hour) // to 01:30
				cancel()
				for _, stop := range stops {
					stop()
				}
				wg.Wait()

				calls := w.callList()
				var got []string
				var liveAt string
				for _, c := range calls {
					who := "backfill"
					if c.key == live.Key() {
						who, liveAt = "live", c.at.Format("15:04")
					}
					if hm := c.at.Format("15:04"); hm >= "00:55" && hm < "01:10" {
						got = append(got, who+" at "+hm)
					}
				}
				slices.SortFunc(got, func(a, b string) int {
					return cmp.Or(strings.Compare(a[len(a)-5:], b[len(b)-5:]), strings.Compare(a, b))
				})
				if tc.calls != nil {
					if diff := gocmp.Diff(tc.calls, got); diff != "" {
						t.Errorf("runs from 00:55 to 01:10 (-want +got):\n%s", diff)
					}
				}
				if liveAt != tc.liveAt {
					t.Errorf("the live slot %s started at %s; want %s (runs from 00:55: %v)", live.Key(), liveAt, tc.liveAt, got)
				}
				if diff := gocmp.Diff([]string{live.Key() + " live"}, ev.of(schedule.KindSucceeded)); diff != "" {
					t.Errorf("succeeded (-want +got):\n%s", diff)
				}
				if n := maxOverlap(calls, take); !tc.noMax && n > tc.limit {
					t.Errorf("%d runs overlapped; want at most the limit, %d", n, tc.limit)
				}
				if got := len(ev.of(schedule.KindLimited)) > 0; got != tc.limitedEvents {
					t.Errorf("slot.limited sent: %v; want %v", got, tc.limitedEvents)
				}
				if got := len(bfEvents.of(backfill.KindLimited)) > 0; got != tc.limitedEvents {
					t.Errorf("backfill.limited sent: %v; want %v", got, tc.limitedEvents)
				}
			})
		})
	}
}

// maxOverlap returns the most calls that ran at one instant, each from
// its start for take of its key; one ending as another starts does not
// overlap it.
func maxOverlap(calls []call, take func(string) time.Duration) int {
	type edge struct {
		at    time.Time
		delta int
	}
	var edges []edge
	for _, c := range calls {
		edges = append(edges, edge{c.at, 1}, edge{c.at.Add(take(c.key)), -1})
	}
	slices.SortFunc(edges, func(a, b edge) int { return cmp.Or(a.at.Compare(b.at), a.delta-b.delta) })
	n, most := 0, 0
	for _, e := range edges {
		n += e.delta
		most = max(most, n)
	}
	return most
}
