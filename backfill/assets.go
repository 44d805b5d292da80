package backfill

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/internal/granularities"
	"github.com/tranche-dev/tranche/internal/zone"
	"github.com/tranche-dev/tranche/ledger"
)

// A backfill of a DAG whose assets have several granularities (hourly
// events, a daily rollup, a monthly report) runs each asset's partitions
// on their own, recorded in the ledger under the asset's identity: the
// identity of a DAG of that asset alone, its dependencies beside it only
// to be read (see [AssetPlan]). It runs the assets in waves, an asset
// after every asset it depends on, independent ones at once, each wave
// planned once the one before it ran: a partition runs when every
// partition of its dependencies that it maps to (tranche.Mapping) has
// succeeded; one that needs a partition that has not, and that the
// backfill does not run, is blocked. Each asset's run reads what it
// maps to through tranche.Runner.Read.

// ActionBlocked is the action of an asset's partition in the plan of a
// backfill of several granularities that needs a partition of a
// dependency that has not succeeded and that the backfill does not run
// (outside the window, failed and left alone, blocked in turn):
// [PlanItem.Reason] names it.
const ActionBlocked ledger.Action = "skip: blocked"

// AssetPlan is one asset's part of the plan of a backfill of a DAG of
// several granularities ([Plan.Assets]).
type AssetPlan struct {
	Asset       string
	Granularity tranche.TimeGranularity
	// DAG is the identity under which the ledger records the asset's
	// partitions: that of a DAG of the asset, with its dependencies only
	// read, in the window's zone. DAGName is its name: the DAG's name,
	// "/", and the asset's.
	DAG, DAGName string
	// Counts counts the asset's partitions inside the window (a
	// partition reaching outside it is not the backfill's) by action;
	// Blocked those of ActionBlocked, Stale those an upstream partition
	// materialized after they last ran makes stale, run again or not
	// (see [ledger.RerunStale]).
	Counts         PlanCounts
	Blocked, Stale int
	// States counts the partitions by the state of their latest
	// attempt, StatePending for those never attempted.
	States map[ledger.State]int
	items  []assetItem
}

// assetItem is one partition of an asset's plan.
type assetItem struct {
	p      tranche.TimePartition
	latest *ledger.Attempt
	action ledger.Action
	reason string
	// runs: the backfill runs it, now or once what it waits for ran.
	runs bool
	// wait: a partition it maps to runs in the backfill first.
	wait  bool
	stale bool
}

// assetUnit is one asset of a backfill of several granularities.
type assetUnit struct {
	name  string
	g     tranche.TimeGranularity
	loc   *time.Location
	dag   *tranche.DAG // the asset, and its dependencies as readers
	id    string       // the ledger's key of its partitions
	code  string       // its code version
	level int          // its wave: 0 when it depends on no partitioned asset
	first time.Time    // the start of its first partition; zero for none
	parts []tranche.TimePartition
	index map[int64]int // a partition's start → its place in parts
	deps  []assetDep
}

// key returns the key of u's partition starting at start (Unix seconds).
func (u *assetUnit) key(start int64) string {
	return tranche.PartitionOf(u.g, time.Unix(start, 0).In(u.loc)).Key()
}

// assetDep is a partitioned dependency of an asset unit: the unit and,
// for each of the asset's partitions, those of the dependency it reads.
type assetDep struct {
	unit   int
	mapped [][]int64 // the starts, in Unix seconds: a year of a daily asset reading hours maps to 8,760
}

