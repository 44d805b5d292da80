package backfill

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/tranche-dev/tranche"
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
	// set is the plan of every asset, which the reasons of items read.
	set *unitPlans
	i   int // the asset's place in set
}

// assetItem is one partition of an asset's plan: its action, and the
// partitions of its dependencies that its reason names, the reason's
// words made only when read (reason), since a status of a million
// partitions reads none.
type assetItem struct {
	action ledger.Action
	why    reasonKind
	// runs: the backfill runs it, now or once what it waits for ran.
	runs bool
	// wait: a partition it maps to runs in the backfill first.
	wait  bool
	stale bool
	// missing, waitFor and newer: the first mapped partition that has
	// not succeeded and does not run, the first that runs first, and the
	// one that succeeded last after the partition's own success began.
	missing, waitFor, newer unitRef
}

// reasonKind is the kind of an item's reason.
type reasonKind uint8

const (
	reasonNone reasonKind = iota
	reasonBlocked
	reasonPending
	reasonTakeover
	reasonState   // its latest attempt's state: failed, canceled
	reasonNewer   // an upstream partition succeeded after it
	reasonWaiting // stale: an upstream partition runs again first
	reasonVersion
	reasonAll
)

// unitRef names a partition of a unit: its place in the unit's span;
// unit -1 names none.
type unitRef struct{ unit, at int32 }

var noRef = unitRef{unit: -1}

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
	// window holds its partitions inside the backfill's window, from
	// its first; n counts them (the window is zero for none).
	window tranche.TimePartitionWindow
	n      int
	// span holds the starts (Unix seconds) of the consecutive partitions
	// the plan reads of it: its own, span[own:own+n], and those its
	// dependents map to, which may reach outside the window.
	span []int64
	own  int
	deps []assetDep
}

// key returns the key of u's partition starting at start (Unix seconds).
func (u *assetUnit) key(start int64) string {
	return tranche.PartitionOf(u.g, time.Unix(start, 0).In(u.loc)).Key()
}

