package schedule_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/memledger"
	"github.com/tranche-dev/tranche/schedule"
)

// TestSkewedReplicas runs three replicas of an hourly DAG on one ledger
// for a day, their clocks (Scheduler.Now) on time, 5 minutes ahead and 5
// minutes behind the ledger's: every slot runs once, by one of them, and
// none starts before its close by the ledger's clock, which judges the
// close as it judges leases (ledger.ClaimRequest.NotBefore). The replica
// ahead fires each slot 5 minutes early by the ledger's clock; the ledger
// refuses it as early (schedule.KindEarly), and it claims the slot again
// at the close.
func TestSkewedReplicas(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := time.Date(2026, 2, 1, 0, 10, 0, 0, time.UTC)
		truth := offsetClock(base) // the ledger's clock
		l := memledger.New(truth)
		var mu sync.Mutex
		started := map[string][]time.Duration{} // slot -> how long after its close each run started, by the ledger's clock
		var rs runs
		var stops []func()
		skews := []time.Duration{0, 5 * time.Minute, -5 * time.Minute}
		evs := make([]events, len(skews))
		schedulers := make([]*schedule.Scheduler, len(skews))
		for i, skew := range skews {
			worker := fmt.Sprintf("replica-%d", i)
			body := func(_ context.Context, key string) error {
				p, err := tranche.ParsePartitionKey(tranche.Hour, key, time.UTC)
				if err != nil {
					return err
				}
				mu.Lock()
				started[key] = append(started[key], truth().Sub(p.End))
				mu.Unlock()
				return nil
			}
			schedulers[i] = &schedule.Scheduler{DAG: rs.dag(t, worker, tranche.Hour, time.UTC, body), Ledger: l, Worker: worker,
				Now: func() time.Time { return truth().Add(skew) }, OnEvent: evs[i].hook}
			stops = append(stops, start(t, schedulers[i]))
		}
		time.Sleep(24 * time.Hour)
		for _, stop := range stops {
			stop()
		}
		id := schedulers[0].Status().DAG
		for _, key := range rs.keys() {
			if by := rs.of(key); len(by) != 1 {
				t.Errorf("slot %s ran %d times, by %v", key, len(by), by)
			}
			for _, after := range started[key] {
				if after < 0 {
					t.Errorf("slot %s started %v before its close by the ledger's clock", key, -after)
				}
			}
			p, err := tranche.ParsePartitionKey(tranche.Hour, key, time.UTC)
			if err != nil {
				t.Fatal(err)
			}
			h, err := l.History(t.Context(), id, p.Start)
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range h {
				if a.Started.Before(p.End) {
					t.Errorf("slot %s: attempt %d by %s started at %v, before its close %v by the ledger's clock", key, a.Number, a.Worker, a.Started, p.End)
				}
			}
		}
		if len(rs.keys()) < 23 {
			t.Errorf("%d slots ran in a day; want 23 or more", len(rs.keys()))
		}
		early := evs[1].of(schedule.KindEarly)
		if len(early) < 23 {
			t.Errorf("the replica 5 minutes ahead was refused as early %d times; want once for each slot, 23 or more", len(early))
		}
		for i := range evs {
			if i != 1 && len(evs[i].of(schedule.KindEarly)) > 0 {
				t.Errorf("replica-%d, whose clock is not ahead, was refused as early: %v", i, evs[i].of(schedule.KindEarly))
			}
		}
		won := map[string]int{}
		for _, key := range rs.keys() {
			won[rs.of(key)[0]]++
		}
		t.Logf("%d slots; runs by replica: %v; the replica ahead refused as early %d times", len(rs.keys()), won, len(early))
	})
}

// TestFastReplicaAlone runs one scheduler whose clock is 5 minutes ahead
// of the ledger's for a day: each slot runs at its close by the ledger's
// clock, after two claims, one refused as early, whose refusal said how
// long to wait, and one granted after exactly that wait, without polling.
func TestFastReplicaAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := time.Date(2026, 2, 1, 0, 10, 0, 0, time.UTC)
		truth := offsetClock(base)
		claims := &countingLedger{Ledger: memledger.New(truth)}
		fast := func() time.Time { return truth().Add(5 * time.Minute) }
		w := newWork(t, tranche.Hour, time.UTC, truth)
		var ev events
		s := &schedule.Scheduler{DAG: w.dag, Ledger: claims, Worker: "fast", Now: fast, OnEvent: ev.hook}
		runFor(t, s, 24*time.Hour-time.Minute) // to 00:09 the next day, by the ledger's clock
		calls := w.callList()
		if len(calls) != 24 {
			t.Fatalf("%d slots ran in a day; want 24", len(calls))
		}
		for _, c := range calls {
			p, err := tranche.ParsePartitionKey(tranche.Hour, c.key, time.UTC)
			if err != nil {
				t.Fatal(err)
			}
			if !c.at.Equal(p.End) {
				t.Errorf("slot %s ran at %v by the ledger's clock; want at its close, %v", c.key, c.at, p.End)
			}
		}
		if n := claims.n.Load(); n != 2*24 {
			t.Errorf("%d claims for 24 slots; want two each, one refused as early, one granted", n)
		}
		for _, e := range ev.list() {
			if e.Kind == schedule.KindEarly && e.Duration != 5*time.Minute {
				t.Errorf("slot %s refused as early, to wait %v; want the skew, 5m", e.Target, e.Duration)
			}
		}
		if early := ev.of(schedule.KindEarly); len(early) != 24 {
			t.Errorf("%d slots refused as early; want 24", len(early))
		}
	})
}

