package duckdb_test

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
	"github.com/tranche-dev/tranche/destination/duckdb"
	"github.com/tranche-dev/tranche/destination/sqldest"
	"github.com/tranche-dev/tranche/ledger/memledger"
)

// A backfill of three days into a table of a DuckDB file, read back with
// DuckDB's SQL; and a value its column cannot hold, refused.
func ExampleOpen() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "warehouse")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	views := sqldest.Table{Name: "page_views", Partition: "day", Columns: []sqldest.Column{
		{Name: "day", Type: column.Time},
		{Name: "page", Type: column.String},
		// A narrower type than the Int kind's BIGINT: each value is
		// checked against it.
		{Name: "views", Type: column.Int, SQLType: "SMALLINT"},
	}}
	dest, err := duckdb.Open(ctx, filepath.Join(dir, "warehouse.duckdb"), views)
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
	report, err := (&backfill.Backfill{DAG: dag, Window: w, Ledger: memledger.New(nil)}).Run(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(report.Succeeded, "partitions succeeded")

	rows, err := dest.DB().QueryContext(ctx, "SELECT strftime(day, '%Y-%m-%d'), sum(views) FROM page_views GROUP BY ALL ORDER BY 1")
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

	// 40,000 views do not fit a SMALLINT: refused, and the partition
	// keeps its rows.
	p := tranche.PartitionOf(tranche.Day, w.Start())
	err = dest.Write(ctx, []tranche.Batch{{Asset: "page_views", Column: "day", Partition: p,
		Rows: []tranche.Row{{"day": p.Start, "page": "/", "views": 40000}}}})
	if ve, ok := errors.AsType[*column.ValueError](err); ok && errors.Is(err, column.ErrOutOfRange) {
		fmt.Printf("refused: partition %s, row %d, column %s: %v\n", ve.Partition, ve.Row, ve.Column, ve.Value)
	}
	// Output:
	// 3 partitions succeeded
	// 2026-03-01 121
	// 2026-03-02 122
	// 2026-03-03 123
	// refused: partition 2026-03-01, row 0, column views: 40000
}
