package tranche

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tranche-dev/tranche/internal/calendar"
	"github.com/tranche-dev/tranche/internal/cron"
)

// A cron schedule as a granularity: each fire time closes a slot that
// began at the previous fire, so the slots of "0 2 * * *" are
// [yesterday 02:00, today 02:00), the window a job firing at 02:00 loads.
// Slots tile time like any partitions, and everything that takes a
// TimeGranularity takes a schedule: windows, lookback, keys, runners and
// backfills.

// A schedule granularity holds its parsed form, a *cron.Spec: equal
// schedules share one (cron.Intern), so that TimeGranularity stays
// comparable with ==, and the packages that need more than its text
// read it through internal/cronspec, which finds the same spec by the
// text (cron.SpecOf).

// ParseCron returns the granularity of a cron schedule's slots. expr is a
// standard five-field expression with names (MON, JAN), ranges, steps and
// lists, or a macro (@hourly, @daily, @weekly, @monthly, @yearly), with an
// optional CRON_TZ=Zone prefix; day of month and day of week combine with
// OR when both are restricted, as in Vixie cron. Without CRON_TZ the
// schedule follows the location of the times it is used with.
//
// excluded are holidays, as dates "2006-01-02" in the schedule's zone: an
// excluded day has no slot, and the next slot covers it, so no time is
// lost.
//
// Across daylight saving time, a schedule with fixed hours fires once per
// local day: a wall time the clock skips fires at the first instant after
// the gap, a repeated one at its first occurrence. A schedule whose hour
// field is * or */n fires at every real matching instant, so "0 * * * *"
// has 23 and 25 slots on New York's transition days.
//
// ParseCron refuses, naming the field and the text, a malformed
// expression, an unknown zone, an expression that can never fire
// ("0 0 30 2 *") and an excluded date that does not exist; each refusal
// is a [*ParseError] of Type "cron" for the expression, whose Reason says
// what was wrong ("hour field \"25\": 25 is out of range 0-23").
func ParseCron(expr string, excluded ...string) (TimeGranularity, error) {
	s, err := cron.Parse(expr, nil)
	if err != nil {
		return TimeGranularity{}, &ParseError{Type: "cron", Text: expr, Reason: strings.TrimPrefix(err.Error(), "cron: ")}
	}
	var dates []cron.Date
	var days []string
	for _, d := range excluded {
		day, ok := parseDate(strings.TrimSpace(d))
		if !ok {
			reason := fmt.Sprintf("excluded date %q is not a date", d)
			if r := fieldReason(strings.TrimSpace(d)); r != "" {
				reason += ": " + r
			}
			return TimeGranularity{}, &ParseError{Type: "cron", Text: expr, Reason: reason + "; want the form 2006-01-02"}
		}
		y, m, dd := calendar.CivilFromDays(day)
		dates = append(dates, cron.Date{Year: int(y), Month: time.Month(m), Day: dd})
		days = append(days, strings.TrimSpace(d))
	}
	slices.Sort(days)
	days = slices.Compact(days)
	spec := cron.Intern(cron.NewSpec(s, cron.Zoned(expr), dates, days))
	return TimeGranularity{unit: unitCron, n: 1, cron: spec}, nil
}

// parseCronText parses the text inside "cron(...)".
func parseCronText(text string) (TimeGranularity, error) {
	expr, except, _ := strings.Cut(text, ";")
	var days []string
	if except = strings.TrimSpace(except); except != "" {
		list, ok := strings.CutPrefix(except, "except")
		if !ok {
			return TimeGranularity{}, &ParseError{Type: "cron", Text: text, Reason: `want "cron(EXPR)" or "cron(EXPR; except 2006-01-02 ...)"`}
		}
		days = strings.Fields(list)
	}
	return ParseCron(expr, days...)
}

// IsSchedule reports whether g is a cron schedule made by [ParseCron].
func (g TimeGranularity) IsSchedule() bool { return g.unit == unitCron }

// SlotAt returns the slot of schedule g that fire closes: the partition
// [previous fire, fire). A time that is not a fire time is refused with
// the nearest fire times before and after it.
//
// The slot is named by fire's instant, not by the offset that spells it:
// a schedule with CRON_TZ has its slots in that zone, so
// 2026-10-03T02:00:00+09:00, 2026-10-02T17:00:00Z and
// 2026-10-02T12:00:00-05:00 all name the slot of
// "CRON_TZ=Asia/Tokyo 0 2 * * *" in Asia/Tokyo, the one [SlotWindow]
// returns for that fire. The zone is part of a DAG's identity, so a
// backfill of the slot and a backfill of a range holding it then share
// their history. A schedule without CRON_TZ follows the location of the
// times it is used with (see [ParseCron]): it is evaluated in
// fire.Location(), and its slot is there, as SlotWindow's are in now's
// location; give the fire in that location (fire.In(now.Location())) for
// the two to agree.
func SlotAt(g TimeGranularity, fire time.Time) (TimePartition, error) {
	if !g.IsSchedule() {
		return TimePartition{}, fmt.Errorf("tranche: SlotAt takes a cron schedule, not %v", g)
	}
	loc := fire.Location()
	if g.cron.Zone != nil {
		loc = g.cron.Zone
	}
	return slotIn(g, fire, loc)
}