// assetDep is a partitioned dependency of an asset unit: the unit and,
// for each of the asset's partitions, the span of the dependency's
// partitions it reads, span[lo[k]:hi[k]] (a year of a daily asset
// reading hours maps to 8,760: two numbers a day, not 24).
type assetDep struct {
	unit   int
	m      tranche.Mapping
	lo, hi []int32
	// base and from: for each partition, the starts of the partitions
	// of the dependency holding its last instant and, unmapped (the
	// same partition or those inside it), its first; the span's places
	// are found from them once every dependent's needs are known.
	base, from []int64
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
	// from and to: the starts of the first and last partition each unit's
	// span must hold (to < from: none).
	var from, to []int64
	for a := range b.DAG.Assets() {
		u := &assetUnit{name: a.Name, g: a.Partitioning.Granularity, loc: loc}
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
		if p.Start.Before(w.Start()) {
			p = p.Next()
		}
		if p.Start.Before(u.first) {
			p = tranche.PartitionOf(u.g, u.first)
		}
		last := tranche.PartitionOf(u.g, w.End().Add(-time.Nanosecond))
		if last.End.After(w.End()) {
			last = last.Prev()
		}
		lo, hi := int64(1), int64(0)
		if !last.Start.Before(p.Start) {
			if u.window, err = tranche.NewTimePartitionWindow(u.g, p.Start, last.Start); err != nil {
				return nil, err
			}
			u.n = u.window.Len()
			lo, hi = p.Start.Unix(), last.Start.Unix()
		}
		from, to = append(from, lo), append(to, hi)
		i := len(units)
		for _, d := range a.Deps {
			k := byName[d]
			up := units[k]
			u.level = max(u.level, up.level+1)
			dep := assetDep{unit: k, m: a.Mappings[d], base: make([]int64, 0, u.n)}
			unmapped := dep.m.Lookback == 0 && dep.m.Offset == 0
			if unmapped {
				dep.from = make([]int64, 0, u.n)
			}
			// The partitions of the dependency holding each partition's
			// first and last instants: consecutive partitions often share
			// them (the hours of a day reading it).
			var holding, first tranche.TimePartition
			at := func(c *tranche.TimePartition, t time.Time) int64 {
				if c.End.IsZero() || t.Before(c.Start) || !t.Before(c.End) {
					*c = tranche.PartitionOf(up.g, t)
				}
				return c.Start.Unix()
			}
			if u.n > 0 {
				for p := range u.window.OldestFirst() {
					dep.base = append(dep.base, at(&holding, p.End.Add(-time.Second)))
					if unmapped {
						dep.from = append(dep.from, at(&first, p.Start))
					}
				}
			}
			// What the span of the dependency must hold: from the first
			// partition's first mapped partition, stepped back as the
			// mapping reaches, to the last's base.
			if len(dep.base) > 0 {
				lo := tranche.PartitionOf(up.g, time.Unix(dep.base[0], 0).In(loc))
				if unmapped {
					lo = tranche.PartitionOf(up.g, time.Unix(dep.from[0], 0).In(loc))
				}
				for range dep.m.Offset + max(1, dep.m.Lookback) - 1 {
					lo = lo.Prev()
				}
				start := max(lo.Start.Unix(), clampFirst(up.first))
				if from[k] > to[k] {
					from[k], to[k] = start, dep.base[len(dep.base)-1]
				} else {
					from[k], to[k] = min(from[k], start), max(to[k], dep.base[len(dep.base)-1])
				}
			}
			u.deps = append(u.deps, dep)
		}
		byName[a.Name] = i
		units = append(units, u)
	}
	// The spans, then each mapping's places in its dependency's span.
	for i, u := range units {
		if from[i] > to[i] {
			continue
		}
		sw, err := tranche.NewTimePartitionWindow(u.g, time.Unix(from[i], 0).In(loc), time.Unix(to[i], 0).In(loc))
		if err != nil {
			return nil, err
		}
		u.span = make([]int64, 0, sw.Len())
		for p := range sw.OldestFirst() {
			u.span = append(u.span, p.Start.Unix())
		}
		if u.n > 0 {
			u.own = u.place(u.window.Start().Unix())
		}
	}
	for _, u := range units {
		for di := range u.deps {
			d := &u.deps[di]
			up := units[d.unit]
			d.lo, d.hi = make([]int32, len(d.base)), make([]int32, len(d.base))
			for k, base := range d.base {
				var lo, hi int
				if d.from != nil {
					lo, hi = up.place(d.from[k]), up.place(base)+1
				} else {
					hi = up.place(base) - d.m.Offset + 1
					lo = hi - max(1, d.m.Lookback)
				}
				// Those before the dependency's first lie before its span.
				lo = max(lo, 0)
				if hi < lo {
					hi = lo
				}
				d.lo[k], d.hi[k] = int32(lo), int32(hi)
			}
			d.base, d.from = nil, nil
		}
	}
	return units, nil
}

// clampFirst returns first in Unix seconds, or the least int64 for the
// zero time (no first partition).
func clampFirst(first time.Time) int64 {
	if first.IsZero() {
		return math.MinInt64
	}
	return first.Unix()
}

