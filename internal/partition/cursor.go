// Package partition is the partition engine: where the boundaries of a
// granularity fall in a location, on Unix seconds, by a cursor over the
// zone's offset spans. It applies the partition rules of the root
// package's documentation (and of DESIGN.md); the root package is its
// face, turning TimeGranularity values into a [Rule] and instants into
// seconds. It knows nothing of runs, assets or backfills.
package partition

import (
	"math"
	"strconv"
	"time"

	"github.com/tranche-dev/tranche/internal/calendar"
	"github.com/tranche-dev/tranche/internal/cron"
)

// Everything works on Unix seconds: zone transitions and partition
// boundaries are whole seconds, so an instant u lies at or after a boundary
// b exactly when its whole second does.

// SecondsPerDay is the length of a day on the Unix clock.
const SecondsPerDay = 86400

// ZoneMargin bounds how far a local date can run ahead of or behind UTC:
// offsets stay within ±16 hours.
const ZoneMargin = 32 * 3600

// Unit is the calendar unit of a granularity, or Cron for a cron
// schedule's slots.
type Unit uint8

// The units, in the order the root package names them.
const (
	Invalid Unit = iota
	Minute
	Hour
	Day
	Week
	Month
	Quarter
	Year
	Cron
)

// Rule is what the engine needs of a granularity: its unit, its multiple
// of that unit, and for a cron schedule its fire times in the cursor's
// location.
type Rule struct {
	Unit  Unit
	N     int64
	Sched *cron.Schedule // for Cron
}

// seconds returns the fixed length of a sub-day granularity.
func (r Rule) seconds() int64 {
	switch r.Unit {
	case Minute:
		return r.N * 60
	case Hour:
		return r.N * 3600
	}
	return 0
}

// subday reports whether r is a multiple of Minute or Hour, whose
// boundaries are wall-clock instants rather than dates.
func (r Rule) subday() bool { return r.Unit == Minute || r.Unit == Hour }

// Cursor finds the partition boundaries of one granularity in one location.
// It remembers the last two offset spans it looked up, so that walking
// through consecutive partitions asks the zone database once per span.
//
// For Minute and Hour multiples it also remembers the last boundary it
// found on a multiple of the partition length inside an offset span, so
// that step and back walk on from it with an addition while they stay in
// that span.
type Cursor struct {
	r        Rule
	loc      *time.Location
	cur, old calendar.Span
	have     int

	// l is r.seconds(), 0 for Day and coarser. aligned is a boundary whose
	// wall time is a multiple of l inside an offset span [S, E), with
	// S < aligned; step adds l to it while aligned <= stepMax (E-l-1),
	// back subtracts l while aligned >= backMin (S+l+1). With no span
	// remembered, stepMax is MinInt64 and backMin MaxInt64.
	l, aligned, stepMax, backMin int64

	sched *cron.Schedule // for a cron schedule: its fire times in loc
}

// NewCursor returns a cursor over the partitions of r in loc.
func NewCursor(r Rule, loc *time.Location) Cursor {
	c := Cursor{r: r, loc: loc, l: r.seconds(), stepMax: math.MinInt64, backMin: math.MaxInt64}
	if r.Unit == Cron {
		c.sched = r.Sched
	}
	return c
}

// remember records the boundary x on a multiple of l inside the offset
// Span sp, with sp.Start < x < sp.End, for step and back.
func (c *Cursor) remember(x int64, sp calendar.Span) {
	c.aligned = x
	c.stepMax = sp.End - c.l - 1   // x+l < sp.End (no overflow at Forever)
	c.backMin = sp.Start + c.l + 1 // x-l > sp.Start (no overflow at Beginning)
}

// Step returns the end of the partition that starts at boundary e, as
// Next does; it is the fast path of a walk forward.
func (c *Cursor) Step(e int64) int64 {
	if e != c.aligned || e > c.stepMax {
		return c.Next(e)
	}
	c.aligned += c.l
	return c.aligned
}

// Back returns the start of the partition that ends at boundary s, as
// start(s-1) does; it is the fast path of a walk backward.
func (c *Cursor) Back(s int64) int64 {
	if s != c.aligned || s < c.backMin {
		return c.startBefore(s)
	}
	c.aligned -= c.l
	return c.aligned
}

// Span returns the offset span of the location that holds u, from the
// two it remembers when it can.
func (c *Cursor) Span(u int64) calendar.Span {
	if c.have > 0 && c.cur.Contains(u) {
		return c.cur
	}
	if c.have > 1 && c.old.Contains(u) {
		c.cur, c.old = c.old, c.cur
		return c.cur
	}
	c.old = c.cur
	c.cur = calendar.SpanAt(c.loc, u)
	c.have = min(c.have+1, 2)
	return c.cur
}

