package cron

import (
	"math/bits"
	"slices"
	"sync/atomic"
	"time"

	"github.com/tranche-dev/tranche/internal/calendar"
)

// Schedule is a parsed cron expression in a location. It is immutable and
// safe for concurrent use. The zero Schedule never fires; use [Parse].
type Schedule struct {
	minute uint64 // bits 0-59
	hour   uint32 // bits 0-23
	dom    uint32 // bits 1-31
	month  uint16 // bits 1-12
	dow    uint8  // bits 0-6, Sunday is 0
	star   uint8  // bit i set: field i was written * or */n
	loc    *time.Location

	// Derived from the fields by init.
	and                     bool // day of month AND day of week (one is a wildcard), else OR
	fixed                   bool // hour field restricted: one fire per matching wall time
	firstMinute, lastMinute int64
	firstHour, lastHour     int64
	firstMonth, lastMonth   int
	// dowDays[w] holds the days 1-31, as bits, of a month whose 1st falls
	// on weekday w that fall on a weekday of the day-of-week field.
	dowDays [7]uint32

	excluded []int64 // day numbers (days since 1970-01-01), sorted, unique

	// cache holds the last span of loc looked up, shared by copies.
	cache *spanCache
}

// Date is a calendar date in a schedule's location, as found in a holiday
// calendar.
type Date struct {
	Year  int
	Month time.Month
	Day   int
}

// init computes the derived fields.
func (s *Schedule) init() {
	s.and = s.star&(1<<fDom|1<<fDow) != 0
	s.fixed = s.star&(1<<fHour) == 0
	s.firstMinute = int64(bits.TrailingZeros64(s.minute))
	s.lastMinute = int64(bits.Len64(s.minute) - 1)
	s.firstHour = int64(bits.TrailingZeros32(s.hour))
	s.lastHour = int64(bits.Len32(s.hour) - 1)
	s.cache = new(spanCache)
	s.firstMonth = bits.TrailingZeros16(s.month)
	s.lastMonth = bits.Len16(s.month) - 1
	for w := range 7 {
		var days uint32
		for d := 1; d <= 31; d++ {
			if s.dow&(1<<((w+d-1)%7)) != 0 {
				days |= 1 << d
			}
		}
		s.dowDays[w] = days
	}
}

// Location returns the schedule's time zone: the one named by a CRON_TZ=
// prefix, else the one given to [Parse].
func (s *Schedule) Location() *time.Location {
	if s.loc == nil {
		return time.UTC
	}
	return s.loc
}

// Exclude returns a copy of s that never fires on the given dates of its
// location, in addition to those s already excludes: a business calendar's
// holidays. Used as partitions, the slot of the next fire time then covers
// the excluded days. A date that does not exist, such as February 30,
// excludes nothing. s itself is unchanged.
func (s *Schedule) Exclude(dates ...Date) *Schedule {
	c := *s
	c.excluded = slices.Clone(s.excluded)
	for _, d := range dates {
		if d.Month < time.January || d.Month > time.December || d.Day < 1 || d.Day > calendar.DaysIn(int64(d.Year), int(d.Month)) {
			continue
		}
		c.excluded = append(c.excluded, calendar.DaysFromCivil(int64(d.Year), int(d.Month), d.Day))
	}
	slices.Sort(c.excluded)
	c.excluded = slices.Compact(c.excluded)
	return &c
}

// Bounds of the search for a fire time.
const (
	// maxGapYears is the longest gap, in calendar years, between two
	// consecutive days that match a schedule that fires at all: February
	// 29 on one weekday across a non-leap century year ("0 0 29 2 */7"
	// matches in 2088 and next in 2128).
	maxGapYears = 40
	// maxUnix bounds the instants Next and Prev accept and return, about
	// 142 million years either side of 1970, far inside int64 arithmetic
	// on minutes and seconds.
	maxUnix = 1 << 52
	// maxJump exceeds any change of UTC offset (Samoa's 24 hours at the
	// end of 2011).
	maxJump = 48 * 3600
)

// searchYears is how many calendar years a search for a matching day may
// cover: maxGapYears+1, and as many again for every excluded date, each of
// which can remove one matching day. A schedule that fires at all
// therefore always finds its next and previous day within the bound. The
// bound stops growing at ten million years (244,000 excluded dates).
func (s *Schedule) searchYears() int64 {
	return min(int64(maxGapYears+1)*int64(1+len(s.excluded)), 10_000_000)
}

