package tranche_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/tranche-dev/tranche"
)

// signups is an asset with state, written as a type whose Materialize
// method is the asset's function: a real one would hold a database handle.
type signups struct {
	perDay map[string]int // made-up source data
}

func (s signups) Materialize(_ context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
	p, err := m.Partition()
	if err != nil {
		return nil, err
	}
	var rows []tranche.Row
	for i := range s.perDay[p.Key()] {
		rows = append(rows, tranche.Row{"day": p.Key(), "user": fmt.Sprintf("u%d", i)})
	}
	return rows, nil
}

// countSignups is an asset written as a function: it reads the rows its
// dependency produced for the same partition.
func countSignups(_ context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
	rows, err := m.Input("signups")
	if err != nil {
		return nil, err
	}
	p, _ := m.Partition()
	return []tranche.Row{{"day": p.Key(), "count": len(rows)}}, nil
}

// ExampleRunner_Run materializes a DAG of two daily assets over three
// days, one run per day, newest first, into an in-memory destination.
func ExampleRunner_Run() {
	dest := new(tranche.MemoryDestination)
	daily := tranche.Partitioning{Granularity: tranche.Day, Column: "day"}
	dag, err := tranche.NewDAG(
		tranche.Asset{
			Name:         "signups",
			Partitioning: daily,
			Destinations: []tranche.Destination{dest},
			Materialize:  signups{perDay: map[string]int{"2026-01-01": 2, "2026-01-03": 5}}.Materialize,
		},
		tranche.Asset{
			Name:         "signup_counts",
			Deps:         []string{"signups"},
			Partitioning: daily,
			Destinations: []tranche.Destination{dest},
			Materialize:  countSignups,
		},
	)
	if err != nil {
		log.Fatal(err)
	}
	days, err := tranche.NewTimePartitionWindow(tranche.Day,
		time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 1, 3, 0, 0, 0, 0, time.UTC))
	if err != nil {
		log.Fatal(err)
	}

	runner := tranche.Runner{MaxConcurrentAssets: 4}
	for p := range days.All() {
		res, err := runner.Run(context.Background(), dag, p)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s %s: %v, %d rows\n", p.Key(), res.State, res.Succeeded, res.Rows)
	}
	rows, _ := dest.Rows("signup_counts", "2026-01-03")
	fmt.Println(rows)
	// Output:
	// 2026-01-03 succeeded: [signups signup_counts], 6 rows
	// 2026-01-02 succeeded: [signups signup_counts], 1 rows
	// 2026-01-01 succeeded: [signups signup_counts], 3 rows
	// [map[count:5 day:2026-01-03]]
}
