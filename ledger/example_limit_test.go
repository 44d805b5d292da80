package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/memledger"
)

// A DAG limited to one run at once: a live slot that comes due while a
// backfill's partition runs waits for it, and goes ahead of the
// backfill's next partition.
func ExampleLimiter() {
	ctx := context.Background()
	l := memledger.New(nil)
	const dag = "events"
	if _, err := l.SetLimit(ctx, dag, ledger.Limit{Max: 1, By: "ops"}); err != nil {
		panic(err)
	}
	hour := func(h int) []tranche.TimePartition {
		return []tranche.TimePartition{tranche.PartitionOf(tranche.Hour, time.Date(2026, 1, 10, h, 0, 0, 0, time.UTC))}
	}
	backfill := func(h int) ledger.ClaimRequest {
		return ledger.ClaimRequest{DAG: dag, Backfill: "last-year", Worker: "worker-1", RunID: fmt.Sprint("b", h),
			Partitions: hour(h), Lease: time.Minute, Policy: ledger.RerunFailed}
	}
	slot := ledger.ClaimRequest{DAG: dag, Worker: "scheduler", RunID: "s9", Partitions: hour(9),
		Lease: time.Minute, Policy: ledger.RerunNone, Trigger: ledger.TriggerLive}

	running, err := l.Claim(ctx, backfill(1))
	if err != nil {
		panic(err)
	}
	_, err = l.Claim(ctx, slot) // refused: its demand is recorded
	fmt.Println("slot:", err)
	if err := l.Finish(ctx, running, []ledger.Outcome{{State: ledger.StateSucceeded}}); err != nil {
		panic(err)
	}
	_, err = l.Claim(ctx, backfill(2)) // the slot goes first
	fmt.Println("backfill:", errors.Is(err, ledger.ErrLimited), err)
	lease, err := l.Claim(ctx, slot)
	fmt.Println("slot:", lease.Trigger, err)
	lim, _ := l.Limit(ctx, dag)
	fmt.Printf("limit %d: %d running, %d waiting\n", lim.Max, lim.Running, lim.Waiting)
	// Output:
	// slot: ledger: the DAG's limit of runs at once is reached: 1 running, limit 1
	// backfill: true ledger: the DAG's limit of runs at once is reached: 0 running, limit 1, and a slot of the DAG's schedule waits to go first
	// slot: live <nil>
	// limit 1: 1 running, 0 waiting
}
