package schedule

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/internal/granularities"
	"github.com/tranche-dev/tranche/internal/zone"
	"github.com/tranche-dev/tranche/ledger"
)

// A Scheduler of a DAG whose assets have several granularities (hourly
// events, a daily rollup, a monthly report) runs one scheduler per
// asset, inside its Run: each on its asset's own slots, recorded under
// the identity a backfill records the asset's partitions under
// ([backfill.AssetDAG]), so that backfills and the scheduler share
// that history. Before a slot of an asset with dependencies is claimed,
// every partition it maps to ([tranche.Mapping]) must have succeeded in
// the ledger: a New York day runs once its 23, 24 or 25 hours landed,
// not merely at midnight.

// gate is what the scheduler of one asset of a DAG of several
// granularities checks before it claims a slot: that the partitions the
// slot maps to have succeeded.
type gate struct {
	deps    []gateDep
	wait    time.Duration // Scheduler.WaitUpstream; 0: no deadline
	runLate bool
	stale   bool
	// looked: when, by the system's clock, the recent slots were last
	// looked at for staleness.
	looked time.Time
}

// gateDep is a partitioned dependency of a gated asset.
type gateDep struct {
	name  string
	id    string // the ledger's key of its partitions
	g     tranche.TimeGranularity
	loc   *time.Location
	first time.Time // the start of its first partition; zero for none
	m     tranche.Mapping
}

