package schedule_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/memledger"
	"github.com/tranche-dev/tranche/schedule"
)

// Benchmarks of the live scheduler; run them with
//
//	go test -run '^$' -bench Idle100 -benchtime 1x -count 5 ./schedule
//
// and the catch-up after an outage on SQLite and PostgreSQL with the
// CatchUp10k benchmarks of ledger/sqlite and ledger/postgres.
// BENCHMARKS.md, "Live scheduler", holds the medians.

// idleRate is how much faster than the system's clock the idle
// benchmark's clock runs: a minute of it is a second of real time.
const idleRate = 60

// idleStretch is how long, in real time, each side of the idle benchmark
// is measured: ten minutes of its clock.
const idleStretch = 10 * time.Second

// idleDAGs returns 100 one-asset DAGs, a third hourly, a third daily and
// a third on the cron schedule "0 6 * * 1-5", each its own identity, with
// a materializer that does nothing.
func idleDAGs(b *testing.B) []*tranche.DAG {
	b.Helper()
	weekdays, err := tranche.ParseCron("0 6 * * 1-5")
	if err != nil {
		b.Fatal(err)
	}
	gs := []tranche.TimeGranularity{tranche.Hour, tranche.Day, weekdays}
	dags := make([]*tranche.DAG, 100)
	for i := range dags {
		dag, err := tranche.NewDAG(tranche.Asset{Name: fmt.Sprintf("asset%03d", i), Partitioning: tranche.Partitioning{Granularity: gs[i%3], Location: time.UTC},
			Materialize: func(context.Context, *tranche.Materialization) ([]tranche.Row, error) { return nil, nil }})
		if err != nil {
			b.Fatal(err)
		}
		dags[i] = dag
	}
	return dags
}

// cpuTime returns the user and system time of the whole process so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// idleSide is one side of BenchmarkIdle100: start starts a loop per DAG,
// each adding one to wakeups whenever it wakes, and returns once they all
// wait, with a function that waits for them to return once ctx ends.
type idleSide struct {
	name  string
	start func(ctx context.Context, b *testing.B, dags []*tranche.DAG, now func() time.Time, wakeups *atomic.Int64) (wait func())
}

// BenchmarkIdle100 measures 100 DAGs waiting for their next slot in one
// process, for idleStretch of real time under a clock idleRate times the
// system's (ten minutes of it, in which no slot comes due), and reports
// for each side its wakeups and its CPU time (user and system, of the
// whole process, by getrusage) per minute of that clock:
//
//   - none: no loop at all, the test process's own cost;
//   - scheduler: 100 Schedulers on one in-memory ledger, each sleeping
//     on its After until its next slot, at most a minute at a time;
//   - ticker-1m and ticker-1s: the loop a user writes instead, one per
//     DAG, a time.Ticker of a minute (or a second) of the clock, which at
//     each tick reads the clock, finds the open slot with
//     tranche.PartitionOf and would run (backfill.RunRecorded) the one
//     before when the open slot moved on.
//
// The sides run one after another in each iteration, so that all see
// the machine's load of the moment; -benchtime 1x and -count 5 give five
// samples of each.
func BenchmarkIdle100(b *testing.B) {
	dags := idleDAGs(b)
	sides := []idleSide{
		{"none", func(context.Context, *testing.B, []*tranche.DAG, func() time.Time, *atomic.Int64) func() {
			return func() {}
		}},
		{"scheduler", startSchedulers},
		{"ticker-1m", startTickers(time.Minute)},
		{"ticker-1s", startTickers(time.Second)},
	}
	wakeups := make([]int64, len(sides))
	cpu := make([]time.Duration, len(sides))
	minutes := 0.0
	for b.Loop() {
		for i, side := range sides {
			// Wednesday 09:05: no slot of any DAG closes in the next 50
			// minutes of the clock.
			base, t0 := time.Date(2026, 3, 4, 9, 5, 0, 0, time.UTC), time.Now()
			now := func() time.Time { return base.Add(time.Since(t0) * idleRate) }
			ctx, cancel := context.WithCancel(b.Context())
			var woke atomic.Int64
			wait := side.start(ctx, b, dags, now, &woke)
			runtime.GC()
			w0, c0 := woke.Load(), cpuTime(b)
			time.Sleep(idleStretch)
			wakeups[i] += woke.Load() - w0
			cpu[i] += cpuTime(b) - c0
			cancel()
			wait()
		}
		minutes += float64(idleStretch*idleRate) / float64(time.Minute)
	}
	for i, side := range sides {
		b.ReportMetric(float64(wakeups[i])/minutes, side.name+"-wakeups/min")
		b.ReportMetric(float64(cpu[i].Microseconds())/minutes, side.name+"-cpu-us/min")
	}
	b.ReportMetric(float64(cpu[1])/float64(cpu[2]), "cpu-scheduler/ticker-1m")
	b.ReportMetric(float64(cpu[1])/float64(cpu[3]), "cpu-scheduler/ticker-1s")
	b.ReportMetric(0, "ns/op") // an iteration is four stretches of idleStretch; the metrics above are what is measured
}

