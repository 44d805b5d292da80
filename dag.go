package tranche

import (
	"container/heap"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"strings"
)

// DAG is a validated set of assets wired by their dependencies. Build one
// with [NewDAG]; it is immutable, but for its Name, and safe for
// concurrent use by several runs.
type DAG struct {
	// Name labels the DAG wherever its backfills are listed: in the
	// ledger beside each backfill, in commands, pages, events and
	// telemetry. NewDAG sets it to the names of the assets nothing else
	// in the DAG depends on, joined by "+" ("daily_totals", or
	// "clicks+orders"), beyond three the first three and how many more;
	// set it where the DAG is built, before its first use. A name is a
	// label, not an identity: renaming a DAG keeps its history, and
	// two DAGs of one name keep two histories. It does link them as
	// versions of one DAG across a deploy: a backfill leaves the
	// partitions another identity of its name landed after the backfill
	// was created (see ledger.ClaimRequest.JudgeVersion), so keep it the
	// same from one version to the next: a backfill of a DAG under this
	// default name refuses to run when the ledger holds one of what looks
	// like an earlier version under another default name (see
	// backfill.ErrUnnamedDAG).
	Name string

	assets     []Asset // topological order, ties broken by name
	index      map[string]int
	deps       [][]int // positions of each asset's dependencies
	dependents [][]int // positions of the assets depending on each

	// uniform is true when the partitioned assets share one granularity
	// and every dependency reads the same partition: a run then gives
	// each asset the run's target, as before mappings existed, and
	// plans nothing.
	uniform bool
}