// checkMixed refuses what a backfill of several granularities cannot
// run: an unpartitioned asset, an asset in another zone than the
// window, chosen partitions, and no way to read what the assets map to.
func (b *Backfill) checkMixed(w tranche.TimePartitionWindow) []error {
	var errs []error
	if len(b.Partitions) > 0 {
		errs = append(errs, errors.New("tranche: backfill: chosen partitions of a DAG of several granularities: give a window, whose partitions of each asset it runs"))
	}
	if b.Runner == nil || b.Runner.Read == nil {
		errs = append(errs, fmt.Errorf("tranche: backfill: DAG %q has assets of several granularities, whose partitions a backfill runs asset by asset, reading the partitions each maps to through Runner.Read; set it to read them from where the destinations wrote them",
			b.DAG.Name))
	}
	for a := range b.DAG.Assets() {
		p := a.Partitioning
		switch {
		case !p.Granularity.IsValid():
			errs = append(errs, fmt.Errorf("tranche: backfill: unpartitioned asset %q would be re-extracted whole by every run; give it a Partitioning or run it outside the backfill", a.Name))
		case p.Location != nil && !zone.Same(p.Location, w.Location()):
			errs = append(errs, fmt.Errorf("tranche: backfill: asset %q follows %v, the window %v", a.Name, p.Location, w.Location()))
		case b.ChunkSize > 1 && !p.AllowWindow:
			errs = append(errs, fmt.Errorf("tranche: backfill: chunk size %d needs window runs, which asset %q does not allow; use chunk size 1", b.ChunkSize, a.Name))
		}
	}
	return errs
}

// assetUnits returns the units of a backfill of several granularities
// over w, in the DAG's order (dependencies first), with their partitions
// inside w and what each maps to.
func (b *Backfill) assetUnits(w tranche.TimePartitionWindow) ([]*assetUnit, error) {
	loc := w.Location()
	var units []*assetUnit
	byName := map[string]int{}
	var read func(context.Context, string, tranche.TimePartition) ([]tranche.Row, error)
	if b.Runner != nil {
		read = b.Runner.Read
	}
	for a := range b.DAG.Assets() {
		u := &assetUnit{name: a.Name, g: a.Partitioning.Granularity, loc: loc, index: map[int64]int{}}
		if !a.Partitioning.First.IsZero() {
			u.first = tranche.PartitionOf(u.g, a.Partitioning.First.In(loc)).Start
		}
		dag, err := AssetDAG(b.DAG, a.Name, read)
		if err != nil {
			return nil, err
		}
		u.dag, u.id, u.code = dag, DAGIdentity(dag, u.g, loc), CodeVersion(dag)
		// Its partitions inside the window, from its first.
		p := tranche.PartitionOf(u.g, w.Start())
		if p.Start.Before(w.Start()) || p.Start.Before(u.first) {
			p = p.Next()
		}
		for ; !p.End.After(w.End()); p = p.Next() {
			if p.Start.Before(u.first) {
				continue
			}
			u.index[p.Start.Unix()] = len(u.parts)
			u.parts = append(u.parts, p)
		}
		for _, d := range a.Deps {
			k := byName[d]
			up := units[k]
			u.level = max(u.level, up.level+1)
			m := a.Mappings[d]
			dep := assetDep{unit: k, mapped: make([][]int64, len(u.parts))}
			for i, p := range u.parts {
				var starts []int64
				eachMapped(m, up.g, up.first, p, func(q tranche.TimePartition) { starts = append(starts, q.Start.Unix()) })
				dep.mapped[i] = slices.Clip(starts)
			}
			u.deps = append(u.deps, dep)
		}
		byName[a.Name] = len(units)
		units = append(units, u)
	}
	return units, nil
}

// AssetDAG returns the DAG under whose identity ([DAGIdentity], at the
// asset's granularity) a backfill of dag, a DAG of several
// granularities, records the partitions of its asset named asset, and
// under which package schedule's Scheduler records them too, so that
// the two share that history: the asset, and its dependencies beside
// it, only read through read, never materialized or written. Its name
// is dag's, "/", and the asset's ("platform/rollup").
func AssetDAG(dag *tranche.DAG, asset string, read func(context.Context, string, tranche.TimePartition) ([]tranche.Row, error)) (*tranche.DAG, error) {
	a, ok := dag.Asset(asset)
	if !ok {
		return nil, fmt.Errorf("tranche: backfill: DAG %q has no asset %q", dag.Name, asset)
	}
	assets := []tranche.Asset{a}
	for _, d := range a.Deps {
		up, _ := dag.Asset(d)
		assets = append(assets, reader(up, read, a.Mappings[d].Offset == 0))
	}
	out, err := tranche.NewDAG(assets...)
	if err != nil {
		return nil, fmt.Errorf("tranche: backfill: asset %q alone: %w", a.Name, err)
	}
	out.Name = dag.Name + "/" + a.Name
	return out, nil
}

