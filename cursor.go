package tranche

import (
	"time"

	"github.com/tranche-dev/tranche/internal/partition"
)

// cursor is the partition engine's cursor (internal/partition) for one
// granularity in one location: this package is the engine's face, which
// turns a TimeGranularity into the engine's rule and its boundaries, Unix
// seconds, into partitions and windows.
type cursor struct {
	partition.Cursor
	g   TimeGranularity
	loc *time.Location
}

// newCursor returns the cursor of g's partitions in loc.
func newCursor(g TimeGranularity, loc *time.Location) cursor {
	r := partition.Rule{Unit: g.unit, N: int64(g.n)}
	if g.unit == unitCron {
		r.Sched = g.cron.Schedule(loc)
	}
	return cursor{Cursor: partition.NewCursor(r, loc), g: g, loc: loc}
}

// unix returns the whole second that holds t: zone transitions and
// partition boundaries are whole seconds, so an instant lies at or after
// a boundary exactly when its whole second does.
func unix(t time.Time) int64 { return t.Unix() }

// at returns the instant u in loc.
func at(u int64, loc *time.Location) time.Time { return time.Unix(u, 0).In(loc) }
