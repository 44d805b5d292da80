package schedule_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/ledger/memledger"
	"github.com/tranche-dev/tranche/schedule"
)

// TestSkewedReplicas runs three replicas of an hourly DAG on one ledger
// for a day, their clocks (Scheduler.Now) on time, 5 minutes ahead and 5
// minutes behind: every slot runs once, by one of them, the ledger
// judging the claims by its own clock. A replica fires a slot when its
// own clock passes the slot's close, so the one ahead fires it up to 5
// minutes early, never more: the scheduler has no clock but its own to
// know when a slot closes (docs/faults.md).
func TestSkewedReplicas(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := time.Date(2026, 2, 1, 0, 10, 0, 0, time.UTC)
		truth := offsetClock(base)
		l := memledger.New(nil)
		var mu sync.Mutex
		started := map[string][]time.Duration{} // slot -> how long after its close each run started, by the true clock
		var rs runs
		var stops []func()
		for i, skew := range []time.Duration{0, 5 * time.Minute, -5 * time.Minute} {
			worker := fmt.Sprintf("replica-%d", i)
			body := func(_ context.Context, key string) error {
				p, err := tranche.ParsePartitionKey(tranche.Hour, key, time.UTC)
				if err != nil {
					return err
				}
				mu.Lock()
				started[key] = append(started[key], truth().Sub(p.End))
				mu.Unlock()
				return nil
			}
			s := &schedule.Scheduler{DAG: rs.dag(t, worker, tranche.Hour, time.UTC, body), Ledger: l, Worker: worker,
				Now: func() time.Time { return truth().Add(skew) }}
			stops = append(stops, start(t, s))
		}
		time.Sleep(24 * time.Hour)
		for _, stop := range stops {
			stop()
		}
		early := 0
		for _, key := range rs.keys() {
			if by := rs.of(key); len(by) != 1 {
				t.Errorf("slot %s ran %d times, by %v", key, len(by), by)
			}
			for _, after := range started[key] {
				if after < -5*time.Minute-time.Second {
					t.Errorf("slot %s started %v before its close; want at most the skew of 5m early", key, -after)
				}
				if after < 0 {
					early++
				}
			}
		}
		if len(rs.keys()) < 23 {
			t.Errorf("%d slots ran in a day; want 23 or more", len(rs.keys()))
		}
		t.Logf("%d slots, each once; %d started before their close by the true clock (the replica 5 minutes ahead fired them)", len(rs.keys()), early)
	})
}
