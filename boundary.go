package tranche

import (
	"math"
	"time"

	"github.com/tranche-dev/tranche/internal/calendar"
	"github.com/tranche-dev/tranche/internal/cron"
)

// This file applies the partition rules of the package documentation.
// Everything works on Unix seconds: zone transitions and partition
// boundaries are whole seconds, so an instant u lies at or after a boundary
// b exactly when its whole second does.

const secondsPerDay = 86400

// zoneMargin bounds how far a local date can run ahead of or behind UTC:
// offsets stay within ±16 hours.
const zoneMargin = 32 * 3600

// cursor finds the partition boundaries of one granularity in one location.
// It remembers the last two offset spans it looked up, so that walking
// through consecutive partitions asks the zone database once per span.
//
// For Minute and Hour multiples it also remembers the last boundary it
// found on a multiple of the partition length inside an offset span, so
// that step and back walk on from it with an addition while they stay in
// that span.
type cursor struct {
	g        TimeGranularity
	loc      *time.Location
	cur, old calendar.Span
	have     int

	// l is g.seconds(), 0 for Day and coarser. aligned is a boundary whose
	// wall time is a multiple of l inside an offset span [S, E), with
	// S < aligned; step adds l to it while aligned <= stepMax (E-l-1),
	// back subtracts l while aligned >= backMin (S+l+1). With no span
	// remembered, stepMax is MinInt64 and backMin MaxInt64.
	l, aligned, stepMax, backMin int64

	sched *cron.Schedule // for a cron schedule: its fire times in loc
}

func newCursor(g TimeGranularity, loc *time.Location) cursor {
	c := cursor{g: g, loc: loc, l: g.seconds(), stepMax: math.MinInt64, backMin: math.MaxInt64}
	if g.unit == unitCron {
		c.sched = g.cron.schedule(loc)
	}
	return c
}

// remember records the boundary x on a multiple of l inside the offset
// span sp, with sp.Start < x < sp.End, for step and back.
func (c *cursor) remember(x int64, sp calendar.Span) {
	c.aligned = x
	c.stepMax = sp.End - c.l - 1   // x+l < sp.End (no overflow at Forever)
	c.backMin = sp.Start + c.l + 1 // x-l > sp.Start (no overflow at Beginning)
}

// step returns the end of the partition that starts at boundary e, as
// next does; it is the fast path of a walk forward.
func (c *cursor) step(e int64) int64 {
	if e != c.aligned || e > c.stepMax {
		return c.next(e)
	}
	c.aligned += c.l
	return c.aligned
}

// back returns the start of the partition that ends at boundary s, as
// start(s-1) does; it is the fast path of a walk backward.
func (c *cursor) back(s int64) int64 {
	if s != c.aligned || s < c.backMin {
		return c.startBefore(s)
	}
	c.aligned -= c.l
	return c.aligned
}

