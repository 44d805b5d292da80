package trancheotel_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/ledger/memledger"
	"github.com/tranche-dev/tranche/schedule"
	"github.com/tranche-dev/tranche/trancheotel"
)

// TestScheduleMetrics runs an hourly scheduler under OverlapBufferOne
// whose 00:00 slot takes 150 minutes, stops it at 05:30 and starts it
// again at 15:30: the lag from each slot's close to its claim, by
// trigger, the slots by state (succeeded, skipped, missed) and the queue
// are measured, under the DAG's name.
func TestScheduleMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := time.Date(2026, 1, 10, 0, 30, 0, 0, time.UTC)
		t0 := time.Now()
		clock := func() time.Time { return base.Add(time.Since(t0)) }
		dag, err := tranche.NewDAG(tranche.Asset{
			Name:         "events",
			Partitioning: tranche.Partitioning{Granularity: tranche.Hour, Location: time.UTC},
			Materialize: func(ctx context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
				if p, _ := m.Partition(); p.Key() == "2026-01-10T00:00Z" {
					time.Sleep(150 * time.Minute)
				}
				return nil, nil
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		tel := newTelemetry()
		hook, _ := tel.hook()
		s := &schedule.Scheduler{DAG: dag, Ledger: memledger.New(clock), Overlap: schedule.OverlapBufferOne, Now: clock, OnEvent: hook}
		run := func(d time.Duration) {
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() { done <- s.Run(ctx) }()
			time.Sleep(d)
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
		run(5 * time.Hour)         // 00:00 at 01:00; 01:00 waits to 03:30; 02:00 skipped; 03:00 and 04:00 live
		time.Sleep(10 * time.Hour) // 05:00 to 14:00 come due
		run(20 * time.Minute)      // 10:00 and 11:00 caught up, 12:00 to 14:00 skipped, 05:00 to 09:00 missed

		got := tel.collect(t)
		dagName := "tranche.dag=" + dag.Name
		wantLag := map[string]point{
			dagName + ",tranche.trigger=live":     {Value: (90 * time.Minute).Seconds(), Count: 4}, // 01:00, closed at 02:00, claimed at 03:30
			dagName + ",tranche.trigger=catch-up": {Value: (8 * time.Hour).Seconds(), Count: 2},
		}
		if diff := cmp.Diff(wantLag, got[trancheotel.MetricScheduleLag]); diff != "" {
			t.Errorf("%s (-want +got):\n%s", trancheotel.MetricScheduleLag, diff)
		}
		wantSlots := map[string]point{
			dagName + ",tranche.slot.state=succeeded": {Value: 6},
			dagName + ",tranche.slot.state=skipped":   {Value: 4},
			dagName + ",tranche.slot.state=missed":    {Value: 5},
		}
		if diff := cmp.Diff(wantSlots, got[trancheotel.MetricScheduleSlots]); diff != "" {
			t.Errorf("%s (-want +got):\n%s", trancheotel.MetricScheduleSlots, diff)
		}
		if q, ok := got[trancheotel.MetricQueued][dagName]; !ok || q.Value != 0 {
			t.Errorf("%s: %v; want a last value of 0", trancheotel.MetricQueued, got[trancheotel.MetricQueued])
		}
	})
}