// TestTakeoverByLedgerClock: a scheduler whose system clock is 26 years
// behind the ledger's (synctest's reads 2000; the ledger's and the
// scheduler's own read 2026) and that has claimed nothing yet finds its
// first slot held under a lease that a dead worker left: it cannot judge
// the lease by its system clock, so it asks the ledger once a heartbeat
// interval, and takes the slot over within an interval of the lease's
// end by the ledger's clock, not 26 years later.
func TestTakeoverByLedgerClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := time.Date(2026, 2, 1, 1, 0, 0, 0, time.UTC)
		clock := offsetClock(base)
		counted := &countingLedger{Ledger: memledger.New(clock)}
		w := newWork(t, tranche.Hour, time.UTC, clock)
		id := backfill.DAGIdentity(w.dag, tranche.Hour, time.UTC)
		slot := tranche.PartitionOf(tranche.Hour, base.Add(-time.Hour))
		dead, err := counted.Claim(t.Context(), ledger.ClaimRequest{DAG: id, Worker: "dead", RunID: backfill.RunID(id, slot.Start, slot.End),
			Partitions: []tranche.TimePartition{slot}, Lease: backfill.DefaultLease, Policy: ledger.RerunNone, Trigger: ledger.TriggerLive})
		if err != nil {
			t.Fatal(err)
		}
		var ev events
		s := &schedule.Scheduler{DAG: w.dag, Ledger: counted, Worker: "heir", Now: clock, OnEvent: ev.hook}
		runFor(t, s, 10*time.Minute)
		calls := w.callList()
		if len(calls) != 1 || calls[0].key != slot.Key() {
			t.Fatalf("runs %v; want one, of %s, taken over", calls, slot.Key())
		}
		heartbeat := backfill.DefaultLease / 3
		if late := calls[0].at.Sub(dead.Until); late < 0 || late > heartbeat {
			t.Errorf("slot %s taken over %v after the dead worker's lease ended by the ledger's clock; want within a heartbeat interval, %v",
				slot.Key(), late, heartbeat)
		}
		h, err := counted.History(t.Context(), id, slot.Start)
		if err != nil || len(h) != 2 || h[0].State != ledger.StateFailed || h[1].Worker != "heir" || h[1].State != ledger.StateSucceeded {
			t.Errorf("history of %s: %+v, %v; want the dead attempt taken over, then the heir's success", slot.Key(), h, err)
		}
		// The claims: the dead worker's, the heir's tries until the lease
		// ended (one an interval), and the takeover.
		if n := counted.n.Load(); n > 2+int64(backfill.DefaultLease/heartbeat)+1 {
			t.Errorf("%d claims; want the dead worker's, one a heartbeat interval while its lease held, and the takeover", n)
		}
	})
}

// countingLedger counts the claims made of the ledger it holds.
type countingLedger struct {
	ledger.Ledger
	n atomic.Int64
}

func (c *countingLedger) Claim(ctx context.Context, req ledger.ClaimRequest) (*ledger.Lease, error) {
	c.n.Add(1)
	return c.Ledger.Claim(ctx, req)
}

