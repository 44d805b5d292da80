// Schedule keeps an hourly DAG current with two replicas sharing one
// ledger, across Berlin's autumn change of clocks (2026-10-25, when
// 02:00 happens twice), under a clock that runs two hours a second: each
// slot runs once, by one replica or the other. Then both stop for eight
// hours of that clock, as in an outage, and start again: the newest five
// missed slots are caught up, oldest first, and the older ones reported
// missed, for a backfill to run.
//
//	go run ./examples/schedule
//	go run ./examples/schedule -rate 3600
//
// The ledger is in memory; replicas in several processes share a SQLite
// or PostgreSQL one (docs/scheduling.md). The ledger judges each slot's
// close by its own clock, the system's, which the accelerated calendar,
// in October 2026, stays behind.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/ledger/memledger"
	"github.com/tranche-dev/tranche/schedule"
)

func main() {
	rate := flag.Int64("rate", 7200, "how many times faster than the system's the clock runs")
	flag.Parse()
	if err := run(*rate); err != nil {
		log.Fatal(err)
	}
}

func run(rate int64) error {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		return err
	}
	start, t0 := time.Date(2026, 10, 24, 22, 30, 0, 0, berlin), time.Now()
	now := func() time.Time { return start.Add(time.Since(t0) * time.Duration(rate)).In(berlin) }
	after := func(d time.Duration) <-chan time.Time { return time.After(d / time.Duration(rate)) }
	sleep := func(d time.Duration) { time.Sleep(d / time.Duration(rate)) }

	dag, err := tranche.NewDAG(tranche.Asset{
		Name:         "pageviews",
		Partitioning: tranche.Partitioning{Granularity: tranche.Hour, Location: berlin},
		Materialize: func(ctx context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
			return nil, nil // read the hour's page views and return them as rows
		},
	})
	if err != nil {
		return err
	}
	l := memledger.New(nil)

	var mu sync.Mutex // the replicas' hooks print one line at a time
	replicas := make([]*schedule.Scheduler, 2)
	for i := range replicas {
		name := fmt.Sprintf("replica-%d", i+1)
		replicas[i] = &schedule.Scheduler{DAG: dag, Ledger: l, Worker: name, Now: now, After: after,
			OnEvent: func(_ context.Context, e tranche.Event) {
				mu.Lock()
				defer mu.Unlock()
				switch e.Kind {
				case schedule.KindSucceeded:
					fmt.Printf("%s  %-22s ran by %s (%s)\n", now().Format("01-02 15:04 MST"), e.Target, name, schedule.TriggerOf(e))
				case schedule.KindMissed:
					fmt.Printf("%s  %-22s missed: %s reports it, for a backfill\n", now().Format("01-02 15:04 MST"), e.Target, name)
				}
			}}
	}
	session := func(d time.Duration) error {
		ctx, stop := context.WithCancel(context.Background())
		errs := make(chan error, len(replicas))
		for _, s := range replicas {
			go func() { errs <- s.Run(ctx) }()
		}
		sleep(d)
		stop()
		for range replicas {
			if err := <-errs; err != nil {
				return err
			}
		}
		return nil
	}

	fmt.Println("two replicas, from", now().Format("2006-01-02 15:04 MST"))
	if err := session(7 * time.Hour); err != nil {
		return err
	}
	fmt.Println("an outage of eight hours, from", now().Format("15:04 MST"))
	sleep(8 * time.Hour)
	fmt.Println("both start again at", now().Format("15:04 MST"))
	if err := session(2 * time.Hour); err != nil {
		return err
	}
	for _, s := range replicas {
		st := s.Status()
		fmt.Printf("%s: last %s (%s), next %s due %s; %d ran, %d missed, %d done by the other\n", st.Worker,
			st.Last.Key(), st.LastState, st.Next.Key(), st.NextDue.Format("15:04 MST"), st.Succeeded, st.Missed, st.Elsewhere)
	}
	return nil
}
