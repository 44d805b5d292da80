package backfill

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

// matcher matches recorded attempts to the partitions of a granularity
// in a location: by start, and for a daily or hourly schedule by the day
// or the hour of their fire.
type matcher struct {
	cadence cron.Cadence
	loc     *time.Location // the zone fires are read in
}

// newMatcher returns the matcher of g's partitions in loc. The root
// package keeps a schedule's parsed form to itself, so the cadence and
// the CRON_TZ zone are read again from g's text form, once per plan.
func newMatcher(g tranche.TimeGranularity, loc *time.Location) matcher {
	if !g.IsSchedule() {
		return matcher{}
	}
	text := strings.TrimSuffix(strings.TrimPrefix(g.String(), "cron("), ")")
	expr, _, _ := strings.Cut(text, "; except ")
	s, err := cron.Parse(expr, nil)
	if err != nil {
		return matcher{} // g's text form always parses; this matches by start alone
	}
	if strings.HasPrefix(expr, "CRON_TZ=") || strings.HasPrefix(expr, "TZ=") {
		loc = s.Location()
	}
	cadence, _ := s.Cadence()
	return matcher{cadence: cadence, loc: loc}
}

// byFire reports whether m matches attempts by their fire.
func (m matcher) byFire() bool { return m.cadence != cron.Irregular }

// key returns the day (a day number) or the hour (the instant it began)
// of fire, in m's zone.
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

// span returns the starts of the attempts that may match the partitions
// of [from, to): the range itself, widened for a daily or hourly schedule
// by more than a day or an hour on either side, where the slots of
// another schedule of the same days start.
func (m matcher) span(from, to time.Time) (time.Time, time.Time) {
	switch m.cadence {
	case cron.Daily:
		return from.Add(-50 * time.Hour), to.Add(50 * time.Hour)
	case cron.Hourly:
		return from.Add(-3 * time.Hour), to.Add(3 * time.Hour)
	}
	return from, to
}

// readLatest sets latest[i] to the latest attempt of dag that matches
// parts[i], consecutive partitions oldest first, or leaves it nil.
func readLatest(ctx context.Context, l ledger.Ledger, dag string, m matcher, parts []tranche.TimePartition, latest []*ledger.Attempt) error {
	if len(parts) == 0 {
		return nil
	}
	from, to := m.span(parts[0].Start, parts[len(parts)-1].End)
	var found []ledger.Attempt
	var at []int     // found[k] is the attempt at parts[at[k]]
	var keys []int64 // the fire keys of parts, when matching by fire
	if m.byFire() {
		keys = make([]int64, len(parts))
		for i, p := range parts {
			keys[i] = m.key(p.End)
		}
	}
	for a, err := range l.Latest(ctx, dag, from, to) {
		if err != nil {
			return fmt.Errorf("tranche: reading ledger: %w", err)
		}
		if i, ok := slices.BinarySearchFunc(parts, a.Start, func(p tranche.TimePartition, t time.Time) int { return p.Start.Compare(t) }); ok {
			found, at = append(found, a), append(at, i)
		} else if keys != nil {
			if i, ok := slices.BinarySearch(keys, m.key(a.End)); ok {
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

// changedIn reports whether an attempt of dag that matches a partition of
// w by m's rule changed after revision rev: whether a plan of w is stale.
// changed reports whether an attempt starting in [from, to) changed after
// rev.
//
// For a schedule matched by fire, m.span reaches two days (or three
// hours) beyond w, where the neighbouring slots start: the live
// schedule's slot right after a window that ends yesterday among them,
// whose run must not make the plan stale. Schedules of one identity fire
// on the same days, once a day (or in the same hours, once an hour), so
// an attempt that starts in a partition of w fires on the day of that
// partition's fire or of the next one's: from the end of w's first
// partition to the start of its last, a change is taken to match, and
// that middle, however long, is one question. (Where a zone moves its
// clock by half an hour, one hourly schedule may skip an hour another
// fires in, and a change there that matches nothing makes the plan stale
// all the same, as every change in the span once did.) The two edges,
// the first and last partitions with what lies beyond them, hold a
// handful of slots: those are read when they changed, and each changed
// attempt is matched.
func changedIn(ctx context.Context, l ledger.Ledger, dag string, m matcher, w tranche.TimePartitionWindow, rev int64,
	changed func(from, to time.Time) (bool, error)) (bool, error) {
	from, to := m.span(w.Start(), w.End())
	if !m.byFire() {
		return changed(from, to)
	}
	edges := []ledger.Range{{From: from, To: to}}
	if head, tail := w.Oldest().End, w.Newest().Start; head.Before(tail) {
		if ok, err := changed(head, tail); err != nil || ok {
			return ok, err
		}
		edges = []ledger.Range{{From: from, To: head}, {From: tail, To: to}}
	}
	for _, e := range edges {
		ok, err := changed(e.From, e.To)
		if err != nil {
			return false, err
		}
		if !ok {
			continue
		}
		for a, err := range l.Latest(ctx, dag, e.From, e.To) {
			if err != nil {
				return false, fmt.Errorf("tranche: reading ledger: %w", err)
			}
			if a.Revision > rev && m.matches(w, a) {
				return true, nil
			}
		}
	}
	return false, nil
}

// matches reports whether attempt a matches a partition of w: by its
// start, or, for a schedule matched by fire, by the day or the hour of
// its fire, as readLatest matches them.
func (m matcher) matches(w tranche.TimePartitionWindow, a ledger.Attempt) bool {
	g, loc := w.Granularity(), w.Location()
	if w.Contains(a.Start) && tranche.PartitionOf(g, a.Start.In(loc)).Start.Equal(a.Start) {
		return true
	}
	if !m.byFire() {
		return false
	}
	// The partitions whose fire may share a's day or hour end within
	// m.span of a's fire.
	k := m.key(a.End)
	lo, hi := m.span(a.End, a.End)
	p := tranche.PartitionOf(g, lo.In(loc))
	if p.Start.Before(w.Start()) {
		p = w.Oldest()
	}
	for ; w.Contains(p.Start) && !p.End.After(hi); p = p.Next() {
		if m.key(p.End) == k {
			return true
		}
	}
	return false
}