// TestFastReplicaSkip runs one scheduler under OverlapSkip whose clock is
// 5 minutes ahead of the ledger's: a slot that comes due by its clock
// while an earlier one runs is not recorded skipped before it closes by
// the ledger's clock. The decision waits for the close: slot 01:00, whose
// predecessor ends at 01:57, three minutes before its close, runs at
// 02:00; slot 03:00, whose predecessor runs until 04:30, is skipped at
// its close, 04:00, and not before.
func TestFastReplicaSkip(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := time.Date(2026, 2, 1, 0, 30, 0, 0, time.UTC)
		truth := offsetClock(base)
		l := memledger.New(truth)
		w := newWork(t, tranche.Hour, time.UTC, truth)
		w.take = func(key string) time.Duration {
			switch key {
			case "2026-02-01T00:00Z":
				return 57 * time.Minute // ends at 01:57
			case "2026-02-01T02:00Z":
				return 90 * time.Minute // ends at 04:30
			}
			return 10 * time.Minute
		}
		var ev events
		s := &schedule.Scheduler{DAG: w.dag, Ledger: l, Worker: "fast", Overlap: schedule.OverlapSkip,
			Now: func() time.Time { return truth().Add(5 * time.Minute) }, OnEvent: ev.hook}
		runFor(t, s, 5*time.Hour) // to 05:30 by the ledger's clock
		var got []string
		for _, c := range w.callList() {
			got = append(got, c.key[11:16]+" at "+c.at.Format("15:04"))
		}
		want := []string{"00:00 at 01:00", "01:00 at 02:00", "02:00 at 03:00", "04:00 at 05:00"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("runs by the ledger's clock (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"2026-02-01T03:00Z live"}, ev.of(schedule.KindSkipped)); diff != "" {
			t.Errorf("skipped (-want +got):\n%s", diff)
		}
		id := s.Status().DAG
		for p := tranche.PartitionOf(tranche.Hour, base.Add(-30*time.Minute)); p.End.Before(base.Add(5 * time.Hour)); p = p.Next() {
			h, err := l.History(t.Context(), id, p.Start)
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range h {
				if a.Started.Before(p.End) {
					t.Errorf("slot %s: attempt %d (%s, %q) started at %v, before its close %v by the ledger's clock",
						p.Key(), a.Number, a.State, a.Err, a.Started.Format("15:04:05"), p.End.Format("15:04"))
				}
			}
		}
	})
}

// TestFastReplicaMissed: a scheduler that catches nothing up
// (MaxCatchUp -1) and whose clock runs 90 minutes ahead of the ledger's
// resumes after its last run, 05:00, at 10:00 by the ledger's clock: by
// its own it is 11:30, and slots 06:00 to 10:00 are missed. Slot 10:00
// has not closed by the ledger's clock: it is not recorded missed, it
// waits for its close and runs then; the others are recorded missed.
//
// Under OverlapSkip too: slot 10:00, decided at its close, runs, nothing
// running then, and so does slot 11:00, which came due by the
// scheduler's clock while 10:00 waited.
func TestFastReplicaMissed(t *testing.T) {
	for _, overlap := range []schedule.Overlap{schedule.OverlapQueue, schedule.OverlapSkip} {
		t.Run(string(overlap), func(t *testing.T) { testFastReplicaMissed(t, overlap) })
	}
}

func testFastReplicaMissed(t *testing.T, overlap schedule.Overlap) {
	synctest.Test(t, func(t *testing.T) {
		// The earlier scheduler ran 05:00 at its close, 06:00, and
		// stopped.
		truth := offsetClock(time.Date(2026, 2, 1, 6, 0, 0, 0, time.UTC))
		l := memledger.New(truth)
		w := newWork(t, tranche.Hour, time.UTC, truth)
		id := backfill.DAGIdentity(w.dag, tranche.Hour, time.UTC)
		last := tranche.PartitionOf(tranche.Hour, time.Date(2026, 2, 1, 5, 0, 0, 0, time.UTC))
		lease, err := l.Claim(t.Context(), ledger.ClaimRequest{DAG: id, Worker: "earlier", RunID: backfill.RunID(id, last.Start, last.End),
			Partitions: []tranche.TimePartition{last}, Lease: backfill.DefaultLease, Policy: ledger.RerunNone, Trigger: ledger.TriggerLive})
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Finish(t.Context(), lease, []ledger.Outcome{{State: ledger.StateSucceeded}}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(4 * time.Hour)
		base := truth()
		var ev events
		s := &schedule.Scheduler{DAG: w.dag, Ledger: l, Worker: "fast", MaxCatchUp: -1, Overlap: overlap,
			Now: func() time.Time { return truth().Add(90 * time.Minute) }, OnEvent: ev.hook}
		runFor(t, s, 150*time.Minute) // to 12:30 by the ledger's clock
		var got []string
		for _, c := range w.callList() {
			got = append(got, c.key[11:16]+" at "+c.at.Format("15:04"))
		}
		if diff := cmp.Diff([]string{"10:00 at 11:00", "11:00 at 12:00"}, got); diff != "" {
			t.Errorf("runs by the ledger's clock (-want +got):\n%s", diff)
		}
		want := []string{"2026-02-01T06:00Z", "2026-02-01T07:00Z", "2026-02-01T08:00Z", "2026-02-01T09:00Z"}
		if diff := cmp.Diff(want, ev.of(schedule.KindMissed)); diff != "" {
			t.Errorf("missed (-want +got):\n%s", diff)
		}
		for p := last.Next(); p.End.Before(base.Add(150 * time.Minute)); p = p.Next() {
			h, err := l.History(t.Context(), id, p.Start)
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range h {
				if a.Started.Before(p.End) {
					t.Errorf("slot %s: attempt %d (%s, %q) started at %v, before its close %v by the ledger's clock",
						p.Key(), a.Number, a.State, a.Err, a.Started.Format("15:04:05"), p.End.Format("15:04"))
				}
			}
		}
	})
}