// Bounds returns the partition [start, end) that holds u.
func (c *Cursor) Bounds(u int64) (start, end int64) {
	if c.sched != nil {
		return c.cronStart(u), c.cronNext(u)
	}
	if c.r.subday() {
		start = c.subdayStart(u)
		return start, c.subdayNext(start)
	}
	return c.coarseBounds(u)
}

// Next returns the end of the partition that starts at boundary s.
func (c *Cursor) Next(s int64) int64 {
	if c.sched != nil {
		return c.cronNext(s)
	}
	if c.r.subday() {
		return c.subdayNext(s)
	}
	return c.FirstInstant(c.r.firstDay(c.r.bucket(c.Date(s)) + 1))
}

// startBefore returns the start of the partition that ends at boundary s.
// It stays a call so that back, its fast path, inlines.
//
//go:noinline
func (c *Cursor) startBefore(s int64) int64 { return c.Start(s - 1) }

// Start returns the start of the partition that holds u.
func (c *Cursor) Start(u int64) int64 {
	if c.sched != nil {
		return c.cronStart(u)
	}
	if c.r.subday() {
		return c.subdayStart(u)
	}
	s, _ := c.coarseBounds(u)
	return s
}

// Minute and Hour multiples: the bucket of an instant is its wall time
// divided by the partition length L (L divides an hour or a day, so this
// is the (date, hour, minute / n) bucket of the rules). A boundary lies
// where the bucket changes, and where the clock is set back onto a
// multiple of L.

// subdayNext returns the first boundary after u.
func (c *Cursor) subdayNext(u int64) int64 {
	l := c.r.seconds()
	for {
		sp := c.Span(u)
		// Inside a span the offset is constant, so the boundaries are
		// the instants whose wall time is a multiple of l.
		next := u + l - calendar.Mod(u+sp.Offset, l)
		if next < sp.End {
			c.remember(next, sp)
			return next
		}
		if c.subdayBoundaryAt(sp.End, sp.Offset) {
			return sp.End
		}
		u = sp.End
	}
}

// subdayStart returns the last boundary at or before u.
func (c *Cursor) subdayStart(u int64) int64 {
	l := c.r.seconds()
	for {
		sp := c.Span(u)
		prev := u - calendar.Mod(u+sp.Offset, l)
		if prev > sp.Start {
			c.remember(prev, sp)
			return prev
		}
		before := c.Span(sp.Start - 1).Offset
		if c.subdayBoundaryAt(sp.Start, before) {
			return sp.Start
		}
		u = sp.Start - 1
	}
}

// subdayBoundaryAt reports whether the offset change at x, from before,
// starts a partition.
func (c *Cursor) subdayBoundaryAt(x, before int64) bool {
	l := c.r.seconds()
	after := c.Span(x).Offset
	wallBefore := x - 1 + before // the last second before the change
	wallAfter := x + after
	if calendar.FloorDiv(wallBefore, l) != calendar.FloorDiv(wallAfter, l) {
		return true
	}
	return after < before && calendar.Mod(wallAfter, l) == 0
}

// Day and coarser: the bucket is a function of the local date. A partition
// starts at the first instant whose local date reaches its bucket's first
// date, so a clock set back never reopens a finished bucket and a bucket
// whose dates never occur has no partition.

// Date returns the local date of u as a day number.
func (c *Cursor) Date(u int64) int64 {
	return calendar.FloorDiv(u+c.Span(u).Offset, SecondsPerDay)
}

// FirstInstant returns the first instant whose local date is day or later.
func (c *Cursor) FirstInstant(day int64) int64 {
	midnight := day * SecondsPerDay
	// Fast path: the cached span holds local midnight and began long
	// enough before it that no earlier span can have shown this date.
	if c.have > 0 {
		sp := c.cur
		if v := midnight - sp.Offset; v < sp.End && (sp.Start == calendar.Beginning || v-sp.Start >= ZoneMargin) {
			return v
		}
	}
	u := midnight - ZoneMargin // local date is still before day here
	for {
		sp := c.Span(u)
		v := max(sp.Start, midnight-sp.Offset, u)
		if v < sp.End {
			return v
		}
		u = sp.End
	}
}

// coarseBounds returns the Day-or-coarser partition that holds u.
func (c *Cursor) coarseBounds(u int64) (start, end int64) {
	b := c.r.bucket(c.Date(u))
	start = c.FirstInstant(c.r.firstDay(b))
	end = c.FirstInstant(c.r.firstDay(b + 1))
	// A clock set back across a bucket boundary shows an older date than
	// the running maximum: u then lies in a later partition.
	for end <= u {
		start = end
		end = c.Next(start)
	}
	return start, end
}