// MappedPartitions returns the partitions of granularity g that mapping
// m maps partition d of a dependent asset to, oldest first, in d's zone,
// leaving out those starting before first (the dependency's
// Partitioning.First as the start of its partition; zero for none):
// the partitions a run of d reads, and that must have succeeded before
// a backfill or a scheduler runs it.
func MappedPartitions(m tranche.Mapping, g tranche.TimeGranularity, first time.Time, d tranche.TimePartition) []tranche.TimePartition {
	return mappedPartitions(m, g, first, d)
}

// reader is asset a as the DAG of one of its dependents holds it: only
// read, through read, never materialized or written. A run of the
// dependent's partition runs it for that partition when they share a
// granularity, though the dependent reads it only when its mapping ends
// there (own: Offset 0); otherwise it reads nothing, since that
// partition may not have landed.
func reader(a tranche.Asset, read func(context.Context, string, tranche.TimePartition) ([]tranche.Row, error), own bool) tranche.Asset {
	name := a.Name
	return tranche.Asset{Name: name, Partitioning: a.Partitioning, CodeVersion: a.CodeVersion,
		Materialize: func(ctx context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
			if !own {
				return nil, nil
			}
			if p, err := m.Partition(); err == nil {
				return read(ctx, name, p)
			}
			var rows []tranche.Row
			for p := range m.Window().OldestFirst() {
				r, err := read(ctx, name, p)
				if err != nil {
					return nil, err
				}
				rows = append(rows, r...)
			}
			return rows, nil
		}}
}

// mappedPartitions returns the partitions of granularity g that mapping
// m maps partition d to, oldest first, in d's zone, leaving out those
// before first (a dependency's first partition; zero for none): what
// tranche.Runner gives the asset of d that reads them (the root's
// Mapping documents the rule; TestMappedPartitionsAsRunner holds the two
// together).
func mappedPartitions(m tranche.Mapping, g tranche.TimeGranularity, first time.Time, d tranche.TimePartition) []tranche.TimePartition {
	var out []tranche.TimePartition
	eachMapped(m, g, first, d, func(p tranche.TimePartition) { out = append(out, p) })
	return out
}

// eachMapped calls yield with each partition mappedPartitions returns.
func eachMapped(m tranche.Mapping, g tranche.TimeGranularity, first time.Time, d tranche.TimePartition, yield func(tranche.TimePartition)) {
	lastInstant := d.End.Add(-time.Second)
	var from, to tranche.TimePartition
	if m.Lookback == 0 && m.Offset == 0 {
		from, to = tranche.PartitionOf(g, d.Start), tranche.PartitionOf(g, lastInstant)
	} else {
		to = tranche.PartitionOf(g, lastInstant)
		for range m.Offset {
			to = to.Prev()
		}
		from = to
		for range max(1, m.Lookback) - 1 {
			from = from.Prev()
		}
	}
	for p := from; ; p = p.Next() {
		if !p.Start.Before(first) {
			yield(p)
		}
		if p.Start.Equal(to.Start) {
			return
		}
	}
}

