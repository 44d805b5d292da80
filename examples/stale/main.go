// Stale backfills March 2026 of a DAG of four granularities in New York
// (hourly events, a daily rollup of each day's hours, a monthly report of
// each month's days, a daily model of the seven days before its own),
// each asset's partitions recorded in the ledger on their own. Then three
// hours of March 8 are reloaded with late data: the rollup of that day,
// the month's report and the seven model days that read the day are
// stale, and a backfill with rerun policy stale runs exactly them, the
// day first.
//
//	go run ./examples/stale
package main

import (
	"context"
	"fmt"
	"log"
	"strings"
	"sync"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/memledger"
)

func main() {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	warehouse := new(tranche.MemoryDestination)
	out := []tranche.Destination{warehouse}
	first := time.Date(2026, 3, 1, 0, 0, 0, 0, ny)
	part := func(g tranche.TimeGranularity) tranche.Partitioning {
		return tranche.Partitioning{Granularity: g, Location: ny, Column: "at", First: first}
	}
	var mu sync.Mutex
	var ran []string // what each backfill ran, asset and partition
	late := map[string]int{}
	record := func(asset string, p tranche.TimePartition) {
		mu.Lock()
		defer mu.Unlock()
		ran = append(ran, asset+" "+p.Key())
	}
	sum := func(m *tranche.Materialization, dep, column string) (int, int, error) {
		rows, err := m.Input(dep)
		total := 0
		for _, r := range rows {
			total += r[column].(int)
		}
		return total, len(rows), err
	}
	events := tranche.Asset{Name: "events", Partitioning: part(tranche.Hour), Destinations: out,
		Materialize: func(_ context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
			h, err := m.Partition()
			if err != nil {
				return nil, err
			}
			record("events", h)
			mu.Lock()
			extra := late[h.Key()]
			mu.Unlock()
			return []tranche.Row{{"at": h.Start, "clicks": 10 + extra}}, nil
		}}
	rollup := tranche.Asset{Name: "rollup", Deps: []string{"events"}, Partitioning: part(tranche.Day), Destinations: out,
		Materialize: func(_ context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
			d, err := m.Partition()
			if err != nil {
				return nil, err
			}
			record("rollup", d)
			clicks, hours, err := sum(m, "events", "clicks") // 23, 24 or 25 hours
			return []tranche.Row{{"at": d.Start, "clicks": clicks, "hours": hours}}, err
		}}
	report := tranche.Asset{Name: "report", Deps: []string{"rollup"}, Partitioning: part(tranche.Month), Destinations: out,
		Materialize: func(_ context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
			mo, err := m.Partition()
			if err != nil {
				return nil, err
			}
			record("report", mo)
			clicks, days, err := sum(m, "rollup", "clicks")
			return []tranche.Row{{"at": mo.Start, "clicks": clicks, "days": days}}, err
		}}
	model := tranche.Asset{Name: "model", Deps: []string{"rollup"}, Partitioning: part(tranche.Day), Destinations: out,
		Mappings: map[string]tranche.Mapping{"rollup": {Lookback: 7, Offset: 1}}, // the seven days before
		Materialize: func(_ context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
			d, err := m.Partition()
			if err != nil {
				return nil, err
			}
			record("model", d)
			clicks, days, err := sum(m, "rollup", "clicks")
			forecast := 0
			if days > 0 {
				forecast = clicks / days
			}
			return []tranche.Row{{"at": d.Start, "forecast": forecast}}, err
		}}
	dag, err := tranche.NewDAG(events, rollup, report, model)
	if err != nil {
		log.Fatal(err)
	}
	dag.Name = "platform"

	// A backfill of several granularities runs each asset's partitions on
	// their own and reads what they map to from where it landed.
	runner := &tranche.Runner{Read: func(_ context.Context, asset string, p tranche.TimePartition) ([]tranche.Row, error) {
		rows, ok := warehouse.Rows(asset, p.Key())
		if !ok {
			return nil, fmt.Errorf("%s %s has not landed", asset, p.Key())
		}
		return rows, nil
	}}
	l := memledger.New(nil)
	window := func(g tranche.TimeGranularity, from, to time.Time) tranche.TimePartitionWindow {
		w, err := tranche.NewTimePartitionWindow(g, from, to)
		if err != nil {
			log.Fatal(err)
		}
		return w
	}
	march := window(tranche.Day, first, time.Date(2026, 3, 31, 0, 0, 0, 0, ny))
	run := func(what string, b *backfill.Backfill) {
		mu.Lock()
		ran = nil
		mu.Unlock()
		rep, err := b.Run(ctx)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s: %d asset partitions ran\n", what, rep.Succeeded)
		for _, a := range rep.Assets {
			n := 0
			if a.Report != nil {
				n = a.Report.Succeeded
			}
			fmt.Printf("  %-7s %4d of %d\n", a.Asset, n, a.Plan.Counts.Total)
		}
	}

	// 1. March: 743 hours (March 8 has 23), 31 days, the month, 31 model days.
	run("march", &backfill.Backfill{DAG: dag, Window: march, Ledger: l, Runner: runner, Concurrency: 4})
	r, _ := warehouse.Rows("rollup", "2026-03-08")
	fmt.Printf("rollup 2026-03-08: %v hours, %v clicks\n", r[0]["hours"], r[0]["clicks"])

	// 2. Late data for three hours of March 8: reload them.
	for _, h := range []string{"2026-03-08T05:00-04:00", "2026-03-08T06:00-04:00", "2026-03-08T07:00-04:00"} {
		late[h] = 100
	}
	hours := window(tranche.Hour, time.Date(2026, 3, 8, 5, 0, 0, 0, ny), time.Date(2026, 3, 8, 7, 0, 0, 0, ny))
	run("reload", &backfill.Backfill{DAG: dag, Window: hours, Ledger: l, Runner: runner, Rerun: ledger.RerunAll})

	// 3. What is stale now, and why.
	stale := &backfill.Backfill{DAG: dag, Window: march, Ledger: l, Runner: runner, Rerun: ledger.RerunStale, Concurrency: 4}
	plan, err := stale.Plan(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, a := range plan.Assets {
		fmt.Printf("plan: %-7s stale %d, to run %d\n", a.Asset, a.Stale, a.Counts.Run)
	}
	for it, err := range plan.Items(ctx) {
		if err != nil {
			log.Fatal(err)
		}
		if it.Action == ledger.ActionRun {
			fmt.Printf("  %s %s: %s\n", it.Asset, it.Partition.Key(), it.Reason)
		}
	}

	// 4. Rerun exactly them, the day first.
	run("stale", stale)
	mu.Lock()
	fmt.Printf("ran, in order: %s\n", strings.Join(ran, ", "))
	mu.Unlock()
	r, _ = warehouse.Rows("rollup", "2026-03-08")
	m, _ := warehouse.Rows("report", "2026-03")
	fmt.Printf("rollup 2026-03-08: %v clicks; report 2026-03: %v clicks\n", r[0]["clicks"], m[0]["clicks"])
	if rep, err := stale.Run(ctx); err != nil || rep.Succeeded != 0 {
		log.Fatalf("stale again: %v, %v: want nothing to run", rep, err)
	}
	fmt.Println("stale again: nothing to run")
}
