// Backfill materializes a month of days over a two-asset DAG into JSON
// files, records every partition in an in-memory ledger, and then runs the
// same backfill again to show that it resumes: only what failed runs.
// Last, it backfills three chosen days of February (not adjacent: one
// backfill, one plan), cancels that backfill after its first day, as an
// operator would, and resumes it: the two days left run.
//
//	go run ./examples/backfill [FOLDER]
//	TRANCHE_FAIL_PARTITION=2026-01-17 go run ./examples/backfill
//
// TRANCHE_FAIL_PARTITION names a day whose extraction fails the first
// time, as a flaky source would; the first run records it failed and goes
// on with the other days, and the second run retries it alone, under the
// same run id. The files land in FOLDER, or in a temporary folder that is
// removed at the end.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/destination/files"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/memledger"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "backfill:", err)
		os.Exit(1)
	}
}

func run() error {
	// Ctrl-C cancels the backfill: the partitions in flight are recorded
	// failed, cause canceled, and the next run retries them.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	dir, cleanup, err := folder()
	if err != nil {
		return err
	}
	defer cleanup()

	january, err := tranche.NewTimePartitionWindow(tranche.Day,
		time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 1, 31, 0, 0, 0, 0, time.UTC))
	if err != nil {
		return err
	}
	fault, err := injectedFault(january)
	if err != nil {
		return err
	}

	dag, err := newDAG(&files.Destination{Dir: dir}, fault)
	if err != nil {
		return err
	}
	b := &backfill.Backfill{
		DAG:         dag,
		Window:      january,
		Ledger:      memledger.New(nil),
		Worker:      "example",
		Concurrency: 4,
		OnFailure:   tranche.FailContinue, // a failed day does not stop the others
		OnEvent:     backfill.NewProgressReporter(os.Stdout),
	}

	fmt.Printf("Backfilling %s into %s\n\n", january, dir)
	for round := 1; round <= 2; round++ {
		fmt.Printf("== run %d: the plan\n", round)
		plan, err := b.Plan(ctx)
		if err != nil {
			return err
		}
		if err := printPlan(ctx, plan, round == 1); err != nil {
			return err
		}
		fmt.Printf("\n== run %d: progress\n", round)
		report, err := b.Execute(ctx, plan)
		if report == nil {
			return err // refused before running anything
		}
		fmt.Printf("\n== run %d: the report\n%s\n", round, report)
		for _, f := range report.Failures {
			fmt.Printf("  failed: %s: %v\n", f.Key, f.Err)
		}
		if err != nil {
			// A failed partition is what this example demonstrates:
			// report it, and resume in the next run.
			fmt.Printf("  error: %v\n", err)
		}
		fmt.Println()
		if ctx.Err() != nil {
			return nil
		}
	}

	if fault != nil {
		h, err := b.Ledger.History(ctx, dagIdentity(b), fault.Start)
		if err != nil {
			return err
		}
		fmt.Printf("History of %s:\n", fault.Key())
		for _, a := range h {
			line := fmt.Sprintf("  attempt %d, run %s: %s", a.Number, a.RunID, a.State)
			if a.Err != "" {
				line += ": " + a.Err
			}
			fmt.Println(line)
		}
	} else {
		fmt.Println("No fault was injected; set TRANCHE_FAIL_PARTITION=2026-01-17 to fail a day and see the second run resume it.")
	}
	if err := chosenDays(ctx, dag, b.Ledger); err != nil {
		return err
	}
	id, err := b.ID()
	if err != nil {
		return err
	}
	status, err := backfill.StatusOf(ctx, b.Ledger, id, time.Now())
	if err != nil {
		return err
	}
	fmt.Println(status)
	path := (&files.Destination{Dir: dir}).Path("daily_totals", "day", "2026-01-17")
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	fmt.Printf("%s:\n%s", path, data)
	if len(os.Args) < 2 {
		fmt.Println("(the temporary folder is removed on exit; give a folder as an argument to keep the files)")
	}
	return nil
}

