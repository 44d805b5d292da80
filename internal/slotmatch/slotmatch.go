// Package slotmatch matches recorded attempts to the partitions of a
// granularity, the one rule that package backfill's plans and package
// schedule's scheduler share: by start, and for a cron schedule that
// fires once a day (or once an hour) by the local date (or hour) of its
// fire, so that a slot of a moved schedule ("0 2 * * *" become
// "0 1 * * *") whose day the old schedule covered counts as recorded.
package slotmatch

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/internal/cron"
	"github.com/tranche-dev/tranche/internal/cronspec"
	"github.com/tranche-dev/tranche/ledger"
)

// Matcher matches recorded attempts to the partitions of a granularity
// in a location. The zero Matcher matches by start alone.
type Matcher struct {
	cadence cron.Cadence
	loc     *time.Location // the zone fires are read in
}

// New returns the matcher of g's partitions in loc, read from the
// schedule's parsed form (internal/cronspec).
func New(g tranche.TimeGranularity, loc *time.Location) Matcher {
	spec := cronspec.Of(g)
	if spec == nil {
		return Matcher{} // not a schedule: by start alone
	}
	if spec.Zone != nil {
		loc = spec.Zone
	}
	return Matcher{cadence: spec.Cadence, loc: loc}
}

// CronZone returns the CRON_TZ zone of schedule g, or nil when g names
// none or is not a schedule.
func CronZone(g tranche.TimeGranularity) *time.Location {
	if spec := cronspec.Of(g); spec != nil {
		return spec.Zone
	}
	return nil
}

// ByFire reports whether m matches attempts by their fire.
func (m Matcher) ByFire() bool { return m.cadence != cron.Irregular }

// Key returns the day (a day number) or the hour (the instant it began)
// of fire, in m's zone.
func (m Matcher) Key(fire time.Time) int64 {
	u := fire.Unix()
	_, off := fire.In(m.loc).Zone()
	local := u + int64(off)
	if m.cadence == cron.Daily {
		return floorDiv(local, 86400)
	}
	return u - (local - floorDiv(local, 3600)*3600)
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// Span returns the starts of the attempts that may match the partitions
// of [from, to): the range itself, widened for a daily or hourly schedule
// by more than a day or an hour on either side, where the slots of
// another schedule of the same days start.
func (m Matcher) Span(from, to time.Time) (time.Time, time.Time) {
	switch m.cadence {
	case cron.Daily:
		return from.Add(-50 * time.Hour), to.Add(50 * time.Hour)
	case cron.Hourly:
		return from.Add(-3 * time.Hour), to.Add(3 * time.Hour)
	}
	return from, to
}

// ReadLatest sets latest[i] to the latest attempt of dag that matches
// parts[i] (sorted by start, not necessarily adjacent), or leaves it
// nil: of several matches, the one changed last.
func (m Matcher) ReadLatest(ctx context.Context, l ledger.Reader, dag string, parts []tranche.TimePartition, latest []*ledger.Attempt) error {
	if len(parts) == 0 {
		return nil
	}
	from, to := m.Span(parts[0].Start, parts[len(parts)-1].End)
	var found []ledger.Attempt
	var at []int     // found[k] is the attempt at parts[at[k]]
	var keys []int64 // the fire keys of parts, when matching by fire
	if m.ByFire() {
		keys = make([]int64, len(parts))
		for i, p := range parts {
			keys[i] = m.Key(p.End)
		}
	}
	for a, err := range l.Latest(ctx, dag, from, to) {
		if err != nil {
			return fmt.Errorf("tranche: reading ledger: %w", err)
		}
		if i, ok := slices.BinarySearchFunc(parts, a.Start, func(p tranche.TimePartition, t time.Time) int { return p.Start.Compare(t) }); ok {
			found, at = append(found, a), append(at, i)
		} else if keys != nil {
			if i, ok := slices.BinarySearch(keys, m.Key(a.End)); ok {
				found, at = append(found, a), append(at, i)
			}
		}
	}
	for k, i := range at {
		if prev := latest[i]; prev == nil || prev.Revision < found[k].Revision {
			latest[i] = &found[k]
		}
	}
	return nil
}

// Matches reports whether attempt a matches a partition of w: by its
// start, or, for a schedule matched by fire, by the day or the hour of
// its fire, as ReadLatest matches them.
func (m Matcher) Matches(w tranche.TimePartitionWindow, a ledger.Attempt) bool {
	g, loc := w.Granularity(), w.Location()
	if w.Contains(a.Start) && tranche.PartitionOf(g, a.Start.In(loc)).Start.Equal(a.Start) {
		return true
	}
	if !m.ByFire() {
		return false
	}
	// The partitions whose fire may share a's day or hour end within
	// m.Span of a's fire.
	k := m.Key(a.End)
	lo, hi := m.Span(a.End, a.End)
	p := tranche.PartitionOf(g, lo.In(loc))
	if p.Start.Before(w.Start()) {
		p = w.Oldest()
	}
	for ; w.Contains(p.Start) && !p.End.After(hi); p = p.Next() {
		if m.Key(p.End) == k {
			return true
		}
	}
	return false
}
