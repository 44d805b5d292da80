package backfill_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/memledger"
)

// The promises a backfill keeps however fast it goes (issue "Fast and
// faithful"): a cancel stops what has not started, a success counts once
// it is recorded, and partitions start in the order of claims whatever
// the budget and the concurrency. Each test runs in a synctest bubble, so
// that a partition's run takes a known time and "later" is exact.

// timedProbe records when each partition's run started and ended, by
// the bubble's clock, and runs hook, when set, in the run.
type timedProbe struct {
	run  time.Duration
	hook func(ctx context.Context, key string)

	mu     sync.Mutex
	starts map[string]time.Time
	ends   map[string]time.Time
	order  []string
}

func (p *timedProbe) materialize(ctx context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
	part, err := m.Partition()
	if err != nil {
		return nil, err
	}
	key := part.Key()
	p.mu.Lock()
	if p.starts == nil {
		p.starts, p.ends = map[string]time.Time{}, map[string]time.Time{}
	}
	if _, ok := p.starts[key]; ok {
		p.mu.Unlock()
		return nil, fmt.Errorf("partition %s run twice", key)
	}
	p.starts[key] = time.Now()
	p.order = append(p.order, key)
	p.mu.Unlock()
	if p.hook != nil {
		p.hook(ctx, key)
	}
	time.Sleep(p.run)
	p.mu.Lock()
	p.ends[key] = time.Now()
	p.mu.Unlock()
	return []tranche.Row{{"day": key}}, nil
}

func (p *timedProbe) dag(t *testing.T) *tranche.DAG {
	t.Helper()
	dag, err := tranche.NewDAG(tranche.Asset{Name: "raw", Materialize: p.materialize,
		Partitioning: tranche.Partitioning{Granularity: tranche.Day, Location: time.UTC, Column: "day"}})
	if err != nil {
		t.Fatal(err)
	}
	dag.Name = "faithful"
	return dag
}

// TestCancelStopsWhatHasNotStarted cancels a backfill of 12 days in the
// ledger from inside the run of its second partition, at every
// concurrency: no partition starts later than one partition's run after
// the cancel, the partitions claimed ahead are released (no attempt: they
// plan again as not run) and not counted failed, and Run returns an
// error matching ErrBackfillCanceled. A resume then runs each of the
// rest once.
func TestCancelStopsWhatHasNotStarted(t *testing.T) {
	const days, run = 12, 10 * time.Millisecond
	for _, concurrency := range []int{1, 2, 4, 8} {
		for _, order := range []backfill.Order{backfill.NewestFirst, backfill.OldestFirst} {
			t.Run(fmt.Sprintf("concurrency=%d/order=%v", concurrency, order), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					l := memledger.New(nil)
					p := &timedProbe{run: run}
					b := &backfill.Backfill{DAG: p.dag(t), Window: bfDays(t, 1, days), Ledger: l, Worker: "w",
						Concurrency: concurrency, Order: order, OnFailure: tranche.FailContinue}
					id, err := b.ID()
					if err != nil {
						t.Fatal(err)
					}
					var canceledAt time.Time
					calls := 0
					p.hook = func(ctx context.Context, key string) {
						p.mu.Lock()
						calls++
						second := calls == 2
						p.mu.Unlock()
						if second {
							if err := l.CancelBackfill(ctx, id, ledger.CancelOptions{}); err != nil {
								t.Error(err)
							}
							canceledAt = time.Now()
						}
					}
					rep, err := b.Run(t.Context())
					if !errors.Is(err, backfill.ErrBackfillCanceled) {
						t.Fatalf("Run: %v; want an error matching ErrBackfillCanceled", err)
					}
					for key, started := range p.starts {
						if started.After(canceledAt.Add(run)) {
							t.Errorf("partition %s started %v after the cancel; want none later than one partition's run (%v)", key, started.Sub(canceledAt), run)
						}
					}
					if rep.Failed != 0 || rep.Succeeded != len(p.starts) || rep.NotRun != days-len(p.starts) {
						t.Errorf("report: %d succeeded, %d failed, %d not run; want %d succeeded (every run), 0 failed, %d not run",
							rep.Succeeded, rep.Failed, rep.NotRun, len(p.starts), days-len(p.starts))
					}
					plan, err := b.Plan(t.Context())
					if err != nil {
						t.Fatal(err)
					}
					if plan.Counts.Run != days-len(p.starts) {
						t.Errorf("plan after the cancel: %d to run; want %d, every partition not run", plan.Counts.Run, days-len(p.starts))
					}
					for a, err := range l.Latest(t.Context(), rep.Plan.DAG, bfDay(1).Start, bfDay(days+1).Start) {
						if err != nil {
							t.Fatal(err)
						}
						if _, ran := p.starts[a.Key]; !ran || a.State != ledger.StateSucceeded {
							t.Errorf("partition %s: %s attempt %d in the ledger (ran: %v); want the partitions run succeeded and the others without an attempt", a.Key, a.State, a.Number, ran)
						}
					}
					ran := len(p.starts)
					rep, err = b.Resume(t.Context())
					if err != nil || rep.Succeeded != days-ran {
						t.Fatalf("Resume: %v, %d succeeded; want nil, %d", err, rep.Succeeded, days-ran)
					}
					if len(p.starts) != days {
						t.Errorf("%d partitions run once after the resume; want %d", len(p.starts), days)
					}
				})
			})
		}
	}
}

