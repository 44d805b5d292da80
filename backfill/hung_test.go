package backfill_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/memledger"
)

// hungFinishLedger is an in-memory ledger whose finish of one
// partition by one worker hangs, ignoring its context, before it
// reaches the ledger: a connection that swallows the call.
type hungFinishLedger struct {
	*memledger.Ledger
	worker, key string
	hang        time.Duration
	late        chan []error // the hung call's answer, once it lands
}

func (l *hungFinishLedger) FinishBatch(ctx context.Context, batch []ledger.Finish) []error {
	for _, f := range batch {
		if f.Lease.Worker == l.worker && f.Lease.Partitions[0].Key() == l.key {
			time.Sleep(l.hang)
			errs := l.Ledger.FinishBatch(context.WithoutCancel(ctx), batch)
			l.late <- errs
			return errs
		}
	}
	return l.Ledger.FinishBatch(ctx, batch)
}

func (l *hungFinishLedger) Finish(ctx context.Context, lease *ledger.Lease, outcomes []ledger.Outcome) error {
	return l.FinishBatch(ctx, []ledger.Finish{{Lease: lease, Outcomes: outcomes}})[0]
}

// TestHungFinishHoldsNothing hangs the finish of worker a's third
// partition for a minute (lease 2 s): a's Run returns within the lease
// and a heartbeat of that partition's end, its failure matching
// ErrLeftBehind; worker b takes the partition over once the lease
// expires and lands it; and the hung finish, landing a minute later, is
// refused by the fence.
func TestHungFinishHoldsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const lease, heartbeat, run = 2 * time.Second, 500 * time.Millisecond, 100 * time.Millisecond
		p := &timedProbe{run: run}
		dag := p.dag(t)
		mem := memledger.New(nil)
		hung := &hungFinishLedger{Ledger: mem, worker: "a", key: bfDay(3).Key(), hang: time.Minute, late: make(chan []error, 1)}
		w := bfDays(t, 1, 3)
		start := time.Now()
		a := &backfill.Backfill{DAG: dag, Window: w, Ledger: hung, Worker: "a", Order: backfill.OldestFirst, Lease: lease, Heartbeat: heartbeat}
		rep, err := a.Run(t.Context())
		took := time.Since(start)
		if !errors.Is(err, backfill.ErrLeftBehind) || rep.Failed != 1 || rep.Succeeded != 2 {
			t.Errorf("a: Run = %v, %d succeeded, %d failed; want an error matching ErrLeftBehind, 2 succeeded, 1 failed", err, rep.Succeeded, rep.Failed)
		}
		if limit := 3*run + heartbeat + lease; took > limit {
			t.Errorf("a's Run returned after %v; want within %v (the partitions' runs, a heartbeat and the lease)", took, limit)
		}
		b := &backfill.Backfill{DAG: dag, Window: w, Ledger: mem, Worker: "b", Lease: lease, Heartbeat: heartbeat, WaitForOthers: true}
		delete(p.starts, bfDay(3).Key()) // run again by b, as it may be
		rep, err = b.Run(t.Context())
		if err != nil || rep.Succeeded != 1 {
			t.Errorf("b: Run = %v, %d succeeded; want nil, 1: the partition taken over", err, rep.Succeeded)
		}
		if tookOver := time.Since(start); tookOver > took+lease {
			t.Errorf("b landed the partition %v after a started; want within a lease of a's return (%v)", tookOver, took+lease)
		}
		if errs := <-hung.late; !errors.Is(errs[0], tranche.ErrFenced) {
			t.Errorf("the hung finish, landing after the takeover: %v; want an error matching ErrFenced", errs[0])
		}
		h, err := mem.History(t.Context(), backfill.DAGIdentity(dag, tranche.Day, time.UTC), bfDay(3).Start)
		if err != nil || len(h) != 2 || h[0].State != ledger.StateFailed || h[1].State != ledger.StateSucceeded || h[1].Worker != "b" {
			t.Errorf("history of %s: %+v (%v); want a's attempt failed (taken over), b's succeeded", bfDay(3).Key(), h, err)
		}
	})
}
