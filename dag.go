package tranche

import (
	"container/heap"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"
)

// DAG is a validated set of assets wired by their dependencies. Build one
// with [NewDAG]; it is immutable and safe for concurrent use by several
// runs.
type DAG struct {
	assets     []Asset // topological order, ties broken by name
	index      map[string]int
	deps       [][]int // positions of each asset's dependencies
	dependents [][]int // positions of the assets depending on each
}

// NewDAG validates the assets and returns the DAG they form. It refuses,
// with one error per problem naming the assets involved (joined with
// errors.Join): an empty name, a nil Materializer, a duplicate name, a
// dependency listed twice or missing from the DAG, a cycle (the error
// shows it, as in "a -> b -> a"), a partitioned asset feeding an
// unpartitioned one, dependent partitioned assets with different
// granularities or locations, and partitioning, timeout or retry settings
// that cannot work.
func NewDAG(assets ...Asset) (*DAG, error) {
	d := &DAG{index: make(map[string]int, len(assets))}
	var errs []error
	input := make([]Asset, 0, len(assets))
	for i, a := range assets {
		switch {
		case a.Name == "":
			errs = append(errs, fmt.Errorf("tranche: asset #%d (counting from 0) has an empty name", i))
			continue
		case d.index[a.Name] > 0:
			errs = append(errs, fmt.Errorf("tranche: duplicate asset name %q (assets #%d and #%d)", a.Name, d.index[a.Name]-1, i))
			continue
		}
		d.index[a.Name] = i + 1
		input = append(input, a.clone())
		errs = append(errs, checkAsset(a)...)
	}
	for _, a := range input {
		seen := make(map[string]bool, len(a.Deps))
		for _, dep := range a.Deps {
			switch {
			case seen[dep]:
				errs = append(errs, fmt.Errorf("tranche: asset %q lists dependency %q twice", a.Name, dep))
			case d.index[dep] == 0:
				errs = append(errs, fmt.Errorf("tranche: asset %q depends on %q, which is not in the DAG", a.Name, dep))
			default:
				errs = append(errs, checkEdge(assets[d.index[dep]-1], a)...)
			}
			seen[dep] = true
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	order, cycle := topoSort(input)
	if cycle != nil {
		return nil, fmt.Errorf("tranche: dependency cycle (each asset feeds the next): %s", strings.Join(cycle, " -> "))
	}
	d.assets = order
	for i, a := range order {
		d.index[a.Name] = i
	}
	d.deps = make([][]int, len(order))
	d.dependents = make([][]int, len(order))
	for i, a := range order {
		for _, dep := range a.Deps {
			j := d.index[dep]
			d.deps[i] = append(d.deps[i], j)
			d.dependents[j] = append(d.dependents[j], i)
		}
	}
	return d, nil
}

// checkAsset returns the problems of one asset on its own.
func checkAsset(a Asset) []error {
	var errs []error
	if f, isFunc := a.Materializer.(MaterializeFunc); a.Materializer == nil || isFunc && f == nil {
		errs = append(errs, fmt.Errorf("tranche: asset %q has a nil Materializer", a.Name))
	}
	p := a.Partitioning
	if !p.Granularity.IsValid() {
		if p.Location != nil || p.Column != "" || p.AllowWindow || !p.First.IsZero() {
			errs = append(errs, fmt.Errorf("tranche: asset %q sets Partitioning fields but no Granularity; set one, or leave Partitioning zero for an unpartitioned asset", a.Name))
		}
	} else if p.Column == "" && len(a.Destinations) > 0 {
		errs = append(errs, fmt.Errorf("tranche: partitioned asset %q has destinations but no Partitioning.Column to split its rows by", a.Name))
	}
	for i, dst := range a.Destinations {
		if dst == nil {
			errs = append(errs, fmt.Errorf("tranche: asset %q: destination #%d is nil", a.Name, i))
		}
	}
	if a.Timeout < 0 {
		errs = append(errs, fmt.Errorf("tranche: asset %q: negative Timeout %v", a.Name, a.Timeout))
	}
	if r := a.Retry; r.Attempts < 0 || r.Backoff < 0 || r.MaxBackoff < 0 {
		errs = append(errs, fmt.Errorf("tranche: asset %q: negative Retry setting %+v", a.Name, r))
	}
	return errs
}

// checkEdge returns the problems of the dependency of to on from.
func checkEdge(from, to Asset) []error {
	fp, tp := from.Partitioning, to.Partitioning
	switch {
	case !from.Partitioned():
		return nil
	case !to.Partitioned():
		return []error{fmt.Errorf("tranche: partitioned asset %q (%v) feeds unpartitioned asset %q; partition %q too, or drop the dependency",
			from.Name, fp.Granularity, to.Name, to.Name)}
	case fp.Granularity != tp.Granularity:
		return []error{fmt.Errorf("tranche: asset %q (%v) depends on asset %q (%v); dependent partitioned assets must share a granularity",
			to.Name, tp.Granularity, from.Name, fp.Granularity)}
	case fp.Location != nil && tp.Location != nil && !sameZone(fp.Location, tp.Location):
		return []error{fmt.Errorf("tranche: asset %q (in %v) depends on asset %q (in %v); dependent partitioned assets must share a location",
			to.Name, tp.Location, from.Name, fp.Location)}
	}
	return nil
}

// topoSort orders assets so that each follows its dependencies, taking the
// smallest name among those ready at each step. When the assets hold a
// cycle, it returns one, its first name repeated at the end.
func topoSort(assets []Asset) (order []Asset, cycle []string) {
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
	if len(order) == len(assets) {
		return order, nil
	}
	return nil, findCycle(assets, pos, waiting)
}

// findCycle walks dependencies among the assets left waiting, which all
// lie on or behind a cycle, until a name repeats.
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

// Len returns the number of assets in the DAG.
func (d *DAG) Len() int { return len(d.assets) }

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
