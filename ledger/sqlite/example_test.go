package sqlite_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/ledger/sqlite"
)

// Open a ledger file, run a backfill on it, and read its state back from
// a second Open of the same file, as another process would.
func ExampleOpen() {
	dir, err := os.MkdirTemp("", "tranche-sqlite-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "ledger.db")
	ctx := context.Background()

	lg, err := sqlite.Open(ctx, path, nil) // created if missing; its folder must exist
	if err != nil {
		fmt.Println(err)
		return
	}
	defer lg.Close()

	dag, err := tranche.NewDAG(tranche.Asset{
		Name:         "events",
		Partitioning: tranche.Partitioning{Granularity: tranche.Day, Location: time.UTC, Column: "day"},
		Destinations: []tranche.Destination{new(tranche.MemoryDestination)},
		Materialize: func(_ context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
			p, err := m.Partition()
			return []tranche.Row{{"day": p.Key()}}, err
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	january, err := tranche.NewTimePartitionWindow(tranche.Day,
		time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 1, 31, 0, 0, 0, 0, time.UTC))
	if err != nil {
		fmt.Println(err)
		return
	}
	b := &backfill.Backfill{DAG: dag, Window: january, Ledger: lg, Concurrency: 4}
	report, err := b.Run(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(report.Succeeded, "of", report.Total, "succeeded")

	other, err := sqlite.Open(ctx, path, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer other.Close()
	status, err := backfill.StatusOf(ctx, other, report.Backfill, time.Now())
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("done:", status.Done())

	_, err = sqlite.Open(ctx, filepath.Join(dir, "missing", "ledger.db"), nil)
	fmt.Println(err != nil) // a folder that does not exist is refused, naming the file
	// Output:
	// 31 of 31 succeeded
	// done: true
	// true
}
