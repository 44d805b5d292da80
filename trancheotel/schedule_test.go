package trancheotel_test

import (
	"context"
	"sync"
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

// TestScheduleUpstreamMetrics schedules hourly events and their daily
// rollup, a DAG of two granularities, from 2026-03-06 23:30 to
// 2026-03-08 04:00 UTC, the hour 2026-03-07 23:00 taking two hours: the
// rollup of the 7th waits for it at midnight, runs late at its deadline
// (an hour, RunLate), and runs again once the hour landed (RerunStale),
// each counted once under the rollup's DAG name.
func TestScheduleUpstreamMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := time.Date(2026, 3, 6, 23, 30, 0, 0, time.UTC)
		t0 := time.Now()
		clock := func() time.Time { return base.Add(time.Since(t0)) }
		var mu sync.Mutex
		landed := map[string]bool{}
		part := func(g tranche.TimeGranularity) tranche.Partitioning {
			return tranche.Partitioning{Granularity: g, Location: time.UTC, First: time.Date(2026, 3, 7, 0, 0, 0, 0, time.UTC)}
		}
		dag, err := tranche.NewDAG(
			tranche.Asset{Name: "events", Partitioning: part(tranche.Hour),
				Materialize: func(ctx context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
					p, err := m.Partition()
					if err != nil {
						return nil, err
					}
					if p.Key() == "2026-03-07T23:00Z" {
						time.Sleep(2 * time.Hour)
					}
					mu.Lock()
					defer mu.Unlock()
					landed[p.Key()] = true
					return nil, nil
				}},
			tranche.Asset{Name: "rollup", Deps: []string{"events"}, Partitioning: part(tranche.Day),
				Materialize: func(ctx context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
					_, err := m.Input("events")
					return nil, err
				}},
		)
		if err != nil {
			t.Fatal(err)
		}
		dag.Name = "platform"
		runner := &tranche.Runner{Read: func(_ context.Context, _ string, p tranche.TimePartition) ([]tranche.Row, error) {
			mu.Lock()
			defer mu.Unlock()
			if !landed[p.Key()] {
				return nil, nil
			}
			return []tranche.Row{{"hour": p.Key()}}, nil
		}}
		tel := newTelemetry()
		hook, _ := tel.hook()
		s := &schedule.Scheduler{DAG: dag, Ledger: memledger.New(clock), Runner: runner, Now: clock, OnEvent: hook,
			WaitUpstream: time.Hour, RunLate: true, RerunStale: true}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- s.Run(ctx) }()
		time.Sleep(28*time.Hour + 30*time.Minute)
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		got := tel.collect(t)
		rollup := "tranche.dag=platform/rollup"
		want := map[string]point{
			rollup + ",tranche.slot.upstream=waiting": {Value: 1},
			rollup + ",tranche.slot.upstream=late":    {Value: 1},
			rollup + ",tranche.slot.upstream=stale":   {Value: 1},
		}
		if diff := cmp.Diff(want, got[trancheotel.MetricScheduleUpstream]); diff != "" {
			t.Errorf("%s (-want +got):\n%s", trancheotel.MetricScheduleUpstream, diff)
		}
	})
}
