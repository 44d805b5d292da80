// Package assettest is the DAG of several granularities of issue 32 (hourly
// events, a daily rollup, a monthly report, a seven-day model, in New
// York) and the checks of its backfills that every ledger passes: each
// asset's partitions run once, in dependency order, rerun when they
// failed and when what they read was materialized again.
package assettest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/ledger"
)

// Platform is the DAG of issue 32 in New York: hourly events, a daily
// rollup of each day's hours, a monthly report of each month's days,
// and a daily model of the seven days before its own, all from March
// 2026, over a MemoryDestination that Runner.Read reads back. It
// records every call of every asset's Materialize in order, and checks,
// in every read, that the ledger holds the partition read succeeded.
type Platform struct {
	t       testing.TB
	dag     *tranche.DAG
	ledger  ledger.Ledger
	out     *tranche.MemoryDestination
	NY      *time.Location // the zone of every asset
	mu      sync.Mutex
	calls   []string          // "asset key", in the order the calls began
	fail    map[string]bool   // "asset key" to fail
	ids     map[string]string // asset → the identity of its records, once planned
	readBad []string          // reads of a partition the ledger does not hold succeeded
	clock   atomic.Int64      // the ledger's clock, in ms: a millisecond a reading
	runner  *tranche.Runner   // reads through out
}

// NewLedger returns a ledger whose clock is now.
type NewLedger func(t testing.TB, now func() time.Time) ledger.Ledger

// New returns the platform over a ledger of newLedger whose clock moves a
// millisecond at each reading, so that an attempt's start and a
// rematerialization's end never share one.
func New(t testing.TB, newLedger NewLedger) *Platform {
	t.Helper()
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	p := &Platform{t: t, NY: ny, out: new(tranche.MemoryDestination), fail: map[string]bool{}}
	p.clock.Store(time.Date(2026, 4, 1, 12, 0, 0, 0, time.UTC).UnixMilli())
	p.ledger = newLedger(t, func() time.Time { return time.UnixMilli(p.clock.Add(1)) })
	first := time.Date(2026, 3, 1, 0, 0, 0, 0, ny)
	part := func(g tranche.TimeGranularity) tranche.Partitioning {
		return tranche.Partitioning{Granularity: g, Location: ny, First: first, Column: "at"}
	}
	out := []tranche.Destination{p.out}
	mat := func(name string) func(context.Context, *tranche.Materialization) ([]tranche.Row, error) {
		return func(_ context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
			q, err := m.Partition()
			if err != nil {
				return nil, err
			}
			call := name + " " + q.Key()
			p.mu.Lock()
			p.calls = append(p.calls, call)
			fail := p.fail[call]
			p.mu.Unlock()
			if fail {
				return nil, fmt.Errorf("%s fails", call)
			}
			n := 1
			for _, dep := range []string{"events", "rollup"} {
				if in, err := m.Inputs(dep); err == nil {
					n = 0
					for _, b := range in {
						for _, r := range b.Rows {
							n += r["n"].(int)
						}
					}
				}
			}
			return []tranche.Row{{"at": q.Start, "n": n}}, nil
		}
	}
	p.dag, err = tranche.NewDAG(
		tranche.Asset{Name: "events", Partitioning: part(tranche.Hour), Destinations: out, Materialize: mat("events")},
		tranche.Asset{Name: "rollup", Deps: []string{"events"}, Partitioning: part(tranche.Day), Destinations: out, Materialize: mat("rollup")},
		tranche.Asset{Name: "report", Deps: []string{"rollup"}, Partitioning: part(tranche.Month), Destinations: out, Materialize: mat("report")},
		tranche.Asset{Name: "model", Deps: []string{"rollup"}, Partitioning: part(tranche.Day), Destinations: out, Materialize: mat("model"),
			Mappings: map[string]tranche.Mapping{"rollup": {Lookback: 7, Offset: 1}}},
	)
	if err != nil {
		t.Fatal(err)
	}
	p.dag.Name = "platform"
	p.runner = &tranche.Runner{Read: func(ctx context.Context, asset string, q tranche.TimePartition) ([]tranche.Row, error) {
		p.mu.Lock()
		id := p.ids[asset]
		p.mu.Unlock()
		h, err := p.ledger.History(ctx, id, q.Start)
		if err != nil {
			return nil, err
		}
		if len(h) == 0 || h[len(h)-1].State != ledger.StateSucceeded {
			p.mu.Lock()
			p.readBad = append(p.readBad, asset+" "+q.Key())
			p.mu.Unlock()
		}
		rows, ok := p.out.Rows(asset, q.Key())
		if !ok {
			return nil, fmt.Errorf("%s %s not landed", asset, q.Key())
		}
		return rows, nil
	}}
	return p
}

// backfill returns a backfill of the platform over the days from to to,
// both included, and learns the identities of the assets' records.
func (p *Platform) backfill(g tranche.TimeGranularity, from, to time.Time, rerun ledger.RerunPolicy) *backfill.Backfill {
	p.t.Helper()
	w, err := tranche.NewTimePartitionWindow(g, from, to)
	if err != nil {
		p.t.Fatal(err)
	}
	return p.Backfill(w, rerun)
}

// Backfill returns a backfill of the platform over w, by worker w1, 4
// partitions at a time, going on after failures, and learns the
// identities of the assets' records (which its reads check).
func (p *Platform) Backfill(w tranche.TimePartitionWindow, rerun ledger.RerunPolicy) *backfill.Backfill {
	p.t.Helper()
	b := &backfill.Backfill{DAG: p.dag, Window: w, Ledger: p.ledger, Runner: p.runner, Rerun: rerun, Concurrency: 4,
		OnFailure: tranche.FailContinue, Worker: "w1"}
	plan, err := b.Plan(context.Background())
	if err != nil {
		p.t.Fatal(err)
	}
	p.mu.Lock()
	p.ids = map[string]string{}
	for _, ap := range plan.Assets {
		p.ids[ap.Asset] = ap.DAG
	}
	p.mu.Unlock()
	return b
}

func (p *Platform) march(rerun ledger.RerunPolicy) *backfill.Backfill {
	return p.backfill(tranche.Day, time.Date(2026, 3, 1, 0, 0, 0, 0, p.NY), time.Date(2026, 3, 31, 0, 0, 0, 0, p.NY), rerun)
}

// takeCalls returns the calls since the last, sorted, and forgets them.
func (p *Platform) takeCalls() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	calls := p.calls
	p.calls = nil
	return calls
}

func count(calls []string, prefix string) int {
	n := 0
	for _, c := range calls {
		if strings.HasPrefix(c, prefix) {
			n++
		}
	}
	return n
}

// DAG returns the platform's DAG, named "platform".
func (p *Platform) DAG() *tranche.DAG { return p.dag }

// Runner returns the runner that reads the platform's partitions back.
func (p *Platform) Runner() *tranche.Runner { return p.runner }

// Ledger returns the platform's ledger.
func (p *Platform) Ledger() ledger.Ledger { return p.ledger }
