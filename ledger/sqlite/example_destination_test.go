package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/destination/column"
	"github.com/tranche-dev/tranche/destination/sqldest"
	"github.com/tranche-dev/tranche/ledger/sqlite"
)

// A backfill writing into a table of the ledger's file: each partition's
// rows commit in the transaction that records its success.
func ExampleNewDestination() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "warehouse")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	lg, err := sqlite.Open(ctx, filepath.Join(dir, "warehouse.db"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer lg.Close()

	views := sqldest.Table{Name: "page_views", Partition: "day", Columns: []sqldest.Column{
		{Name: "day", Type: column.Time},
		{Name: "page", Type: column.String},
		{Name: "views", Type: column.Int},
	}}
	dest, err := sqlite.NewDestination(ctx, lg, views)
	if err != nil {
		log.Fatal(err)
	}
	defer dest.Close()
	if err := dest.CreateTables(ctx); err != nil {
		log.Fatal(err)
	}

	daily := tranche.Partitioning{Granularity: tranche.Day, Location: time.UTC, Column: "day"}
	dag, err := tranche.NewDAG(tranche.Asset{Name: "page_views", Partitioning: daily,
		Destinations: []tranche.Destination{dest},
		Materialize: func(ctx context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
			p, err := m.Partition()
			return []tranche.Row{
				{"day": p.Start, "page": "/", "views": 120},
				{"day": p.Start, "page": "/pricing", "views": p.Start.Day()},
			}, err
		}})
	if err != nil {
		log.Fatal(err)
	}
	w, err := tranche.NewTimePartitionWindow(tranche.Day, time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 3, 3, 0, 0, 0, 0, time.UTC))
	if err != nil {
		log.Fatal(err)
	}
	report, err := (&backfill.Backfill{DAG: dag, Window: w, Ledger: lg}).Run(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(report.Succeeded, "partitions succeeded")

	rows, err := lg.DB().QueryContext(ctx, "SELECT substr(day, 1, 10), sum(views) FROM page_views GROUP BY 1 ORDER BY 1")
	if err != nil {
		log.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var day string
		var views int
		if err := rows.Scan(&day, &views); err != nil {
			log.Fatal(err)
		}
		fmt.Println(day, views)
	}

	// A value of the wrong type is refused before anything is written.
	p := tranche.PartitionOf(tranche.Day, w.Start())
	err = dest.Write(ctx, []tranche.Batch{{Asset: "page_views", Column: "day", Partition: p,
		Rows: []tranche.Row{{"day": p.Start, "page": "/", "views": "many"}}}})
	if ve, ok := errors.AsType[*column.ValueError](err); ok && errors.Is(err, column.ErrMistyped) {
		fmt.Printf("refused: partition %s, row %d, column %s: %v\n", ve.Partition, ve.Row, ve.Column, ve.Value)
	}
	// Output:
	// 3 partitions succeeded
	// 2026-03-01 121
	// 2026-03-02 122
	// 2026-03-03 123
	// refused: partition 2026-03-01, row 0, column views: many
}
