package backfill_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/memledger"
)

// TestRerunAfterCrashFinishes runs a backfill again after a worker
// holding two of its partitions was killed (their leases, of 2 s,
// claimed and never renewed): right after, when the killed worker was a
// process of this machine under its default name, or an interval after,
// whatever its name. By default the rerun waits for those leases to
// expire, saying so (partition.waiting), takes the partitions over and
// returns with every partition succeeded, within a lease of the kill;
// with ReturnHeld it returns at once, reporting them held.
func TestRerunAfterCrashFinishes(t *testing.T) {
	host, err := os.Hostname()
	if err != nil {
		t.Skip(err)
	}
	for _, c := range []struct {
		name, worker string
		after        time.Duration
		returnHeld   bool
	}{
		{"local", fmt.Sprintf("%s-%d", host, 99999999), 0, false}, // no such process
		{"remote", "killed", 600 * time.Millisecond, false},
		{"ReturnHeld", fmt.Sprintf("%s-%d", host, 99999999), 0, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			returnHeld := c.returnHeld
			synctest.Test(t, func(t *testing.T) {
				const lease, heartbeat = 2 * time.Second, 500 * time.Millisecond
				p := &timedProbe{run: 10 * time.Millisecond}
				l := memledger.New(nil)
				b := &backfill.Backfill{DAG: p.dag(t), Window: bfDays(t, 1, 6), Ledger: l, Worker: "rerun",
					Lease: lease, Heartbeat: heartbeat, ReturnHeld: returnHeld}
				killed := crashedWorker(t, b, l, c.worker, lease, 3, 4)
				time.Sleep(c.after)
				var waiting []string
				b.OnEvent = func(_ context.Context, e tranche.Event) {
					if e.Kind == backfill.KindPartitionWaiting {
						waiting = append(waiting, e.Partition.Key())
					}
				}
				rep, err := b.Run(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				took := time.Since(killed)
				if returnHeld {
					if rep.Held != 2 || rep.Succeeded != 4 || took > time.Second || len(waiting) != 0 {
						t.Errorf("ReturnHeld: %d held, %d succeeded, after %v, waiting events %v; want 2, 4, at once, none", rep.Held, rep.Succeeded, took, waiting)
					}
					return
				}
				if rep.Held != 0 || rep.Succeeded != 6 || took > lease+heartbeat {
					t.Errorf("%d held, %d succeeded, after %v; want 0, 6 (the killed worker's taken over), within %v of the kill", rep.Held, rep.Succeeded, took, lease+heartbeat)
				}
				if len(waiting) != 2 {
					t.Errorf("partition.waiting events for %v; want one for each of the killed worker's partitions", waiting)
				}
			})
		})
	}
}

// TestRerunBesideLiveWorker runs a backfill while another worker runs
// one of its partitions for a minute, renewing its lease: that is
// ordinary overlap, so the run returns at once, reporting it held, and
// says nothing of waiting.
func TestRerunBesideLiveWorker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const lease, heartbeat = 2 * time.Second, 500 * time.Millisecond
		p := &timedProbe{run: 10 * time.Millisecond}
		l := memledger.New(nil)
		slow := &timedProbe{run: time.Minute}
		dag := p.dag(t)
		other := &backfill.Backfill{DAG: slow.dag(t), Window: bfDays(t, 3, 3), Ledger: l, Worker: "live", Lease: lease, Heartbeat: heartbeat}
		other.DAG.Name = dag.Name // one DAG: the same identity
		var wg sync.WaitGroup
		wg.Go(func() {
			if _, err := other.Run(context.WithoutCancel(t.Context())); err != nil {
				t.Error(err)
			}
		})
		time.Sleep(time.Millisecond)
		var waiting int
		b := &backfill.Backfill{DAG: dag, Window: bfDays(t, 1, 6), Ledger: l, Worker: "b", Lease: lease, Heartbeat: heartbeat,
			OnEvent: func(_ context.Context, e tranche.Event) {
				if e.Kind == backfill.KindPartitionWaiting {
					waiting++
				}
			}}
		start := time.Now()
		rep, err := b.Run(t.Context())
		if err != nil || rep.Held != 1 || rep.Succeeded != 5 || waiting != 0 || time.Since(start) > 100*time.Millisecond {
			t.Errorf("Run = %v: %d held, %d succeeded, %d waiting events, after %v; want nil, 1, 5, 0, at once", err, rep.Held, rep.Succeeded, waiting, time.Since(start))
		}
		wg.Wait()
	})
}

