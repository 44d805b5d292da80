// Duckdb loads a month of taxi trips into a DuckDB file through a
// backfill, a day a partition, recorded in a SQLite ledger beside it,
// and then queries the month back with DuckDB's SQL. Run it again and
// the backfill skips every day the ledger holds: only the days missing
// (a failed one, or a new month) run, and each replaces its day in the
// table, so the month is never loaded twice.
//
//	go run ./examples/duckdb [-dir tranche-duckdb] [-month 2026-01]
//	duckdb tranche-duckdb/warehouse.duckdb "SUMMARIZE trips"
//
// The file stays in the folder: the duckdb shell opens it once the
// program has ended (DuckDB lets one process at a time open a file).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/destination/column"
	"github.com/tranche-dev/tranche/destination/duckdb"
	"github.com/tranche-dev/tranche/destination/sqldest"
	"github.com/tranche-dev/tranche/ledger/sqlite"
)

func main() {
	dir := flag.String("dir", "tranche-duckdb", "folder for the DuckDB file and the ledger")
	month := flag.String("month", "2026-01", "the month to load, YYYY-MM")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout, *dir, *month); err != nil {
		fmt.Fprintln(os.Stderr, "duckdb:", err)
		os.Exit(1)
	}
}

// trips is the table of the trips asset. The fare is a DECIMAL, and the
// passengers a TINYINT: the destination checks every value against them.
var trips = sqldest.Table{Name: "trips", Partition: "pickup_day", Columns: []sqldest.Column{
	{Name: "pickup_day", Type: column.Time},
	{Name: "pickup", Type: column.Time},
	{Name: "zone", Type: column.String},
	{Name: "passengers", Type: column.Int, SQLType: "TINYINT"},
	{Name: "fare", Type: column.Float, SQLType: "DECIMAL(8,2)"},
	{Name: "attempt", Type: column.Int, Meta: sqldest.FromToken},
}}

func run(ctx context.Context, out io.Writer, dir, month string) error {
	first, err := time.Parse("2006-01", month)
	if err != nil {
		return fmt.Errorf("-month %q: want a month as YYYY-MM, such as 2026-01", month)
	}
	days, err := tranche.NewTimePartitionWindow(tranche.Day, first, first.AddDate(0, 1, -1))
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	ledger, err := sqlite.Open(ctx, filepath.Join(dir, "ledger.db"), nil)
	if err != nil {
		return err
	}
	defer ledger.Close()
	dest, err := duckdb.Open(ctx, filepath.Join(dir, "warehouse.duckdb"), trips)
	if err != nil {
		return err
	}
	defer dest.Close()
	if err := dest.CreateTables(ctx); err != nil {
		return err
	}

	dag, err := tranche.NewDAG(tranche.Asset{
		Name:         "trips",
		Partitioning: tranche.Partitioning{Granularity: tranche.Day, Location: time.UTC, Column: "pickup_day"},
		Destinations: []tranche.Destination{dest},
		Materialize: func(ctx context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
			p, err := m.Partition()
			if err != nil {
				return nil, err
			}
			return tripsOf(p), nil
		},
	})
	if err != nil {
		return err
	}
	report, err := (&backfill.Backfill{DAG: dag, Window: days, Ledger: ledger, Worker: "example", Concurrency: 4}).Run(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "backfill of %s: %d days loaded, %d skipped (loaded before)\n", month, report.Succeeded, report.Skipped)

	// The month, queried back in the same process: the destination holds
	// the file.
	db := dest.DB()
	var n, passengers int
	var fares float64
	if err := db.QueryRowContext(ctx, "SELECT count(*), sum(passengers), sum(fare)::DOUBLE FROM trips").Scan(&n, &passengers, &fares); err != nil {
		return err
	}
	fmt.Fprintf(out, "%d trips, %d passengers, fares %.2f\n", n, passengers, fares)
	rows, err := db.QueryContext(ctx, `SELECT strftime(date_trunc('week', pickup), '%Y-%m-%d') AS week, count(*), sum(fare)::DOUBLE
		FROM trips GROUP BY ALL ORDER BY week`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var week string
		var count int
		var sum float64
		if err := rows.Scan(&week, &count, &sum); err != nil {
			return err
		}
		fmt.Fprintf(out, "  week of %s: %4d trips, fares %9.2f\n", week, count, sum)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	var zone string
	var trips int
	if err := db.QueryRowContext(ctx, "SELECT zone, count(*) AS c FROM trips GROUP BY zone ORDER BY c DESC, zone LIMIT 1").Scan(&zone, &trips); err != nil {
		return err
	}
	fmt.Fprintf(out, "busiest zone: %s, %d trips\n", zone, trips)
	return nil
}

var zones = []string{"Midtown", "Downtown", "Airport", "Harlem", "Brooklyn Heights"}

// tripsOf makes a day's trips, the same on every run: a trip every 15
// minutes, more at the day's busy hours.
func tripsOf(p tranche.TimePartition) []tranche.Row {
	var out []tranche.Row
	seed := p.Start.YearDay()
	for at := p.Start; at.Before(p.End); at = at.Add(15 * time.Minute) {
		h := at.Hour()
		k := 1
		if h >= 7 && h < 10 || h >= 16 && h < 20 {
			k = 3
		}
		for j := range k {
			i := seed + at.Minute() + h*7 + j*13
			out = append(out, tranche.Row{
				"pickup_day": p.Start,
				"pickup":     at.Add(time.Duration(j) * time.Minute),
				"zone":       zones[i%len(zones)],
				"passengers": 1 + i%4,
				"fare":       float64(500+i*37%4000) / 100,
			})
		}
	}
	return out
}