// latestOfUnits reads the latest attempt of each unit's partitions that
// the plan looks at: its own, and those its dependents map to.
func (b *Backfill) latestOfUnits(ctx context.Context, units []*assetUnit) ([]map[int64]*ledger.Attempt, error) {
	from := make([]time.Time, len(units))
	to := make([]time.Time, len(units))
	for i, u := range units {
		if len(u.parts) > 0 {
			from[i], to[i] = u.parts[0].Start, u.parts[len(u.parts)-1].End
		}
	}
	for _, u := range units {
		for _, d := range u.deps {
			for _, ps := range d.mapped {
				if len(ps) == 0 {
					continue
				}
				if s := time.Unix(ps[0], 0); from[d.unit].IsZero() || s.Before(from[d.unit]) {
					from[d.unit] = s
				}
				// Latest reads the partitions starting before to.
				if e := time.Unix(ps[len(ps)-1]+1, 0); e.After(to[d.unit]) {
					to[d.unit] = e
				}
			}
		}
	}
	out := make([]map[int64]*ledger.Attempt, len(units))
	for i, u := range units {
		out[i] = map[int64]*ledger.Attempt{}
		if from[i].IsZero() {
			continue
		}
		for a, err := range b.reader().Latest(ctx, u.id, from[i], to[i]) {
			if err != nil {
				return nil, fmt.Errorf("tranche: reading the attempts of asset %q: %w", u.name, err)
			}
			out[i][a.Start.Unix()] = &a
		}
	}
	return out, nil
}

// planUnits decides, for each partition of each unit, what the backfill
// does with it as the ledger stands now, dependencies first: a partition
// that maps to one the backfill runs waits for it, unless that one's
// wave (a level below wave) has run already.
func (b *Backfill) planUnits(ctx context.Context, cfg *config, units []*assetUnit, wave int) ([]AssetPlan, error) {
	latest, err := b.latestOfUnits(ctx, units)
	if err != nil {
		return nil, err
	}
	now := b.now()
	plans := make([]AssetPlan, len(units))
	for i, u := range units {
		ap := &plans[i]
		*ap = AssetPlan{Asset: u.name, Granularity: u.g, DAG: u.id, DAGName: u.dag.Name, items: make([]assetItem, len(u.parts)),
			States: map[ledger.State]int{}}
		ap.Counts.Total = len(u.parts)
		for k, p := range u.parts {
			it := &ap.items[k]
			it.p, it.latest = p, latest[i][p.Start.Unix()]
			b.judgeItem(cfg, units, plans, latest, i, k, it, now, wave)
			if it.latest == nil {
				ap.States[ledger.StatePending]++
			} else {
				ap.States[it.latest.State]++
			}
			switch {
			case it.action == ActionBlocked:
				ap.Blocked++
			case it.runs:
				ap.Counts.Run++
				ap.Counts.Runs++
			case it.action == ledger.ActionSkipRunning:
				ap.Counts.SkipRunning++
			case it.action == ledger.ActionSkipRecorded:
				ap.Counts.SkipRecorded++
			default:
				ap.Counts.SkipSucceeded++
			}
			if it.stale {
				ap.Stale++
			}
		}
	}
	return plans, nil
}

