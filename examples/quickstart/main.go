// Quickstart backfills a month of days over two assets, newest day first,
// into JSON-lines files, recording every partition in a SQLite ledger; it
// then runs the same backfill again, which skips every day: the ledger
// remembers, across runs and across processes. It opens with what
// daylight saving time does to days.
//
//	go run ./examples/quickstart [-dir tranche-demo]
//	TRANCHE_FAIL_PARTITION=2026-11-15 go run ./examples/quickstart
//	go run ./examples/quickstart   # resumes: only 2026-11-15 runs
//
// TRANCHE_FAIL_PARTITION names a day whose source is down: the backfill
// records it failed and lands the other days, and the quickstart exits
// with status 1, as a job whose backfill did not land every day should.
// Run the quickstart again without it, and the backfill resumes, running
// that day alone. The files
// and the ledger (ledger.db) are kept in the folder: inspect the ledger
// with sqlite3 (see the README), and delete the folder to start over.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/destination/files"
	"github.com/tranche-dev/tranche/ledger/sqlite"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

func run() error {
	dir := flag.String("dir", "tranche-demo", "folder for the files and the ledger")
	flag.Parse()
	// Ctrl-C cancels the backfill: the days in flight are recorded failed,
	// cause canceled, and the next run retries them.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		return err
	}
	november, err := tranche.NewTimePartitionWindow(tranche.Day,
		time.Date(2026, 11, 1, 0, 0, 0, 0, ny), time.Date(2026, 11, 30, 0, 0, 0, 0, ny))
	if err != nil {
		return err
	}
	first := november.Oldest()
	fmt.Printf("November 2026 in New York (%s): %d days, the first %v long as clocks fall back, keys %s to %s\n\n",
		november, november.Len(), first.End.Sub(first.Start), first.Key(), november.Newest().Key())

	fault, err := injectedFault(november)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		return err
	}
	lg, err := sqlite.Open(ctx, filepath.Join(*dir, "ledger.db"), nil)
	if err != nil {
		return err
	}
	defer lg.Close()

	warehouse := &files.Destination{Dir: *dir}
	dag, err := newDAG(warehouse, ny, fault)
	if err != nil {
		return err
	}
	b := &backfill.Backfill{
		DAG:         dag,
		Window:      november,
		Ledger:      lg,
		Worker:      "quickstart",
		Concurrency: 4,
		OnFailure:   tranche.FailContinue, // a failed day does not stop the others
		OnEvent:     backfill.NewProgressReporter(os.Stdout),
	}
	fmt.Printf("Backfilling into %s, recorded in %s\n", *dir, lg.Path())
	var failed []backfill.Failure
	for round := 1; round <= 2; round++ {
		plan, err := b.Plan(ctx)
		if err != nil {
			return err
		}
		fmt.Printf("\n== run %d: %d to run, %d succeeded before, %d running elsewhere\n",
			round, plan.Counts.Run, plan.Counts.SkipSucceeded, plan.Counts.SkipRunning)
		report, err := b.Execute(ctx, plan)
		if report == nil {
			return err // refused before running anything
		}
		fmt.Printf("== run %d: %d ran here (%d failed), %d skipped, in %v\n",
			round, report.RanHere(), report.Failed, report.Skipped+report.Elsewhere, report.Duration.Round(time.Millisecond))
		if err != nil && report.Failed == 0 {
			return err // the ledger failed, or other workers hold days
		}
		failed = report.Failures
		if ctx.Err() != nil {
			return nil
		}
	}

	for _, f := range failed {
		p, err := tranche.ParsePartitionKey(tranche.Day, f.Key, ny)
		if err != nil {
			return err
		}
		h, err := lg.History(ctx, backfill.DAGIdentity(dag, tranche.Day, ny), p.Start)
		if err != nil {
			return err
		}
		fmt.Printf("\nThe history of %s:\n", f.Key)
		for _, a := range h {
			fmt.Printf("  attempt %d by %s: %s  %s\n", a.Number, a.Worker, a.State, a.Err)
		}
	}
	id, err := b.ID()
	if err != nil {
		return err
	}
	status, err := backfill.StatusOf(ctx, lg, id, time.Now())
	if err != nil {
		return err
	}
	fmt.Printf("\n%s\n", status)
	switch {
	case fault != nil:
		fmt.Printf("Now run it again without TRANCHE_FAIL_PARTITION: the backfill resumes, running %s alone.\n", fault.Key())
	case status.Done():
		fmt.Println("Every day has landed; running the quickstart again skips them all: the ledger remembers.")
		fmt.Println("Set TRANCHE_FAIL_PARTITION=2026-11-15 and delete the folder to see a failure, then the resume.")
	}
	fmt.Printf("For instance %s\n", warehouse.Path("daily_stats", "day", november.Newest().Key()))
	fmt.Printf("Inspect the ledger: sqlite3 -readonly %s 'SELECT partition_key, attempt, state FROM tranche_attempts'\n",
		lg.Path())
	if len(failed) > 0 {
		return fmt.Errorf("%d days failed, the first %s: %w", len(failed), failed[0].Key, failed[0].Err)
	}
	return nil
}

// injectedFault returns the day TRANCHE_FAIL_PARTITION names, or nil.
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
		return nil, fmt.Errorf("TRANCHE_FAIL_PARTITION=%s is outside %s; give a day of it, such as 2026-11-15", key, w)
	}
	return &p, nil
}

// newDAG returns the quickstart's DAG: page_views, made up per day, and
// daily_stats, summed from it; both write JSON lines to dst. The page
// views of the fault's day fail.
func newDAG(dst tranche.Destination, ny *time.Location, fault *tranche.TimePartition) (*tranche.DAG, error) {
	daily := tranche.Partitioning{Granularity: tranche.Day, Location: ny, Column: "day"}
	pageViews := func(ctx context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
		p, err := m.Partition()
		if err != nil {
			return nil, err
		}
		if fault != nil && p.Equal(*fault) {
			return nil, errors.New("injected fault (TRANCHE_FAIL_PARTITION): the source timed out")
		}
		time.Sleep(20 * time.Millisecond) // as if it read something
		var rows []tranche.Row
		for i, page := range []string{"/", "/pricing", "/docs"} {
			rows = append(rows, tranche.Row{"day": p.Key(), "page": page, "views": (p.Start.Day()*7+i*13)%50 + 1})
		}
		return rows, nil
	}
	dailyStats := func(_ context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
		views, err := m.Input("page_views")
		if err != nil {
			return nil, err
		}
		p, err := m.Partition()
		if err != nil {
			return nil, err
		}
		total := 0
		for _, r := range views {
			total += r["views"].(int)
		}
		return []tranche.Row{{"day": p.Key(), "pages": len(views), "views": total}}, nil
	}
	return tranche.NewDAG(
		tranche.Asset{Name: "page_views", Partitioning: daily, Destinations: []tranche.Destination{dst},
			Materialize: pageViews},
		tranche.Asset{Name: "daily_stats", Deps: []string{"page_views"}, Partitioning: daily,
			Destinations: []tranche.Destination{dst}, Materialize: dailyStats},
	)
}