// FirstDayOf returns the first local date of the bucket that holds the
// local date day, for Day and coarser: day itself when a partition
// starts on it.
func (c *Cursor) FirstDayOf(day int64) int64 { return c.r.firstDay(c.r.bucket(day)) }

// bucket returns the bucket of a local date (a day number).
func (r Rule) bucket(day int64) int64 {
	n := r.N
	switch r.Unit {
	case Day:
		return calendar.FloorDiv(day, n)
	case Week:
		return calendar.FloorDiv(calendar.FloorDiv(day-isoEpochMonday, 7), n)
	case Month, Quarter:
		y, m, _ := calendar.CivilFromDays(day)
		return calendar.FloorDiv(y*12+int64(m-1), r.months())
	case Year:
		y, _, _ := calendar.CivilFromDays(day)
		return calendar.FloorDiv(y, n)
	}
	panic("partition: bucket of unit " + strconv.Itoa(int(r.Unit)))
}

// firstDay returns the first local date of a bucket.
func (r Rule) firstDay(b int64) int64 {
	n := r.N
	switch r.Unit {
	case Day:
		return b * n
	case Week:
		return isoEpochMonday + b*n*7
	case Month, Quarter:
		months := b * r.months()
		return calendar.DaysFromCivil(calendar.FloorDiv(months, 12), int(calendar.Mod(months, 12))+1, 1)
	case Year:
		return calendar.DaysFromCivil(b*n, 1, 1)
	}
	panic("partition: first day of unit " + strconv.Itoa(int(r.Unit)))
}

func (r Rule) months() int64 {
	if r.Unit == Quarter {
		return 3 * r.N
	}
	return r.N
}

// isoEpochMonday is 1969-12-29, the Monday of the ISO week holding the
// epoch, from which Week multiples count.
const isoEpochMonday = -3

// Count returns the number of partitions in [start, end), both boundaries.
// It looks at each offset span once, so its cost grows with the zone
// transitions in the range, not with its partitions.
func (c *Cursor) Count(start, end int64) int {
	switch {
	case start >= end:
		return 0
	case c.sched != nil:
		// Fire times have no closed form: count them, at tens of
		// nanoseconds each.
		n := 0
		for u := start; u < end; u = c.cronNext(u) {
			n++
		}
		return n
	case c.r.subday():
		return c.subdayCount(start, end)
	}
	return c.coarseCount(start, end)
}

func (c *Cursor) subdayCount(start, end int64) int {
	l := c.r.seconds()
	n := int64(1) // start itself
	u := start
	for u < end {
		sp := c.Span(u)
		hi := min(sp.End, end)
		// multiples of l among the wall times of (u, hi)
		n += calendar.FloorDiv(hi-1+sp.Offset, l) - calendar.FloorDiv(u+sp.Offset, l)
		if hi < end && c.subdayBoundaryAt(hi, sp.Offset) {
			n++
		}
		u = hi
	}
	return int(n)
}

func (c *Cursor) coarseCount(start, end int64) int {
	last := c.Start(end - 1)
	n := c.r.bucket(c.Date(last)) - c.r.bucket(c.Date(start)) + 1
	// Buckets whose every date was skipped by a clock jumping forward a
	// day or more (Pacific/Apia, 2011-12-30) have no partition.
	u := start
	for u < last {
		sp := c.Span(u)
		if sp.End > last {
			break
		}
		after := c.Span(sp.End).Offset
		if jump := after - sp.Offset; jump >= SecondsPerDay {
			n -= c.r.skippedBuckets(sp.End+sp.Offset, sp.End+after)
		}
		u = sp.End
	}
	return int(n)
}

// skippedBuckets counts the buckets all of whose dates lie in the skipped
// wall times [from, to).
func (r Rule) skippedBuckets(from, to int64) int64 {
	firstDay := calendar.FloorDiv(from+SecondsPerDay-1, SecondsPerDay)
	lastDay := calendar.FloorDiv(to, SecondsPerDay) - 1
	var n int64
	for b := r.bucket(firstDay); r.firstDay(b) <= lastDay; b++ {
		if r.firstDay(b) >= firstDay && r.firstDay(b+1)-1 <= lastDay {
			n++
		}
	}
	return n
}

// cronStart returns the last fire time at or before u: the start of the
// slot that holds u.
func (c *Cursor) cronStart(u int64) int64 {
	return c.sched.Prev(time.Unix(u, 0)).Unix()
}

// cronNext returns the first fire time after u: the end of the slot that
// holds u.
func (c *Cursor) cronNext(u int64) int64 {
	return c.sched.Next(time.Unix(u, 0)).Unix()
}
