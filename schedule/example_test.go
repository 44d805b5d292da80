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
// partition runs (the example's clock reaches midnight 200 ms in) runs
// as soon as that partition ends, before the backfill's next one, which
// waits for the place all along (the backfill runs two at a time).
func Example_budget() {
	start, t0 := time.Date(2026, 1, 8, 23, 59, 59, 800_000_000, time.UTC), time.Now()
	now := func() time.Time { return start.Add(time.Since(t0)) }

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