// Next returns the first fire time strictly after t, in s.Location(). It
// returns the zero Time for the zero Schedule, and when t or the fire time
// lies more than about 142 million years from 1970.
func (s *Schedule) Next(t time.Time) time.Time {
	a := t.Unix()
	if s.minute == 0 || a < -maxUnix || a >= maxUnix {
		return time.Time{}
	}
	u, ok := s.nextFire(a + 1) // fire times are whole seconds
	if !ok || u > maxUnix {
		return time.Time{}
	}
	return time.Unix(u, 0).In(s.Location())
}

// Prev returns the last fire time at or before t, in s.Location(). It
// returns the zero Time for the zero Schedule, and when t or the fire time
// lies more than about 142 million years from 1970.
func (s *Schedule) Prev(t time.Time) time.Time {
	b := t.Unix()
	if s.minute == 0 || b <= -maxUnix || b > maxUnix {
		return time.Time{}
	}
	u, ok := s.prevFire(b)
	if !ok || u < -maxUnix {
		return time.Time{}
	}
	return time.Unix(u, 0).In(s.Location())
}

// Wall times are counted in minutes since 1970-01-01 00:00 of the local
// clock ("wall minutes"); instants in Unix seconds. In a span of constant
// offset off, the instant of wall minute w is 60*w - off.

// nextFire returns the first fire time at or after the instant a.
func (s *Schedule) nextFire(a int64) (int64, bool) {
	loc := s.Location()
	limit := calendar.FloorDiv(a, 60) + s.searchYears()*366*1440
	sp := s.span(a)
	off, end := sp.Offset, sp.End
	bottom := a + off // the search covers wall seconds from bottom on
	if s.fixed && sp.Start != calendar.Beginning && a-sp.Start < maxJump {
		switch prev := offsetAt(loc, sp.Start-1); {
		case prev > off:
			// The clock was set back at sp.Start: wall times before
			// sp.Start+prev first occurred in the previous span.
			bottom = max(bottom, sp.Start+prev)
		case prev < off && a == sp.Start:
			// The clock jumped forward at sp.Start: wall times in the gap
			// fire at sp.Start.
			if _, ok := s.nextWall(ceilDiv(sp.Start+prev, 60), ceilDiv(sp.Start+off, 60)-1); ok {
				return sp.Start, true
			}
		}
	}
	// Invariant: w is the first matching wall minute from bottom on.
	w, ok := s.nextWall(ceilDiv(bottom, 60), limit)
	for ok {
		if u := 60*w - off; u < end {
			return u, true
		}
		// w lies past this span: continue in the next one.
		next := s.spanAt(end)
		if s.fixed && next.Offset > off && 60*w < end+next.Offset {
			return end, true // w lies in the gap
		}
		b := end + next.Offset
		if s.fixed {
			b = end + max(off, next.Offset) // skip wall times shown again
		}
		switch {
		case 60*w < b: // w lies in the gap: search on
			w, ok = s.nextWall(ceilDiv(b, 60), limit)
		case b < bottom: // the clock was set back: wall times before bottom show again
			if r, found := s.nextWall(ceilDiv(b, 60), ceilDiv(bottom, 60)-1); found {
				w = r
			}
		}
		bottom, off, end = b, next.Offset, next.End
	}
	return 0, false
}

// prevFire returns the last fire time at or before the instant b.
func (s *Schedule) prevFire(b int64) (int64, bool) {
	loc := s.Location()
	limit := calendar.FloorDiv(b, 60) - s.searchYears()*366*1440
	sp := s.span(b)
	off, start := sp.Offset, sp.Start
	top := b + off // the search covers wall seconds up to top
	// Invariant: w is the last matching wall minute up to top.
	w, ok := s.prevWall(calendar.FloorDiv(top, 60), limit)
	for ok {
		if u := 60*w - off; u >= start {
			if !s.fixed || start == calendar.Beginning || u-start >= maxJump {
				return u, true
			}
			if prev := offsetAt(loc, start-1); prev <= off || 60*w >= start+prev {
				return u, true
			}
			// The clock was set back at start and w first occurred in the
			// previous span: it fires there.
		}
		// Continue in the previous span.
		prev := s.spanAt(start - 1)
		if s.fixed && prev.Offset < off && 60*w >= start+prev.Offset {
			return start, true // w lies in the gap before start
		}
		t := start - 1 + prev.Offset
		switch {
		case 60*w > t: // w lies in the gap: search on
			w, ok = s.prevWall(calendar.FloorDiv(t, 60), limit)
		case t > top: // the clock was set back: wall times after top show in the previous span
			if r, found := s.prevWall(calendar.FloorDiv(t, 60), calendar.FloorDiv(top, 60)+1); found {
				w = r
			}
		}
		top, off, start = t, prev.Offset, prev.Start
	}
	return 0, false
}

