package pagetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/ledger"
)

// DAGFixture is a DAG of daily partitions with two backfills over
// overlapping windows, for the DAG page.
type DAGFixture struct {
	DAG           string // its identity
	First, Second string // the backfills' ids, oldest first
	// States is the state of each day's latest attempt by key, over the
	// union of the backfills' windows, January 1st to 12th; "missing"
	// for the days never attempted.
	States map[string]ledger.State
	// Backfills is the state the DAG page gives each backfill.
	Backfills map[string]ledger.State
	// Running holds the 10th, left running.
	Running *ledger.Lease
}

// NewDAG backfills the days of January 2026 from the 1st to the 6th,
// oldest first, the 3rd failing with an error text holding HTML; then
// from the 5th to the 12th, oldest first, rerunning every partition: the
// 5th succeeds again and the 6th fails this time, a later attempt that
// wins over the first backfill's success, which stops the second
// backfill. Then, as another worker of the second backfill, the 10th is
// left running under an hour's lease and the 11th is canceled. The 7th
// to 9th and the 12th are never attempted.
func NewDAG(t testing.TB, l ledger.Ledger) DAGFixture {
	t.Helper()
	ctx := context.Background()
	fail := Day(3)
	daily := tranche.Partitioning{Granularity: tranche.Day, Location: time.UTC, Column: "day"}
	dag, err := tranche.NewDAG(tranche.Asset{Name: "sessions", Partitioning: daily,
		Materialize: func(ctx context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
			p, err := m.Partition()
			if err != nil {
				return nil, err
			}
			if p.Equal(fail) {
				return nil, errors.New("sessions of " + p.Key() + ": " + Evil)
			}
			return []tranche.Row{{"day": p.Key()}}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	window := func(first, last int) tranche.TimePartitionWindow {
		w, err := tranche.NewTimePartitionWindow(tranche.Day, Day(first).Start, Day(last).Start)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	a := &backfill.Backfill{DAG: dag, Window: window(1, 6), Ledger: l, Order: backfill.OldestFirst,
		OnFailure: tranche.FailContinue, Worker: `worker-<i>a</i>`}
	if res, err := a.Run(ctx); res == nil || res.Failed != 1 || res.Succeeded != 5 {
		t.Fatalf("the first backfill: %+v, %v; want 5 succeeded, 1 failed", res, err)
	}
	fail = Day(6)
	b := &backfill.Backfill{DAG: dag, Window: window(5, 12), Ledger: l, Order: backfill.OldestFirst,
		Rerun: ledger.RerunAll, Worker: "worker-b"}
	if res, err := b.Run(ctx); res == nil || res.Failed != 1 || res.Succeeded != 1 {
		t.Fatalf("the second backfill: %+v, %v; want 1 succeeded, then 1 failed", res, err)
	}
	first, err := a.ID()
	if err != nil {
		t.Fatal(err)
	}
	second, err := b.ID()
	if err != nil {
		t.Fatal(err)
	}
	ident := backfill.DAGIdentity(dag, tranche.Day, time.UTC)
	claim := func(d int) *ledger.Lease {
		t.Helper()
		p := Day(d)
		lease, err := l.Claim(ctx, ledger.ClaimRequest{DAG: ident, Backfill: second, Worker: "worker-c", RunID: backfill.RunID(ident, p.Start, p.End),
			Partitions: []tranche.TimePartition{p}, Lease: time.Hour, Policy: ledger.RerunFailed})
		if err != nil {
			t.Fatalf("claim of %s: %v", p.Key(), err)
		}
		return lease
	}
	running := claim(10)
	if err := l.Finish(ctx, claim(11), []ledger.Outcome{{State: ledger.StateCanceled, Err: "context canceled"}}); err != nil {
		t.Fatal(err)
	}
	states := map[string]ledger.State{}
	for d := 1; d <= 12; d++ {
		states[Day(d).Key()] = "missing"
	}
	for _, d := range []int{1, 2, 4, 5} {
		states[Day(d).Key()] = ledger.StateSucceeded
	}
	states[Day(3).Key()] = ledger.StateFailed
	states[Day(6).Key()] = ledger.StateFailed
	states[Day(10).Key()] = ledger.StateRunning
	states[Day(11).Key()] = ledger.StateCanceled
	return DAGFixture{DAG: ident, First: first, Second: second, States: states, Running: running,
		Backfills: map[string]ledger.State{first: ledger.StateFailed, second: ledger.StateRunning}}
}