// judgeItem decides partition k of unit i, in the plan of wave.
func (b *Backfill) judgeItem(cfg *config, units []*assetUnit, plans []AssetPlan, latest []map[int64]*ledger.Attempt, i, k int, it *assetItem, now time.Time, wave int) {
	u := units[i]
	own := it.latest
	var waitFor, missing string
	stale := granularities.NewStale(own)
	for _, d := range u.deps {
		up := units[d.unit]
		for _, q := range d.mapped[k] {
			// A wave that ran already runs nothing more: what it left
			// (failed, or judged again to run under RerunAll) is read
			// from the ledger below.
			if j, ok := up.index[q]; ok && plans[d.unit].items[j].runs && up.level >= wave {
				if waitFor == "" {
					waitFor = up.name + " " + up.key(q)
				}
				continue
			}
			a := latest[d.unit][q]
			if a == nil || a.State != ledger.StateSucceeded {
				if missing == "" {
					why := "outside the window"
					if j, ok := up.index[q]; ok {
						why = string(plans[d.unit].items[j].action)
					}
					state := "never run"
					if a != nil {
						state = string(a.State)
					}
					missing = fmt.Sprintf("needs %s %s (%s; %s)", up.name, up.key(q), state, why)
				}
				continue
			}
			if stale.Newer(a) {
				stale.Name(up.name, up.key(q))
			}
		}
	}
	switch {
	case missing != "" && waitFor == "":
		it.action, it.reason = ActionBlocked, missing
		return
	case missing != "":
		it.action, it.reason = ActionBlocked, missing+"; after "+waitFor
		return
	}
	if own != nil && own.State == ledger.StateRunning && own.LeaseUntil.After(now) {
		it.action = ledger.ActionSkipRunning
		return
	}
	it.action = ledger.ActionRun
	switch {
	case own == nil:
		it.reason = "pending"
	case own.State == ledger.StateRunning:
		it.reason = "lease expired: take over"
	case own.State != ledger.StateSucceeded && cfg.rerun == ledger.RerunNone:
		it.action = ledger.ActionSkipRecorded
	case own.State != ledger.StateSucceeded:
		it.reason = string(own.State)
	case stale.Why() != "":
		it.stale, it.reason = true, stale.Why()
	case waitFor != "":
		it.stale, it.reason = true, "stale: upstream "+waitFor+" runs again first"
	case cfg.rerun == ledger.RerunStale && own.CodeVersion != u.code:
		it.reason = fmt.Sprintf("stale: code version %q, now %q", own.CodeVersion, u.code)
	case cfg.rerun == ledger.RerunAll:
		it.reason = "rerun all"
	default:
		it.action = ledger.ActionSkipSucceeded
	}
	if it.stale && cfg.rerun != ledger.RerunStale && cfg.rerun != ledger.RerunAll {
		it.action = ledger.ActionSkipSucceeded
	}
	if it.action == ledger.ActionRun {
		it.runs, it.wait = true, waitFor != ""
		if it.wait && !strings.Contains(it.reason, waitFor) {
			it.reason += "; after " + waitFor
		}
	}
}

// AssetsOf returns, for a DAG of several granularities, the window its
// assets' recorded backfills cover (the span from the first's start to
// the last's end, in its finest granularity) and each asset's partitions
// inside it as the ledger stands at now: their latest states
// (AssetPlan.States), and those a backfill under the default rerun
// policy would find blocked and stale. It returns a zero window and no
// plans when no backfill of its assets is recorded. It reads only: no
// Runner is needed.
func AssetsOf(ctx context.Context, l ledger.Reader, dag *tranche.DAG, now time.Time) (tranche.TimePartitionWindow, []AssetPlan, error) {
	g, loc, err := PartitioningOf(dag)
	if err != nil {
		return tranche.TimePartitionWindow{}, nil, err
	}
	b := &Backfill{DAG: dag, reads: l, Now: func() time.Time { return now }}
	w, err := tranche.NewTimePartitionWindow(g, now.In(loc), now.In(loc))
	if err != nil {
		return tranche.TimePartitionWindow{}, nil, err
	}
	units, err := b.assetUnits(w)
	if err != nil {
		return tranche.TimePartitionWindow{}, nil, err
	}
	ids := map[string]bool{}
	for _, u := range units {
		ids[u.id] = true
	}
	records, err := l.Backfills(ctx)
	if err != nil {
		return tranche.TimePartitionWindow{}, nil, err
	}
	var from, to time.Time
	for _, r := range records {
		rw, err := tranche.ParseTimePartitionWindow(r.Window)
		if !ids[r.DAG] || err != nil {
			continue
		}
		if from.IsZero() || rw.Start().Before(from) {
			from = rw.Start()
		}
		if rw.End().After(to) {
			to = rw.End()
		}
	}
	if from.IsZero() {
		return tranche.TimePartitionWindow{}, nil, nil
	}
	if w, err = tranche.WindowBetween(g, from.In(loc), to.In(loc)); err != nil {
		return tranche.TimePartitionWindow{}, nil, err
	}
	if units, err = b.assetUnits(w); err != nil {
		return tranche.TimePartitionWindow{}, nil, err
	}
	plans, err := b.planUnits(ctx, &config{rerun: ledger.RerunFailed}, units, 0)
	return w, plans, err
}

