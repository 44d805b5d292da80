// Granularities runs one DAG of four granularities in New York: hourly
// events, a daily rollup of each day's hours, a monthly report of each
// month's days, and a daily model that reads the seven days before its
// own. It lands March 2026's hours, then runs each day reading what
// landed, then the month; last it runs one day alone, which materializes
// the hours and days it reads first. March 8 has 23 hours (DST starts),
// and every figure below counts them from the calendar, not from 24.
//
//	go run ./examples/granularities
package main

import (
	"context"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/tranche-dev/tranche"
)

func main() {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	warehouse := new(tranche.MemoryDestination)
	first := time.Date(2026, 3, 1, 0, 0, 0, 0, ny) // the first hour with data
	part := func(g tranche.TimeGranularity, column string) tranche.Partitioning {
		return tranche.Partitioning{Granularity: g, Location: ny, Column: column, First: first}
	}
	out := []tranche.Destination{warehouse}

	hourly := part(tranche.Hour, "hour")
	hourly.AllowWindow = true // one call for many hours: a run of a window, or the hours a day reads
	events := tranche.Asset{Name: "events", Partitioning: hourly, Destinations: out,
		Materialize: func(_ context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
			var rows []tranche.Row
			for h := range m.Window().OldestFirst() {
				rows = append(rows, tranche.Row{"hour": h.Key(), "clicks": 10 + h.Start.Hour()})
			}
			return rows, nil
		}}
	rollup := tranche.Asset{Name: "rollup", Deps: []string{"events"}, Partitioning: part(tranche.Day, "day"), Destinations: out,
		Materialize: func(_ context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
			day, err := m.Partition()
			if err != nil {
				return nil, err
			}
			hours, err := m.Inputs("events") // one batch per hour of the day: 23, 24 or 25
			if err != nil {
				return nil, err
			}
			clicks := 0
			for _, h := range hours {
				for _, r := range h.Rows {
					clicks += r["clicks"].(int)
				}
			}
			return []tranche.Row{{"day": day.Key(), "hours": len(hours), "clicks": clicks}}, nil
		}}
	report := tranche.Asset{Name: "report", Deps: []string{"rollup"}, Partitioning: part(tranche.Month, "month"), Destinations: out,
		Materialize: func(_ context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
			month, err := m.Partition()
			if err != nil {
				return nil, err
			}
			days, err := m.Input("rollup") // every day of the month
			if err != nil {
				return nil, err
			}
			hours, clicks := 0, 0
			for _, d := range days {
				hours += d["hours"].(int)
				clicks += d["clicks"].(int)
			}
			return []tranche.Row{{"month": month.Key(), "days": len(days), "hours": hours, "clicks": clicks}}, nil
		}}
	model := tranche.Asset{Name: "model", Deps: []string{"rollup"}, Partitioning: part(tranche.Day, "day"), Destinations: out,
		Mappings: map[string]tranche.Mapping{"rollup": {Lookback: 7, Offset: 1}}, // the seven days before
		Materialize: func(_ context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
			day, err := m.Partition()
			if err != nil {
				return nil, err
			}
			week, err := m.Input("rollup") // fewer before March 8: nothing before First
			if err != nil {
				return nil, err
			}
			clicks := 0
			for _, d := range week {
				clicks += d["clicks"].(int)
			}
			forecast := 0
			if len(week) > 0 {
				forecast = clicks / len(week)
			}
			return []tranche.Row{{"day": day.Key(), "days_read": len(week), "forecast": forecast}}, nil
		}}
	dag, err := tranche.NewDAG(events, rollup, report, model)
	if err != nil {
		log.Fatal(err)
	}

	// 1. Land March's hours: a window run of hours runs only the hourly
	// asset, once; the daily and monthly ones hold none of its partitions.
	hours, err := tranche.NewTimePartitionWindow(tranche.Hour, first, time.Date(2026, 3, 31, 23, 0, 0, 0, ny))
	if err != nil {
		log.Fatal(err)
	}
	res, err := (&tranche.Runner{}).Run(ctx, dag, hours)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("landed %d hours of March in %d call; skipped: %v\n", len(warehouse.Keys("events")), res.Assets[0].Attempts, res.Skipped)

	// 2. Each day, oldest first, reading the hours and days that landed.
	read := &tranche.Runner{Read: func(_ context.Context, asset string, p tranche.TimePartition) ([]tranche.Row, error) {
		rows, _ := warehouse.Rows(asset, p.Key())
		return rows, nil
	}}
	days, err := tranche.NewTimePartitionWindow(tranche.Day, first, time.Date(2026, 3, 31, 0, 0, 0, 0, ny))
	if err != nil {
		log.Fatal(err)
	}
	for d := range days.OldestFirst() {
		if _, err := read.Run(ctx, dag, d); err != nil {
			log.Fatal(err)
		}
	}
	for _, key := range []string{"2026-03-02", "2026-03-08", "2026-03-09"} {
		r, _ := warehouse.Rows("rollup", key)
		f, _ := warehouse.Rows("model", key)
		fmt.Printf("%s: rollup of %v hours, %v clicks; model read %v day(s), forecast %v\n", key, r[0]["hours"], r[0]["clicks"], f[0]["days_read"], f[0]["forecast"])
	}

	// 3. The month, reading its days.
	march := tranche.PartitionOf(tranche.Month, first)
	if _, err := read.Run(ctx, dag, march); err != nil {
		log.Fatal(err)
	}
	r, _ := warehouse.Rows("report", "2026-03")
	fmt.Printf("report 2026-03: %v days, %v hours, %v clicks\n", r[0]["days"], r[0]["hours"], r[0]["clicks"])

	// 4. One day alone, without Read: the run materializes what the day
	// reads first, each partition once: the model's seven days before,
	// the day itself, and all their hours.
	var mu sync.Mutex
	calls, ran := map[string]int{}, map[string]int{}
	alone := &tranche.Runner{OnEvent: func(_ context.Context, e tranche.Event) {
		if e.Kind == tranche.KindAssetSucceeded {
			mu.Lock()
			defer mu.Unlock()
			calls[e.Asset]++
			if e.Window.Len() > 0 {
				ran[e.Asset] += e.Window.Len()
			} else {
				ran[e.Asset]++
			}
		}
	}}
	march8 := tranche.PartitionOf(tranche.Day, time.Date(2026, 3, 8, 12, 0, 0, 0, ny))
	res, err = alone.Run(ctx, dag, march8)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("2026-03-08 alone: events ran for %d hours in %d call, rollup for %d days, model for %d; skipped: %v\n",
		ran["events"], calls["events"], ran["rollup"], ran["model"], res.Skipped)
}
