// Package granularities holds what the packages that run a DAG of
// several granularities share: [Several] tells such a DAG from one of a
// single granularity, which a backfill and the scheduler run asset by
// asset, each asset recorded under a DAG identity of its own, and the
// command and the pages show by asset; [Stale] is the rule by which an
// asset's partition is stale.
package granularities

import "github.com/tranche-dev/tranche"

// Several reports whether dag's partitioned assets have more than one
// granularity. Unpartitioned assets do not count.
func Several(dag *tranche.DAG) bool {
	var g tranche.TimeGranularity
	for a := range dag.Assets() {
		switch p := a.Partitioning.Granularity; {
		case !p.IsValid():
		case !g.IsValid():
			g = p
		case p != g:
			return true
		}
	}
	return false
}
