package backfill_test

// This file imports tranche, backfill and a ledger's package only: every
// policy of a Backfill is set without package ledger.

import (
	"context"
	"fmt"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/memledger"
)

// Every policy of a backfill is named in this package or in tranche: the
// order, the rerun policy, what a failure does, how many run at once.
func ExampleBackfill_policies() {
	dag, err := tranche.NewDAG(tranche.Asset{
		Name:         "events",
		Partitioning: tranche.Partitioning{Granularity: tranche.Day, Location: time.UTC},
		Materialize: func(context.Context, *tranche.Materialization) ([]tranche.Row, error) {
			return nil, nil
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	b := &backfill.Backfill{
		DAG:         dag,
		Window:      exampleDays(),
		Ledger:      memledger.New(nil),
		Order:       backfill.OldestFirst,
		Rerun:       ledger.RerunNone,
		OnFailure:   tranche.FailContinue,
		Concurrency: 2,
		ChunkSize:   1,
	}
	plan, err := b.Plan(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(plan.Order, plan.Rerun, plan.OnFailure, plan.Concurrency)
	// Output:
	// oldest-first none continue 2
}
