package tranche

import (
	"errors"
	"fmt"
	"iter"
	"strings"
	"time"
)

// TimePartitionWindow is a run of consecutive partitions of one
// granularity in one location: the half-open span [Start, End) from the
// start of its oldest partition to the end of its newest.
//
// A window is a small value and lazy: it holds its bounds and length, never
// its partitions, so a century of minutes costs as little as a day. Range
// over it with [TimePartitionWindow.All] (newest first) or
// [TimePartitionWindow.OldestFirst]. The zero value is an empty window.
type TimePartitionWindow struct {
	g                TimeGranularity
	loc              *time.Location
	start, last, end int64 // oldest start, newest start, newest end (Unix seconds)
	n                int
}

// NewTimePartitionWindow returns the window of g from the partition that
// holds first to the partition that holds last, both included, in
// first.Location() (last is converted). It fails if g is invalid or if
// last's partition precedes first's.
func NewTimePartitionWindow(g TimeGranularity, first, last time.Time) (TimePartitionWindow, error) {
	if !g.IsValid() {
		return TimePartitionWindow{}, errors.New("tranche: NewTimePartitionWindow with the zero TimeGranularity")
	}
	loc := first.Location()
	c := newCursor(g, loc)
	start, _ := c.Bounds(unix(first))
	lastStart, end := c.Bounds(unix(last))
	if lastStart < start {
		return TimePartitionWindow{}, fmt.Errorf("tranche: inverted window: last %s (partition %s) is before first %s (partition %s)",
			last.In(loc).Format(time.RFC3339), c.partition(lastStart).Key(), first.Format(time.RFC3339), c.partition(start).Key())
	}
	return c.window(start, lastStart, end), nil
}

// window builds the window [start, end) whose newest partition starts at
// last, counting its partitions.
func (c *cursor) window(start, last, end int64) TimePartitionWindow {
	return TimePartitionWindow{g: c.g, loc: c.loc, start: start, last: last, end: end, n: c.Count(start, end)}
}

// Granularity returns the window's granularity.
func (w TimePartitionWindow) Granularity() TimeGranularity { return w.g }

// Location returns the location whose calendar the window's partitions
// follow.
func (w TimePartitionWindow) Location() *time.Location {
	if w.loc == nil {
		return time.UTC
	}
	return w.loc
}

// Start returns the start of the oldest partition; the zero time for an
// empty window.
func (w TimePartitionWindow) Start() time.Time {
	if w.n == 0 {
		return time.Time{}
	}
	return at(w.start, w.loc)
}

// End returns the end of the newest partition, the first instant after the
// window; the zero time for an empty window.
func (w TimePartitionWindow) End() time.Time {
	if w.n == 0 {
		return time.Time{}
	}
	return at(w.end, w.loc)
}

// Len returns the number of partitions in the window. It costs nothing:
// the count is made once, when the window is built, from the calendar
// rather than by walking the partitions.
func (w TimePartitionWindow) Len() int { return w.n }

// Newest returns the window's newest partition; the zero partition for an
// empty window.
func (w TimePartitionWindow) Newest() TimePartition {
	if w.n == 0 {
		return TimePartition{}
	}
	return TimePartition{Start: at(w.last, w.loc), End: at(w.end, w.loc), Granularity: w.g}
}

// Oldest returns the window's oldest partition; the zero partition for an
// empty window.
func (w TimePartitionWindow) Oldest() TimePartition {
	if w.n == 0 {
		return TimePartition{}
	}
	c := newCursor(w.g, w.loc)
	return TimePartition{Start: at(w.start, w.loc), End: at(c.Next(w.start), w.loc), Granularity: w.g}
}

// Contains reports whether t lies in [w.Start(), w.End()).
func (w TimePartitionWindow) Contains(t time.Time) bool {
	u := unix(t)
	return w.n > 0 && w.start <= u && u < w.end
}

// All returns the window's partitions newest first, the order backfills
// use so that an interrupted run leaves the most recent data in place. It
// yields nothing for an empty window and allocates nothing per partition.
func (w TimePartitionWindow) All() iter.Seq[TimePartition] {
	return func(yield func(TimePartition) bool) {
		if w.n == 0 {
			return
		}
		c := newCursor(w.g, w.loc)
		s, end := w.last, at(w.end, w.loc)
		for {
			// at, written out: it exceeds the inliner's budget, and
			// its call costs about a tenth of each step through hours.
			start := time.Unix(s, 0).In(w.loc)
			if !yield(TimePartition{Start: start, End: end, Granularity: w.g}) || s <= w.start {
				return
			}
			s, end = c.Back(s), start
		}
	}
}

