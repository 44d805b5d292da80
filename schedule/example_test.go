package schedule_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/ledger/memledger"
	"github.com/tranche-dev/tranche/schedule"
)

// A scheduler keeps an hourly DAG current in New York on the day clocks
// spring forward: the hour from 01:00 closes at 03:00, daylight time.
// The example's clock starts just after midnight and runs an hour every
// 400 ms, so that three slots close in a little over a second; a program
// leaves Now and After nil. The ledger judges each slot's close by its
// own clock, the system's, which the example's calendar, in the past,
// never overtakes.
func Example() {
	newYork, err := time.LoadLocation("America/New_York")
	if err != nil {
		fmt.Println(err)
		return
	}
	const rate = 9000 // an hour in 400 ms
	start, t0 := time.Date(2026, 3, 8, 0, 1, 0, 0, newYork), time.Now()
	now := func() time.Time { return start.Add(time.Since(t0) * rate) }
	after := func(d time.Duration) <-chan time.Time { return time.After(d / rate) }

	dag, err := tranche.NewDAG(tranche.Asset{
		Name:         "hits",
		Partitioning: tranche.Partitioning{Granularity: tranche.Hour, Location: newYork},
		Materialize: func(ctx context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
			return nil, nil // read the hour's hits and return them as rows
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	ran := 0
	s := &schedule.Scheduler{
		DAG:    dag,
		Ledger: memledger.New(nil), // a program shares a SQLite or PostgreSQL ledger among its replicas
		Now:    now,
		After:  after,
		OnEvent: func(_ context.Context, e tranche.Event) {
			if e.Kind == schedule.KindSucceeded {
				fmt.Println(e.Target, schedule.TriggerOf(e))
				if ran++; ran == 3 {
					stop()
				}
			}
		},
	}
	if err := s.Run(ctx); err != nil {
		fmt.Println(err)
	}
	st := s.Status()
	fmt.Println("next:", st.Next.Key(), "due", st.NextDue.Format(time.Kitchen))
	// Output:
	// 2026-03-08T00:00-05:00 live
	// 2026-03-08T01:00-05:00 live
	// 2026-03-08T03:00-04:00 live
	// next: 2026-03-08T04:00-04:00 due 5:00AM
}

// A scheduler and a backfill of the same DAG share one budget of a
// single run at a time: the day that closes while the backfill's first
// partition runs (the example's clock reaches midnight 200 ms after the
// scheduler first reads it) runs as soon as that partition ends, before
// the backfill's next one, which waits for the place all along (the
// backfill runs two at a time).
func Example_budget() {
	// The example's clock starts when the scheduler first reads it.
	start := time.Date(2026, 1, 8, 23, 59, 59, 800_000_000, time.UTC)
	var t0 time.Time
	var once sync.Once
	now := func() time.Time {
		once.Do(func() { t0 = time.Now() })
		return start.Add(time.Since(t0))
	}

	claimed := make(chan struct{}) // the live slot holds its lease, and asks for a place
	var mu sync.Mutex
	var order []string
	dag, err := tranche.NewDAG(tranche.Asset{
		Name:         "events",
		Partitioning: tranche.Partitioning{Granularity: tranche.Day, Location: time.UTC},
		Materialize: func(ctx context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
			p, err := m.Partition()
			if err != nil {
				return nil, err
			}
			who := "a backfill partition"
			if p.Start.Equal(start.Truncate(24 * time.Hour)) {
				who = "the live slot " + p.Key()
			}
			mu.Lock()
			order = append(order, who)
			first := len(order) == 1
			mu.Unlock()
			if first {
				<-claimed
				time.Sleep(100 * time.Millisecond) // the partition runs on a while
			}
			return nil, nil
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	l := memledger.New(nil)
	budget := backfill.NewBudget(1)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	s := &schedule.Scheduler{DAG: dag, Ledger: l, Budget: budget, Now: now,
		OnEvent: func(_ context.Context, e tranche.Event) {
			if e.Kind == schedule.KindClaimed {
				close(claimed)
			}
		}}
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()

	week, err := tranche.WindowBetween(tranche.Day, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 1, 8, 0, 0, 0, 0, time.UTC))
	if err != nil {
		fmt.Println(err)
		return
	}
	b := &backfill.Backfill{DAG: dag, Window: week, Ledger: l, Budget: budget, Concurrency: 2}
	res, err := b.Run(ctx)
	stop() // the scheduler too
	if err := errors.Join(err, <-done); err != nil {
		fmt.Println(err)
		return
	}
	mu.Lock()
	defer mu.Unlock()
	for _, o := range order[:3] {
		fmt.Println(o)
	}
	fmt.Println(res.Succeeded, "days backfilled,", s.Status().Succeeded, "slot live")
	// Output:
	// a backfill partition
	// the live slot 2026-01-08
	// a backfill partition
	// 7 days backfilled, 1 slot live
}

// A scheduler keeps a DAG of two granularities current: hourly hits and
// their daily rollup, in New York. A backfill landed the 7th's hours to
// 22:00 (backfills and the scheduler record each asset's partitions
// alike, and skip what the other landed); the scheduler runs the hour
// from 23:00 at midnight, and the 7th's rollup, due then too, once that
// hour has landed. The example's clock runs an hour every 400 ms.
func Example_granularities() {
	newYork, err := time.LoadLocation("America/New_York")
	if err != nil {
		fmt.Println(err)
		return
	}
	const rate = 9000
	start := time.Date(2026, 3, 7, 23, 45, 0, 0, newYork)
	var t0 time.Time // set once the backfill ran
	now := func() time.Time { return start.Add(time.Since(t0) * rate) }
	after := func(d time.Duration) <-chan time.Time { return time.After(d / rate) }

	var mu sync.Mutex
	landed := map[string][]tranche.Row{} // the warehouse: rows by asset and partition
	write := func(m *tranche.Materialization, rows []tranche.Row) ([]tranche.Row, error) {
		p, err := m.Partition()
		if err != nil {
			return nil, err
		}
		mu.Lock()
		defer mu.Unlock()
		landed[m.Asset()+" "+p.Key()] = rows
		return rows, nil
	}
	part := func(g tranche.TimeGranularity) tranche.Partitioning {
		return tranche.Partitioning{Granularity: g, Location: newYork}
	}
	dag, err := tranche.NewDAG(
		tranche.Asset{Name: "hits", Partitioning: part(tranche.Hour),
			Materialize: func(ctx context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
				time.Sleep(200 * time.Millisecond) // half an hour of the example's clock
				return write(m, []tranche.Row{{"hits": 10}})
			}},
		tranche.Asset{Name: "rollup", Deps: []string{"hits"}, Partitioning: part(tranche.Day),
			Materialize: func(ctx context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
				hours, err := m.Input("hits") // every hour of the day, through Read
				if err != nil {
					return nil, err
				}
				fmt.Println("rollup of", len(hours), "hours")
				return write(m, []tranche.Row{{"hours": len(hours)}})
			}},
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	dag.Name = "platform"
	runner := &tranche.Runner{Read: func(_ context.Context, asset string, p tranche.TimePartition) ([]tranche.Row, error) {
		mu.Lock()
		defer mu.Unlock()
		rows, ok := landed[asset+" "+p.Key()]
		if !ok {
			return nil, fmt.Errorf("%s %s has not landed", asset, p.Key())
		}
		return rows, nil
	}}
	l := memledger.New(nil)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	hours, err := tranche.WindowBetween(tranche.Hour, time.Date(2026, 3, 7, 0, 0, 0, 0, newYork), time.Date(2026, 3, 7, 23, 0, 0, 0, newYork))
	if err != nil {
		fmt.Println(err)
		return
	}
	if _, err := (&backfill.Backfill{DAG: dag, Window: hours, Ledger: l, Runner: runner, Concurrency: 4}).Run(ctx); err != nil {
		fmt.Println(err)
		return
	}

	t0 = time.Now()
	s := &schedule.Scheduler{
		DAG: dag, Ledger: l, Runner: runner, Now: now, After: after,
		Lease: time.Second, Heartbeat: 50 * time.Millisecond, // how often a waiting day looks at its hours
		WaitUpstream: 2 * time.Hour, // then recorded missed, for a backfill to run
		OnEvent: func(_ context.Context, e tranche.Event) {
			switch e.Kind {
			case schedule.KindWaiting, schedule.KindSucceeded:
				fmt.Println(e.DAG, e.Target, e.Kind)
				if e.DAG == "platform/rollup" && e.Kind == schedule.KindSucceeded {
					stop()
				}
			}
		},
	}
	if err := s.Run(ctx); err != nil {
		fmt.Println(err)
	}
	for _, a := range s.Status().Assets {
		fmt.Println(a.Last.Key(), a.LastState)
	}
	// Output:
	// platform/rollup 2026-03-07 slot.waiting
	// platform/hits 2026-03-07T23:00-05:00 slot.succeeded
	// rollup of 24 hours
	// platform/rollup 2026-03-07 slot.succeeded
	// 2026-03-07T23:00-05:00 succeeded
	// 2026-03-07 succeeded
}