// startSchedulers runs a Scheduler of each DAG on one in-memory ledger
// under the clock now, counting each sleep on After as a wakeup, and
// returns once each has read the ledger and waits.
func startSchedulers(ctx context.Context, b *testing.B, dags []*tranche.DAG, now func() time.Time, wakeups *atomic.Int64) func() {
	b.Helper()
	l := memledger.New(nil)
	after := func(d time.Duration) <-chan time.Time {
		wakeups.Add(1)
		return time.After(d / idleRate)
	}
	var wg sync.WaitGroup
	scheds := make([]*schedule.Scheduler, len(dags))
	for i, dag := range dags {
		s := &schedule.Scheduler{DAG: dag, Ledger: l, Worker: "idle", Now: now, After: after}
		scheds[i] = s
		wg.Go(func() {
			if err := s.Run(ctx); err != nil {
				b.Error(err)
			}
		})
	}
	for _, s := range scheds {
		for s.Status().NextDue.IsZero() {
			time.Sleep(time.Millisecond)
		}
		if st := s.Status(); !st.NextDue.After(now().Add(30 * time.Minute)) {
			b.Fatalf("scheduler of %s: next slot due %v, within the measured stretch", st.DAG, st.NextDue)
		}
	}
	return wg.Wait
}

// startTickers returns the side of a ticker loop per DAG, ticking every
// tick of the clock now.
func startTickers(tick time.Duration) func(context.Context, *testing.B, []*tranche.DAG, func() time.Time, *atomic.Int64) func() {
	return func(ctx context.Context, b *testing.B, dags []*tranche.DAG, now func() time.Time, wakeups *atomic.Int64) func() {
		l := memledger.New(nil)
		var wg sync.WaitGroup
		var ready sync.WaitGroup
		for _, dag := range dags {
			ready.Add(1)
			wg.Go(func() {
				tickerLoop(ctx, l, dag, now, tick, wakeups, ready.Done)
			})
		}
		ready.Wait()
		return wg.Wait
	}
}

// tickerLoop is the simplest scheduler a user writes: a ticker, and at
// each tick the open slot, whose predecessor runs when the open slot
// moves on.
func tickerLoop(ctx context.Context, l ledger.Ledger, dag *tranche.DAG, now func() time.Time, tick time.Duration, wakeups *atomic.Int64, ready func()) {
	var p tranche.Partitioning
	for a := range dag.Assets() {
		p = a.Partitioning
	}
	t := time.NewTicker(tick / idleRate)
	defer t.Stop()
	open := tranche.PartitionOf(p.Granularity, now().In(p.Location))
	ready()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			wakeups.Add(1)
			cur := tranche.PartitionOf(p.Granularity, now().In(p.Location))
			if cur.Start.After(open.Start) {
				if _, err := backfill.RunRecorded(ctx, l, nil, dag, open, "idle"); err != nil {
					return
				}
				open = cur
			}
		}
	}
}
