package backfill

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/internal/granularities"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/memledger"
)

// TestMixedPlanAsModel holds the plan of a backfill of several
// granularities (briefs in arrays over each asset's span, reasons made
// when read) to a plain model of its rules (every latest attempt whole,
// in maps, each mapping's partitions listed by mappedPartitions, stale
// ones found by internal/granularities.Stale, the scheduler's rule: the
// plan as it was first written), item by item, action and reason, for random
// ledgers of the DAG of issue 32 around New York's spring transition:
// each asset partition never run, succeeded, failed or running under a
// live or expired lease, at random instants and code versions, under
// every rerun policy.
func TestMixedPlanAsModel(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	noop := func(context.Context, *tranche.Materialization) ([]tranche.Row, error) { return nil, nil }
	part := func(g tranche.TimeGranularity) tranche.Partitioning {
		return tranche.Partitioning{Granularity: g, Location: ny}
	}
	dag, err := tranche.NewDAG(
		tranche.Asset{Name: "events", Partitioning: part(tranche.Hour), Materialize: noop},
		tranche.Asset{Name: "rollup", Deps: []string{"events"}, Partitioning: part(tranche.Day), Materialize: noop},
		tranche.Asset{Name: "report", Deps: []string{"rollup"}, Partitioning: part(tranche.Month), Materialize: noop},
		tranche.Asset{Name: "model", Deps: []string{"rollup"}, Partitioning: part(tranche.Day), Materialize: noop,
			Mappings: map[string]tranche.Mapping{"rollup": {Lookback: 7, Offset: 1}}},
	)
	if err != nil {
		t.Fatal(err)
	}
	dag.Name = "platform"
	read := func(context.Context, string, tranche.TimePartition) ([]tranche.Row, error) { return nil, nil }
	window, err := tranche.NewTimePartitionWindow(tranche.Day, time.Date(2026, 3, 1, 0, 0, 0, 0, ny), time.Date(2026, 3, 31, 0, 0, 0, 0, ny))
	if err != nil {
		t.Fatal(err)
	}
	base := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	rapid.Check(t, func(rt *rapid.T) {
		rng := rand.New(rand.NewPCG(rapid.Uint64().Draw(rt, "seed"), 1))
		// How often each partition is left alone, failed, running.
		never, failed, running := rng.IntN(4), rng.IntN(3), rng.IntN(2)
		var clock time.Time
		l := memledger.New(func() time.Time { return clock })
		ctx := context.Background()
		for a := range dag.Assets() {
			ad, err := AssetDAG(dag, a.Name, read)
			if err != nil {
				rt.Fatal(err)
			}
			g := a.Partitioning.Granularity
			id := DAGIdentity(ad, g, ny)
			// Records from before the window, which the model reads
			// through, to after it.
			w, err := tranche.NewTimePartitionWindow(g, time.Date(2026, 2, 15, 0, 0, 0, 0, ny), time.Date(2026, 4, 3, 0, 0, 0, 0, ny))
			if err != nil {
				rt.Fatal(err)
			}
			for p := range w.OldestFirst() {
				if rng.IntN(10) < never {
					continue
				}
				clock = base.Add(time.Duration(rng.IntN(4*3600)) * time.Second)
				version := CodeVersion(ad)
				if rng.IntN(8) == 0 {
					version = "old"
				}
				lease, err := l.Claim(ctx, ledger.ClaimRequest{DAG: id, Worker: "w", RunID: "r", Partitions: []tranche.TimePartition{p},
					Lease: time.Duration(1+rng.IntN(3600)) * time.Second, Policy: ledger.RerunAll, Revision: 1 << 40, CodeVersion: version})
				if err != nil {
					rt.Fatal(err)
				}
				if rng.IntN(20) < running {
					continue
				}
				clock = clock.Add(time.Duration(1+rng.IntN(600)) * time.Second)
				state := ledger.StateSucceeded
				if rng.IntN(10) < failed {
					state = ledger.StateFailed
				}
				if err := l.Finish(ctx, lease, []ledger.Outcome{{State: state}}); err != nil {
					rt.Fatal(err)
				}
			}
		}
		clock = base.Add(time.Duration(rng.IntN(5*3600)) * time.Second)
		rerun := rapid.SampledFrom([]ledger.RerunPolicy{ledger.RerunFailed, ledger.RerunNone, ledger.RerunAll, ledger.RerunStale}).Draw(rt, "rerun")
		b := &Backfill{DAG: dag, Window: window, Ledger: l, Rerun: rerun, Runner: &tranche.Runner{Read: read}, Now: func() time.Time { return clock }}
		plan, err := b.Plan(ctx)
		if err != nil {
			rt.Fatal(err)
		}
		var got []string
		for it, err := range plan.Items(ctx) {
			if err != nil {
				rt.Fatal(err)
			}
			got = append(got, fmt.Sprintf("%s %s %s [%s]", it.Asset, it.Partition.Key(), it.Action, it.Reason))
		}
		want := modelPlan(rt, b, window, rerun)
		if g, w := strings.Join(got, "\n"), strings.Join(want, "\n"); g != w {
			for k := range min(len(got), len(want)) {
				if got[k] != want[k] {
					rt.Fatalf("item %d: the plan says\n  %s\nthe model\n  %s", k, got[k], want[k])
				}
			}
			rt.Fatalf("the plan has %d items, the model %d", len(got), len(want))
		}
	})
}