// nextWall returns the first matching wall minute from m to lim.
func (s *Schedule) nextWall(m, lim int64) (int64, bool) {
	if m > lim {
		return 0, false
	}
	day := calendar.FloorDiv(m, 1440)
	rem := m - day*1440
	h, mi := rem/60, rem%60
	y, mo, d := civil(day)
	if s.dayMatches(day, mo, d) {
		if s.hour&(1<<h) != 0 {
			if mm := s.minute >> mi; mm != 0 {
				r := m + int64(bits.TrailingZeros64(mm))
				return r, r <= lim
			}
		}
		if hh := s.hour >> (h + 1); hh != 0 {
			r := day*1440 + (h+1+int64(bits.TrailingZeros32(hh)))*60 + s.firstMinute
			return r, r <= lim
		}
	}
	next, ok := s.nextDay(y, mo, d+1, calendar.FloorDiv(lim, 1440))
	if !ok {
		return 0, false
	}
	r := next*1440 + s.firstHour*60 + s.firstMinute
	return r, r <= lim
}

// prevWall returns the last matching wall minute from lim to m.
func (s *Schedule) prevWall(m, lim int64) (int64, bool) {
	if m < lim {
		return 0, false
	}
	day := calendar.FloorDiv(m, 1440)
	rem := m - day*1440
	h, mi := rem/60, rem%60
	y, mo, d := civil(day)
	if s.dayMatches(day, mo, d) {
		if s.hour&(1<<h) != 0 {
			if mm := s.minute & (2<<mi - 1); mm != 0 {
				r := day*1440 + h*60 + int64(bits.Len64(mm)-1)
				return r, r >= lim
			}
		}
		if hh := s.hour & (1<<h - 1); hh != 0 {
			r := day*1440 + int64(bits.Len32(hh)-1)*60 + s.lastMinute
			return r, r >= lim
		}
	}
	prev, ok := s.prevDay(y, mo, d-1, calendar.FloorDiv(lim, 1440))
	if !ok {
		return 0, false
	}
	r := prev*1440 + s.lastHour*60 + s.lastMinute
	return r, r >= lim
}

// dayMatches reports whether the day numbered day, month mo and day of
// month d, matches the day fields and is not excluded.
func (s *Schedule) dayMatches(day int64, mo, d int) bool {
	if s.month&(1<<mo) == 0 {
		return false
	}
	domOK := s.dom&(1<<d) != 0
	dowOK := s.dow&(1<<calendar.Mod(day+4, 7)) != 0 // 1970-01-01 was a Thursday
	if s.and {
		domOK = domOK && dowOK
	} else {
		domOK = domOK || dowOK
	}
	if !domOK || len(s.excluded) == 0 {
		return domOK
	}
	_, found := slices.BinarySearch(s.excluded, day)
	return !found
}

// monthDays returns the matching days of month mo of year y, whose 1st is
// day number first, as bits 1-31.
func (s *Schedule) monthDays(y int64, mo int, first int64) uint32 {
	dim := calendar.DaysIn(y, mo)
	var days uint32
	if s.and {
		days = s.dom & s.dowDays[calendar.Mod(first+4, 7)]
	} else {
		days = s.dom | s.dowDays[calendar.Mod(first+4, 7)]
	}
	days &= uint32(2)<<dim - 2
	if len(s.excluded) > 0 && days != 0 {
		i, _ := slices.BinarySearch(s.excluded, first)
		for ; i < len(s.excluded) && s.excluded[i] < first+int64(dim); i++ {
			days &^= 1 << (s.excluded[i] - first + 1)
		}
	}
	return days
}

// nextDay returns the day number of the first matching day from day d of
// month mo of year y (d may be past the end of the month) to day number
// lim.
func (s *Schedule) nextDay(y int64, mo, d int, lim int64) (int64, bool) {
	if s.month&(1<<mo) == 0 {
		y, mo, d = s.nextMonth(y, mo)
	}
	for {
		first := calendar.DaysFromCivil(y, mo, 1)
		if first > lim {
			return 0, false
		}
		if days := s.monthDays(y, mo, first) &^ (uint32(1)<<d - 1); days != 0 {
			r := first + int64(bits.TrailingZeros32(days)) - 1
			return r, r <= lim
		}
		y, mo, d = s.nextMonth(y, mo)
	}
}

