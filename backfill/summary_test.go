package backfill_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/memledger"
)

// TestSummaryOf: a DAG's latest run leaves backfills out, however recent
// their runs; its latest backfill is the failed one until its failure is
// run again; the scheduler is seen by its slots' triggers, its delay
// read from its last live slot, and after downtime it is reported
// waiting, the slots due since counted missed.
func TestSummaryOf(t *testing.T) {
	now := time.Now().UTC()
	today := tranche.PartitionOf(tranche.Day, now)
	d3, d2, d1 := today.Prev().Prev().Prev(), today.Prev().Prev(), today.Prev()
	clock := now
	l := memledger.New(func() time.Time { return clock })
	dag, _, second := twoBackfills(t, l) // Jan 1-5 (3rd failed), Jan 4-7 (5th failed)
	run := func(p tranche.TimePartition, trigger ledger.Trigger, started time.Time, state ledger.State) {
		t.Helper()
		clock = started
		rev, err := l.Revision(t.Context(), dag)
		if err != nil {
			t.Fatal(err)
		}
		lease, err := l.Claim(t.Context(), ledger.ClaimRequest{DAG: dag, Worker: "w", RunID: p.Key(), Partitions: []tranche.TimePartition{p},
			Lease: time.Minute, Policy: ledger.RerunAll, Revision: rev, Trigger: trigger})
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Finish(t.Context(), lease, []ledger.Outcome{{State: state}}); err != nil {
			t.Fatal(err)
		}
	}
	s, err := backfill.SummaryOf(t.Context(), l, dag, tranche.Day, time.UTC, now)
	if err != nil {
		t.Fatal(err)
	}
	if s.LatestRun != nil || s.Scheduler.Last != nil {
		t.Errorf("SummaryOf a DAG of backfills alone: latest run %+v, scheduler's last %+v; want none", s.LatestRun, s.Scheduler.Last)
	}
	if s.LatestBackfill == nil || s.LatestBackfill.Record.ID != second {
		t.Errorf("latest backfill %v; want the newest failed, %s", s.LatestBackfill, second)
	}

	// Live slots of the last three days; the slot of two days ago by
	// hand. Then a backfill's run of yesterday, which is not the latest
	// run.
	const delay = 10 * time.Minute
	run(d3, ledger.TriggerLive, d3.End.Add(delay), ledger.StateSucceeded)
	run(d2, ledger.TriggerManual, d2.End.Add(time.Hour), ledger.StateFailed)
	s, err = backfill.SummaryOf(t.Context(), l, dag, tranche.TimeGranularity{}, nil, d2.End.Add(2*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if s.LatestRun == nil || s.LatestRun.Key != d2.Key() || s.Scheduler.Last == nil || s.Scheduler.Last.Key != d3.Key() {
		t.Fatalf("latest run %+v, scheduler's last %+v; want %s by hand and %s live", s.LatestRun, s.Scheduler.Last, d2.Key(), d3.Key())
	}
	// The granularity from the backfills: the next slot is d2, due at its
	// end plus the delay of d3; d2 has an attempt, by hand, so nothing
	// is missed and the scheduler is not waited for.
	if !s.Scheduler.Next.Equal(d2) || s.Scheduler.Delay != delay || !s.Scheduler.NextDue.Equal(d2.End.Add(delay)) {
		t.Errorf("next %v due %v, delay %v; want %s, due at its end plus %v", s.Scheduler.Next, s.Scheduler.NextDue, s.Scheduler.Delay, d2.Key(), delay)
	}
	if s.Scheduler.Waiting || s.Scheduler.Missed != 0 {
		t.Errorf("waiting %v, missed %d; want false and 0", s.Scheduler.Waiting, s.Scheduler.Missed)
	}

	// An ordinary run of d1 without a trigger (manual), and a day and a
	// half later: today and tomorrow came due with none.
	run(d1, "", d1.End.Add(time.Hour), ledger.StateSucceeded)
	later := today.End.Add(36 * time.Hour)
	s, err = backfill.SummaryOf(t.Context(), l, dag, tranche.Day, time.UTC, later)
	if err != nil {
		t.Fatal(err)
	}
	if s.LatestRun.Key != d1.Key() || s.LatestRun.Trigger != ledger.TriggerManual {
		t.Errorf("latest run %s (%s); want %s, manual", s.LatestRun.Key, s.LatestRun.Trigger, d1.Key())
	}
	if s.Scheduler.Missed != 2 || s.Scheduler.Waiting {
		t.Errorf("missed %d, waiting %v; want 2 (today and tomorrow), and not waiting: the next slot has a run by hand", s.Scheduler.Missed, s.Scheduler.Waiting)
	}
	// A live run of d2 too: the next slot is d1, which has a run, then
	// today, due with none: waiting.
	run(d2, ledger.TriggerLive, d2.End.Add(delay), ledger.StateSucceeded)
	run(d1, ledger.TriggerLive, d1.End.Add(delay), ledger.StateSucceeded)
	s, err = backfill.SummaryOf(t.Context(), l, dag, tranche.Day, time.UTC, later)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Scheduler.Next.Equal(today) || !s.Scheduler.Waiting || s.Scheduler.Missed != 2 {
		t.Errorf("next %v, waiting %v, missed %d; want %s, true, 2", s.Scheduler.Next, s.Scheduler.Waiting, s.Scheduler.Missed, today.Key())
	}

	if s.LatestRun.Key != d1.Key() || s.LatestRun.Trigger != ledger.TriggerLive {
		t.Errorf("latest run %s (%s); want %s, live", s.LatestRun.Key, s.LatestRun.Trigger, d1.Key())
	}
}

// TestMaterializationTrigger: an asset reads why it runs, as the ledger
// records the attempt: backfill in a backfill, manual through
// RunRecorded.
func TestMaterializationTrigger(t *testing.T) {
	l := memledger.New(nil)
	var seen []string
	dag, err := tranche.NewDAG(tranche.Asset{Name: "a", Partitioning: tranche.Partitioning{Granularity: tranche.Day},
		Materialize: func(_ context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
			seen = append(seen, m.Trigger())
			return nil, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	b := &backfill.Backfill{DAG: dag, Window: janDays(t, 1, 2), Ledger: l}
	if _, err := b.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := backfill.RunRecorded(t.Context(), l, nil, dag, janDay(3), "w"); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(seen) != "[backfill backfill manual]" {
		t.Errorf("the assets read triggers %v; want [backfill backfill manual]", seen)
	}
	for _, d := range []int{1, 3} {
		h, err := l.History(t.Context(), backfill.DAGIdentity(dag, tranche.Day, time.UTC), janDay(d).Start)
		if err != nil || len(h) != 1 {
			t.Fatal(h, err)
		}
		if want := map[int]ledger.Trigger{1: ledger.TriggerBackfill, 3: ledger.TriggerManual}[d]; h[0].Trigger != want {
			t.Errorf("the attempt at January %d: trigger %q; want %q", d, h[0].Trigger, want)
		}
	}
}