// slotIn is SlotAt with the slot in loc, whatever the schedule's zone:
// a partition key is parsed in the location its caller names, which may
// not be a schedule's CRON_TZ.
func slotIn(g TimeGranularity, fire time.Time, loc *time.Location) (TimePartition, error) {
	c := newCursor(g, loc)
	u := unix(fire)
	if prev := c.Start(u); prev != u || fire.Nanosecond() != 0 {
		return TimePartition{}, fmt.Errorf("tranche: %s is not a fire time of %v; the nearest are %s and %s",
			fire.Format(time.RFC3339Nano), g, at(prev, c.loc).Format(time.RFC3339), at(c.Next(u), c.loc).Format(time.RFC3339))
	}
	return c.partition(u - 1), nil
}

// SlotWindow returns the window of schedule g's slots that fire from
// `from` to `to`, both included, as people type bounds for a backfill of a
// schedule's past: a date ("2026-01-05") means the start of that day for
// from and, for to, through the end of that day, so that
// SlotWindow(g, "2026-10-02", "2026-10-02", now) holds the slots that fire
// on 10-02 and not the one firing at the next midnight (an hourly schedule
// has 24 there, 23 or 25 on DST days); a time without an offset is read in
// the schedule's zone (its CRON_TZ, else now's location); RFC 3339 is
// taken as is. An empty to means now, and a later to is clamped to now.
// The fires of now's minute and later belong to the live schedule: with
// now at 02:00:30, the 02:00 fire is not in the window, so a backfill and
// the live job never both run it. A from later than now, or later than
// to, is refused, as is a range in which nothing fires.
func SlotWindow(g TimeGranularity, from, to string, now time.Time) (TimePartitionWindow, error) {
	if !g.IsSchedule() {
		return TimePartitionWindow{}, fmt.Errorf("tranche: SlotWindow takes a cron schedule, not %v", g)
	}
	loc := now.Location()
	if g.cron.Zone != nil {
		loc = g.cron.Zone
	}
	lo, err := slotBound(from, loc, false)
	if err != nil {
		return TimePartitionWindow{}, err
	}
	// hi is the last instant a fire may fall on: to itself, or the last
	// second of to's day.
	hi := now.In(loc)
	if strings.TrimSpace(to) != "" {
		if hi, err = slotBound(to, loc, true); err != nil {
			return TimePartitionWindow{}, err
		}
		hi = hi.In(loc)
	}
	switch {
	case lo.After(now):
		return TimePartitionWindow{}, fmt.Errorf("tranche: from %s is later than now (%s): a backfill covers the past", lo.Format(time.RFC3339), now.Format(time.RFC3339))
	case lo.After(hi):
		return TimePartitionWindow{}, fmt.Errorf("tranche: from %s is later than to %s", lo.Format(time.RFC3339), hi.Format(time.RFC3339))
	}
	// The live schedule owns the fires from the start of now's minute on.
	u := unix(now)
	_, off := now.In(loc).Zone()
	live := u - calendar.Mod(u+int64(off), 60)
	last := unix(hi)
	if last >= live {
		last = live - 1
	}
	c := newCursor(g, loc)
	first := c.Next(unix(lo) - 1)
	lastFire := c.Start(last)
	if first > lastFire {
		note := ""
		if first >= live {
			note = fmt.Sprintf(" (the fires from %s on, now's minute, belong to the live schedule)", at(live, loc).Format(time.RFC3339))
		}
		return TimePartitionWindow{}, fmt.Errorf("tranche: %v fires nowhere from %s to %s%s; the nearest fire times are %s and %s",
			g, lo.Format(time.RFC3339), at(last, loc).Format(time.RFC3339), note, at(lastFire, loc).Format(time.RFC3339), at(first, loc).Format(time.RFC3339))
	}
	firstStart, _ := c.Bounds(first - 1)
	lastStart, _ := c.Bounds(lastFire - 1)
	return c.window(firstStart, lastStart, lastFire), nil
}

// slotBound parses a bound of SlotWindow. A date is its day's first
// instant, or with end the last second before the next day's first
// instant: fires are whole seconds, so "up to and including that second"
// is "before the next day".
func slotBound(s string, loc *time.Location, end bool) (time.Time, error) {
	t, err := ParseBound(s, loc)
	if err != nil {
		return time.Time{}, err
	}
	if day, isDate := parseDate(strings.TrimSpace(s)); isDate && end {
		c := newCursor(Day, loc)
		return at(c.FirstInstant(day+1)-1, loc), nil
	}
	return t, nil
}
