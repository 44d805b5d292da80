// Package pagetest holds the backfill that the status page's tests and
// the tranche command's browser tests both draw: fourteen days in every
// state, with error texts holding HTML.
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

// Evil is an error text an asset might return, holding HTML that a page
// which did not escape it would run.
const Evil = `<b>boom</b><script>document.title="pwned"</script><img src=x onerror="document.title='pwned'">`

// Fixture is a backfill of 14 days in a ledger, in every state.
type Fixture struct {
	ID, DAG string
	Window  tranche.TimePartitionWindow
	// States is the state of each day's latest attempt, by key.
	States map[string]ledger.State
	// Running holds the 9th, left running.
	Running *ledger.Lease
}

// Day returns the partition of January 2026's day d, in UTC.
func Day(d int) tranche.TimePartition {
	return tranche.PartitionOf(tranche.Day, time.Date(2026, 1, d, 0, 0, 0, 0, time.UTC))
}

// NewDays returns the window of January 2026's days first to last, UTC.
func NewDays(t testing.TB, first, last int) tranche.TimePartitionWindow {
	t.Helper()
	w, err := tranche.NewTimePartitionWindow(tranche.Day, Day(first).Start, Day(last).Start)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// New backfills 2026-01-01..2026-01-14 newest first, one at a
// time, stopping at the failure of the 10th (an error text with HTML);
// then, as other workers: the 10th fails once more, the 9th is left
// running under an hour's lease, the 5th fails (HTML again) and the 4th
// is canceled. The 1st to 3rd and 6th to 8th stay pending.
func New(t testing.TB, l ledger.Ledger) Fixture {
	t.Helper()
	ctx := context.Background()
	w, err := tranche.NewTimePartitionWindow(tranche.Day, Day(1).Start, Day(14).Start)
	if err != nil {
		t.Fatal(err)
	}
	daily := tranche.Partitioning{Granularity: tranche.Day, Location: time.UTC, Column: "day"}
	dag, err := tranche.NewDAG(tranche.Asset{Name: "events", Partitioning: daily,
		Materialize: func(ctx context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
			p, err := m.Partition()
			if err != nil {
				return nil, err
			}
			if p.Equal(Day(10)) {
				return nil, errors.New(Evil)
			}
			return []tranche.Row{{"day": p.Key()}}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	b := &backfill.Backfill{DAG: dag, Window: w, Ledger: l, Worker: `worker-<i>1</i>`}
	res, err := b.Run(ctx)
	if res == nil || res.Failed != 1 {
		t.Fatalf("the fixture's backfill: %+v, %v; want one failure", res, err)
	}
	id, err := b.ID()
	if err != nil {
		t.Fatal(err)
	}
	ident := backfill.DAGIdentity(dag, tranche.Day, time.UTC)
	attempt := func(d int, worker string, out *ledger.Outcome) *ledger.Lease {
		t.Helper()
		p := Day(d)
		lease, err := l.Claim(ctx, ledger.ClaimRequest{DAG: ident, Backfill: id, Worker: worker, RunID: backfill.RunID(ident, p.Start, p.End),
			Partitions: []tranche.TimePartition{p}, Lease: time.Hour, Policy: ledger.RerunFailed})
		if err != nil {
			t.Fatalf("claim of %s: %v", p.Key(), err)
		}
		if out != nil {
			if err := l.Finish(ctx, lease, []ledger.Outcome{*out}); err != nil {
				t.Fatalf("finish of %s: %v", p.Key(), err)
			}
		}
		return lease
	}
	attempt(10, "worker-2", &ledger.Outcome{State: ledger.StateFailed, Err: "second try: " + Evil})
	running := attempt(9, "worker-2", nil)
	attempt(5, "worker-3", &ledger.Outcome{State: ledger.StateFailed, Err: Evil})
	attempt(4, "worker-3", &ledger.Outcome{State: ledger.StateCanceled, Err: "context canceled"})

	states := map[string]ledger.State{}
	for d := 1; d <= 14; d++ {
		states[Day(d).Key()] = ledger.StatePending
	}
	for d := 11; d <= 14; d++ {
		states[Day(d).Key()] = ledger.StateSucceeded
	}
	states[Day(10).Key()] = ledger.StateFailed
	states[Day(9).Key()] = ledger.StateRunning
	states[Day(5).Key()] = ledger.StateFailed
	states[Day(4).Key()] = ledger.StateCanceled
	return Fixture{ID: id, DAG: ident, Window: w, States: states, Running: running}
}
