package tranche

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// runPlan is what a run of a DAG that is not uniform (see DAG.uniform)
// materializes: nodes, each one asset for one partition, a window, or
// nothing (unpartitioned), wired by the partitions their mappings read.
// A uniform DAG's run has no plan: its nodes are its assets, each for the
// run's target, and the DAG's own edges wire them.
type runPlan struct {
	nodes      []planNode
	deps       [][]int // nodes each node waits for
	dependents [][]int
	byAsset    [][]int         // each asset's nodes, oldest first
	nodeOf     []map[int64]int // per partitioned asset: a partition's start → the node materializing it
	cursors    []*cursor       // per partitioned asset: its partitions in the run's location
	first      []int64         // per partitioned asset: the start of its first partition, or minInt64
	read       bool            // mapped partitions outside the target's are read (Runner.Read), not run
	readMu     sync.Mutex
	readRows   map[[2]int64][]Row // rows read before a node's call: (asset, start) → rows
	batches    [][]Batch          // a window node's rows by partition, once it completed
}

// planNode is one asset for one target in a run's plan.
type planNode struct {
	asset int
	t     target
	// own is true when t is the run's target, whose fencing tokens its
	// batches carry.
	own bool
	// out, when not nil, is why the node does not run: its asset has
	// no partition in the run's target and no dependent maps to one.
	out error
	// inputs holds, per dependency (as dag.deps of the asset), the
	// starts of the dependency's partitions the node reads, oldest
	// first.
	inputs [][]int64
}

const noFirst = -1 << 63