// planMixed is the plan of a backfill of several granularities.
func (b *Backfill) planMixed(ctx context.Context, cfg *config) (*Plan, error) {
	units, err := b.assetUnits(cfg.window)
	if err != nil {
		return nil, err
	}
	plans, err := b.planUnits(ctx, cfg, units, 0)
	if err != nil {
		return nil, err
	}
	p := &Plan{
		Backfill: cfg.id, DAG: cfg.dag, DAGName: b.DAG.Name, Window: cfg.window, ChunkSize: cfg.chunk, Order: b.Order,
		Rerun: cfg.rerun, OnFailure: cfg.onFailure, Concurrency: cfg.concurrency, Created: b.now(), backfill: b,
		Assets: plans,
	}
	p.Counts = sumCounts(plans)
	if p.Counts.Run == 0 {
		p.Warnings = append(p.Warnings, "nothing to run")
	}
	return p, nil
}

// sumCounts sums the counts of the assets' plans.
func sumCounts(plans []AssetPlan) PlanCounts {
	var c PlanCounts
	for _, ap := range plans {
		c.Total += ap.Counts.Total
		c.Run += ap.Counts.Run
		c.Runs += ap.Counts.Runs
		c.SkipSucceeded += ap.Counts.SkipSucceeded
		c.SkipRunning += ap.Counts.SkipRunning
		c.SkipRecorded += ap.Counts.SkipRecorded
	}
	return c
}

