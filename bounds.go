package tranche

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tranche-dev/tranche/internal/calendar"
	"github.com/tranche-dev/tranche/internal/partition"
)

// WindowBetween returns the window of g covering the half-open span
// [from, to), as schedulers and chunked backfills pass bounds, in
// from.Location(). Both bounds must lie on partition boundaries; one that
// does not is refused with an error naming the nearest boundaries on
// either side, the start and end of [PartitionOf] at the bound. Equal instants in different zones are the same bound.
// It fails for an empty or inverted span.
func WindowBetween(g TimeGranularity, from, to time.Time) (TimePartitionWindow, error) {
	if !g.IsValid() {
		return TimePartitionWindow{}, errors.New("tranche: WindowBetween with the zero TimeGranularity")
	}
	loc := from.Location()
	to = to.In(loc)
	switch c := from.Compare(to); {
	case c == 0:
		return TimePartitionWindow{}, fmt.Errorf("tranche: empty window: from and to are both %s; to must be later", from.Format(time.RFC3339Nano))
	case c > 0:
		return TimePartitionWindow{}, fmt.Errorf("tranche: inverted window: from %s is later than to %s", from.Format(time.RFC3339Nano), to.Format(time.RFC3339Nano))
	}
	c := newCursor(g, loc)
	start, err := c.boundary("from", from)
	if err != nil {
		return TimePartitionWindow{}, err
	}
	end, err := c.boundary("to", to)
	if err != nil {
		return TimePartitionWindow{}, err
	}
	return c.window(start, c.Start(end-1), end), nil
}

// boundary returns t as Unix seconds if it is a partition boundary.
func (c *cursor) boundary(name string, t time.Time) (int64, error) {
	s, e := c.Bounds(unix(t))
	if s == unix(t) && t.Nanosecond() == 0 {
		return s, nil
	}
	return 0, fmt.Errorf("tranche: %s %s is not a %v boundary in %v; the nearest are %s and %s",
		name, t.Format(time.RFC3339Nano), c.g, t.Location(), at(s, c.loc).Format(time.RFC3339), at(e, c.loc).Format(time.RFC3339))
}

var (
	offsetLayouts = []string{time.RFC3339Nano, "2006-01-02T15:04Z07:00"}
	wallLayouts   = []string{"2006-01-02T15:04:05.999999999", "2006-01-02T15:04", "2006-01-02 15:04:05.999999999", "2006-01-02 15:04"}
)

// ParseBound parses a window bound given as text, as from a command line
// or a config file. It accepts:
//
//   - RFC 3339 with an offset ("2026-01-01T00:00:00Z",
//     "2026-01-01T02:00:00+02:00"), converted to loc when loc is not nil.
//     With a nil loc the bound keeps its offset, the same on every host
//     and never time.Local: a zero offset ("Z", "+00:00") is [time.UTC],
//     any other a fixed zone named by the offset ("+02:00"). A window
//     between such bounds follows that fixed offset, and the backfill it
//     names has one id wherever it runs.
//   - Only when loc names a zone: a date ("2026-01-01", its first instant
//     in loc) or a wall time without an offset ("2026-01-01T06:00",
//     "2026-01-01 06:00:00"), read in loc.
//
// It refuses a bound without an offset and without a zone, a wall time
// that loc skips or repeats, and an instant outside the years 0001 to 9999,
// in UTC or in its own zone, which RFC 3339 cannot write back. Every refusal is a
// [*ParseError] of Type "bound" whose Reason says what was wrong: a month
// or day out of range, a relative word such as "yesterday", a missing
// zone.
func ParseBound(s string, loc *time.Location) (time.Time, error) {
	t, reason := parseBound(s, loc)
	if reason == "" {
		reason = outsideRFC3339(t)
	}
	if reason != "" {
		return time.Time{}, &ParseError{Type: "bound", Text: s, Reason: reason}
	}
	return t, nil
}

// outsideRFC3339 says why RFC 3339 cannot write t, or returns "". Both
// years count: a bound is written in its own zone, and compared in UTC.
func outsideRFC3339(t time.Time) string {
	const want = "bounds lie in the years 0001 to 9999, in UTC and in their zone, which RFC 3339 can write"
	if y := t.UTC().Year(); y < 1 || y > 9999 {
		return fmt.Sprintf("it lies in year %d in UTC; %s", y, want)
	}
	if y := t.Year(); y < 1 || y > 9999 {
		return fmt.Sprintf("it lies in year %d in %s; %s", y, t.Location(), want)
	}
	return ""
}

// parseBound is ParseBound without the range check; it returns the reason
// of a refusal rather than an error.
func parseBound(s string, loc *time.Location) (time.Time, string) {
	text := strings.TrimSpace(s)
	for _, layout := range offsetLayouts {
		if t, err := time.Parse(layout, text); err == nil {
			if loc == nil {
				// time.Parse returns time.Local when the offset happens to
				// be the host's: a bound must mean the same on every host.
				_, off := t.Zone()
				loc = offsetZone(off)
			}
			return t.In(loc), ""
		}
	}
	day, isDate := parseDate(text)
	var wall time.Time
	isWall := false
	for _, layout := range wallLayouts {
		if t, err := time.Parse(layout, text); err == nil {
			wall, isWall = t, true
			break
		}
	}
	switch {
	case !isDate && !isWall:
		return time.Time{}, notATime(text)
	case loc == nil:
		example := text + "T00:00:00Z"
		if isWall {
			example = wall.Format("2006-01-02T15:04:05Z")
		}
		return time.Time{}, fmt.Sprintf("no UTC offset and no zone was given; write it with an offset, as in %s, or name its zone", example)
	case isDate:
		c := newCursor(Day, loc)
		return at(c.FirstInstant(day), loc), ""
	}
	return wallInstant(wall, loc)
}

// notATime explains why text is no bound at all.
func notATime(text string) string {
	const want = "write RFC 3339 with an offset, as in 2026-01-01T00:00:00Z, or a date or time with a zone"
	if text == "" {
		return "empty; " + want
	}
	if w := relativeWord(text); w != "" {
		return fmt.Sprintf("relative words such as %s are not times: use Lookback for a window relative to now, or %s", w, want)
	}
	if r := fieldReason(text); r != "" {
		return r
	}
	return "not a time; " + want
}

// wallInstant finds the one instant at which loc shows the wall time of
// wall (read as UTC).
func wallInstant(wall time.Time, loc *time.Location) (time.Time, string) {
	w := wall.Unix()
	var found []int64
	for u := w - partition.ZoneMargin; u < w+partition.ZoneMargin; {
		sp := calendar.SpanAt(loc, u)
		if v := w - sp.Offset; sp.Contains(v) && (len(found) == 0 || found[len(found)-1] != v) {
			found = append(found, v)
		}
		if sp.End == calendar.Forever {
			break
		}
		u = sp.End
	}
	switch len(found) {
	case 1:
		return time.Unix(found[0], int64(wall.Nanosecond())).In(loc), ""
	case 0:
		return time.Time{}, fmt.Sprintf("it does not exist in %v: the clocks skip it; write it with an offset", loc)
	}
	a, b := at(found[0], loc), at(found[1], loc)
	return time.Time{}, fmt.Sprintf("it occurs twice in %v, at %s and %s; write it with the offset you mean", loc, a.Format(time.RFC3339), b.Format(time.RFC3339))
}
