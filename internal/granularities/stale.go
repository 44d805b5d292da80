package granularities

import (
	"fmt"
	"time"

	"github.com/tranche-dev/tranche/ledger"
)

// Stale finds why a partition of an asset that maps to partitions of
// its dependencies is stale, for the scheduler's RerunStale: an upstream
// partition whose latest success ended after the partition's own latest
// success began was materialized again after the partition read it. Of
// several, the one that ended last is named. A backfill's plan applies
// the same rule to its compact attempts (backfill's unitPlans.judge),
// and says it in the same words.
type Stale struct {
	own    *ledger.Attempt
	newest time.Time
	why    string
}

// NewStale returns a Stale of a partition whose latest attempt is own
// (nil: never attempted, which nothing makes stale).
func NewStale(own *ledger.Attempt) Stale {
	return Stale{own: own}
}

// Newer looks at a partition of a dependency whose latest attempt is a
// (nil: never attempted), and reports whether it makes the partition
// stale and ended after every one seen before; the caller then names it
// with [Stale.Name]. Keys are made only then: a plan looks at a year of
// hours and names a handful.
func (s *Stale) Newer(a *ledger.Attempt) bool {
	if s.own == nil || s.own.State != ledger.StateSucceeded || a == nil || a.State != ledger.StateSucceeded {
		return false
	}
	if !a.Finished.After(s.own.Started) || !a.Finished.After(s.newest) {
		return false
	}
	s.newest = a.Finished
	return true
}

// Name names the partition Newer last reported: key of the asset named
// asset.
func (s *Stale) Name(asset, key string) {
	s.why = fmt.Sprintf("stale: upstream %s %s rematerialized", asset, key)
}

// Why returns why the partition is stale ("stale: upstream events
// 2026-03-08T05:00-04:00 rematerialized"), or "" when no partition seen
// makes it so.
func (s *Stale) Why() string { return s.why }
