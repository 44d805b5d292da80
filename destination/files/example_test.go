package files_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/destination/files"
)

// A Destination writes each partition of an asset to its own JSON
// lines file, replacing it whole on every write, so that running a
// partition again never duplicates its rows.
func ExampleDestination() {
	dir, err := os.MkdirTemp("", "tranche-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	warehouse := &files.Destination{Dir: dir}
	dag, err := tranche.NewDAG(tranche.Asset{
		Name:         "events",
		Partitioning: tranche.Partitioning{Granularity: tranche.Day, Location: time.UTC, Column: "day"},
		Destinations: []tranche.Destination{warehouse},
		Materialize: func(_ context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
			p, err := m.Partition()
			if err != nil {
				return nil, err
			}
			return []tranche.Row{{"day": p.Key(), "n": 1}}, nil
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	day := tranche.PartitionOf(tranche.Day, time.Date(2026, 1, 3, 0, 0, 0, 0, time.UTC))
	for range 2 { // twice: the second run replaces the first one's file
		if _, err := new(tranche.Runner).Run(ctx, dag, day); err != nil {
			fmt.Println(err)
			return
		}
	}
	path := warehouse.Path("events", "day", day.Key())
	rel, err := filepath.Rel(dir, path)
	if err != nil {
		fmt.Println(err)
		return
	}
	data, err := os.ReadFile(path)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(filepath.ToSlash(rel))
	fmt.Print(string(data))
	// Output:
	// events/day=2026-01-03/data.jsonl
	// {"day":"2026-01-03","n":1}
}
