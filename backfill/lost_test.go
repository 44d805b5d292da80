package backfill_test

import (
	"context"
	"errors"
	"iter"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/memledger"
)

// silentLedger is an in-memory ledger whose every call, once cut, gets
// no answer: it waits until its context ends, as over a network gone
// silent. Its first claim may be slow (claimWait), as a claim waiting
// for a lock another worker holds.
type silentLedger struct {
	*memledger.Ledger
	cut       atomic.Bool
	claimWait time.Duration
	claims    atomic.Int64
}

func (l *silentLedger) silent(ctx context.Context) error {
	if !l.cut.Load() {
		return nil
	}
	<-ctx.Done()
	return ctx.Err()
}

func (l *silentLedger) claimed(ctx context.Context) error {
	if l.claims.Add(1) == 1 {
		time.Sleep(l.claimWait) // a lock's wait does not heed the context
	}
	return l.silent(ctx)
}

func (l *silentLedger) ClaimNext(ctx context.Context, req ledger.NextRequest) ([]ledger.Grant, error) {
	if err := l.claimed(ctx); err != nil {
		return nil, err
	}
	return l.Ledger.ClaimNext(ctx, req)
}

func (l *silentLedger) Claim(ctx context.Context, req ledger.ClaimRequest) (*ledger.Lease, error) {
	if err := l.claimed(ctx); err != nil {
		return nil, err
	}
	return l.Ledger.Claim(ctx, req)
}

func (l *silentLedger) Heartbeat(ctx context.Context, lease *ledger.Lease, d time.Duration) error {
	if err := l.silent(ctx); err != nil {
		return err
	}
	return l.Ledger.Heartbeat(ctx, lease, d)
}

func (l *silentLedger) FinishBatch(ctx context.Context, batch []ledger.Finish) []error {
	if err := l.silent(ctx); err != nil {
		errs := make([]error, len(batch))
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	return l.Ledger.FinishBatch(ctx, batch)
}

func (l *silentLedger) Finish(ctx context.Context, lease *ledger.Lease, outcomes []ledger.Outcome) error {
	return l.FinishBatch(ctx, []ledger.Finish{{Lease: lease, Outcomes: outcomes}})[0]
}

func (l *silentLedger) Release(ctx context.Context, lease *ledger.Lease) error {
	if err := l.silent(ctx); err != nil {
		return err
	}
	return l.Ledger.Release(ctx, lease)
}

func (l *silentLedger) Backfill(ctx context.Context, id string) (ledger.BackfillRecord, error) {
	if err := l.silent(ctx); err != nil {
		return ledger.BackfillRecord{}, err
	}
	return l.Ledger.Backfill(ctx, id)
}

func (l *silentLedger) Latest(ctx context.Context, dag string, from, to time.Time) iter.Seq2[ledger.Attempt, error] {
	return func(yield func(ledger.Attempt, error) bool) {
		if err := l.silent(ctx); err != nil {
			yield(ledger.Attempt{}, err)
			return
		}
		for a, err := range l.Ledger.Latest(ctx, dag, from, to) {
			if !yield(a, err) {
				return
			}
		}
	}
}

// TestLostLedgerReturns cuts a worker off from its ledger in the middle
// of a backfill of 1 s partitions (lease 2 s): no call gets an answer
// any more, neither a reply nor an error. Run returns within two leases
// and a heartbeat of the cut (a heartbeat's lease lapses unanswered, and
// a read of the backfill's record gets no answer within a lease after
// it), with an error that says it lost the ledger and wraps the
// ledger's, and the partitions it did not reach stay pending. (It waited
// for the claim in flight, whose context never ends, for as long as the
// ledger was silent: here, until the test's minute ran out.)
func TestLostLedgerReturns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const lease, heartbeat, run = 2 * time.Second, 500 * time.Millisecond, time.Second
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		p := &timedProbe{run: run}
		l := &silentLedger{Ledger: memledger.New(nil)}
		b := &backfill.Backfill{DAG: p.dag(t), Window: bfDays(t, 1, 20), Ledger: l, Worker: "a", Concurrency: 2,
			Order: backfill.OldestFirst, Lease: lease, Heartbeat: heartbeat}
		cut := make(chan time.Time, 1)
		go func() {
			time.Sleep(3*run + run/2)
			l.cut.Store(true)
			cut <- time.Now()
		}()
		rep, err := b.Run(ctx)
		took := time.Since(<-cut)
		if err == nil || !strings.Contains(err.Error(), "lost the ledger") || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Run = %v; want an error saying it lost the ledger, wrapping the ledger's (context.DeadlineExceeded)", err)
		}
		if limit := 2*lease + heartbeat; took > limit {
			t.Errorf("Run returned %v after the cut; want within %v (two leases and a heartbeat)", took, limit)
		}
		if rep == nil || rep.Succeeded < 4 || rep.Succeeded+rep.Failed+rep.NotRun+rep.Unclaimed != 20 {
			t.Errorf("report %v; want the 4 partitions recorded before the cut succeeded, and the others failed, not run or not claimed", rep)
		}
		t.Logf("returned %v after the cut: %s: %v", took, rep, err)
	})
}

// TestSlowClaimNotLost answers the first claim two leases late, as a
// claim waiting for a lock another worker holds, while the ledger
// answers everything else: the worker reads the ledger once the claim
// has waited a lease, finds it within reach, and waits for the claim,
// whose leases, lapsed by then, it gives back and claims again: the
// backfill succeeds.
func TestSlowClaimNotLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const lease, heartbeat = time.Second, 250 * time.Millisecond
		p := &timedProbe{run: 100 * time.Millisecond}
		l := &silentLedger{Ledger: memledger.New(nil), claimWait: 2 * lease}
		b := &backfill.Backfill{DAG: p.dag(t), Window: bfDays(t, 1, 4), Ledger: l, Worker: "a", Concurrency: 2,
			Lease: lease, Heartbeat: heartbeat}
		rep, err := b.Run(t.Context())
		if err != nil || !rep.Done() {
			t.Errorf("Run = %v (%v); want the backfill done, its slow claims waited for", err, rep)
		}
	})
}
