package backfill_test

import (
	"context"
	"runtime/metrics"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/memledger"
)

// latentLedger is the in-memory ledger whose finishes take as long as a
// server's round trip, counted: the real ledger records them.
type latentLedger struct {
	*memledger.Ledger
	latency time.Duration
	alone   bool // FinishesAlone's answer, as for a destination sharing the ledger

	mu       sync.Mutex
	batches  []int // the size of each FinishBatch call
	finishes int   // Finish calls
}

func (l *latentLedger) FinishBatch(ctx context.Context, batch []ledger.Finish) []error {
	time.Sleep(l.latency)
	l.mu.Lock()
	l.batches = append(l.batches, len(batch))
	l.mu.Unlock()
	return l.Ledger.FinishBatch(ctx, batch)
}

func (l *latentLedger) Finish(ctx context.Context, lease *ledger.Lease, outcomes []ledger.Outcome) error {
	time.Sleep(l.latency)
	l.mu.Lock()
	l.finishes++
	l.mu.Unlock()
	return l.Ledger.Finish(ctx, lease, outcomes)
}

func (l *latentLedger) FinishesAlone(*ledger.Lease) bool { return l.alone }

// TestFinishBatches runs short partitions in 4 slots on a ledger whose
// finishes take 2 ms: the successes of slots that end while a call is
// in flight are recorded together by the next (a group commit), every
// one of them once, and a ledger that finishes a lease alone (a
// destination's writes commit with it) is given each success in a call
// of its own.
func TestFinishBatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const days = 50
		for _, alone := range []bool{false, true} {
			l := &latentLedger{Ledger: memledger.New(nil), latency: 2 * time.Millisecond, alone: alone}
			b := &backfill.Backfill{DAG: bfDAG(t, &bfProbe{}, false), Window: bfDays(t, 1, days), Ledger: l, Worker: "w1", Concurrency: 4}
			rep, err := b.Run(t.Context())
			if err != nil {
				t.Fatalf("alone=%v: Run: %v", alone, err)
			}
			bfCheckReport(t, rep, backfill.Report{Total: days, Succeeded: days})
			recorded := 0
			for a, err := range l.Latest(t.Context(), backfill.DAGIdentity(b.DAG, b.Window.Granularity(), b.Window.Location()), bfDay(1).Start, bfDay(days+1).Start) {
				if err != nil {
					t.Fatal(err)
				}
				if a.State == ledger.StateSucceeded && a.Number == 1 {
					recorded++
				}
			}
			if recorded != days {
				t.Errorf("alone=%v: %d partitions recorded succeeded at their first attempt; want %d", alone, recorded, days)
			}
			l.mu.Lock()
			sum := 0
			for _, n := range l.batches {
				sum += n
			}
			switch {
			case alone && (len(l.batches) != days || sum != days || l.finishes != 0):
				t.Errorf("a ledger that finishes each lease alone: %d successes in %d FinishBatch calls, %d Finish calls; want %d in %d, none", sum, len(l.batches), l.finishes, days, days)
			case !alone && (sum != days || l.finishes != 0 || len(l.batches) > 3*days/5):
				t.Errorf("%d successes in %d FinishBatch calls (%v), %d Finish calls; want %d in at most %d calls, no Finish", sum, len(l.batches), l.batches, l.finishes, days, 3*days/5)
			}
			l.mu.Unlock()
		}
	})
}

// TestFinishKeepsItsCallers runs a year of no-work days at Concurrency
// 1: each success is recorded by a call on a goroutine apart from the
// job's, so that a call that hangs can be left behind, but that
// goroutine is kept from one call to the next, not made for each (a new
// goroutine, and its stack grown to a database driver's depth, cost a
// fifth of a worker's CPU).
func TestFinishKeepsItsCallers(t *testing.T) {
	w, err := tranche.NewTimePartitionWindow(tranche.Day, time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2020, 12, 31, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	b := &backfill.Backfill{DAG: bfDAG(t, &bfProbe{}, false), Window: w, Ledger: memledger.New(nil), Worker: "w1"}
	created := func() uint64 {
		s := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
		metrics.Read(s)
		return s[0].Value.Uint64()
	}
	before := created()
	rep, err := b.Run(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	made := created() - before
	bfCheckReport(t, rep, backfill.Report{Total: w.Len(), Succeeded: w.Len()})
	if made > uint64(w.Len()/4) {
		t.Errorf("the backfill of %d partitions made %d goroutines; want far fewer than one a partition", w.Len(), made)
	}
}
