package backfill_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/memledger"
)

// exampleDays returns the days 2026-01-01 to 2026-01-03, UTC.
func exampleDays() tranche.TimePartitionWindow {
	w, err := tranche.NewTimePartitionWindow(tranche.Day,
		time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 1, 3, 0, 0, 0, 0, time.UTC))
	if err != nil {
		panic(err)
	}
	return w
}

// exampleDAG is a daily asset writing one row per day to dest; the
// partition keyed fail fails the first time it runs.
func exampleDAG(dest tranche.Destination, fail string) (*tranche.DAG, error) {
	failed := false
	return tranche.NewDAG(tranche.Asset{
		Name:         "events",
		Partitioning: tranche.Partitioning{Granularity: tranche.Day, Location: time.UTC, Column: "day"},
		Destinations: []tranche.Destination{dest},
		Materialize: func(_ context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
			p, err := m.Partition()
			if err != nil {
				return nil, err
			}
			if p.Key() == fail && !failed {
				failed = true
				return nil, errors.New("upstream not ready")
			}
			return []tranche.Row{{"day": p.Key(), "n": 1}}, nil
		},
	})
}

// A backfill records every partition's attempts in a ledger, so running
// it again resumes it: the partition that failed runs again, the others
// are skipped.
func ExampleBackfill_Run() {
	dag, err := exampleDAG(new(tranche.MemoryDestination), "2026-01-02")
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	b := &backfill.Backfill{
		DAG:       dag,
		Window:    exampleDays(),
		Ledger:    memledger.New(nil),
		OnFailure: tranche.FailContinue, // run the other partitions after a failure
	}
	report, err := b.Run(ctx)
	fmt.Println(report.Succeeded, "succeeded,", report.Failed, "failed")
	for _, f := range report.Failures {
		fmt.Println(f.Key, f.Err)
	}
	fmt.Println(err != nil)

	report, err = b.Run(ctx)
	fmt.Println(report.Succeeded, "succeeded,", report.Skipped, "skipped:", err)
	// Output:
	// 2 succeeded, 1 failed
	// 2026-01-02 tranche: asset "events" failed for 2026-01-02: upstream not ready
	// true
	// 1 succeeded, 2 skipped: <nil>
}

// A plan is a dry run: what running the backfill now would do to each
// partition, read from the ledger, with nothing run or written.
func ExampleBackfill_Plan() {
	dag, err := exampleDAG(new(tranche.MemoryDestination), "2026-01-02")
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	b := &backfill.Backfill{DAG: dag, Window: exampleDays(), Ledger: memledger.New(nil), OnFailure: tranche.FailContinue}
	if _, err := b.Run(ctx); err == nil {
		fmt.Println("the first run should have failed a partition")
	}

	plan, err := b.Plan(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%d partitions: run %d, skip %d\n", plan.Counts.Total, plan.Counts.Run, plan.Counts.SkipSucceeded)
	for item, err := range plan.Items(ctx) {
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(item.Partition.Key(), item.Action, item.Latest.State)
	}
	// Output:
	// 3 partitions: run 1, skip 2
	// 2026-01-03 skip: succeeded succeeded
	// 2026-01-02 run failed
	// 2026-01-01 skip: succeeded succeeded
}

// StatusOf reads a backfill's state from its ledger, from any process:
// counts per state, each partition's latest attempt, and whether it is
// done.
func ExampleStatusOf() {
	dag, err := exampleDAG(new(tranche.MemoryDestination), "2026-01-02")
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	lg := memledger.New(nil)
	b := &backfill.Backfill{DAG: dag, Window: exampleDays(), Ledger: lg, Worker: "worker-1", OnFailure: tranche.FailContinue}
	report, err := b.Run(ctx)
	if report == nil {
		fmt.Println(err)
		return
	}

	status, err := backfill.StatusOf(ctx, lg, report.Backfill, time.Now())
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("done:", status.Done())
	fmt.Println(status.Counts[ledger.StateSucceeded], "succeeded,", status.Counts[ledger.StateFailed], "failed")
	for p, err := range status.Partitions(ctx) {
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(p.Partition.Key(), p.State, "by", p.Latest.Worker)
	}
	// Output:
	// done: false
	// 2 succeeded, 1 failed
	// 2026-01-03 succeeded by worker-1
	// 2026-01-02 failed by worker-1
	// 2026-01-01 succeeded by worker-1
}

// The progress reporter turns a backfill's events into lines for people:
// one per finished partition and a last one when the backfill ends
// when its writer is not a terminal, one line rewritten in place on a
// terminal. Here it is given the events a backfill of three days emits,
// one second apart.
func ExampleNewProgressReporter() {
	report := backfill.NewProgressReporter(os.Stdout) // as Backfill.OnEvent
	start := time.Date(2026, 1, 4, 6, 0, 0, 0, time.UTC)
	ctx := context.Background()
	for i, e := range []tranche.Event{
		{Kind: backfill.KindStarted, Progress: &tranche.Progress{Total: 3}},
		{Kind: backfill.KindPartitionSucceeded, Target: "2026-01-03", Progress: &tranche.Progress{Done: 1, Total: 3, ETA: 2 * time.Second}},
		{Kind: backfill.KindPartitionFailed, Target: "2026-01-02", Progress: &tranche.Progress{Done: 1, Failed: 1, Total: 3, ETA: time.Second}},
		{Kind: backfill.KindPartitionSucceeded, Target: "2026-01-01", Progress: &tranche.Progress{Done: 2, Failed: 1, Total: 3}},
		{Kind: backfill.KindFailed, Progress: &tranche.Progress{Done: 2, Failed: 1, Total: 3}},
	} {
		e.Backfill = "5192afd30e0c"
		e.Time = start.Add(time.Duration(i) * time.Second)
		report(ctx, e)
	}
	// Output:
	// backfill 5192afd30e0c: 2026-01-03 succeeded (1/3 done, 0 failed, 0 skipped, 1.0 partitions/s, ETA 2s)
	// backfill 5192afd30e0c: 2026-01-02 failed (1/3 done, 1 failed, 0 skipped, 1.0 partitions/s, ETA 1s)
	// backfill 5192afd30e0c: 2026-01-01 succeeded (2/3 done, 1 failed, 0 skipped, 1.0 partitions/s)
	// backfill 5192afd30e0c failed: 2/3 done, 1 failed, 0 skipped, 0.8 partitions/s
}