// runMixed runs a backfill of several granularities wave by wave, each
// wave's assets at once, each planned once the waves before it ran.
func (b *Backfill) runMixed(ctx context.Context, cfg *config, resume bool) (*Report, error) {
	start := time.Now()
	units, err := b.assetUnits(cfg.window)
	if err != nil {
		return nil, err
	}
	report := &Report{Backfill: cfg.id, Worker: cfg.worker}
	var firstPlan *Plan
	var hookMu sync.Mutex
	onEvent := b.OnEvent
	if onEvent != nil {
		// Assets of one wave run at once; the hook sees one event at a
		// time, as the contract says.
		onEvent = func(ctx context.Context, e tranche.Event) {
			hookMu.Lock()
			defer hookMu.Unlock()
			b.OnEvent(ctx, e)
		}
	}
	levels := 0
	for _, u := range units {
		levels = max(levels, u.level+1)
	}
	reports := make([]*AssetReport, len(units))
	var errs []error
	stopped := false
	for level := range levels {
		if ctx.Err() != nil {
			// Not planned, which reads the ledger under ctx: the assets
			// of the waves left are counted not run.
			break
		}
		plans, err := b.planUnits(ctx, cfg, units, level)
		if err != nil {
			return nil, err
		}
		if firstPlan == nil {
			firstPlan = &Plan{Backfill: cfg.id, DAG: cfg.dag, DAGName: b.DAG.Name, Window: cfg.window, ChunkSize: cfg.chunk, Order: b.Order,
				Rerun: cfg.rerun, OnFailure: cfg.onFailure, Concurrency: cfg.concurrency, Created: b.now(), Counts: sumCounts(plans),
				Assets: plans, backfill: b}
			if firstPlan.Counts.Run > 0 {
				if err := b.recordAssets(ctx, cfg, units, resume); errors.Is(err, ErrBackfillCanceled) {
					errs, stopped = append(errs, err), true
				} else if err != nil {
					return nil, err
				}
			}
		}
		var g errgroup.Group
		var mu sync.Mutex
		canceled := false
		for i, u := range units {
			if u.level != level {
				continue
			}
			ar := &AssetReport{Asset: u.name, DAG: u.id, Plan: &plans[i]}
			reports[i] = ar
			if stopped {
				continue
			}
			child := b.assetBackfill(cfg, u, &plans[i], onEvent)
			if child == nil {
				continue
			}
			g.Go(func() error {
				var r *Report
				var err error
				if resume {
					r, err = child.Resume(ctx)
				} else {
					r, err = child.Run(ctx)
				}
				mu.Lock()
				defer mu.Unlock()
				ar.Report = r
				if err != nil {
					errs = append(errs, fmt.Errorf("tranche: backfill of asset %q: %w", u.name, err))
				}
				// Canceled in the ledger, as an operator cancels the
				// backfill they see running: the waves after it start
				// nothing either.
				canceled = canceled || errors.Is(err, ErrBackfillCanceled)
				return nil
			})
		}
		_ = g.Wait()
		stopped = stopped || canceled
		for _, ar := range reports {
			if ar != nil && ar.Report != nil && ar.Report.Failed > 0 && cfg.onFailure == tranche.FailStop {
				stopped = true
			}
		}
	}
	for i, ar := range reports {
		if ar == nil {
			ar = &AssetReport{Asset: units[i].name, DAG: units[i].id}
		}
		report.add(ar, len(units[i].parts))
		report.Assets = append(report.Assets, *ar)
	}
	report.Plan = firstPlan
	report.Duration = time.Since(start)
	if len(errs) > 0 {
		return report, errors.Join(errs...)
	}
	if ctx.Err() != nil && report.NotRun > 0 {
		// Between two waves: no asset's backfill saw it.
		return report, fmt.Errorf("tranche: backfill %s canceled: %w", cfg.id, context.Cause(ctx))
	}
	if report.Failed > 0 {
		return report, fmt.Errorf("tranche: backfill %s: %d asset partitions failed", cfg.id, report.Failed)
	}
	return report, nil
}

// assetBackfill returns the backfill of unit u's partitions that plan
// runs now (those that wait for nothing), or nil for none: of its whole
// window under the backfill's rerun policy when that runs them, so that
// running it again resumes the same backfill, or else of those chosen.
func (b *Backfill) assetBackfill(cfg *config, u *assetUnit, plan *AssetPlan, onEvent func(context.Context, tranche.Event)) *Backfill {
	var run []tranche.TimePartition
	whole := cfg.rerun != ledger.RerunStale
	for _, it := range plan.items {
		switch {
		case it.runs && !it.wait:
			run = append(run, it.p)
		case it.action != ledger.ActionSkipSucceeded:
			whole = false // blocked, waiting, held, or left alone: chosen
		}
	}
	if len(run) == 0 {
		return nil
	}
	child := &Backfill{
		DAG: u.dag, Ledger: b.Ledger, Runner: b.Runner, Worker: cfg.worker, Concurrency: b.Concurrency,
		Budget: b.Budget, ChunkSize: b.ChunkSize, Order: b.Order, Rerun: ledger.RerunAll, OnFailure: b.OnFailure,
		Lease: b.Lease, Heartbeat: b.Heartbeat, MaxPartitions: b.MaxPartitions, StopOnCancel: b.StopOnCancel,
		WaitForOthers: true, OnEvent: onEvent, Now: b.Now, only: u.name, id: assetBackfillID(cfg.id, u.name),
	}
	if whole {
		w, err := tranche.NewTimePartitionWindow(u.g, u.parts[0].Start, u.parts[len(u.parts)-1].Start)
		if err == nil {
			child.Window, child.Rerun = w, cfg.rerun
			return child
		}
	}
	child.Partitions = run
	return child
}