// place returns the place in u's span of its partition starting at start
// (Unix seconds), or -1 when start lies before the span, as only a
// partition before the unit's first does.
func (u *assetUnit) place(start int64) int {
	if len(u.span) == 0 || start < u.span[0] {
		return -1
	}
	k, _ := slices.BinarySearch(u.span, start)
	return k
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

// brief is what a plan weighs of a partition's latest attempt: its
// state ("" for none) and instants in Unix nanoseconds (0 for none), the
// finish, or the lease's end while running. A plan of a million
// partitions holds one a partition.
type brief struct {
	state          ledger.State
	started, until int64
}

// briefOf returns the brief of b.
func briefOf(b ledger.Brief) brief {
	until := b.Finished
	if b.State == ledger.StateRunning {
		until = b.LeaseUntil
	}
	br := brief{state: b.State, started: b.Started.UnixNano()}
	if !until.IsZero() {
		br.until = until.UnixNano()
	}
	return br
}

// unitPlans is the plan of every unit of a backfill of several
// granularities: what the reasons of its items read.
type unitPlans struct {
	units  []*assetUnit
	plans  []AssetPlan
	latest [][]brief  // by unit, by place in its span
	codes  [][]string // by unit and place, the code versions of the latest attempts, read for rerun policy stale only
}

// latestOfUnits reads the latest attempt of each unit's partitions that
// the plan looks at, its span, in brief: through a [ledger.BriefReader]
// when the ledger is one, with the code versions (whole attempts) when
// codes is set. (Reading a span in pieces at once, on several
// connections, saved nothing at a million partitions on a loaded
// machine: the database's work is the cost.)
func (b *Backfill) latestOfUnits(ctx context.Context, units []*assetUnit, codes bool) ([][]brief, [][]string, error) {
	latest := make([][]brief, len(units))
	var versions [][]string
	if codes {
		versions = make([][]string, len(units))
	}
	r := b.reader()
	br, ok := r.(ledger.BriefReader)
	for i, u := range units {
		latest[i] = make([]brief, len(u.span))
		if versions != nil {
			versions[i] = make([]string, len(u.span))
		}
		if len(u.span) == 0 {
			continue
		}
		var codes []string
		if versions != nil {
			codes = versions[i]
		}
		if err := readSpan(ctx, r, br, ok, u, latest[i], codes); err != nil {
			return nil, nil, fmt.Errorf("tranche: reading the attempts of asset %q: %w", u.name, err)
		}
	}
	return latest, versions, nil
}

// readSpan reads the latest attempts of u's span into latest, by place,
// and their code versions into versions when it is not nil (whole
// attempts, through r.Latest); through br when ok, else r.Latest.
func readSpan(ctx context.Context, r ledger.Reader, br ledger.BriefReader, ok bool, u *assetUnit, latest []brief, versions []string) error {
	from, to := time.Unix(u.span[0], 0), time.Unix(u.span[len(u.span)-1]+1, 0)
	k := 0
	// put records the brief of the partition starting at start, which
	// comes after the last put (Latest's order), at its place.
	put := func(start int64, a brief) int {
		for k < len(u.span) && u.span[k] < start {
			k++
		}
		if k < len(u.span) && u.span[k] == start {
			latest[k] = a
			return k
		}
		return -1
	}
	switch {
	case versions != nil:
		for a, err := range r.Latest(ctx, u.id, from, to) {
			if err != nil {
				return err
			}
			if j := put(a.Start.Unix(), briefOf(ledger.BriefOf(a))); j >= 0 {
				versions[j] = a.CodeVersion
			}
		}
	case ok:
		for a, err := range br.LatestBriefs(ctx, u.id, from, to) {
			if err != nil {
				return err
			}
			put(a.Start.Unix(), briefOf(a))
		}
	default:
		for a, err := range r.Latest(ctx, u.id, from, to) {
			if err != nil {
				return err
			}
			put(a.Start.Unix(), briefOf(ledger.BriefOf(a)))
		}
	}
	return nil
}

// planUnits decides, for each partition of each unit, what the backfill
// does with it as the ledger stands now, dependencies first: a partition
// that maps to one the backfill runs waits for it, unless that one's
// wave (a level below wave) has run already.
func (b *Backfill) planUnits(ctx context.Context, cfg *config, units []*assetUnit, wave int) ([]AssetPlan, error) {
	latest, codes, err := b.latestOfUnits(ctx, units, cfg.rerun == ledger.RerunStale)
	if err != nil {
		return nil, err
	}
	now := b.now().UnixNano()
	set := &unitPlans{units: units, plans: make([]AssetPlan, len(units)), latest: latest, codes: codes}
	for i, u := range units {
		ap := &set.plans[i]
		*ap = AssetPlan{Asset: u.name, Granularity: u.g, DAG: u.id, DAGName: u.dag.Name, items: make([]assetItem, u.n),
			States: map[ledger.State]int{}, set: set, i: i}
		ap.Counts.Total = u.n
		var states [len(briefStates) + 1]int // by place in briefStates; the last: other states
		for k := range ap.items {
			it := &ap.items[k]
			set.judge(cfg, i, k, now, wave)
			switch st := latest[i][u.own+k].state; st {
			case "":
				ap.States[ledger.StatePending]++
			default:
				if j := slices.Index(briefStates[:], st); j >= 0 {
					states[j]++
				} else {
					ap.States[st]++
				}
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
		for j, n := range states[:len(briefStates)] {
			if n > 0 {
				ap.States[briefStates[j]] += n
			}
		}
	}
	return set.plans, nil
}

// briefStates are the states of latest attempts a plan counts apart.
var briefStates = [...]ledger.State{ledger.StateSucceeded, ledger.StateFailed, ledger.StateRunning, ledger.StateCanceled}

// judge decides partition k of unit i, in the plan of wave, at now (Unix
// nanoseconds).
func (s *unitPlans) judge(cfg *config, i, k int, now int64, wave int) {
	u := s.units[i]
	it := &s.plans[i].items[k]
	it.missing, it.waitFor, it.newer = noRef, noRef, noRef
	own := &s.latest[i][u.own+k]
	newest := int64(math.MinInt64)
	for _, d := range u.deps {
		up := s.units[d.unit]
		items := s.plans[d.unit].items
		latest := s.latest[d.unit]
		for q := int(d.lo[k]); q < int(d.hi[k]); q++ {
			// A wave that ran already runs nothing more: what it left
			// (failed, or judged again to run under RerunAll) is read
			// from the ledger below.
			if j := q - up.own; j >= 0 && j < up.n && items[j].runs && up.level >= wave {
				if it.waitFor.unit < 0 {
					it.waitFor = unitRef{int32(d.unit), int32(q)}
				}
				continue
			}
			a := &latest[q]
			if a.state != ledger.StateSucceeded {
				if it.missing.unit < 0 {
					it.missing = unitRef{int32(d.unit), int32(q)}
				}
				continue
			}
			// Stale: the upstream partition's latest success ended after
			// the partition's own latest success began to read it.
			if own.state == ledger.StateSucceeded && a.until > own.started && a.until > newest {
				newest = a.until
				it.newer = unitRef{int32(d.unit), int32(q)}
			}
		}
	}
	if it.missing.unit >= 0 {
		it.action, it.why = ActionBlocked, reasonBlocked
		return
	}
	if own.state == ledger.StateRunning && own.until > now {
		it.action = ledger.ActionSkipRunning
		return
	}
	it.action = ledger.ActionRun
	switch {
	case own.state == "":
		it.why = reasonPending
	case own.state == ledger.StateRunning:
		it.why = reasonTakeover
	case own.state != ledger.StateSucceeded && cfg.rerun == ledger.RerunNone:
		it.action = ledger.ActionSkipRecorded
	case own.state != ledger.StateSucceeded:
		it.why = reasonState
	case it.newer.unit >= 0:
		it.stale, it.why = true, reasonNewer
	case it.waitFor.unit >= 0:
		it.stale, it.why = true, reasonWaiting
	case cfg.rerun == ledger.RerunStale && s.codes[i][u.own+k] != u.code:
		it.why = reasonVersion
	case cfg.rerun == ledger.RerunAll:
		it.why = reasonAll
	default:
		it.action = ledger.ActionSkipSucceeded
	}
	if it.stale && cfg.rerun != ledger.RerunStale && cfg.rerun != ledger.RerunAll {
		it.action = ledger.ActionSkipSucceeded
	}
	if it.action == ledger.ActionRun {
		it.runs, it.wait = true, it.waitFor.unit >= 0
	}
}

// name returns the words of partition r: its asset and key.
func (s *unitPlans) name(r unitRef) string {
	up := s.units[r.unit]
	return up.name + " " + up.key(up.span[r.at])
}

// reason returns the reason of partition k of unit i: what blocks it, or
// why it runs ("pending", "failed", "stale: upstream events
// 2026-03-08T05:00 rematerialized"), or "".
func (s *unitPlans) reason(i, k int) string {
	u := s.units[i]
	it := &s.plans[i].items[k]
	var r string
	switch it.why {
	case reasonBlocked:
		m := it.missing
		up := s.units[m.unit]
		why := "outside the window"
		if j := int(m.at) - up.own; j >= 0 && j < up.n {
			why = string(s.plans[m.unit].items[j].action)
		}
		state := "never run"
		if a := s.latest[m.unit][m.at]; a.state != "" {
			state = string(a.state)
		}
		r = fmt.Sprintf("needs %s (%s; %s)", s.name(m), state, why)
		if it.waitFor.unit >= 0 {
			r += "; after " + s.name(it.waitFor)
		}
		return r
	case reasonPending:
		r = "pending"
	case reasonTakeover:
		r = "lease expired: take over"
	case reasonState:
		r = string(s.latest[i][u.own+k].state)
	case reasonNewer:
		r = "stale: upstream " + s.name(it.newer) + " rematerialized"
	case reasonWaiting:
		r = "stale: upstream " + s.name(it.waitFor) + " runs again first"
	case reasonVersion:
		r = fmt.Sprintf("stale: code version %q, now %q", s.codes[i][u.own+k], u.code)
	case reasonAll:
		r = "rerun all"
	}
	if it.wait && it.why != reasonWaiting {
		r += "; after " + s.name(it.waitFor)
	}
	return r
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
		report.add(ar, units[i].n)
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
	k := 0
	if u.n > 0 {
		for p := range u.window.OldestFirst() {
			switch it := &plan.items[k]; {
			case it.runs && !it.wait:
				run = append(run, p)
			case it.action != ledger.ActionSkipSucceeded:
				whole = false // blocked, waiting, held, or left alone: chosen
			}
			k++
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
		child.Window, child.Rerun = u.window, cfg.rerun
		return child
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
// asset by asset in the DAG's order, each oldest first, with their
// actions and reasons as planned and their latest attempts as the
// ledger stands now (the plan weighed them in brief).
func (p *Plan) mixedItems(ctx context.Context) iter.Seq2[PlanItem, error] {
	return func(yield func(PlanItem, error) bool) {
		for _, ap := range p.Assets {
			u := ap.set.units[ap.i]
			if u.n == 0 {
				continue
			}
			next, stop := iter.Pull2(p.backfill.reader().Latest(ctx, ap.DAG, u.window.Start(), u.window.End()))
			a, err, more := next()
			k := 0
			for part := range u.window.OldestFirst() {
				for more && err == nil && a.Start.Before(part.Start) {
					a, err, more = next()
				}
				if err != nil {
					stop()
					yield(PlanItem{}, fmt.Errorf("tranche: reading the attempts of asset %q: %w", ap.Asset, err))
					return
				}
				var latest *ledger.Attempt
				if more && a.Start.Equal(part.Start) {
					found := a
					latest = &found
					a, err, more = next()
				}
				w, _ := tranche.NewTimePartitionWindow(part.Granularity, part.Start, part.Start)
				it := &ap.items[k]
				if !yield(PlanItem{Asset: ap.Asset, Partition: part, Action: it.action, Reason: ap.set.reason(ap.i, k), Latest: latest, Chunk: w}, nil) {
					stop()
					return
				}
				k++
			}
			stop()
			if err != nil {
				yield(PlanItem{}, fmt.Errorf("tranche: reading the attempts of asset %q: %w", ap.Asset, err))
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
