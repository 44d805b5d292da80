package backfill_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/memledger"
)

// TestLimitBackfill runs two workers of one backfill, Concurrency 3 each,
// under a DAG's limit of 2 in the ledger: never more than 2 partitions
// run at once, the backfill succeeds whole, each worker says it waited
// (backfill.limited), and the plan said the limit beforehand. A run of
// the DAG by hand (RunRecorded) during the backfill waits for room, and
// a live slot waiting makes the plan say the backfill starts waiting.
func TestLimitBackfill(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		l := memledger.New(nil)
		p := &bfProbe{hook: func(ctx context.Context, _ string) error {
			time.Sleep(time.Minute)
			return nil
		}}
		dag := bfDAG(t, p, false)
		w := bfDays(t, 1, 13)
		id := backfill.DAGIdentity(dag, tranche.Day, time.UTC)
		if _, err := l.SetLimit(ctx, id, ledger.Limit{Max: 2, By: "test"}); err != nil {
			t.Fatal(err)
		}
		b := func(worker string) *backfill.Backfill {
			return &backfill.Backfill{DAG: dag, Window: w, Ledger: l, Concurrency: 3, Worker: worker}
		}
		plan, err := b("planner").Plan(ctx)
		if err != nil {
			t.Fatal(err)
		}
		const want = "the DAG's limit allows 2 runs at once across every process, live slots first, fewer than this backfill's concurrency (3)"
		if !strings.Contains(strings.Join(plan.Warnings, "\n"), want) {
			t.Errorf("plan warnings %q; want %q", plan.Warnings, want)
		}
		var limited [2]limitEvents
		reports := make(chan *backfill.Report, 2)
		for i, worker := range []string{"a", "b"} {
			bf := b(worker)
			bf.OnEvent = limited[i].hook
			go func() {
				r, err := bf.Run(ctx)
				if err != nil {
					t.Errorf("worker %s: %v", worker, err)
				}
				reports <- r
			}()
		}
		// A run by hand while the backfill fills the limit: it waits for
		// room, then runs.
		time.Sleep(30 * time.Second)
		manual := bfDay(20)
		start := time.Now()
		if _, err := backfill.RunRecorded(ctx, l, nil, dag, manual, "operator"); err != nil {
			t.Fatalf("RunRecorded: %v", err)
		}
		if waited := time.Since(start); waited < 30*time.Second {
			t.Errorf("RunRecorded under a full limit ran after %v; want it to wait for a run to end", waited)
		}
		done := 0
		for range 2 {
			r := <-reports
			done += r.Succeeded
		}
		if done != w.Len() {
			t.Errorf("the workers succeeded %d partitions; want the window's %d", done, w.Len())
		}
		if peak := p.Peak(); peak != 2 {
			t.Errorf("%d partitions ran at once; want the limit, 2", peak)
		}
		for i := range limited {
			if limited[i].count(backfill.KindLimited) == 0 {
				t.Errorf("worker %d sent no backfill.limited", i)
			}
		}

		// A live slot waiting: a plan says the backfill would wait.
		hold, err := l.Claim(ctx, ledger.ClaimRequest{DAG: id, Worker: "x", RunID: "x", Partitions: []tranche.TimePartition{bfDay(30)}, Lease: time.Hour, Policy: ledger.RerunAll})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Finish(ctx, hold, []ledger.Outcome{{State: ledger.StateSucceeded}})
		if _, err := l.SetLimit(ctx, id, ledger.Limit{Max: 1, By: "test"}); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Claim(ctx, ledger.ClaimRequest{DAG: id, Worker: "s", RunID: "s", Partitions: []tranche.TimePartition{bfDay(31)}, Lease: time.Hour,
			Policy: ledger.RerunNone, Trigger: ledger.TriggerLive}); err == nil {
			t.Fatal("a live slot claimed past the limit")
		}
		plan, err = (&backfill.Backfill{DAG: dag, Window: bfDays(t, 40, 42), Ledger: l, Concurrency: 1}).Plan(ctx)
		if err != nil {
			t.Fatal(err)
		}
		const waiting = "the DAG's limit allows 1 run at once across every process, live slots first; 1 running now, 1 slot waiting: the backfill starts waiting for the DAG's limit"
		if !strings.Contains(strings.Join(plan.Warnings, "\n"), waiting) {
			t.Errorf("plan warnings %q; want %q", plan.Warnings, waiting)
		}
	})
}

