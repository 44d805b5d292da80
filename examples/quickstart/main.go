// Quickstart materializes a DAG of two daily assets over a month in New
// York, newest day first, into JSON-lines files, printing every event
// through the slog adapter; it then runs the month again to show that a
// re-run replaces each day's file rather than adding to it. It opens with
// what daylight saving time does to partitions and lookback windows.
//
//	go run ./examples/quickstart [-dir tranche-demo]
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"os"
	"time"

	"github.com/tranche-dev/tranche"
)

func main() {
	dir := flag.String("dir", "tranche-demo", "folder for the files destination")
	flag.Parse()
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		log.Fatal(err)
	}
	partitions(ny)
	if err := materialize(context.Background(), ny, *dir); err != nil {
		log.Fatal(err)
	}
}

// partitions shows days, hours and lookback across the fall-back night.
func partitions(ny *time.Location) {
	w, err := tranche.NewTimePartitionWindow(tranche.Day,
		time.Date(2026, 10, 31, 0, 0, 0, 0, ny), time.Date(2026, 11, 2, 0, 0, 0, 0, ny))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("window %s, newest first:\n", w)
	for p := range w.All() {
		fmt.Printf("  %s  %v long\n", p.Key(), p.Duration())
	}
	night, err := tranche.NewTimePartitionWindow(tranche.Hour,
		time.Date(2026, 11, 1, 0, 0, 0, 0, ny), time.Date(2026, 11, 1, 2, 30, 0, 0, ny))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print("hours of the fall-back night:")
	for p := range night.OldestFirst() {
		fmt.Print(" " + p.Key())
	}
	now := time.Date(2026, 11, 3, 9, 30, 0, 0, ny)
	week, err := tranche.Lookback(now, 7, 1, tranche.Day)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("\nthe 7 days ending yesterday, at %s: %s\n\n", now.Format(time.RFC3339), week)
}

// pageViews makes up a day's page views: a few rows per page.
func pageViews(_ context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
	p, err := m.Partition()
	if err != nil {
		return nil, err
	}
	var rows []tranche.Row
	for i, page := range []string{"/", "/pricing", "/docs"} {
		rows = append(rows, tranche.Row{"day": p.Key(), "page": page, "views": (p.Start.Day()*7+i*13)%50 + 1})
	}
	m.Logger().Debug("generated", "rows", len(rows))
	return rows, nil
}

// dailyStats sums the day's page views.
func dailyStats(_ context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
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

func materialize(ctx context.Context, ny *time.Location, dir string) error {
	files := &tranche.FilesDestination{Dir: dir}
	daily := tranche.Partitioning{Granularity: tranche.Day, Location: ny, Column: "day"}
	dag, err := tranche.NewDAG(
		tranche.Asset{Name: "page_views", Partitioning: daily, Destinations: []tranche.Destination{files},
			Materializer: tranche.MaterializeFunc(pageViews)},
		tranche.Asset{Name: "daily_stats", Deps: []string{"page_views"}, Partitioning: daily,
			Destinations: []tranche.Destination{files}, Materializer: tranche.MaterializeFunc(dailyStats)},
	)
	if err != nil {
		return err
	}
	month, err := tranche.NewTimePartitionWindow(tranche.Day,
		time.Date(2026, 11, 1, 0, 0, 0, 0, ny), time.Date(2026, 11, 30, 0, 0, 0, 0, ny))
	if err != nil {
		return err
	}

	// Events go through the slog adapter; time and id are left out to keep
	// the lines short.
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey || a.Key == "id" {
				return slog.Attr{}
			}
			return a
		},
	}))
	runner := tranche.Runner{Concurrency: 4, Logger: logger}
	fmt.Printf("materializing %s into %s, newest first:\n", month, dir)
	for p := range month.All() {
		if _, err := runner.Run(ctx, dag, p); err != nil {
			return err
		}
	}

	// The same month again, silently: each day's file is replaced.
	before := countLines(files, month)
	quiet := tranche.Runner{Concurrency: 4}
	for p := range month.All() {
		if _, err := quiet.Run(ctx, dag, p); err != nil {
			return err
		}
	}
	fmt.Printf("\nrows on disk after the first run: %d; after re-running the month: %d\n", before, countLines(files, month))
	fmt.Printf("for instance %s\n", files.Path("daily_stats", "day", month.Newest().Key()))
	return nil
}

// countLines counts the rows of both assets' files for the month.
func countLines(files *tranche.FilesDestination, month tranche.TimePartitionWindow) int {
	n := 0
	for p := range month.All() {
		for _, asset := range []string{"page_views", "daily_stats"} {
			f, err := os.Open(files.Path(asset, "day", p.Key()))
			if err != nil {
				log.Fatal(err)
			}
			for s := bufio.NewScanner(f); s.Scan(); {
				n++
			}
			f.Close()
		}
	}
	return n
}