// modelPlan is the plan of a backfill of several granularities by its
// rules written plainly, each item "asset key action [reason]", asset by
// asset, oldest first.
func modelPlan(t *rapid.T, b *Backfill, w tranche.TimePartitionWindow, rerun ledger.RerunPolicy) []string {
	ctx := context.Background()
	loc := w.Location()
	now := b.now()
	type item struct {
		p                 tranche.TimePartition
		latest            *ledger.Attempt
		action            ledger.Action
		reason            string
		runs, wait, stale bool
	}
	type unit struct {
		name   string
		g      tranche.TimeGranularity
		code   string
		level  int
		first  time.Time
		parts  []tranche.TimePartition
		index  map[int64]int
		deps   []int
		mapped [][][]int64 // by dependency, by partition
		latest map[int64]*ledger.Attempt
		items  []item
	}
	var units []*unit
	byName := map[string]int{}
	for a := range b.DAG.Assets() {
		u := &unit{name: a.Name, g: a.Partitioning.Granularity, index: map[int64]int{}, latest: map[int64]*ledger.Attempt{}}
		ad, err := AssetDAG(b.DAG, a.Name, nil)
		if err != nil {
			t.Fatal(err)
		}
		u.code = CodeVersion(ad)
		p := tranche.PartitionOf(u.g, w.Start())
		if p.Start.Before(w.Start()) {
			p = p.Next()
		}
		for ; !p.End.After(w.End()); p = p.Next() {
			u.index[p.Start.Unix()] = len(u.parts)
			u.parts = append(u.parts, p)
		}
		for _, d := range a.Deps {
			k := byName[d]
			up := units[k]
			u.level = max(u.level, up.level+1)
			u.deps = append(u.deps, k)
			var m [][]int64
			for _, p := range u.parts {
				var starts []int64
				for _, q := range mappedPartitions(a.Mappings[d], up.g, up.first, p) {
					starts = append(starts, q.Start.Unix())
				}
				m = append(m, starts)
			}
			u.mapped = append(u.mapped, m)
		}
		byName[a.Name] = len(units)
		units = append(units, u)
		for att, err := range b.Ledger.Latest(ctx, DAGIdentity(ad, u.g, loc), w.Start().AddDate(0, -1, 0), w.End().AddDate(0, 1, 0)) {
			if err != nil {
				t.Fatal(err)
			}
			u.latest[att.Start.Unix()] = &att
		}
	}
	key := func(u *unit, s int64) string { return tranche.PartitionOf(u.g, time.Unix(s, 0).In(loc)).Key() }
	var out []string
	for _, u := range units {
		u.items = make([]item, len(u.parts))
		for k, p := range u.parts {
			it := &u.items[k]
			it.p, it.latest = p, u.latest[p.Start.Unix()]
			own := it.latest
			var waitFor, missing string
			// The scheduler's staleness rule: the plan's, in arrays, must
			// agree with it.
			stale := granularities.NewStale(own)
			for di, dk := range u.deps {
				up := units[dk]
				for _, q := range u.mapped[di][k] {
					if j, ok := up.index[q]; ok && up.items[j].runs {
						if waitFor == "" {
							waitFor = up.name + " " + key(up, q)
						}
						continue
					}
					a := up.latest[q]
					if a == nil || a.State != ledger.StateSucceeded {
						if missing == "" {
							why := "outside the window"
							if j, ok := up.index[q]; ok {
								why = string(up.items[j].action)
							}
							state := "never run"
							if a != nil {
								state = string(a.State)
							}
							missing = fmt.Sprintf("needs %s %s (%s; %s)", up.name, key(up, q), state, why)
						}
						continue
					}
					if stale.Newer(a) {
						stale.Name(up.name, key(up, q))
					}
				}
			}
			switch {
			case missing != "" && waitFor == "":
				it.action, it.reason = ActionBlocked, missing
			case missing != "":
				it.action, it.reason = ActionBlocked, missing+"; after "+waitFor
			case own != nil && own.State == ledger.StateRunning && own.LeaseUntil.After(now):
				it.action = ledger.ActionSkipRunning
			default:
				it.action = ledger.ActionRun
				switch {
				case own == nil:
					it.reason = "pending"
				case own.State == ledger.StateRunning:
					it.reason = "lease expired: take over"
				case own.State != ledger.StateSucceeded && rerun == ledger.RerunNone:
					it.action = ledger.ActionSkipRecorded
				case own.State != ledger.StateSucceeded:
					it.reason = string(own.State)
				case stale.Why() != "":
					it.stale, it.reason = true, stale.Why()
				case waitFor != "":
					it.stale, it.reason = true, "stale: upstream "+waitFor+" runs again first"
				case rerun == ledger.RerunStale && own.CodeVersion != u.code:
					it.reason = fmt.Sprintf("stale: code version %q, now %q", own.CodeVersion, u.code)
				case rerun == ledger.RerunAll:
					it.reason = "rerun all"
				default:
					it.action = ledger.ActionSkipSucceeded
				}
				if it.stale && rerun != ledger.RerunStale && rerun != ledger.RerunAll {
					it.action = ledger.ActionSkipSucceeded
				}
				if it.action == ledger.ActionRun {
					it.runs, it.wait = true, waitFor != ""
					if it.wait && !strings.Contains(it.reason, waitFor) {
						it.reason += "; after " + waitFor
					}
				}
			}
			out = append(out, fmt.Sprintf("%s %s %s [%s]", u.name, p.Key(), it.action, it.reason))
		}
	}
	return out
}
