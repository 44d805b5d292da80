package tranchetest_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/destination/files"
	"github.com/tranche-dev/tranche/tranchetest"
)

// A Recorder keeps every event of a run; Kinds lists those of one asset.
func ExampleRecorder() {
	dag, err := tranche.NewDAG(
		tranchetest.Rows("raw", []tranche.Row{{"n": 1}, {"n": 2}}),
		tranchetest.Func("sum", func(_ context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
			rows, err := m.Input("raw")
			total := 0
			for _, r := range rows {
				total += r["n"].(int)
			}
			return []tranche.Row{{"total": total}}, err
		}, "raw"),
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	rec := new(tranchetest.Recorder)
	res, err := (&tranche.Runner{OnEvent: rec.OnEvent}).Run(context.Background(), dag, nil)
	fmt.Println(res.State, err)
	fmt.Println(rec.Kinds(""))
	fmt.Println(rec.Kinds("sum"))
	// Output:
	// succeeded <nil>
	// [run.started run.succeeded]
	// [asset.started asset.succeeded]
}

// RunBackfill runs a backfill on an in-memory ledger whose clock stands
// still, so that its attempts read the same on every run; the test then
// checks that every partition succeeded exactly once, and reads the rows
// back from the files destination.
func ExampleRunBackfill() {
	dir, err := os.MkdirTemp("", "tranchetest-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	warehouse := &files.Destination{Dir: dir}

	fails := 1 // 2026-01-02 fails once, then succeeds
	events := tranchetest.Func("events", func(_ context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
		p, err := m.Partition()
		if err != nil {
			return nil, err
		}
		if p.Key() == "2026-01-02" && fails > 0 {
			fails--
			return nil, errors.New("upstream not ready")
		}
		return []tranche.Row{{"day": p.Key(), "n": 1}}, nil
	})
	events.Partitioning = tranche.Partitioning{Granularity: tranche.Day, Location: time.UTC, Column: "day"}
	events.Destinations = []tranche.Destination{warehouse}
	dag, err := tranche.NewDAG(events)
	if err != nil {
		fmt.Println(err)
		return
	}
	january, err := tranche.NewTimePartitionWindow(tranche.Day,
		time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 1, 3, 0, 0, 0, 0, time.UTC))
	if err != nil {
		fmt.Println(err)
		return
	}

	ctx := context.Background()
	b := &backfill.Backfill{DAG: dag, Window: january, OnFailure: tranche.FailContinue}
	report, err := tranchetest.RunBackfill(ctx, nil, b)
	fmt.Printf("first run: %d succeeded, %d failed: %v\n", report.Succeeded, report.Failed, err != nil)
	fmt.Println(tranchetest.CheckSucceededOnce(ctx, b))

	report, err = tranchetest.RunBackfill(ctx, nil, b) // resumes: only the failed partition runs
	fmt.Printf("second run: %d succeeded, %d skipped: %v\n", report.Succeeded, report.Skipped, err)
	fmt.Println(tranchetest.CheckSucceededOnce(ctx, b))

	keys, err := tranchetest.FileKeys(warehouse, "events", "day")
	fmt.Println(keys, err)
	rows, err := tranchetest.FileRows(warehouse, "events", "day", "2026-01-02")
	fmt.Println(rows, err)
	// Output:
	// first run: 2 succeeded, 1 failed: true
	// tranchetest: backfill of day 2026-01-01..2026-01-03 UTC: 1 of 3 partitions did not succeed exactly once
	// 	1 not succeeded:
	// 		2026-01-02: attempt 1 by tranchetest failed: tranche: asset "events" failed for 2026-01-02: upstream not ready
	// second run: 1 succeeded, 2 skipped: <nil>
	// <nil>
	// [2026-01-01 2026-01-02 2026-01-03] <nil>
	// [map[day:2026-01-02 n:1]] <nil>
}
