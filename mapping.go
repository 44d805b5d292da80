package tranche

import (
	"fmt"
	"slices"
)

// Mapping says which partitions of a dependency a partition of an asset
// reads; [Asset.Mappings] holds one per dependency. Every mapping is
// computed from the dependency's partitions in the zone, never from
// durations, so a New York day maps to its 23, 24 or 25 hours.
//
// The zero Mapping reads the dependency's partitions that cover the
// asset's partition: the same partition when both share a granularity
// (the default, and the only choice before mappings); every finer
// partition inside it when the dependency is finer (a day reads its
// hours, a month its days, an ISO week its days); the coarser partition
// holding it when the dependency is coarser, which needs Open.
//
// Lookback or Offset, when either is set, make it a trailing window
// counted in the dependency's partitions, with [Lookback]'s meaning, whose
// current partition is the dependency's partition holding the last
// instant of the asset's partition: Mapping{Offset: 1} is the previous
// partition, Mapping{Lookback: 7, Offset: 1} the seven before,
// Mapping{Lookback: 7} the partition itself and the six before it, and
// Mapping{Offset: 7} the partition a week back of a daily dependency.
// Partitions of the window before the dependency's Partitioning.First
// hold no data and are left out.
type Mapping struct {
	// Lookback is how many partitions the window spans; zero means one
	// when Offset is set.
	Lookback int
	// Offset is how many partitions before the current one the window
	// ends.
	Offset int

	// Open declares that the asset reads partitions of the dependency
	// that may not have closed when its own partition does: the coarser
	// partition holding it (an hour reads its day's reference data), a
	// trailing window that ends with a coarser current partition, or the
	// partitions overlapping it of a granularity that does not nest in
	// its own (weeks and months). NewDAG refuses such a mapping without
	// it; for a schedule ([ParseCron]), whose slots need not line up
	// with calendar partitions, a run refuses a partition it maps past
	// its end.
	Open bool
}

// trailing reports whether m is a trailing window rather than the
// covering partitions.
func (m Mapping) trailing() bool { return m.Lookback != 0 || m.Offset != 0 }

// describe names m in errors: "covering partitions" or "trailing 7
// offset 1", with ", open" when declared.
func (m Mapping) describe() string {
	s := "covering partitions"
	if m.trailing() {
		s = fmt.Sprintf("trailing %d offset %d", max(1, m.Lookback), m.Offset)
	}
	if m.Open {
		s += ", open"
	}
	return s
}

// span returns the upstream partitions m maps the downstream partition
// [start, end) to, as Unix seconds: the oldest's start, the newest's start
// and end. c is the upstream's cursor.
func (m Mapping) span(c *cursor, start, end int64) (first, last, lastEnd int64) {
	if !m.trailing() {
		first, _ = c.Bounds(start)
		last, lastEnd = c.Bounds(end - 1)
		return first, last, lastEnd
	}
	s, e := c.Bounds(end - 1)
	for range m.Offset {
		s, e = c.Back(s), s
	}
	last, lastEnd = s, e
	for range max(1, m.Lookback) - 1 {
		s = c.Back(s)
	}
	return s, last, lastEnd
}

// nests reports whether fine's partitions tile coarse's in every
// location: each boundary of coarse is a boundary of fine. Coarse's
// bucket is then a non-decreasing function of fine's (see the partition
// rules): minutes and hours in any sub-day multiple they divide, and in
// any day or coarser (a new date is a new sub-day bucket); days in any
// multiple of days, weeks, months, quarters and years; n weeks in a
// multiple of n weeks; months, quarters and years by their spans in
// months, all counted from January of year 0. A schedule nests only in
// itself: its slots need not line up with anything.
func nests(fine, coarse TimeGranularity) bool {
	switch {
	case fine == coarse:
		return true
	case fine.unit == unitCron || coarse.unit == unitCron:
		return false
	case fine.subday() && coarse.subday():
		return subdayMinutes(coarse)%subdayMinutes(fine) == 0
	case fine.subday():
		return true
	case coarse.subday():
		return false
	case fine.unit == unitDay:
		return fine.n == 1 || (coarse.unit == unitDay && coarse.n%fine.n == 0)
	case fine.unit == unitWeek:
		return coarse.unit == unitWeek && coarse.n%fine.n == 0
	case coarse.unit == unitDay || coarse.unit == unitWeek:
		return false
	}
	return monthSpan(coarse)%monthSpan(fine) == 0
}

func subdayMinutes(g TimeGranularity) int32 {
	if g.unit == unitHour {
		return 60 * g.n
	}
	return g.n
}

func monthSpan(g TimeGranularity) int32 {
	switch g.unit {
	case unitQuarter:
		return 3 * g.n
	case unitYear:
		return 12 * g.n
	}
	return g.n
}

// needsOpen reports whether m, from a downstream partition of gd to an
// upstream of gu, can read an upstream partition that ends after the
// downstream one: the covering partitions of a granularity that does not
// nest in gd, or a trailing window whose current partition is such a
// partition. Schedules are checked per partition at run time instead.
func needsOpen(m Mapping, gu, gd TimeGranularity) bool {
	if gu.unit == unitCron || gd.unit == unitCron {
		return false
	}
	if m.trailing() && m.Offset > 0 {
		return false
	}
	return !nests(gu, gd)
}

// checkMapping returns the problems of the mapping by which to reads
// from, both partitioned.
func checkMapping(from, to Asset, m Mapping) []error {
	var errs []error
	if m.Lookback < 0 || m.Offset < 0 {
		errs = append(errs, fmt.Errorf("tranche: asset %q maps dependency %q with Lookback %d and Offset %d; both must be 0 or more (Mapping{Lookback: 7, Offset: 1} is the seven partitions before)",
			to.Name, from.Name, m.Lookback, m.Offset))
		return errs
	}
	gu, gd := from.Partitioning.Granularity, to.Partitioning.Granularity
	if !m.Open && needsOpen(m, gu, gd) {
		var what string
		switch {
		case m.trailing():
			what = fmt.Sprintf("its trailing window with offset 0 ends with the %v partition holding the end of each %v partition, which may not have closed when it does", gu, gd)
		case nests(gd, gu):
			what = fmt.Sprintf("each %v partition reads the %v partition holding it, which has not closed when it does", gd, gu)
		default:
			what = fmt.Sprintf("%v partitions do not nest in %v partitions, so each reads the %v partitions overlapping it, the last of which may not have closed when it does", gu, gd, gu)
		}
		errs = append(errs, fmt.Errorf("tranche: asset %q (%v) depends on asset %q (%v): %s; declare Mappings[%q] = Mapping{Open: true} to read it anyway, or a trailing window with an offset (Mapping{Offset: 1} reads the previous one)",
			to.Name, gd, from.Name, gu, what, from.Name))
	}
	return errs
}

// sortedKeys returns a map's keys in order, for errors that list them.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