// crashedWorker records b's backfill and claims days (of bfDays) under
// a lease of worker, which never renews it, as a worker killed just
// after it claimed them leaves them; it returns when.
func crashedWorker(t *testing.T, b *backfill.Backfill, l *memledger.Ledger, worker string, lease time.Duration, days ...int) time.Time {
	t.Helper()
	plan, err := b.Plan(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.PutBackfill(t.Context(), ledger.BackfillRecord{ID: plan.Backfill, DAG: plan.DAG, DAGName: b.DAG.Name, Window: b.Window.String(), Chunk: 1}); err != nil {
		t.Fatal(err)
	}
	for _, d := range days {
		p := bfDay(d)
		if _, err := l.Claim(t.Context(), ledger.ClaimRequest{DAG: plan.DAG, Backfill: plan.Backfill, Worker: worker,
			RunID: backfill.RunID(plan.DAG, p.Start, p.End), Partitions: []tranche.TimePartition{p}, Lease: lease, Policy: ledger.RerunFailed}); err != nil {
			t.Fatal(err)
		}
	}
	return time.Now()
}

// TestTakeOverWhenExpired runs a backfill of 200 days, 50 ms each, while
// a killed worker's lease of 2 s holds its second day: the run takes
// that day over soon after the lease expires, among the days it is
// claiming then, not once it reaches the end of the window (10 s later).
func TestTakeOverWhenExpired(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const lease, heartbeat = 2 * time.Second, 500 * time.Millisecond
		p := &timedProbe{run: 50 * time.Millisecond}
		l := memledger.New(nil)
		b := &backfill.Backfill{DAG: p.dag(t), Window: bfDays(t, 1, 200), Ledger: l, Worker: "b", Order: backfill.OldestFirst,
			Lease: lease, Heartbeat: heartbeat, ReturnHeld: true}
		killed := crashedWorker(t, b, l, "killed", lease, 2)
		rep, err := b.Run(t.Context())
		if err != nil || rep.Succeeded != 200 {
			t.Fatalf("Run = %v, %d succeeded; want nil, 200", err, rep.Succeeded)
		}
		at := p.starts[bfDay(2).Key()].Sub(killed)
		if at < lease || at > lease+heartbeat {
			t.Errorf("the killed worker's day taken over %v after the kill; want once its lease of %v expired, within %v", at, lease, heartbeat)
		}
	})
}

// TestNoSlotIdle runs 8 days of a second each in 4 slots, with a
// heartbeat of half a second: no day is claimed before a slot is free to
// run it (one claimed without a slot waited past the heartbeat, was
// given back, and ran at the end, leaving slots idle), so the run takes
// two seconds, not three.
func TestNoSlotIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &timedProbe{run: time.Second}
		b := &backfill.Backfill{DAG: p.dag(t), Window: bfDays(t, 1, 8), Ledger: memledger.New(nil), Worker: "w", Concurrency: 4,
			Lease: 1500 * time.Millisecond, Heartbeat: 500 * time.Millisecond}
		start := time.Now()
		rep, err := b.Run(t.Context())
		if err != nil || rep.Succeeded != 8 {
			t.Fatalf("Run = %v, %d succeeded; want nil, 8", err, rep.Succeeded)
		}
		if took := time.Since(start); took > 2100*time.Millisecond {
			t.Errorf("8 days of a second in 4 slots took %v; want about 2s", took)
		}
	})
}
