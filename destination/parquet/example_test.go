package parquet_test

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	_ "github.com/duckdb/duckdb-go/v2"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/destination/column"
	"github.com/tranche-dev/tranche/destination/parquet"
	"github.com/tranche-dev/tranche/ledger/memledger"
)

// backfillLake backfills three days of an orders asset, with a declared
// schema, into a lake in dir.
func backfillLake(ctx context.Context, dir string) (*parquet.Destination, error) {
	lake := &parquet.Destination{
		Dir: dir,
		Schemas: map[string]parquet.Schema{"orders": {Columns: []parquet.Column{
			{Name: "id", Type: column.Int},
			{Name: "amount", Type: column.Float},
			{Name: "customer", Type: column.String, Null: true},
			{Name: "placed_at", Type: column.Time},
		}}},
	}
	dag, err := tranche.NewDAG(tranche.Asset{
		Name:         "orders",
		Partitioning: tranche.Partitioning{Granularity: tranche.Day, Location: time.UTC, Column: "day"},
		Destinations: []tranche.Destination{lake},
		Materialize: func(_ context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
			p, err := m.Partition()
			if err != nil {
				return nil, err
			}
			var rows []tranche.Row
			for i := range p.Start.Day() { // one order on the 1st, two on the 2nd, ...
				r := tranche.Row{
					"day":       p.Key(),
					"id":        p.Start.Day()*10 + i,
					"amount":    9.5 + float64(i),
					"placed_at": p.Start.Add(time.Duration(i+9) * time.Hour),
				}
				if i == 0 {
					r["customer"] = "ada" // the others have none: null
				}
				rows = append(rows, r)
			}
			return rows, nil
		},
	})
	if err != nil {
		return nil, err
	}
	days, err := tranche.NewTimePartitionWindow(tranche.Day,
		time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 1, 3, 0, 0, 0, 0, time.UTC))
	if err != nil {
		return nil, err
	}
	b := &backfill.Backfill{DAG: dag, Window: days, Ledger: memledger.New(nil)}
	if _, err := b.Run(ctx); err != nil {
		return nil, err
	}
	return lake, nil
}

// A backfill writes one Parquet file per partition, in a folder named by
// the partition column and key; Rows reads one back.
func ExampleDestination() {
	dir, err := os.MkdirTemp("", "lake-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	lake, err := backfillLake(context.Background(), dir)
	if err != nil {
		fmt.Println(err)
		return
	}
	filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err == nil && filepath.Ext(path) == ".parquet" {
			rel, _ := filepath.Rel(dir, path)
			fmt.Println(filepath.ToSlash(rel))
		}
		return err
	})
	rows, err := lake.Rows("orders", "day", "2026-01-02")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range rows {
		fmt.Println(r["id"], r["amount"], r["customer"], r["placed_at"])
	}
	// Output:
	// orders/day=2026-01-01/part-00000.parquet
	// orders/day=2026-01-02/part-00000.parquet
	// orders/day=2026-01-03/part-00000.parquet
	// 20 9.5 ada 2026-01-02 09:00:00 +0000 UTC
	// 21 10.5 <nil> 2026-01-02 10:00:00 +0000 UTC
}

// DuckDB reads the lake back with hive_partitioning, which takes the
// partition column from the folder names.
func ExampleDestination_duckDB() {
	dir, err := os.MkdirTemp("", "lake-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	if _, err := backfillLake(context.Background(), dir); err != nil {
		fmt.Println(err)
		return
	}
	db, err := sql.Open("duckdb", "")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	glob := strings.ReplaceAll(filepath.Join(dir, "orders", "*", "*.parquet"), "'", "''")
	rows, err := db.Query(`SELECT strftime(day, '%Y-%m-%d'), count(*), sum(amount), count(customer)
		FROM read_parquet('` + glob + `', hive_partitioning = true) GROUP BY day ORDER BY day`)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rows.Close()
	for rows.Next() {
		var day string
		var orders, customers int64
		var amount float64
		if err := rows.Scan(&day, &orders, &amount, &customers); err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(day, orders, amount, customers)
	}
	if err := rows.Err(); err != nil {
		fmt.Println(err)
	}
	// Output:
	// 2026-01-01 1 9.5 1
	// 2026-01-02 2 20 1
	// 2026-01-03 3 31.5 1
}