// AssetReport is what a backfill of several granularities did with one
// asset ([Report.Assets]).
type AssetReport struct {
	Asset string
	DAG   string // the identity under which the ledger records its partitions
	// Plan is the asset's plan as the backfill planned its wave: nil
	// when its context ended before.
	Plan *AssetPlan
	// Report is that of the asset's own backfill: nil when none of its
	// partitions was to run.
	Report *Report
}

// add counts an asset's report, of total partitions, into r.
func (r *Report) add(ar *AssetReport, total int) {
	r.Total += total
	if ar.Report == nil {
		if ar.Plan != nil {
			r.Skipped += ar.Plan.Counts.SkipSucceeded + ar.Plan.Counts.SkipRecorded
			r.Held += ar.Plan.Counts.SkipRunning
			r.NotRun += total - ar.Plan.Counts.SkipSucceeded - ar.Plan.Counts.SkipRecorded - ar.Plan.Counts.SkipRunning
		} else {
			r.NotRun += total
		}
		return
	}
	c := ar.Report
	r.Succeeded += c.Succeeded
	r.Failed += c.Failed
	r.Skipped += c.Skipped
	r.Superseded += c.Superseded
	r.Elsewhere += c.Elsewhere
	r.Held += c.Held
	r.NotRun += c.NotRun
	r.Unclaimed += c.Unclaimed
	// What its own backfill did not cover: skipped by the plan, or
	// blocked.
	if rest := total - c.Total; rest > 0 {
		skipped := 0
		if c.Plan == nil || !c.Plan.Chosen {
			skipped = rest // a window's: every partition is in it
		} else {
			for _, it := range ar.Plan.items {
				if !it.runs && it.action != ActionBlocked && it.action != ledger.ActionSkipRunning {
					skipped++
				}
			}
		}
		r.Skipped += skipped
		r.NotRun += rest - skipped
	}
	for _, f := range c.Failures {
		r.Failures = append(r.Failures, Failure{Key: ar.Asset + " " + f.Key, Err: f.Err})
	}
	for _, f := range c.ClaimFailures {
		r.ClaimFailures = append(r.ClaimFailures, Failure{Key: ar.Asset + " " + f.Key, Err: f.Err})
	}
	if c.HookErr != nil {
		r.HookErr = errors.Join(r.HookErr, c.HookErr)
	}
}

// mixedItems yields the partitions of a plan of several granularities,
// asset by asset in the DAG's order, each oldest first.
func (p *Plan) mixedItems(yield func(PlanItem, error) bool) {
	for _, ap := range p.Assets {
		for _, it := range ap.items {
			w, _ := tranche.NewTimePartitionWindow(it.p.Granularity, it.p.Start, it.p.Start)
			if !yield(PlanItem{Asset: ap.Asset, Partition: it.p, Action: it.action, Reason: it.reason, Latest: it.latest, Chunk: w}, nil) {
				return
			}
		}
	}
}

// mixedText writes the per-asset summary lines of a plan of several
// granularities.
func (p *Plan) mixedText(b *strings.Builder) {
	for _, ap := range p.Assets {
		fmt.Fprintf(b, "  asset       %s (%v, %s): %d partitions: run %d, skip: succeeded %d, running elsewhere %d, recorded %d; blocked %d; stale %d\n",
			ap.Asset, ap.Granularity, ap.DAG, ap.Counts.Total, ap.Counts.Run, ap.Counts.SkipSucceeded, ap.Counts.SkipRunning, ap.Counts.SkipRecorded, ap.Blocked, ap.Stale)
	}
}

// mixedLine is the start of an item's line in a plan's text: its asset
// and two spaces, or "" for a DAG of one granularity.
func mixedLine(it PlanItem) string {
	if it.Asset == "" {
		return ""
	}
	return it.Asset + "  "
}

// reasonText is the end of an item's line in a plan's text: its reason
// in brackets, or "".
func reasonText(it PlanItem) string {
	if it.Reason == "" {
		return ""
	}
	return "  [" + it.Reason + "]"
}