// prevDay returns the day number of the last matching day from day number
// lim to day d of month mo of year y (d may be 0).
func (s *Schedule) prevDay(y int64, mo, d int, lim int64) (int64, bool) {
	if s.month&(1<<mo) == 0 {
		y, mo, d = s.prevMonth(y, mo)
	}
	for {
		first := calendar.DaysFromCivil(y, mo, 1)
		if first+30 < lim {
			return 0, false
		}
		if days := s.monthDays(y, mo, first) & (uint32(2)<<d - 1); days != 0 {
			r := first + int64(bits.Len32(days)) - 2
			return r, r >= lim
		}
		y, mo, d = s.prevMonth(y, mo)
	}
}

// nextMonth returns the 1st of the first month of the schedule after
// month mo of year y.
func (s *Schedule) nextMonth(y int64, mo int) (int64, int, int) {
	if mm := s.month >> (mo + 1); mm != 0 {
		return y, mo + 1 + bits.TrailingZeros16(mm), 1
	}
	return y + 1, s.firstMonth, 1
}

// prevMonth returns the last day (31, clipped by the month mask) of the
// last month of the schedule before month mo of year y.
func (s *Schedule) prevMonth(y int64, mo int) (int64, int, int) {
	if mm := s.month & (1<<mo - 1); mm != 0 {
		return y, bits.Len16(mm) - 1, 31
	}
	return y - 1, s.lastMonth, 31
}

// span returns the span of the schedule's location that holds the
// instant u, from the cache when it holds u, else looked up and cached.
func (s *Schedule) span(u int64) calendar.Span {
	if sp, ok := s.cache.get(u); ok {
		return sp
	}
	sp := calendar.SpanAt(s.Location(), u)
	s.cache.put(sp)
	return sp
}

// spanAt is span without filling the cache, for the spans a search passes
// through: the cache keeps the span where the search began, which is
// where the next search of an enumeration begins too.
func (s *Schedule) spanAt(u int64) calendar.Span {
	if sp, ok := s.cache.get(u); ok {
		return sp
	}
	return calendar.SpanAt(s.Location(), u)
}

// spanCache remembers one span for a schedule, so that consecutive fire
// times skip the zone lookups. It is a sequence lock over atomics: a
// reader sees a span written whole or misses, and a writer that finds
// another one writing leaves the cache alone.
type spanCache struct {
	seq                atomic.Uint64 // odd while written
	start, end, offset atomic.Int64
}

func (c *spanCache) get(u int64) (calendar.Span, bool) {
	if c == nil {
		return calendar.Span{}, false
	}
	seq := c.seq.Load()
	sp := calendar.Span{Start: c.start.Load(), End: c.end.Load(), Offset: c.offset.Load()}
	if seq&1 != 0 || c.seq.Load() != seq || !sp.Contains(u) {
		return calendar.Span{}, false
	}
	return sp, true
}

func (c *spanCache) put(sp calendar.Span) {
	if c == nil {
		return
	}
	seq := c.seq.Load()
	if seq&1 != 0 || !c.seq.CompareAndSwap(seq, seq+1) {
		return
	}
	c.start.Store(sp.Start)
	c.end.Store(sp.End)
	c.offset.Store(sp.Offset)
	c.seq.Store(seq + 2)
}

func offsetAt(loc *time.Location, u int64) int64 {
	_, off := time.Unix(u, 0).In(loc).Zone()
	return int64(off)
}

// ceilDiv returns a/b rounded toward positive infinity; b must be positive.
func ceilDiv(a, b int64) int64 {
	return -calendar.FloorDiv(-a, b)
}

// Bounds of the day numbers civil handles itself: its 32-bit arithmetic
// covers years -32800 to about 2.9 million.
const (
	civilShift = 719468 + 146097*82
	civilMin   = -civilShift
	civilMax   = 1<<30 - civilShift - 1
)

// civil is calendar.CivilFromDays with a faster path for day numbers in
// [civilMin, civilMax]: the algorithm of Neri and Schneider, "Euclidean
// affine functions and their application to calendar algorithms" (2022).
func civil(days int64) (y int64, m, d int) {
	if days < civilMin || days > civilMax {
		return calendar.CivilFromDays(days)
	}
	n := uint32(days + civilShift)
	n1 := 4*n + 3
	c := n1 / 146097
	nc := n1 % 146097 / 4
	p2 := uint64(2939745) * uint64(4*nc+3)
	z := uint32(p2 >> 32)
	ny := uint32(p2) / 2939745 / 4
	n3 := 2141*ny + 197913
	y = int64(100*c+z) - 400*82
	m = int(n3 >> 16)
	d = int(n3&0xffff/2141) + 1
	if ny >= 306 {
		y++
		m -= 12
	}
	return y, m, d
}