// NewDAG validates the assets and returns the DAG they form. It refuses,
// with one error per problem naming the assets involved, all of them
// joined with errors.Join: an empty name, a nil Materialize, a duplicate
// name, a dependency on itself, a dependency listed twice or missing from
// the DAG, cycles (one error for each group of assets that depend on each
// other, showing one cycle, as in "a -> b -> a"), a partitioned asset
// feeding an unpartitioned one, dependent partitioned assets with
// different locations, a mapping of an asset that is not a dependency,
// of an unpartitioned one, or with a negative count, a mapping that reads
// a partition that may not have closed (a coarser one) without
// Mapping.Open, and partitioning, timeout or retry settings that cannot
// work. Every asset is checked, a duplicate too, so
// that one call reports everything to fix.
//
// NewDAG() with no assets is the empty DAG, not an error: it has no
// assets and no identity of its own beyond that, and a run of it, with
// any target or none, completes at once without calling anything, so
// that a program assembling its DAG from configuration can hold one.
func NewDAG(assets ...Asset) (*DAG, error) {
	var errs []error
	first := make(map[string]int, len(assets)) // each name's first asset
	for i, a := range assets {
		switch j, dup := first[a.Name]; {
		case a.Name == "":
			errs = append(errs, fmt.Errorf("tranche: asset #%d (counting from 0) has an empty name", i))
		case dup:
			errs = append(errs, fmt.Errorf("tranche: duplicate asset name %q (assets #%d and #%d)", a.Name, j, i))
		default:
			first[a.Name] = i
		}
		errs = append(errs, checkAsset(assetLabel(i, a), a)...)
	}
	// The dependencies of every asset. graph holds, for the cycle check,
	// the first asset of each name with the dependencies that exist, once
	// each and without the self-dependencies reported here.
	graph := make([]Asset, 0, len(first))
	for i, a := range assets {
		seen := make(map[string]bool, len(a.Deps))
		var deps []string
		for _, dep := range a.Deps {
			j, exists := first[dep]
			switch {
			case seen[dep]:
				errs = append(errs, fmt.Errorf("tranche: asset %s lists dependency %q twice", assetLabel(i, a), dep))
			case dep == a.Name:
				errs = append(errs, fmt.Errorf("tranche: asset %q depends on itself: dependency cycle (each asset feeds the next): %[1]s -> %[1]s", a.Name))
			case !exists:
				errs = append(errs, fmt.Errorf("tranche: asset %s depends on %q, which is not in the DAG", assetLabel(i, a), dep))
			default:
				m, declared := a.Mappings[dep]
				errs = append(errs, checkEdge(assets[j], a, m, declared)...)
				deps = append(deps, dep)
			}
			seen[dep] = true
		}
		for _, dep := range sortedKeys(a.Mappings) {
			if !seen[dep] {
				errs = append(errs, fmt.Errorf("tranche: asset %s maps %q, which is not one of its dependencies; list it in Deps, or drop its mapping", assetLabel(i, a), dep))
			}
		}
		if j, ok := first[a.Name]; ok && j == i {
			graph = append(graph, Asset{Name: a.Name, Deps: deps})
		}
	}
	order, ok := topoSort(graph)
	if !ok {
		for _, cycle := range cycles(graph) {
			errs = append(errs, fmt.Errorf("tranche: dependency cycle (each asset feeds the next): %s", strings.Join(cycle, " -> ")))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	d := &DAG{assets: make([]Asset, len(order)), index: make(map[string]int, len(order))}
	for i, a := range order {
		d.assets[i] = assets[first[a.Name]].clone()
		d.index[a.Name] = i
	}
	d.deps = make([][]int, len(order))
	d.dependents = make([][]int, len(order))
	var g TimeGranularity // the one granularity of a uniform DAG
	d.uniform = true
	for i, a := range d.assets {
		if a.partitioned() {
			if g.IsValid() && a.Partitioning.Granularity != g {
				d.uniform = false
			}
			g = a.Partitioning.Granularity
		}
		for _, dep := range a.Deps {
			j := d.index[dep]
			d.deps[i] = append(d.deps[i], j)
			d.dependents[j] = append(d.dependents[j], i)
		}
		for _, m := range a.Mappings {
			if m != (Mapping{}) {
				d.uniform = false
			}
		}
	}
	d.Name = defaultName(d)
	return d, nil
}

// defaultName is the name NewDAG gives a DAG: its assets that no other
// depends on, in the DAG's order, joined by "+".
func defaultName(d *DAG) string {
	var leaves []string
	for i, a := range d.assets {
		if len(d.dependents[i]) == 0 {
			leaves = append(leaves, a.Name)
		}
	}
	if len(leaves) > 3 {
		return strings.Join(leaves[:3], "+") + fmt.Sprintf("+%d more", len(leaves)-3)
	}
	return strings.Join(leaves, "+")
}

// assetLabel names the i-th asset given to NewDAG in its errors: by its
// name, or by its position when it has none.
func assetLabel(i int, a Asset) string {
	if a.Name == "" {
		return fmt.Sprintf("#%d (counting from 0)", i)
	}
	return strconv.Quote(a.Name)
}

// checkAsset returns the problems of one asset on its own, named by label.
func checkAsset(label string, a Asset) []error {
	var errs []error
	if a.Materialize == nil {
		errs = append(errs, fmt.Errorf("tranche: asset %s has a nil Materialize", label))
	}
	p := a.Partitioning
	if !p.Granularity.IsValid() {
		if p.Location != nil || p.Column != "" || p.AllowWindow || !p.First.IsZero() {
			errs = append(errs, fmt.Errorf("tranche: asset %s sets Partitioning fields but no Granularity; set one, or leave Partitioning zero for an unpartitioned asset", label))
		}
	} else if p.Column == "" && len(a.Destinations) > 0 {
		errs = append(errs, fmt.Errorf("tranche: partitioned asset %s has destinations but no Partitioning.Column to split its rows by", label))
	}
	for i, dst := range a.Destinations {
		if dst == nil {
			errs = append(errs, fmt.Errorf("tranche: asset %s: destination #%d is nil", label, i))
		}
	}
	if a.Timeout < 0 {
		errs = append(errs, fmt.Errorf("tranche: asset %s: negative Timeout %v", label, a.Timeout))
	}
	if r := a.Retry; r.Attempts < 0 || r.Backoff < 0 || r.MaxBackoff < 0 {
		errs = append(errs, fmt.Errorf("tranche: asset %s: negative Retry setting %+v", label, r))
	}
	return errs
}

// checkEdge returns the problems of the dependency of to on from, which
// to reads through m (declared when to names it in its Mappings).
func checkEdge(from, to Asset, m Mapping, declared bool) []error {
	fp, tp := from.Partitioning, to.Partitioning
	switch {
	case !from.partitioned():
		if declared && m != (Mapping{}) {
			return []error{fmt.Errorf("tranche: asset %q maps unpartitioned asset %q (%s); an unpartitioned dependency is read whole, so drop its mapping",
				to.Name, from.Name, m.describe())}
		}
		return nil
	case !to.partitioned():
		return []error{fmt.Errorf("tranche: partitioned asset %q (%v) feeds unpartitioned asset %q; partition %q too, or drop the dependency",
			from.Name, fp.Granularity, to.Name, to.Name)}
	case fp.Location != nil && tp.Location != nil && !sameZone(fp.Location, tp.Location):
		return []error{fmt.Errorf("tranche: asset %q (in %v) depends on asset %q (in %v); dependent partitioned assets must share a location",
			to.Name, tp.Location, from.Name, fp.Location)}
	}
	return checkMapping(from, to, m)
}

// topoSort orders assets, whose names are unique and whose dependencies
// all exist, so that each follows its dependencies, taking the smallest
// name among those ready at each step. It reports false when the assets
// hold a cycle.
func topoSort(assets []Asset) (order []Asset, ok bool) {
	pos := make(map[string]int, len(assets))
	for i, a := range assets {
		pos[a.Name] = i
	}
	waiting := make([]int, len(assets))
	dependents := make([][]int, len(assets))
	for i, a := range assets {
		waiting[i] = len(a.Deps)
		for _, dep := range a.Deps {
			dependents[pos[dep]] = append(dependents[pos[dep]], i)
		}
	}
	ready := &nameHeap{assets: assets}
	for i := range assets {
		if waiting[i] == 0 {
			ready.idx = append(ready.idx, i)
		}
	}
	heap.Init(ready)
	order = make([]Asset, 0, len(assets))
	for ready.Len() > 0 {
		i := heap.Pop(ready).(int)
		order = append(order, assets[i])
		for _, j := range dependents[i] {
			if waiting[j]--; waiting[j] == 0 {
				heap.Push(ready, j)
			}
		}
	}
	return order, len(order) == len(assets)
}

// cycles returns one cycle of each group of assets that depend on each
// other (each strongly connected component of more than one asset), in
// the order of their smallest names, as findCycle writes them. The assets'
// names are unique and their dependencies all exist.
func cycles(assets []Asset) [][]string {
	pos := make(map[string]int, len(assets))
	for i, a := range assets {
		pos[a.Name] = i
	}
	// Tarjan's algorithm: index[i] is 1 + the order in which the walk
	// reached i, 0 before; low[i] the smallest index reachable from i
	// through the assets still on the stack.
	index, low := make([]int, len(assets)), make([]int, len(assets))
	onStack := make([]bool, len(assets))
	var stack []int
	var out [][]string
	next := 1
	var visit func(i int)
	visit = func(i int) {
		index[i], low[i] = next, next
		next++
		stack = append(stack, i)
		onStack[i] = true
		for _, dep := range assets[i].Deps {
			switch j := pos[dep]; {
			case index[j] == 0:
				visit(j)
				low[i] = min(low[i], low[j])
			case onStack[j]:
				low[i] = min(low[i], index[j])
			}
		}
		if low[i] != index[i] {
			return
		}
		k := len(stack) - 1
		for stack[k] != i {
			k--
		}
		group := stack[k:]
		stack = stack[:k]
		for _, j := range group {
			onStack[j] = false
		}
		if len(group) > 1 {
			member := make([]int, len(assets))
			for _, j := range group {
				member[j] = 1
			}
			out = append(out, findCycle(assets, pos, member))
		}
	}
	for i := range assets {
		if index[i] == 0 {
			visit(i)
		}
	}
	slices.SortFunc(out, func(a, b []string) int { return strings.Compare(a[0], b[0]) })
	return out
}

// findCycle walks dependencies among the assets whose entry in waiting is
// positive, which all lie on or behind a cycle, until a name repeats.
func findCycle(assets []Asset, pos map[string]int, waiting []int) []string {
	start := -1
	for i := range assets {
		if waiting[i] > 0 && (start < 0 || assets[i].Name < assets[start].Name) {
			start = i
		}
	}
	step := make(map[int]int)
	var path []int
	for i := start; ; {
		if k, ok := step[i]; ok {
			path = path[k:]
			break
		}
		step[i] = len(path)
		path = append(path, i)
		next := -1
		for _, dep := range slices.Sorted(slices.Values(assets[i].Deps)) {
			if j := pos[dep]; waiting[j] > 0 {
				next = j
				break
			}
		}
		i = next
	}
	// path follows dependencies (a needs b); print it the way data flows.
	names := make([]string, 0, len(path)+1)
	for k := len(path) - 1; k >= 0; k-- {
		names = append(names, assets[path[k]].Name)
	}
	// Start at the smallest name, so that a cycle always reads the same.
	m := 0
	for k, name := range names {
		if name < names[m] {
			m = k
		}
	}
	names = slices.Concat(names[m:], names[:m])
	return append(names, names[0])
}

type nameHeap struct {
	assets []Asset
	idx    []int
}

func (h *nameHeap) Len() int           { return len(h.idx) }
func (h *nameHeap) Less(i, j int) bool { return h.assets[h.idx[i]].Name < h.assets[h.idx[j]].Name }
func (h *nameHeap) Swap(i, j int)      { h.idx[i], h.idx[j] = h.idx[j], h.idx[i] }
func (h *nameHeap) Push(x any)         { h.idx = append(h.idx, x.(int)) }
func (h *nameHeap) Pop() any {
	x := h.idx[len(h.idx)-1]
	h.idx = h.idx[:len(h.idx)-1]
	return x
}

// Assets returns the DAG's assets in dependency order, each after those it
// depends on, ties broken by name: the order is the same for the same
// assets however they were passed to [NewDAG]. Each yielded Asset is a
// copy.
func (d *DAG) Assets() iter.Seq[Asset] {
	return func(yield func(Asset) bool) {
		for _, a := range d.assets {
			if !yield(a.clone()) {
				return
			}
		}
	}
}

// Asset returns a copy of the asset with the given name, and whether the
// DAG holds it.
func (d *DAG) Asset(name string) (Asset, bool) {
	i, ok := d.index[name]
	if !ok {
		return Asset{}, false
	}
	return d.assets[i].clone(), true
}
