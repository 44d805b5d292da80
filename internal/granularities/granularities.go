// Package granularities tells a DAG of several granularities from one of
// a single granularity, for every package that treats the two apart: a
// backfill and the scheduler run the former asset by asset, each asset
// recorded under a DAG identity of its own, and the command and the
// pages show its assets.
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
