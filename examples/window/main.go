// Window materializes a whole week in one run: each asset is called once
// with the week, and the destination splits the rows into one write per
// day, writing the days without rows as empty. It then shows the refusal
// a window run gets when an asset allows only single partitions.
//
//	go run ./examples/window
package main

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/tranche-dev/tranche"
)

func main() {
	ctx := context.Background()
	week, err := tranche.NewTimePartitionWindow(tranche.Day,
		time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC), time.Date(2026, 3, 8, 0, 0, 0, 0, time.UTC))
	if err != nil {
		log.Fatal(err)
	}
	dest := new(tranche.MemoryDestination)
	calls := 0
	orders := tranche.Asset{
		Name:         "orders",
		Partitioning: tranche.Partitioning{Granularity: tranche.Day, Column: "at", AllowWindow: true},
		Destinations: []tranche.Destination{dest},
		Materialize: func(_ context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
			calls++
			w := m.Window() // the whole week: one query instead of seven
			fmt.Printf("orders called for %s\n", w)
			var rows []tranche.Row
			for p := range w.OldestFirst() {
				if p.Start.Weekday() == time.Sunday {
					continue // closed on Sundays: that day gets an empty write
				}
				for h := range 2 {
					rows = append(rows, tranche.Row{"at": p.Start.Add(time.Duration(9+h*4) * time.Hour), "amount": 10 * (h + 1)})
				}
			}
			return rows, nil
		},
	}
	dag, err := tranche.NewDAG(orders)
	if err != nil {
		log.Fatal(err)
	}
	var runner tranche.Runner
	res, err := runner.Run(ctx, dag, week)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("run %s: %d call(s), %d rows\n", res.State, calls, res.Rows)
	o := res.Assets[0] // the DAG's one asset; Assets are in the DAG's order
	for p := range week.OldestFirst() {
		rows, _ := dest.Rows("orders", p.Key())
		fmt.Printf("  %s %-9s %d rows (result: %d)\n", p.Key(), p.Start.Weekday(), len(rows), o.RowsByPartition[p.Key()])
	}

	// An asset that must be run a partition at a time refuses the window
	// before anything runs.
	perDay := tranche.Asset{
		Name:         "per_day_export",
		Deps:         []string{"orders"},
		Partitioning: tranche.Partitioning{Granularity: tranche.Day},
		Materialize:  func(context.Context, *tranche.Materialization) ([]tranche.Row, error) { return nil, nil },
	}
	dag, err = tranche.NewDAG(orders, perDay)
	if err != nil {
		log.Fatal(err)
	}
	_, err = runner.Run(ctx, dag, week)
	fmt.Println("with per_day_export:", err)
	for p := range week.All() { // newest first, one run per day
		if _, err := runner.Run(ctx, dag, p); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println("run day by day instead: done")
}
