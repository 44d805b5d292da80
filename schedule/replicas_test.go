package schedule_test

import (
	"context"
	"fmt"
	"iter"
	"slices"
	"strings"
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

// runs records the runs of several replicas of one DAG: each replica
// has a DAG of its own (the same assets, so the same identity) whose
// materializer names it.
type runs struct {
	mu   sync.Mutex
	list []string // "KEY by WORKER"
	by   map[string][]string
}

func (r *runs) dag(t testing.TB, worker string, g tranche.TimeGranularity, loc *time.Location,
	body func(ctx context.Context, key string) error) *tranche.DAG {
	t.Helper()
	dag, err := tranche.NewDAG(tranche.Asset{
		Name:         "events",
		Partitioning: tranche.Partitioning{Granularity: g, Location: loc},
		Materialize: func(ctx context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
			p, err := m.Partition()
			if err != nil {
				return nil, err
			}
			r.mu.Lock()
			r.list = append(r.list, p.Key()+" by "+worker)
			if r.by == nil {
				r.by = map[string][]string{}
			}
			r.by[p.Key()] = append(r.by[p.Key()], worker)
			r.mu.Unlock()
			if body != nil {
				return nil, body(ctx, p.Key())
			}
			return nil, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return dag
}

func (r *runs) of(key string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.by[key])
}

func (r *runs) keys() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	keys := make([]string, 0, len(r.by))
	for k := range r.by {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// TestReplicas runs three schedulers of one DAG on one ledger, started at
// different times, for two days of hourly slots whose runs take up to
// most of an hour: every slot runs once, by one of them, and the ledger
// holds one succeeded attempt of each.
func TestReplicas(t *testing.T) {
	for _, overlap := range []schedule.Overlap{schedule.OverlapQueue, schedule.OverlapConcurrent, schedule.OverlapSkip} {
		t.Run(string(overlap), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := time.Date(2026, 2, 1, 0, 10, 0, 0, time.UTC)
				clock := offsetClock(base)
				l := memledger.New(clock)
				var rs runs
				take := func(ctx context.Context, key string) error {
					// 5 to 95 minutes, from the slot's hour: some runs
					// outlast their hour.
					h := int(key[11]-'0')*10 + int(key[12]-'0')
					select {
					case <-time.After(time.Duration(5+(h*37)%91) * time.Minute):
						return nil
					case <-ctx.Done():
						return ctx.Err()
					}
				}
				var stops []func()
				schedulers := make([]*schedule.Scheduler, 3)
				for i, delay := range []time.Duration{0, 7 * time.Minute, 2 * time.Hour} {
					time.Sleep(delay)
					worker := fmt.Sprintf("replica-%d", i)
					schedulers[i] = &schedule.Scheduler{DAG: rs.dag(t, worker, tranche.Hour, time.UTC, take), Ledger: l,
						Worker: worker, Overlap: overlap, Now: clock}
					stops = append(stops, start(t, schedulers[i]))
				}
				time.Sleep(48 * time.Hour)
				for _, stop := range stops {
					stop()
				}
				// The slots that closed and finished: 00:00 on the first
				// day to 23:00 on the second at least.
				id := schedulers[0].Status().DAG
				total := 0
				for _, key := range rs.keys() {
					if by := rs.of(key); len(by) != 1 {
						t.Errorf("slot %s ran %d times, by %v", key, len(by), by)
					}
					p, err := tranche.ParsePartitionKey(tranche.Hour, key, time.UTC)
					if err != nil {
						t.Fatal(err)
					}
					h, err := l.History(context.Background(), id, p.Start)
					if err != nil {
						t.Fatal(err)
					}
					if len(h) != 1 || (h[0].State != ledger.StateSucceeded && p.Start.Before(base.Add(48*time.Hour))) {
						t.Errorf("history of %s: %v", key, h)
					}
					total++
				}
				succeeded, elsewhere := 0, 0
				for _, s := range schedulers {
					st := s.Status()
					succeeded += st.Succeeded + st.Interrupted
					elsewhere += st.Elsewhere
				}
				if succeeded != total {
					t.Errorf("the replicas ran %d slots, and the runs recorded %d", succeeded, total)
				}
				if overlap != schedule.OverlapSkip && total < 48 {
					t.Errorf("%d slots ran in two days; want 48 or more", total)
				}
				if elsewhere == 0 {
					t.Error("no replica found a slot run by another: they did not compete")
				}
			})
		})
	}
}

// frozen is a ledger that stops answering a replica once killed: its
// calls block until their contexts end, as those of a process stopped
// dead would never return.
type frozen struct {
	ledger.Ledger
	dead atomic.Bool
}

func (f *frozen) block(ctx context.Context) error {
	<-ctx.Done()
	return ctx.Err()
}

func (f *frozen) Claim(ctx context.Context, req ledger.ClaimRequest) (*ledger.Lease, error) {
	if f.dead.Load() {
		return nil, f.block(ctx)
	}
	return f.Ledger.Claim(ctx, req)
}

func (f *frozen) Heartbeat(ctx context.Context, l *ledger.Lease, d time.Duration) error {
	if f.dead.Load() {
		return f.block(ctx)
	}
	return f.Ledger.Heartbeat(ctx, l, d)
}

func (f *frozen) Finish(ctx context.Context, l *ledger.Lease, o []ledger.Outcome) error {
	if f.dead.Load() {
		return f.block(ctx)
	}
	return f.Ledger.Finish(ctx, l, o)
}

func (f *frozen) Latest(ctx context.Context, dag string, from, to time.Time) iter.Seq2[ledger.Attempt, error] {
	if f.dead.Load() {
		return func(yield func(ledger.Attempt, error) bool) { yield(ledger.Attempt{}, f.block(ctx)) }
	}
	return f.Ledger.Latest(ctx, dag, from, to)
}

// TestKilledReplica: the replica that takes a slot dies while running it
// (it never calls the ledger again); another takes the slot over once
// its lease expires and runs it, and the ledger holds the dead attempt,
// failed by the takeover, and one success.
func TestKilledReplica(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := time.Date(2026, 2, 1, 0, 10, 0, 0, time.UTC)
		clock := offsetClock(base)
		l := memledger.New(clock)
		var rs runs
		const victim = "2026-02-01T02:00Z"
		var killed atomic.Value // the worker that died
		ledgers := make([]*frozen, 3)
		var stops []func()
		var evs [3]events
		for i := range ledgers {
			worker := fmt.Sprintf("replica-%d", i)
			ledgers[i] = &frozen{Ledger: l}
			f := ledgers[i]
			body := func(ctx context.Context, key string) error {
				if key == victim && killed.CompareAndSwap(nil, worker) {
					f.dead.Store(true)
					<-ctx.Done() // it hangs, dead, until its own clock says the lease is gone
					return ctx.Err()
				}
				return nil
			}
			s := &schedule.Scheduler{DAG: rs.dag(t, worker, tranche.Hour, time.UTC, body), Ledger: f, Worker: worker, Now: clock,
				OnEvent: evs[i].hook}
			stops = append(stops, start(t, s))
		}
		time.Sleep(5 * time.Hour)
		for _, stop := range stops {
			stop()
		}
		dead := killed.Load().(string)
		by := rs.of(victim)
		if len(by) != 2 || by[0] != dead || by[1] == dead {
			t.Fatalf("slot %s ran by %v; want by the dead replica %s, then by another", victim, by, dead)
		}
		p, _ := tranche.ParsePartitionKey(tranche.Hour, victim, time.UTC)
		h, err := l.History(context.Background(), backfill.DAGIdentity(rs.dag(t, "x", tranche.Hour, time.UTC, nil), tranche.Hour, time.UTC), p.Start)
		if err != nil {
			t.Fatal(err)
		}
		if len(h) != 2 || h[0].Worker != dead || h[0].State != ledger.StateFailed || !strings.Contains(h[0].Err, "taken over") ||
			h[1].Worker != by[1] || h[1].State != ledger.StateSucceeded {
			t.Errorf("history of %s: %+v", victim, h)
		}
		// The takeover was a catch-up, once the dead replica's lease
		// had expired.
		claimed := map[string]time.Time{}
		for i := range evs {
			for _, e := range evs[i].list() {
				if e.Target == victim && e.Kind == schedule.KindClaimed {
					claimed[fmt.Sprintf("replica-%d", i)] = e.Time
				}
				if e.Target == victim && e.Kind == schedule.KindSucceeded && schedule.TriggerOf(e) != ledger.TriggerCatchUp {
					t.Errorf("the takeover's trigger is %q, want catch-up", schedule.TriggerOf(e))
				}
			}
		}
		if took := claimed[by[1]].Sub(claimed[dead]); took < backfill.DefaultLease {
			t.Errorf("the slot was taken over %v after the dead replica claimed it, before its lease of %v expired", took, backfill.DefaultLease)
		}
		// Every other slot ran once.
		for _, key := range rs.keys() {
			if key != victim && len(rs.of(key)) != 1 {
				t.Errorf("slot %s ran by %v", key, rs.of(key))
			}
		}
		if diff := cmp.Diff([]string{"2026-02-01T00:00Z", "2026-02-01T01:00Z", victim, "2026-02-01T03:00Z", "2026-02-01T04:00Z"}, rs.keys()); diff != "" {
			t.Errorf("slots (-want +got):\n%s", diff)
		}
	})
}
