package tranche

import (
	"fmt"
	"strings"
	"time"
)

// TimePartition is one partition of time: the half-open span [Start, End)
// of a granularity, with both instants in the partition's location.
//
// Partitions are small values, compared with [TimePartition.Equal] or
// [TimePartition.Compare] rather than == (as with time.Time, == also
// compares locations and monotonic readings). The zero TimePartition,
// whose Granularity is invalid, stands for no partition (the
// partition of an unpartitioned asset's [Batch]); p == TimePartition{}
// tests for it, and no partition this package computes is zero.
type TimePartition struct {
	Start, End  time.Time // half-open [Start, End), in the partition's location
	Granularity TimeGranularity
}

// PartitionOf returns the partition of g that holds t, in t.Location().
// It panics if g is the zero TimeGranularity.
func PartitionOf(g TimeGranularity, t time.Time) TimePartition {
	g.mustBeValid("PartitionOf")
	loc := t.Location()
	c := newCursor(g, loc)
	s, e := c.Bounds(unix(t))
	return TimePartition{Start: at(s, loc), End: at(e, loc), Granularity: g}
}

// Next returns the partition that starts where p ends.
func (p TimePartition) Next() TimePartition {
	p.Granularity.mustBeValid("TimePartition.Next")
	loc := p.Start.Location()
	c := newCursor(p.Granularity, loc)
	s := unix(p.End)
	return TimePartition{Start: at(s, loc), End: at(c.Next(s), loc), Granularity: p.Granularity}
}

// Prev returns the partition that ends where p starts.
func (p TimePartition) Prev() TimePartition {
	p.Granularity.mustBeValid("TimePartition.Prev")
	loc := p.Start.Location()
	c := newCursor(p.Granularity, loc)
	e := unix(p.Start)
	return TimePartition{Start: at(c.Start(e-1), loc), End: at(e, loc), Granularity: p.Granularity}
}

// isZero reports whether p is the zero TimePartition, which is what a
// user tests with p == TimePartition{}. No partition computed by this
// package is zero; none is empty either.
func (p TimePartition) isZero() bool {
	return p.Start.IsZero() && p.End.IsZero() && !p.Granularity.IsValid()
}

// Equal reports whether p and q are the same partition: the same
// granularity, start and end instants and location.
func (p TimePartition) Equal(q TimePartition) bool {
	return p.Granularity == q.Granularity && p.Start.Equal(q.Start) && p.End.Equal(q.End) &&
		sameZone(p.Start.Location(), q.Start.Location())
}

// Compare orders partitions by start, then end: -1 if p starts first, +1
// if q does, 0 if they share both bounds. It suits slices.SortFunc.
func (p TimePartition) Compare(q TimePartition) int {
	if c := p.Start.Compare(q.Start); c != 0 {
		return c
	}
	return p.End.Compare(q.End)
}

// String returns the key and the half-open bounds, as in
// "2024-03-10 [2024-03-10T00:00:00-05:00, 2024-03-11T00:00:00-04:00)".
func (p TimePartition) String() string {
	if p.isZero() {
		return "zero partition"
	}
	return p.Key() + " [" + p.Start.Format(time.RFC3339) + ", " + p.End.Format(time.RFC3339) + ")"
}

// MarshalText implements [encoding.TextMarshaler]: the partition's
// granularity, key and zone, as a window's text form has them, as in
// "day 2024-03-10 America/New_York" or
// "hour 2024-11-03T01:00-05:00 America/New_York"; the zone is named as
// [TimePartitionWindow.String] names it. The zero partition marshals to
// empty text. It refuses a value that is not a partition of its
// granularity (bounds that [PartitionOf] would not give) and one whose
// zone has no name that means the same calendar on every host (see
// [TimePartitionWindow.MarshalText]).
func (p TimePartition) MarshalText() ([]byte, error) {
	if p.isZero() {
		return []byte{}, nil
	}
	if !p.Granularity.IsValid() {
		return nil, fmt.Errorf("tranche: cannot marshal partition %s: its granularity is the zero TimeGranularity", p)
	}
	if q := PartitionOf(p.Granularity, p.Start); !q.Start.Equal(p.Start) || !q.End.Equal(p.End) {
		return nil, fmt.Errorf("tranche: cannot marshal partition %s: it is not a %v partition; the one holding its start is %s", p, p.Granularity, q)
	}
	loc := p.Start.Location()
	if !portableZone(loc) {
		return nil, fmt.Errorf("tranche: cannot marshal partition %s: its location %q is not a zone database name or a fixed offset; load the zone by name", p, zoneName(loc))
	}
	b := append([]byte(p.Granularity.String()), ' ')
	b = appendKey(b, p.Granularity, p.Start, p.End)
	b = append(b, ' ')
	return append(b, zoneName(loc)...), nil
}

// UnmarshalText implements [encoding.TextUnmarshaler] for the form
// MarshalText writes, "GRANULARITY KEY ZONE", with [ParseGranularity],
// [ParsePartitionKey] and a zone as [ParseTimePartitionWindow] takes it;
// empty text is the zero partition.
func (p *TimePartition) UnmarshalText(text []byte) error {
	if len(text) == 0 {
		*p = TimePartition{}
		return nil
	}
	s := string(text)
	rest, zone, ok1 := cutLast(strings.TrimSpace(s))
	gran, key, ok2 := cutLast(rest)
	if !ok1 || !ok2 {
		return &ParseError{Type: "partition", Text: s, Reason: `want "GRANULARITY KEY ZONE", as in "day 2024-03-10 America/New_York"`}
	}
	g, err := ParseGranularity(gran)
	if err != nil {
		return &ParseError{Type: "partition", Text: s, Reason: reasonOf(err), Err: err}
	}
	loc, err := loadZone(zone)
	if err != nil {
		return &ParseError{Type: "partition", Text: s, Reason: fmt.Sprintf("zone %q: %v", zone, err), Err: err}
	}
	v, err := ParsePartitionKey(g, key, loc)
	if err != nil {
		return &ParseError{Type: "partition", Text: s, Reason: reasonOf(err), Err: err}
	}
	*p = v
	return nil
}
