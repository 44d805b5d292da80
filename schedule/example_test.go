package schedule_test

import (
	"context"
	"fmt"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/ledger/memledger"
	"github.com/tranche-dev/tranche/schedule"
)

// A scheduler keeps an hourly DAG current in New York on the day clocks
// spring forward: the hour from 01:00 closes at 03:00, daylight time.
// The example's clock starts just after midnight and runs an hour every
// 400 ms, so that three slots close in a little over a second; a program
// leaves Now and After nil.
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