// buildPlan plans the run of a DAG that is not uniform for target t
// (checked by preflight): each asset of t's granularity runs for t; every
// partition of a dependency that a running node maps to runs too, once,
// before the nodes that read it, unless read is set, in which case it
// is read through Runner.Read when it is not one of t's; an asset none of
// whose partitions is reached is left out.
func buildPlan(d *DAG, t *target, read bool) (*runPlan, error) {
	n := len(d.assets)
	g, loc := t.granularity(), t.location()
	p := &runPlan{
		byAsset: make([][]int, n),
		nodeOf:  make([]map[int64]int, n),
		cursors: make([]*cursor, n),
		first:   make([]int64, n),
		read:    read,
	}
	// The target's partitions.
	var own []int64
	ownEnd := map[int64]int64{}
	for q := range t.asWindow().OldestFirst() {
		s, e := q.Start.Unix(), q.End.Unix()
		own = append(own, s)
		ownEnd[s] = e
	}
	// need[i]: the partitions of asset i that run, start → end. Assets
	// come in dependency order, so walking backwards meets every
	// dependent before its dependencies.
	need := make([]map[int64]int64, n)
	var errs []error
	for i := n - 1; i >= 0; i-- {
		a := &d.assets[i]
		if !a.partitioned() {
			continue
		}
		c := newCursor(a.Partitioning.Granularity, loc)
		p.cursors[i] = &c
		p.first[i] = noFirst
		if !a.Partitioning.First.IsZero() {
			p.first[i], _ = c.Bounds(unix(a.Partitioning.First))
		}
		need[i] = map[int64]int64{}
		if a.Partitioning.Granularity == g {
			for _, s := range own {
				need[i][s] = ownEnd[s]
			}
		}
		if read {
			continue
		}
		for _, b := range d.dependents[i] {
			m := d.assets[b].Mappings[a.Name]
			for s, e := range need[b] {
				err := p.mapped(i, m, d.assets[b].Name, s, e, func(u, ue int64) { need[i][u] = ue })
				if err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	// The nodes, in dependency order.
	for i := range d.assets {
		a := &d.assets[i]
		add := func(nd planNode) {
			nd.asset = i
			p.byAsset[i] = append(p.byAsset[i], len(p.nodes))
			p.nodes = append(p.nodes, nd)
		}
		switch {
		case !a.partitioned():
			add(planNode{t: target{none: true}})
			continue
		case len(need[i]) == 0:
			add(planNode{t: *t, out: fmt.Errorf("tranche: asset %q (%v) not run: the run's target %s holds none of its partitions, and no asset that runs maps to one: %w",
				a.Name, a.Partitioning.Granularity, t.text, ErrSkip)})
			continue
		}
		p.nodeOf[i] = make(map[int64]int, len(need[i]))
		starts := make([]int64, 0, len(need[i]))
		for s := range need[i] {
			starts = append(starts, s)
		}
		slices.Sort(starts)
		c := p.cursors[i]
		isOwn := func(s int64) bool {
			_, ok := ownEnd[s]
			return ok && a.Partitioning.Granularity == g
		}
		// The target's partitions are one node for the target, a window
		// run as the DAG's window runs are, whose batches its fencing
		// tokens number. Other partitions run one at a time, or by runs
		// of consecutive ones for an asset that allows windows and whose
		// rows can be told apart by partition.
		windows := a.Partitioning.AllowWindow && a.Partitioning.Column != ""
		for k := 0; k < len(starts); {
			if isOwn(starts[k]) {
				for _, s := range own {
					p.nodeOf[i][s] = len(p.nodes)
				}
				add(planNode{t: *t, own: true})
				k += len(own)
				continue
			}
			j := k + 1
			for windows && j < len(starts) && need[i][starts[j-1]] == starts[j] && !isOwn(starts[j]) {
				j++
			}
			for _, s := range starts[k:j] {
				p.nodeOf[i][s] = len(p.nodes)
			}
			var nt target
			if j-k == 1 {
				q := c.partition(starts[k])
				nt = target{partition: q, text: q.Key()}
			} else {
				w := c.window(starts[k], starts[j-1], need[i][starts[j-1]])
				nt = target{isWindow: true, window: w, text: w.String()}
			}
			add(planNode{t: nt})
			k = j
		}
	}
	p.batches = make([][]Batch, len(p.nodes))
	// The edges and each node's inputs.
	p.deps = make([][]int, len(p.nodes))
	p.dependents = make([][]int, len(p.nodes))
	for x := range p.nodes {
		nd := &p.nodes[x]
		if nd.out != nil {
			continue
		}
		b := nd.asset
		nd.inputs = make([][]int64, len(d.deps[b]))
		for k, i := range d.deps[b] {
			a := &d.assets[i]
			if !a.partitioned() {
				p.link(p.byAsset[i][0], x)
				continue
			}
			m := d.assets[b].Mappings[a.Name]
			seen := map[int64]bool{}
			var starts []int64
			for q := range nd.t.asWindow().OldestFirst() {
				_ = p.mapped(i, m, d.assets[b].Name, q.Start.Unix(), q.End.Unix(), func(u, _ int64) {
					if !seen[u] {
						seen[u] = true
						starts = append(starts, u)
					}
				})
			}
			slices.Sort(starts)
			nd.inputs[k] = starts
			for _, u := range starts {
				if y, ok := p.nodeOf[i][u]; ok && p.nodes[y].out == nil {
					p.link(y, x)
				}
			}
		}
	}
	return p, nil
}

// link makes node x wait for node y, once.
func (p *runPlan) link(y, x int) {
	if deps := p.deps[x]; len(deps) > 0 && slices.Contains(deps, y) {
		return
	}
	p.deps[x] = append(p.deps[x], y)
	p.dependents[y] = append(p.dependents[y], x)
}

// mapped calls add with each partition of asset i that mapping m maps
// the partition [s, e) of its dependent (named for errors) to, oldest
// first, leaving out those before the asset's first partition. It
// refuses a schedule's partition mapped past the dependent's end without
// Mapping.Open (NewDAG checks calendar granularities).
func (p *runPlan) mapped(i int, m Mapping, dependent string, s, e int64, add func(u, ue int64)) error {
	c := p.cursors[i]
	first, last, lastEnd := m.span(c, s, e)
	if lastEnd > e && !m.Open {
		return fmt.Errorf("tranche: asset %q reads %v partition %s of its dependency, which ends after its own partition [%s, %s) does; declare Mapping{Open: true} to read it anyway",
			dependent, c.g, c.partition(last).Key(), at(s, c.loc).Format(time.RFC3339), at(e, c.loc).Format(time.RFC3339))
	}
	for u := first; ; {
		ue := c.Next(u)
		if u >= p.first[i] {
			add(u, ue)
		}
		if u == last {
			return nil
		}
		u = ue
	}
}

// gather returns one outcome per asset from the plan's nodes: a lone
// node's as it is; for several, the worst state (failed, canceled,
// succeeded, skipped, in that order) with the first error of a node in
// it, the earliest start and latest end, attempts and rows summed, and
// rows by partition merged.
func (s *runState) gather() []AssetResult {
	out := make([]AssetResult, len(s.dag.assets))
	rank := func(st State) int {
		switch st {
		case StateFailed:
			return 3
		case StateCanceled:
			return 2
		case StateSucceeded:
			return 1
		}
		return 0
	}
	for i, nodes := range s.plan.byAsset {
		if len(nodes) == 1 {
			out[i] = s.outcomes[nodes[0]]
			continue
		}
		o := &out[i]
		o.Asset = s.dag.assets[i].Name
		o.State = StateSkipped
		for k, x := range nodes {
			n := &s.outcomes[x]
			if k == 0 || rank(n.State) > rank(o.State) {
				o.State, o.Err = n.State, n.Err
			}
			if !n.Start.IsZero() && (o.Start.IsZero() || n.Start.Before(o.Start)) {
				o.Start = n.Start
			}
			if n.End.After(o.End) {
				o.End = n.End
			}
			o.Attempts += n.Attempts
			o.Rows += n.Rows
			if n.RowsByPartition != nil {
				if o.RowsByPartition == nil {
					o.RowsByPartition = make(map[string]int)
				}
				for key, c := range n.RowsByPartition {
					o.RowsByPartition[key] += c
				}
			}
		}
		// A node that never ended leaves the asset unended.
		for _, x := range nodes {
			if s.outcomes[x].End.IsZero() {
				o.End = time.Time{}
			}
		}
	}
	return out
}

// readInputs reads, through Runner.Read, the partitions node i maps to
// that the run does not materialize, before its call.
func (s *runState) readInputs(ctx context.Context, i int) error {
	p := s.plan
	if !p.read {
		return nil
	}
	nd := &p.nodes[i]
	for k, j := range s.dag.deps[nd.asset] {
		if len(nd.inputs[k]) == 0 {
			continue
		}
		a := &s.dag.assets[j]
		for _, u := range nd.inputs[k] {
			if y, ok := p.nodeOf[j][u]; ok && p.nodes[y].out == nil {
				continue
			}
			c := *p.cursors[j] // a copy: a cursor caches, and nodes run concurrently
			q := c.partition(u)
			rows, err := s.runner.Read(ctx, a.Name, q)
			if err != nil {
				return fmt.Errorf("tranche: reading partition %s of dependency %q: %w", q.Key(), a.Name, err)
			}
			s.plan.readMu.Lock()
			if p.readRows == nil {
				p.readRows = make(map[[2]int64][]Row)
			}
			p.readRows[[2]int64{int64(j), u}] = rows
			s.plan.readMu.Unlock()
		}
	}
	return nil
}

// inputs returns the batches of dependency j that node x reads: one per
// mapped partition, oldest first, from the nodes that materialized them
// or from what readInputs read.
func (s *runState) inputs(x, k, j int) ([]Batch, error) {
	p := s.plan
	a := &s.dag.assets[j]
	if !a.partitioned() {
		return []Batch{{Asset: a.Name, RunID: s.id, Rows: s.assets[p.byAsset[j][0]].rows}}, nil
	}
	starts := p.nodes[x].inputs[k]
	batches := make([]Batch, 0, len(starts))
	c := *p.cursors[j] // a copy: a cursor caches, and nodes run concurrently
	for _, u := range starts {
		b := Batch{Asset: a.Name, Column: a.Partitioning.Column}
		y, ok := p.nodeOf[j][u]
		switch {
		case ok && p.nodes[y].out == nil:
			t := &p.nodes[y].t
			b.RunID = s.id
			if !t.isWindow {
				b.Partition, b.Rows = t.partition, s.assets[y].rows
				break
			}
			// A window node's rows by partition, which try kept: it
			// has a column, unless it is the run's target.
			ys := p.batches[y]
			if ys == nil {
				return nil, fmt.Errorf("tranche: dependency %q ran for window %s without a Partitioning.Column, so its rows cannot be told apart by partition; give it a column, or use Input", a.Name, t.text)
			}
			k := sortSearch(ys, u)
			b.Partition, b.Rows = ys[k].Partition, ys[k].Rows
		default:
			s.plan.readMu.Lock()
			b.Rows = p.readRows[[2]int64{int64(j), u}]
			s.plan.readMu.Unlock()
			b.Partition = c.partition(u)
		}
		batches = append(batches, b)
	}
	return batches, nil
}

// sortSearch returns the index of the batch whose partition starts at u.
func sortSearch(batches []Batch, u int64) int {
	k, _ := slices.BinarySearchFunc(batches, u, func(b Batch, u int64) int {
		return cmpInt64(b.Partition.Start.Unix(), u)
	})
	return k
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
