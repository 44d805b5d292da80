package schedule

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/internal/cron"
	"github.com/tranche-dev/tranche/ledger"
)

// matcher matches recorded attempts to slots as a backfill's plan does:
// by start, and for a schedule that fires once a day (or once an hour) by
// the local date (or hour) of its fire, so that a slot of a moved
// schedule ("0 2 * * *" become "0 1 * * *") whose day the old schedule
// covered counts as recorded. Backfill keeps its matcher unexported; this
// is the same rule, and the tests check it against backfill's plans.
type matcher struct {
	cadence cron.Cadence
	loc     *time.Location // the zone fires are read in
}

// cronZone returns the CRON_TZ zone of schedule g, or nil when g has
// none or is not a schedule. The root package keeps a schedule's parsed
// form to itself, so it is read again from g's canonical text, as
// backfill does.
func cronZone(g tranche.TimeGranularity) *time.Location {
	s, zoned := parseSchedule(g)
	if !zoned {
		return nil
	}
	return s.Location()
}

func parseSchedule(g tranche.TimeGranularity) (s *cron.Schedule, zoned bool) {
	if !g.IsSchedule() {
		return nil, false
	}
	text := strings.TrimSuffix(strings.TrimPrefix(g.String(), "cron("), ")")
	expr, _, _ := strings.Cut(text, "; except ")
	s, err := cron.Parse(expr, nil)
	if err != nil {
		return nil, false // g's text form always parses
	}
	return s, strings.HasPrefix(expr, "CRON_TZ=") || strings.HasPrefix(expr, "TZ=")
}

func newMatcher(g tranche.TimeGranularity, loc *time.Location) matcher {
	s, zoned := parseSchedule(g)
	if s == nil {
		return matcher{}
	}
	if zoned {
		loc = s.Location()
	}
	cadence, _ := s.Cadence()
	return matcher{cadence: cadence, loc: loc}
}

func (m matcher) byFire() bool { return m.cadence != cron.Irregular }

// key returns the local day (a day number) or the hour (the instant it
// began) of fire.
func (m matcher) key(fire time.Time) int64 {
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

// span returns the starts of the attempts that may match the slots of
// [from, to): wider than a day or an hour either side for a schedule
// matched by fire, where another schedule's slots of the same days start.
func (m matcher) span(from, to time.Time) (time.Time, time.Time) {
	switch m.cadence {
	case cron.Daily:
		return from.Add(-50 * time.Hour), to.Add(50 * time.Hour)
	case cron.Hourly:
		return from.Add(-3 * time.Hour), to.Add(3 * time.Hour)
	}
	return from, to
}

// latest returns the latest attempt of dag matching each of parts
// (sorted by start, not necessarily adjacent), nil where none does: of
// several matches, the one changed last.
func latest(ctx context.Context, l ledger.Ledger, dag string, m matcher, parts []tranche.TimePartition) ([]*ledger.Attempt, error) {
	out := make([]*ledger.Attempt, len(parts))
	if len(parts) == 0 {
		return out, nil
	}
	var keys []int64
	if m.byFire() {
		keys = make([]int64, len(parts))
		for i, p := range parts {
			keys[i] = m.key(p.End)
		}
	}
	from, to := m.span(parts[0].Start, parts[len(parts)-1].End)
	for a, err := range l.Latest(ctx, dag, from, to) {
		if err != nil {
			return nil, fmt.Errorf("tranche: reading ledger: %w", err)
		}
		i, ok := slices.BinarySearchFunc(parts, a.Start, func(p tranche.TimePartition, t time.Time) int { return p.Start.Compare(t) })
		if !ok && keys != nil {
			i, ok = slices.BinarySearch(keys, m.key(a.End))
		}
		if ok && (out[i] == nil || out[i].Revision < a.Revision) {
			out[i] = &a
		}
	}
	return out, nil
}