// OldestFirst returns the window's partitions oldest first. It yields
// nothing for an empty window and allocates nothing per partition.
func (w TimePartitionWindow) OldestFirst() iter.Seq[TimePartition] {
	return func(yield func(TimePartition) bool) {
		if w.n == 0 {
			return
		}
		c := newCursor(w.g, w.loc)
		e, start := w.start, at(w.start, w.loc)
		for e < w.end {
			e = c.Step(e)
			end := time.Unix(e, 0).In(w.loc) // at, written out (see All)
			if !yield(TimePartition{Start: start, End: end, Granularity: w.g}) {
				return
			}
			start = end
		}
	}
}

// Chunks returns consecutive sub-windows of at most n partitions each,
// newest first, that together tile w: the first holds the newest n
// partitions, and only the last (oldest) may hold fewer. It yields nothing
// for an empty window and never an empty window. Chunks panics if n < 1.
func (w TimePartitionWindow) Chunks(n int) iter.Seq[TimePartitionWindow] {
	if n < 1 {
		panic(fmt.Sprintf("tranche: Chunks(%d): the chunk size must be at least 1", n))
	}
	return func(yield func(TimePartitionWindow) bool) {
		c := newCursor(w.g, w.loc)
		last, end := w.last, w.end
		for left := w.n; left > 0; {
			k := min(n, left)
			start := last
			for range k - 1 {
				start = c.Back(start)
			}
			chunk := TimePartitionWindow{g: w.g, loc: w.loc, start: start, last: last, end: end, n: k}
			if !yield(chunk) {
				return
			}
			if left -= k; left > 0 {
				last, end = c.Back(start), start
			}
		}
	}
}

// ClampStart drops the partitions before the one that holds start, as for
// an asset whose data begins at start. It returns false, and the zero
// window, when no partition remains.
func (w TimePartitionWindow) ClampStart(start time.Time) (TimePartitionWindow, bool) {
	u := unix(start)
	switch {
	case w.n == 0 || u >= w.end:
		return TimePartitionWindow{}, false
	case u <= w.start:
		return w, true
	}
	c := newCursor(w.g, w.loc)
	s := c.Start(u)
	w.n -= c.Count(w.start, s)
	w.start = s
	return w, true
}

// Equal reports whether w and v hold the same partitions: the same
// granularity, bounds and location.
func (w TimePartitionWindow) Equal(v TimePartitionWindow) bool {
	if w.n == 0 || v.n == 0 {
		return w.n == v.n
	}
	return w.g == v.g && w.start == v.start && w.end == v.end && sameZone(w.loc, v.loc)
}

// String returns the window's text form: its granularity, the keys of its
// oldest and newest partitions, and its zone, as in
// "day 2024-01-01..2024-01-31 America/New_York"; "empty" for the empty
// window. The zone is the location's zone database name, or for a fixed
// offset without one its offset ("day 2026-01-01..2026-01-31 +01:00", and
// "UTC" for zero), so that the text means the same window on every host.
// [ParseTimePartitionWindow] inverts it.
func (w TimePartitionWindow) String() string {
	if w.n == 0 {
		return "empty"
	}
	var buf [96]byte
	b := append(buf[:0], w.g.String()...)
	b = append(b, ' ')
	oldest := w.Oldest()
	b = appendKey(b, w.g, oldest.Start, oldest.End)
	b = append(b, ".."...)
	b = appendKey(b, w.g, at(w.last, w.loc), at(w.end, w.loc))
	b = append(b, ' ')
	b = append(b, zoneName(w.loc)...)
	return string(b)
}

// MarshalText implements [encoding.TextMarshaler] with the String form;
// the empty window marshals to empty text. A window whose zone has no name
// that means the same calendar on every host cannot be marshaled: one in
// time.Local on a host with daylight saving time and without TZ set, or in
// a location loaded from data under a name the zone database does not
// know.
func (w TimePartitionWindow) MarshalText() ([]byte, error) {
	if w.n == 0 {
		return []byte{}, nil
	}
	if !portableZone(w.loc) {
		return nil, fmt.Errorf("tranche: cannot marshal window %s: its location %q is not a zone database name or a fixed offset; load the zone by name", w, zoneName(w.loc))
	}
	return []byte(w.String()), nil
}