// TestSuccessCountsOnceRecorded runs 8 days at Concurrency 1 on a ledger
// whose finishes take 5 ms: each partition.succeeded event comes after
// the ledger holds the success, and each partition starts after the one
// before it is recorded succeeded, in the records too (its attempt's
// Started at or after the other's Finished).
func TestSuccessCountsOnceRecorded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &latentLedger{Ledger: memledger.New(nil), latency: 5 * time.Millisecond}
		p := &timedProbe{run: time.Millisecond}
		b := &backfill.Backfill{DAG: p.dag(t), Window: bfDays(t, 1, 8), Ledger: l, Worker: "w", Order: backfill.OldestFirst}
		dag := backfill.DAGIdentity(b.DAG, tranche.Day, time.UTC)
		b.OnEvent = func(ctx context.Context, e tranche.Event) {
			switch e.Kind {
			case backfill.KindPartitionSucceeded:
				h, err := l.History(ctx, dag, e.Partition.Start)
				if err != nil || len(h) == 0 || h[len(h)-1].State != ledger.StateSucceeded {
					t.Errorf("%s: partition.succeeded sent while the ledger holds %v (%v); want its success recorded first", e.Partition.Key(), h, err)
				}
			case backfill.KindPartitionStarted:
				prev := e.Partition.Start.AddDate(0, 0, -1)
				if prev.Before(bfDay(1).Start) {
					return
				}
				h, err := l.History(ctx, dag, prev)
				if err != nil || len(h) == 0 || h[len(h)-1].State != ledger.StateSucceeded {
					t.Errorf("%s started while the day before is %v (%v) in the ledger; want it recorded succeeded first", e.Partition.Key(), h, err)
				}
			}
		}
		if _, err := b.Run(t.Context()); err != nil {
			t.Fatal(err)
		}
		var prev ledger.Attempt
		for a, err := range l.Latest(t.Context(), dag, bfDay(1).Start, bfDay(9).Start) {
			if err != nil {
				t.Fatal(err)
			}
			if !prev.Finished.IsZero() && a.Started.Before(prev.Finished) {
				t.Errorf("%s recorded started at %v, before %s recorded finished at %v", a.Key, a.Started, prev.Key, prev.Finished)
			}
			prev = a
		}
	})
}