// assetSchedulers returns the schedulers of the assets of s's DAG, of
// several granularities, in the DAG's order; run: to run them, which
// needs Runner.Read (a pause does not).
func (s *Scheduler) assetSchedulers(run bool) ([]*Scheduler, error) {
	var read func(context.Context, string, tranche.TimePartition) ([]tranche.Row, error)
	if s.Runner != nil {
		read = s.Runner.Read
	}
	if run && read == nil {
		return nil, fmt.Errorf("tranche: scheduler: DAG %q has assets of several granularities, each run on its own slots, reading the partitions it maps to through Runner.Read; set it to read them from where the destinations wrote them", s.DAG.Name)
	}
	if s.WaitUpstream < 0 {
		return nil, fmt.Errorf("tranche: scheduler: wait upstream %v: want 0 (no deadline) or more", s.WaitUpstream)
	}
	loc := s.Location
	var errs []error
	for a := range s.DAG.Assets() {
		p := a.Partitioning
		switch {
		case !p.Granularity.IsValid():
			errs = append(errs, fmt.Errorf("tranche: scheduler: unpartitioned asset %q would be re-extracted whole by every slot; give it a Partitioning or run it apart", a.Name))
		case p.Location == nil:
		case loc == nil:
			loc = p.Location
		case !zone.Same(loc, p.Location):
			errs = append(errs, fmt.Errorf("tranche: scheduler: asset %q follows %v, and the slots %v; give one zone", a.Name, p.Location, loc))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if loc == nil {
		loc = time.UTC
	}
	worker := s.Worker
	if worker == "" {
		// One name for every asset's scheduler of this one, as config
		// would give each.
		host, err := os.Hostname()
		if err != nil || host == "" {
			host = "worker"
		}
		worker = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	deps := map[string]gateDep{}
	var out []*Scheduler
	for a := range s.DAG.Assets() {
		dag, err := backfill.AssetDAG(s.DAG, a.Name, read)
		if err != nil {
			return nil, fmt.Errorf("tranche: scheduler: %w", err)
		}
		g := a.Partitioning.Granularity
		d := gateDep{name: a.Name, id: backfill.DAGIdentity(dag, g, loc), g: g, loc: loc}
		if !a.Partitioning.First.IsZero() {
			d.first = tranche.PartitionOf(g, a.Partitioning.First.In(loc)).Start
		}
		deps[a.Name] = d
		gt := &gate{wait: s.WaitUpstream, runLate: s.RunLate, stale: s.RerunStale}
		for _, name := range a.Deps {
			up := deps[name]
			up.m = a.Mappings[name]
			gt.deps = append(gt.deps, up)
		}
		out = append(out, &Scheduler{
			DAG: dag, Ledger: s.Ledger, Location: loc, Delay: s.Delay, MaxCatchUp: s.MaxCatchUp,
			CatchUpWindow: s.CatchUpWindow, Overlap: s.Overlap, MaxQueue: s.MaxQueue, Budget: s.Budget,
			Runner: s.Runner, Worker: worker, Lease: s.Lease, Heartbeat: s.Heartbeat, OnEvent: s.OnEvent,
			Now: s.Now, After: s.After, gate: gt, only: a.Name,
		})
	}
	return out, nil
}

// runAssets is Run of a DAG of several granularities: each asset's
// scheduler, at once, until ctx ends.
func (s *Scheduler) runAssets(ctx context.Context) error {
	kids, err := s.assetSchedulers(true)
	if err != nil {
		return err
	}
	var errs []error
	var clock func() time.Time
	for _, k := range kids {
		cfg, err := k.config()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		clock = cfg.now
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	s.mu.Lock()
	if s.running {
		s.mu.Unlock()
		return errors.New("tranche: scheduler: Run called while the scheduler runs")
	}
	s.running, s.kids = true, kids
	s.status = Status{Worker: kids[0].Worker}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.running = false
		s.mu.Unlock()
	}()
	began := clock()
	for _, k := range kids {
		k.began = began
	}
	var wg sync.WaitGroup
	errc := make(chan error, len(kids))
	for _, k := range kids {
		wg.Go(func() { errc <- k.Run(ctx) })
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// assetsStatus adds the statuses of the assets' schedulers to st: each
// in st.Assets, and their counts summed.
func assetsStatus(st *Status, kids []*Scheduler) {
	for _, k := range kids {
		a := k.Status()
		st.Assets = append(st.Assets, a)
		st.Running = append(st.Running, a.Running...)
		st.Waiting = append(st.Waiting, a.Waiting...)
		st.Succeeded += a.Succeeded
		st.Failed += a.Failed
		st.Interrupted += a.Interrupted
		st.Elsewhere += a.Elsewhere
		st.Missed += a.Missed
		st.Skipped += a.Skipped
		st.Canceled += a.Canceled
		if a.HookErr != nil {
			st.HookErr = a.HookErr
		}
	}
}

// assetsPause sets the pause of every asset's schedule of s's DAG of
// several granularities, and returns the last.
func (s *Scheduler) assetsPause(ctx context.Context, p ledger.SchedulePause) (ledger.SchedulePause, error) {
	kids, err := s.assetSchedulers(false)
	if err != nil {
		return ledger.SchedulePause{}, err
	}
	var out ledger.SchedulePause
	for _, k := range kids {
		if out, err = k.setPause(ctx, p); err != nil {
			return out, err
		}
	}
	return out, nil
}

// What the gate says of a slot.
type verdict int

const (
	gateRun  verdict = iota // claim it
	gateWait                // look again at its notBefore
	gateDrop                // recorded missed: no longer pending
)

// upstream reports, for a slot of a gated asset, the first partition it
// maps to that has not succeeded ("events 2026-03-08T05:00-04:00
// (failed)"), or "" when all have.
func (g *gate) upstream(ctx context.Context, l ledger.Ledger, p tranche.TimePartition) (string, error) {
	why := ""
	err := g.mapped(ctx, l, p, func(d gateDep, q tranche.TimePartition, a *ledger.Attempt) bool {
		switch {
		case q.End.After(p.End):
			// Open: a coarser partition holding the slot, or one after
			// it, which cannot have landed when the slot closes; the
			// mapping declared reading it open.
		case a == nil:
			why = fmt.Sprintf("%s %s (never run)", d.name, q.Key())
		case a.State != ledger.StateSucceeded:
			why = fmt.Sprintf("%s %s (%s)", d.name, q.Key(), a.State)
		}
		return why == ""
	})
	return why, err
}

// staleBy reports, for a slot of a gated asset whose latest attempt own
// succeeded, the newest partition it maps to that succeeded again after
// own began ("stale: upstream events 2026-03-08T05:00-04:00
// rematerialized"), or "" when none did.
func (g *gate) staleBy(ctx context.Context, l ledger.Ledger, p tranche.TimePartition, own *ledger.Attempt) (string, error) {
	stale := granularities.NewStale(own)
	err := g.mapped(ctx, l, p, func(d gateDep, q tranche.TimePartition, a *ledger.Attempt) bool {
		if stale.Newer(a) {
			stale.Name(d.name, q.Key())
		}
		return true
	})
	return stale.Why(), err
}

// mapped calls yield with each partition of each dependency that slot p
// maps to, and its latest attempt (nil: never attempted), dependency by
// dependency, each oldest first, until yield returns false.
func (g *gate) mapped(ctx context.Context, l ledger.Ledger, p tranche.TimePartition, yield func(gateDep, tranche.TimePartition, *ledger.Attempt) bool) error {
	for _, d := range g.deps {
		ps := backfill.MappedPartitions(d.m, d.g, d.first, p)
		if len(ps) == 0 {
			continue
		}
		got := map[int64]*ledger.Attempt{}
		for a, err := range l.Latest(ctx, d.id, ps[0].Start, ps[len(ps)-1].End) {
			if err != nil {
				return fmt.Errorf("tranche: reading the attempts of asset %q: %w", d.name, err)
			}
			got[a.Start.Unix()] = &a
		}
		for _, q := range ps {
			if !yield(d, q, got[q.Start.Unix()]) {
				return nil
			}
		}
	}
	return nil
}

// whyUpstream is why a slot whose upstream partitions had not succeeded
// by its deadline is recorded missed.
const whyUpstream = "missed: upstream %s had not succeeded %v after the slot came due (WaitUpstream); a backfill runs it"

// admit applies the gate to sl, before its claim: run it when every
// partition it maps to succeeded; otherwise wait, looked at again a
// heartbeat interval later (or at its deadline), until its deadline,
// Delay plus WaitUpstream after its close; then run it anyway (RunLate)
// or record it missed.
func (r *run) admit(ctx context.Context, sl *slot) (verdict, error) {
	g := r.s.gate
	missing, err := g.upstream(ctx, r.s.Ledger, sl.p)
	if err != nil || missing == "" {
		return gateRun, err
	}
	now := r.cfg.now()
	deadline := r.cfg.due(sl.p).Add(g.wait)
	if g.wait > 0 && !now.Before(deadline) {
		if g.runLate {
			r.emit(KindLate, sl, func(e *tranche.Event) { e.Attrs = append(e.Attrs, slog.String("upstream", missing)) })
			return gateRun, nil
		}
		recorded, retry, err := r.record(ctx, []tranche.TimePartition{sl.p}, fmt.Sprintf(whyUpstream, missing, g.wait), sl.trigger)
		switch {
		case err != nil:
			return gateWait, err
		case !retry.IsZero():
			r.postpone(sl, retry, true)
			return gateWait, nil
		case !recorded:
			sl.check = true // another worker recorded or holds it: refresh says which
			return gateWait, nil
		}
		r.count(func(st *Status) { st.Missed++ })
		r.emit(KindMissed, sl, func(e *tranche.Event) { e.Attrs = append(e.Attrs, slog.String("upstream", missing)) })
		return gateDrop, nil
	}
	if !sl.waiting {
		sl.waiting = true
		r.emit(KindWaiting, sl, func(e *tranche.Event) { e.Attrs = append(e.Attrs, slog.String("upstream", missing)) })
	}
	poll := r.cfg.heartbeat
	if left := deadline.Sub(now); g.wait > 0 && left < poll {
		poll = left
	}
	sl.notBefore = time.Now().Add(max(poll, time.Millisecond))
	return gateWait, nil
}

// findStale looks, once a heartbeat interval, at the newest due slots
// of a gated asset (as many as a catch-up runs, at least one) that are
// not pending: a slot whose latest attempt succeeded and began before a
// partition it maps to succeeded again is stale ([KindStale]), and, with
// RerunStale, pending again, to be claimed under that attempt's
// revision, so that of the schedulers that find it stale one reruns it.
func (r *run) findStale(ctx context.Context) error {
	g := r.s.gate
	if g == nil || !g.stale || time.Since(g.looked) < r.cfg.heartbeat {
		return nil
	}
	g.looked = time.Now()
	var parts []tranche.TimePartition
	for p := r.next.Prev(); len(parts) < max(r.cfg.maxCatchUp, 1) && !p.Start.Before(r.cfg.first); p = p.Prev() {
		parts = append(parts, p)
	}
	if len(parts) == 0 {
		return nil
	}
	slices.Reverse(parts)
	att, err := latest(ctx, r.s.Ledger, r.cfg.dag, r.cfg.match, parts)
	if err != nil {
		return err
	}
	for i, a := range att {
		p := parts[i]
		if a == nil || a.State != ledger.StateSucceeded || slices.ContainsFunc(r.pending, func(sl *slot) bool { return sl.p.Equal(p) }) {
			continue
		}
		why, err := g.staleBy(ctx, r.s.Ledger, p, a)
		if err != nil {
			return err
		}
		if why == "" {
			continue
		}
		sl := &slot{p: p, trigger: ledger.TriggerCatchUp, rerun: true, revision: a.Revision}
		// In order of its slot: before a later one that waits for its
		// own upstream partitions.
		at := slices.IndexFunc(r.pending, func(o *slot) bool { return o.p.Start.After(p.Start) })
		if at < 0 {
			at = len(r.pending)
		}
		r.pending = slices.Insert(r.pending, at, sl)
		r.emit(KindStale, sl, func(e *tranche.Event) { e.Attrs = append(e.Attrs, slog.String("reason", why)) })
	}
	return nil
}