// UnmarshalText implements [encoding.TextUnmarshaler] with
// [ParseTimePartitionWindow]; empty text is the empty window, as
// MarshalText writes it.
func (w *TimePartitionWindow) UnmarshalText(text []byte) error {
	if len(text) == 0 {
		*w = TimePartitionWindow{}
		return nil
	}
	v, err := ParseTimePartitionWindow(string(text))
	if err != nil {
		return err
	}
	*w = v
	return nil
}

// ParseTimePartitionWindow parses the text form of
// [TimePartitionWindow.String]: "GRANULARITY OLDEST..NEWEST ZONE", with
// partition keys as [TimePartition.Key] writes them and a zone: a zone
// database name ("UTC", "Europe/Berlin") or a fixed offset ("+01:00",
// "-03:30"). "Local" is refused: it would name the host's zone, another
// calendar on another host. A refused text is a [*ParseError] of Type
// "window", wrapping the error of the part that was wrong.
func ParseTimePartitionWindow(s string) (TimePartitionWindow, error) {
	const form = `want "GRANULARITY OLDEST..NEWEST ZONE", as in "day 2024-01-01..2024-01-31 America/New_York"`
	rest, zone, ok1 := cutLast(strings.TrimSpace(s))
	gran, span, ok2 := cutLast(rest)
	oldest, newest, ok3 := strings.Cut(span, "..")
	if !ok1 || !ok2 || !ok3 {
		return TimePartitionWindow{}, &ParseError{Type: "window", Text: s, Reason: form}
	}
	fail := func(err error) (TimePartitionWindow, error) {
		return TimePartitionWindow{}, &ParseError{Type: "window", Text: s, Reason: reasonOf(err), Err: err}
	}
	g, err := ParseGranularity(gran)
	if err != nil {
		return fail(err)
	}
	loc, err := loadZone(zone)
	if err != nil {
		return TimePartitionWindow{}, &ParseError{Type: "window", Text: s, Reason: fmt.Sprintf("unknown zone %q: %v", zone, err), Err: err}
	}
	first, err := ParsePartitionKey(g, oldest, loc)
	if err != nil {
		return fail(err)
	}
	last, err := ParsePartitionKey(g, newest, loc)
	if err != nil {
		return fail(err)
	}
	w, err := NewTimePartitionWindow(g, first.Start, last.Start)
	if err != nil {
		return fail(err)
	}
	return w, nil
}

// cutLast splits s at its last run of spaces.
func cutLast(s string) (before, after string, ok bool) {
	i := strings.LastIndexByte(s, ' ')
	if i < 0 {
		return "", "", false
	}
	return strings.TrimRight(s[:i], " "), s[i+1:], true
}

// Lookback returns the trailing window of lookback partitions of g that
// ends offset partitions before the current one, the partition holding now
// (in now.Location()). Lookback(now, 1, 0, g) is the current, still
// incomplete partition; Lookback(now, 7, 1, Day) is the seven days ending
// yesterday. The windows of consecutive ticks with lookback 1 tile time.
// It fails for lookback < 1, offset < 0 or an invalid granularity.
func Lookback(now time.Time, lookback, offset int, g TimeGranularity) (TimePartitionWindow, error) {
	switch {
	case !g.IsValid():
		return TimePartitionWindow{}, errors.New("tranche: Lookback with the zero TimeGranularity")
	case lookback < 1:
		return TimePartitionWindow{}, fmt.Errorf("tranche: Lookback: lookback %d must be at least 1", lookback)
	case offset < 0:
		return TimePartitionWindow{}, fmt.Errorf("tranche: Lookback: offset %d must be 0 (the current partition) or more", offset)
	}
	c := newCursor(g, now.Location())
	start, end := c.Bounds(unix(now))
	for range offset {
		start, end = c.Back(start), start
	}
	last := start
	for range lookback - 1 {
		start = c.Back(start)
	}
	return TimePartitionWindow{g: g, loc: now.Location(), start: start, last: last, end: end, n: lookback}, nil
}