// chosenDays backfills three days of February that are not adjacent,
// cancels the backfill in the ledger once its first day succeeded, and
// resumes it.
func chosenDays(ctx context.Context, dag *tranche.DAG, lg ledger.Ledger) error {
	var days []tranche.TimePartition
	for _, d := range []int{2, 9, 16} {
		days = append(days, tranche.PartitionOf(tranche.Day, time.Date(2026, 2, d, 0, 0, 0, 0, time.UTC)))
	}
	canceled := false
	cancelAfterFirst := func(ctx context.Context, e tranche.Event) {
		if e.Kind == backfill.KindPartitionSucceeded && !canceled {
			canceled = true // one worker, one partition at a time: no race
			if err := lg.CancelBackfill(ctx, e.Backfill, ledger.CancelOptions{}); err != nil {
				fmt.Println("  cancel:", err)
			}
		}
	}
	b := &backfill.Backfill{DAG: dag, Partitions: days, Ledger: lg, Worker: "example",
		OnEvent: tranche.Hooks(backfill.NewProgressReporter(os.Stdout), cancelAfterFirst)}
	plan, err := b.Plan(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("\n== chosen days: the plan\n%s\n", plan)
	report, err := b.Run(ctx)
	if !errors.Is(err, backfill.ErrBackfillCanceled) {
		return fmt.Errorf("the backfill of chosen days, canceled after its first day: %v, %w", report, err)
	}
	fmt.Printf("\n== chosen days: canceled after the first\n%s\n  error: %v\n", report, err)
	if report, err = b.Resume(ctx); err != nil {
		return err
	}
	fmt.Printf("\n== chosen days: resumed\n%s\n", report)
	record, err := lg.Backfill(ctx, report.Backfill)
	if err != nil {
		return err
	}
	fmt.Printf("  canceled at %s, resumed at %s\n\n", record.CanceledAt.Format(time.TimeOnly), record.ResumedAt.Format(time.TimeOnly))
	return nil
}

// dagIdentity returns the identity under which the ledger keys the DAG.
func dagIdentity(b *backfill.Backfill) string {
	return backfill.DAGIdentity(b.DAG, b.Window.Granularity(), b.Window.Location())
}

// folder returns the folder given as the first argument, or a temporary
// one with a function that removes it.
func folder() (string, func(), error) {
	if len(os.Args) > 1 {
		return os.Args[1], func() {}, nil
	}
	dir, err := os.MkdirTemp("", "tranche-backfill-")
	if err != nil {
		return "", nil, err
	}
	return dir, func() { os.RemoveAll(dir) }, nil
}

// injectedFault returns the partition TRANCHE_FAIL_PARTITION names, or
// nil when it is not set.
func injectedFault(w tranche.TimePartitionWindow) (*tranche.TimePartition, error) {
	key := os.Getenv("TRANCHE_FAIL_PARTITION")
	if key == "" {
		return nil, nil
	}
	p, err := tranche.ParsePartitionKey(w.Granularity(), key, w.Location())
	if err != nil {
		return nil, fmt.Errorf("TRANCHE_FAIL_PARTITION=%s: %w", key, err)
	}
	if !w.Contains(p.Start) {
		return nil, fmt.Errorf("TRANCHE_FAIL_PARTITION=%s is outside %s", key, w)
	}
	return &p, nil
}

// newDAG returns the example's DAG: "orders", extracted per day, and
// "daily_totals", summed from it; both write JSON lines to dst. The
// extraction of the fault's day fails the first time.
func newDAG(dst tranche.Destination, fault *tranche.TimePartition) (*tranche.DAG, error) {
	daily := tranche.Partitioning{Granularity: tranche.Day, Location: time.UTC, Column: "day"}
	var mu sync.Mutex
	failed := false
	orders := func(ctx context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
		p, err := m.Partition()
		if err != nil {
			return nil, err
		}
		if fault != nil && p.Equal(*fault) {
			mu.Lock()
			first := !failed
			failed = true
			mu.Unlock()
			if first {
				return nil, errors.New("injected fault (TRANCHE_FAIL_PARTITION): the source timed out")
			}
		}
		// A few orders a day, the same on every run.
		day := p.Start.Day()
		var rows []tranche.Row
		for i := range 3 + day%4 {
			rows = append(rows, tranche.Row{"day": p.Key(), "order": fmt.Sprintf("%s-%d", p.Key(), i), "cents": 500 + 125*((day+i)%7)})
		}
		return rows, nil
	}
	totals := func(ctx context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
		rows, err := m.Input("orders")
		if err != nil {
			return nil, err
		}
		p, err := m.Partition()
		if err != nil {
			return nil, err
		}
		cents := 0
		for _, r := range rows {
			cents += r["cents"].(int)
		}
		return []tranche.Row{{"day": p.Key(), "orders": len(rows), "cents": cents}}, nil
	}
	return tranche.NewDAG(
		tranche.Asset{Name: "orders", Partitioning: daily, Destinations: []tranche.Destination{dst}, Materialize: orders},
		tranche.Asset{Name: "daily_totals", Deps: []string{"orders"}, Partitioning: daily, Destinations: []tranche.Destination{dst},
			Materialize: totals},
	)
}

// printPlan prints the plan: in full the first time, then its summary and
// the partitions it runs.
func printPlan(ctx context.Context, plan *backfill.Plan, full bool) error {
	if full {
		return plan.WriteText(ctx, os.Stdout)
	}
	fmt.Println(plan)
	for item, err := range plan.Items(ctx) {
		if err != nil {
			return err
		}
		if item.Action == ledger.ActionRun {
			fmt.Printf("  %s  %s\n", item.Partition.Key(), item.Action)
		}
	}
	return nil
}
