package schedule_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/memledger"
	"github.com/tranche-dev/tranche/schedule"
)

// TestJoiningReplicaKeepsQueue: replica a's 10:00 slot runs for 10
// hours, so that the later slots queue behind it (OverlapQueue); replica
// c joins while 6, or 8, are queued. The queued slots came due while a
// scheduler ran: neither replica records any missed, and each runs once,
// in order, once 10:00 is over.
func TestJoiningReplicaKeepsQueue(t *testing.T) {
	for _, join := range []time.Duration{7*time.Hour + 10*time.Minute, 9*time.Hour + 10*time.Minute} { // 17:30 and 19:30
		queued := int(join/time.Hour) - 1
		t.Run(fmt.Sprintf("%d queued", queued), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := time.Date(2026, 2, 1, 10, 20, 0, 0, time.UTC)
				clock := offsetClock(base)
				l := memledger.New(clock)
				var rs runs
				body := func(ctx context.Context, key string) error {
					if key != "2026-02-01T10:00Z" {
						return nil
					}
					select {
					case <-time.After(10 * time.Hour):
						return nil
					case <-ctx.Done():
						return ctx.Err()
					}
				}
				var evA, evC events
				a := &schedule.Scheduler{DAG: rs.dag(t, "a", tranche.Hour, time.UTC, body), Ledger: l, Worker: "a", Now: clock, OnEvent: evA.hook}
				stopA := start(t, a)
				time.Sleep(join)
				c := &schedule.Scheduler{DAG: rs.dag(t, "c", tranche.Hour, time.UTC, body), Ledger: l, Worker: "c", Now: clock, OnEvent: evC.hook}
				stopC := start(t, c)
				time.Sleep(14*time.Hour - join) // to 00:20: 10:00 ended at 21:00, and the queue ran after
				stopC()
				stopA()
				for _, ev := range []*events{&evA, &evC} {
					if got := ev.of(schedule.KindMissed); len(got) != 0 {
						t.Errorf("missed %v: queued slots recorded missed", got)
					}
				}
				if a.Status().Missed+c.Status().Missed != 0 {
					t.Errorf("Status.Missed: a %d, c %d; want 0", a.Status().Missed, c.Status().Missed)
				}
				id := backfill.DAGIdentity(a.DAG, tranche.Hour, time.UTC)
				for h := 10; h < 24; h++ {
					p := tranche.PartitionOf(tranche.Hour, time.Date(2026, 2, 1, h, 0, 0, 0, time.UTC))
					if by := rs.of(p.Key()); len(by) != 1 {
						t.Errorf("slot %s ran %d times (%v); want once", p.Key(), len(by), by)
					}
					hist, err := l.History(context.Background(), id, p.Start)
					if err != nil {
						t.Fatal(err)
					}
					if len(hist) != 1 || hist[0].State != ledger.StateSucceeded {
						t.Errorf("history of %s: %+v; want one success", p.Key(), hist)
					}
				}
			})
		})
	}
}