func (c *cursor) span(u int64) calendar.Span {
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

// bounds returns the partition [start, end) that holds u.
func (c *cursor) bounds(u int64) (start, end int64) {
	if c.sched != nil {
		return c.cronStart(u), c.cronNext(u)
	}
	if c.g.subday() {
		start = c.subdayStart(u)
		return start, c.subdayNext(start)
	}
	return c.coarseBounds(u)
}

// next returns the end of the partition that starts at boundary s.
func (c *cursor) next(s int64) int64 {
	if c.sched != nil {
		return c.cronNext(s)
	}
	if c.g.subday() {
		return c.subdayNext(s)
	}
	return c.firstInstant(c.g.firstDay(c.g.bucket(c.date(s)) + 1))
}

// startBefore returns the start of the partition that ends at boundary s.
// It stays a call so that back, its fast path, inlines.
//
//go:noinline
func (c *cursor) startBefore(s int64) int64 { return c.start(s - 1) }

// start returns the start of the partition that holds u.
func (c *cursor) start(u int64) int64 {
	if c.sched != nil {
		return c.cronStart(u)
	}
	if c.g.subday() {
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
func (c *cursor) subdayNext(u int64) int64 {
	l := c.g.seconds()
	for {
		sp := c.span(u)
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
func (c *cursor) subdayStart(u int64) int64 {
	l := c.g.seconds()
	for {
		sp := c.span(u)
		prev := u - calendar.Mod(u+sp.Offset, l)
		if prev > sp.Start {
			c.remember(prev, sp)
			return prev
		}
		before := c.span(sp.Start - 1).Offset
		if c.subdayBoundaryAt(sp.Start, before) {
			return sp.Start
		}
		u = sp.Start - 1
	}
}

// subdayBoundaryAt reports whether the offset change at x, from before,
// starts a partition.
func (c *cursor) subdayBoundaryAt(x, before int64) bool {
	l := c.g.seconds()
	after := c.span(x).Offset
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

// date returns the local date of u as a day number.
func (c *cursor) date(u int64) int64 {
	return calendar.FloorDiv(u+c.span(u).Offset, secondsPerDay)
}

// firstInstant returns the first instant whose local date is day or later.
func (c *cursor) firstInstant(day int64) int64 {
	midnight := day * secondsPerDay
	// Fast path: the cached span holds local midnight and began long
	// enough before it that no earlier span can have shown this date.
	if c.have > 0 {
		sp := c.cur
		if v := midnight - sp.Offset; v < sp.End && (sp.Start == calendar.Beginning || v-sp.Start >= zoneMargin) {
			return v
		}
	}
	u := midnight - zoneMargin // local date is still before day here
	for {
		sp := c.span(u)
		v := max(sp.Start, midnight-sp.Offset, u)
		if v < sp.End {
			return v
		}
		u = sp.End
	}
}

// coarseBounds returns the Day-or-coarser partition that holds u.
func (c *cursor) coarseBounds(u int64) (start, end int64) {
	b := c.g.bucket(c.date(u))
	start = c.firstInstant(c.g.firstDay(b))
	end = c.firstInstant(c.g.firstDay(b + 1))
	// A clock set back across a bucket boundary shows an older date than
	// the running maximum: u then lies in a later partition.
	for end <= u {
		start = end
		end = c.next(start)
	}
	return start, end
}

// bucket returns the bucket of a local date (a day number).
func (g TimeGranularity) bucket(day int64) int64 {
	n := int64(g.n)
	switch g.unit {
	case unitDay:
		return calendar.FloorDiv(day, n)
	case unitWeek:
		return calendar.FloorDiv(calendar.FloorDiv(day-isoEpochMonday, 7), n)
	case unitMonth, unitQuarter:
		y, m, _ := calendar.CivilFromDays(day)
		return calendar.FloorDiv(y*12+int64(m-1), g.months())
	case unitYear:
		y, _, _ := calendar.CivilFromDays(day)
		return calendar.FloorDiv(y, n)
	}
	panic("tranche: bucket of " + g.String())
}

// firstDay returns the first local date of a bucket.
func (g TimeGranularity) firstDay(b int64) int64 {
	n := int64(g.n)
	switch g.unit {
	case unitDay:
		return b * n
	case unitWeek:
		return isoEpochMonday + b*n*7
	case unitMonth, unitQuarter:
		months := b * g.months()
		return calendar.DaysFromCivil(calendar.FloorDiv(months, 12), int(calendar.Mod(months, 12))+1, 1)
	case unitYear:
		return calendar.DaysFromCivil(b*n, 1, 1)
	}
	panic("tranche: first day of " + g.String())
}

func (g TimeGranularity) months() int64 {
	if g.unit == unitQuarter {
		return 3 * int64(g.n)
	}
	return int64(g.n)
}

// isoEpochMonday is 1969-12-29, the Monday of the ISO week holding the
// epoch, from which Week multiples count.
const isoEpochMonday = -3

// count returns the number of partitions in [start, end), both boundaries.
// It looks at each offset span once, so its cost grows with the zone
// transitions in the range, not with its partitions.
func (c *cursor) count(start, end int64) int {
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
	case c.g.subday():
		return c.subdayCount(start, end)
	}
	return c.coarseCount(start, end)
}

func (c *cursor) subdayCount(start, end int64) int {
	l := c.g.seconds()
	n := int64(1) // start itself
	u := start
	for u < end {
		sp := c.span(u)
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

func (c *cursor) coarseCount(start, end int64) int {
	last := c.start(end - 1)
	n := c.g.bucket(c.date(last)) - c.g.bucket(c.date(start)) + 1
	// Buckets whose every date was skipped by a clock jumping forward a
	// day or more (Pacific/Apia, 2011-12-30) have no partition.
	u := start
	for u < last {
		sp := c.span(u)
		if sp.End > last {
			break
		}
		after := c.span(sp.End).Offset
		if jump := after - sp.Offset; jump >= secondsPerDay {
			n -= c.g.skippedBuckets(sp.End+sp.Offset, sp.End+after)
		}
		u = sp.End
	}
	return int(n)
}

// skippedBuckets counts the buckets all of whose dates lie in the skipped
// wall times [from, to).
func (g TimeGranularity) skippedBuckets(from, to int64) int64 {
	firstDay := calendar.FloorDiv(from+secondsPerDay-1, secondsPerDay)
	lastDay := calendar.FloorDiv(to, secondsPerDay) - 1
	var n int64
	for b := g.bucket(firstDay); g.firstDay(b) <= lastDay; b++ {
		if g.firstDay(b) >= firstDay && g.firstDay(b+1)-1 <= lastDay {
			n++
		}
	}
	return n
}

// unix returns the whole second that holds t.
func unix(t time.Time) int64 { return t.Unix() }

// at returns the instant u in loc.
func at(u int64, loc *time.Location) time.Time { return time.Unix(u, 0).In(loc) }
