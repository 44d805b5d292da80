package calendar

import (
	"math"
	"time"
)

// Unbounded ends of a Span: a location that never changes its offset
// before or after.
const (
	Beginning int64 = math.MinInt64
	Forever   int64 = math.MaxInt64
)

// Span is a stretch [Start, End) of Unix seconds during which a location
// keeps one UTC offset, Offset seconds east of UTC. Spans may be shorter
// than the zone's real stretch (a change of abbreviation alone ends one),
// never longer.
type Span struct {
	Start, End int64
	Offset     int64
}

// Contains reports whether u lies in the span.
func (s Span) Contains(u int64) bool { return s.Start <= u && u < s.End }

// SpanAt returns the span of loc that holds the instant u (Unix seconds).
func SpanAt(loc *time.Location, u int64) Span {
	t := time.Unix(u, 0).In(loc)
	_, off := t.Zone()
	start, end := t.ZoneBounds()
	s := Span{Start: Beginning, End: Forever, Offset: int64(off)}
	if !start.IsZero() {
		s.Start = start.Unix()
	}
	if !end.IsZero() {
		s.End = end.Unix()
	}
	// Go 1.26 computes a wrong end past the zone file's explicit
	// transitions on the last UTC day of a leap year (New York 2040-12-31
	// gets an end before the time itself). Search for the real stretch
	// whenever the answer does not hold u.
	if s.Start > u {
		s.Start = searchStart(loc, u, s.Offset)
	}
	if s.End <= u {
		s.End = searchEnd(loc, u, s.Offset)
	}
	return s
}

func offsetAt(loc *time.Location, u int64) int64 {
	_, off := time.Unix(u, 0).In(loc).Zone()
	return int64(off)
}

// searchLimit bounds the fallback search; a span cut there is still a
// correct (shorter) span.
const searchLimit = 48 * 3600

// searchEnd finds the first instant after u whose offset differs from off,
// probing hourly and bisecting to the second.
func searchEnd(loc *time.Location, u, off int64) int64 {
	lo := u
	for lo-u < searchLimit {
		hi := lo + 3600
		if offsetAt(loc, hi) != off {
			for hi-lo > 1 {
				mid := lo + (hi-lo)/2
				if offsetAt(loc, mid) != off {
					hi = mid
				} else {
					lo = mid
				}
			}
			return hi
		}
		lo = hi
	}
	return lo
}

// searchStart finds the earliest instant at or before u from which the
// offset stays off up to u.
func searchStart(loc *time.Location, u, off int64) int64 {
	hi := u
	for u-hi < searchLimit {
		lo := hi - 3600
		if offsetAt(loc, lo) != off {
			for hi-lo > 1 {
				mid := lo + (hi-lo)/2
				if offsetAt(loc, mid) != off {
					lo = mid
				} else {
					hi = mid
				}
			}
			return hi
		}
		hi = lo
	}
	return hi
}