// TestOrderUnderBudget runs 8 days oldest first at Concurrency 2 under
// a Budget of 1, and at other concurrencies and budgets: partitions
// start (take their place in the budget and send their started event)
// in the order of claims, which is the backfill's order, every time.
func TestOrderUnderBudget(t *testing.T) {
	for _, c := range []struct{ concurrency, budget int }{{2, 1}, {4, 1}, {4, 2}, {8, 3}, {3, 0}} {
		t.Run(fmt.Sprintf("concurrency=%d/budget=%d", c.concurrency, c.budget), func(t *testing.T) {
			for range 20 {
				synctest.Test(t, func(t *testing.T) {
					p := &timedProbe{run: time.Millisecond}
					var started []string
					b := &backfill.Backfill{DAG: p.dag(t), Window: bfDays(t, 1, 8), Ledger: memledger.New(nil), Worker: "w",
						Order: backfill.OldestFirst, Concurrency: c.concurrency,
						OnEvent: func(_ context.Context, e tranche.Event) {
							if e.Kind == backfill.KindPartitionStarted {
								started = append(started, e.Partition.Key())
							}
						}}
					if c.budget > 0 {
						b.Budget = backfill.NewBudget(c.budget)
					}
					if _, err := b.Run(t.Context()); err != nil {
						t.Fatal(err)
					}
					// Runs that may overlap enter their assets in any
					// order; one at a time, they enter in the order of
					// claims too.
					want := bfKeys(1, 2, 3, 4, 5, 6, 7, 8)
					if !slices.Equal(started, want) || c.budget == 1 && !slices.Equal(p.order, want) {
						t.Fatalf("started events %v, runs %v; want the events, and the runs of a budget of 1, in order %v", started, p.order, want)
					}
				})
			}
		})
	}
}

// TestFailStopClaimsNothingAfter fails the first of 8 days while the
// second still runs, at Concurrency 2, under FailStop: the dispatcher,
// waiting for a slot when the failure stops the backfill, claims
// nothing more, so that a hook that sees the failure sees no partition
// claimed after it, and the days after stay unclaimed (not run).
func TestFailStopClaimsNothingAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &timedProbe{run: 5 * time.Second}
		boom := errors.New("boom")
		dag, err := tranche.NewDAG(tranche.Asset{Name: "raw",
			Partitioning: tranche.Partitioning{Granularity: tranche.Day, Location: time.UTC, Column: "day"},
			Materialize: func(ctx context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
				if part, _ := m.Partition(); part.Key() == "2026-01-01" {
					time.Sleep(time.Second)
					return nil, boom
				}
				return p.materialize(ctx, m)
			}})
		if err != nil {
			t.Fatal(err)
		}
		dag.Name = "failstop"
		var kinds []string
		b := &backfill.Backfill{DAG: dag, Window: bfDays(t, 1, 8), Ledger: memledger.New(nil), Worker: "w",
			Order: backfill.OldestFirst, Concurrency: 2, OnFailure: tranche.FailStop,
			OnEvent: func(_ context.Context, e tranche.Event) {
				if e.Kind == backfill.KindPartitionClaimed || e.Kind == backfill.KindPartitionFailed {
					kinds = append(kinds, string(e.Kind)+" "+e.Partition.Key())
				}
			}}
		rep, err := b.Run(t.Context())
		if !errors.Is(err, boom) {
			t.Fatalf("Run: %v; want the failure", err)
		}
		want := []string{"partition.claimed 2026-01-01", "partition.claimed 2026-01-02", "partition.failed 2026-01-01"}
		if !slices.Equal(kinds, want) {
			t.Errorf("events %v; want %v", kinds, want)
		}
		if rep.Succeeded != 1 || rep.Failed != 1 || rep.NotRun != 6 {
			t.Errorf("report: %d succeeded, %d failed, %d not run; want 1, 1, 6", rep.Succeeded, rep.Failed, rep.NotRun)
		}
	})
}