// limitEvents records the kinds of a backfill's events.
type limitEvents struct {
	mu    sync.Mutex
	kinds []tranche.Kind
}

func (e *limitEvents) hook(_ context.Context, ev tranche.Event) {
	e.mu.Lock()
	e.kinds = append(e.kinds, ev.Kind)
	e.mu.Unlock()
}

func (e *limitEvents) count(k tranche.Kind) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, got := range e.kinds {
		if got == k {
			n++
		}
	}
	return n
}

// TestLimitPlanFrom plans a backfill under a DAG's limit from a reader
// alone (PlanFrom, as a ledger opened to read only is planned from): the
// plan warns of the limit as Plan does, since PlanFrom promises the
// same plan.
func TestLimitPlanFrom(t *testing.T) {
	ctx := t.Context()
	l := memledger.New(nil)
	dag := bfDAG(t, &bfProbe{}, false)
	id := backfill.DAGIdentity(dag, tranche.Day, time.UTC)
	if _, err := l.SetLimit(ctx, id, ledger.Limit{Max: 2, By: "test"}); err != nil {
		t.Fatal(err)
	}
	b := &backfill.Backfill{DAG: dag, Window: bfDays(t, 1, 13), Concurrency: 3}
	plan, err := b.PlanFrom(ctx, l)
	if err != nil {
		t.Fatal(err)
	}
	const want = "the DAG's limit allows 2 runs at once"
	if !strings.Contains(strings.Join(plan.Warnings, "\n"), want) {
		t.Errorf("PlanFrom's warnings %q; want one saying %q", plan.Warnings, want)
	}
}

// TestLimitWaitStopsOnFailStop fails a partition under FailStop while
// the backfill waits, for the DAG's limit, to take over a partition
// another worker held: the wait ends with the backfill, which returns
// at once, rather than once the limit leaves room (here when a live
// slot's demand lapses, 10 minutes on) only to release the claim.
func TestLimitWaitStopsOnFailStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		l := memledger.New(nil)
		dag := bfDAG(t, &bfProbe{hook: func(_ context.Context, target string) error {
			if target == bfDay(2).Key() {
				time.Sleep(2 * time.Minute)
				return errors.New("day 2 fails")
			}
			return nil
		}}, false)
		id := backfill.DAGIdentity(dag, tranche.Day, time.UTC)
		if _, err := l.SetLimit(ctx, id, ledger.Limit{Max: 3, By: "test"}); err != nil {
			t.Fatal(err)
		}
		claim := func(day int, lease time.Duration, trigger ledger.Trigger) error {
			_, err := l.Claim(ctx, ledger.ClaimRequest{DAG: id, Worker: "other", RunID: fmt.Sprint("other-", day),
				Partitions: []tranche.TimePartition{bfDay(day)}, Lease: lease, Policy: ledger.RerunAll, Trigger: trigger})
			return err
		}
		// Day 20 runs elsewhere all along; day 1 is held a minute by a
		// worker that then stops.
		if err := claim(20, 24*time.Hour, ledger.TriggerManual); err != nil {
			t.Fatal(err)
		}
		if err := claim(1, time.Minute, ledger.TriggerManual); err != nil {
			t.Fatal(err)
		}
		go func() {
			// Once the backfill runs day 2, the limit is full: a live
			// slot refused records its demand, which holds backfills
			// back for 10 minutes.
			time.Sleep(30 * time.Second)
			if err := claim(22, 10*time.Minute, ledger.TriggerLive); !errors.Is(err, ledger.ErrLimited) {
				t.Errorf("the live slot's claim: %v; want ErrLimited", err)
			}
		}()
		start := time.Now()
		b := &backfill.Backfill{DAG: dag, Window: bfDays(t, 1, 4), Ledger: l, Concurrency: 2, Order: backfill.OldestFirst,
			OnFailure: tranche.FailStop, Worker: "w"}
		rep, err := b.Run(ctx)
		if err == nil || rep == nil || rep.Failed != 1 {
			t.Fatalf("Run = %v, %v; want day 2 failed", rep, err)
		}
		if took := time.Since(start); took > 5*time.Minute {
			t.Errorf("Run returned %v after it began, %v after day 2 failed; want it to stop waiting for the limit then", took, took-2*time.Minute)
		}
	})
}
