package cron

import (
	"testing"
	"time"

	"pgregory.net/rapid"
)

// TestProperties checks the laws that tie Next and Prev together on
// random expressions, zones and instants.
func TestProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		expr := exprGen.Draw(t, "expr")
		loc := rapid.SampledFrom(append(zones, oddZones...)).Draw(t, "zone")
		// Local mean time before 1900 has offsets of odd seconds; past
		// 2037 Go computes offsets from the zone's rule.
		at := instantGenYears(loc, 1800, 2400).Draw(t, "at")
		s := mustParse(t, expr, loc)

		next, prev := s.Next(at), s.Prev(at)
		if next.IsZero() || prev.IsZero() {
			t.Fatalf("%q in %v: Next(%v) = %v, Prev = %v, want both non-zero", expr, loc, at, next, prev)
		}
		if !next.After(at) {
			t.Fatalf("%q in %v: Next(%v) = %v, not after it", expr, loc, at, next)
		}
		if prev.After(at) {
			t.Fatalf("%q in %v: Prev(%v) = %v, after it", expr, loc, at, prev)
		}
		if got := s.Prev(next); !got.Equal(next) {
			t.Fatalf("%q in %v: Prev(Next(%v)) = %v, want %v", expr, loc, at, got, next)
		}
		if got := s.Next(prev); !got.Equal(next) {
			t.Fatalf("%q in %v: Next(Prev(%v)) = %v, want Next = %v", expr, loc, at, got, next)
		}
		if got := s.Next(prev.Add(-time.Nanosecond)); !got.Equal(prev) {
			t.Fatalf("%q in %v: Next(Prev(%v) - 1ns) = %v, want Prev = %v", expr, loc, at, got, prev)
		}
		if got := s.Prev(next.Add(-time.Nanosecond)); !got.Equal(prev) {
			t.Fatalf("%q in %v: Prev(Next(%v) - 1ns) = %v, want Prev = %v", expr, loc, at, got, prev)
		}

		// Ten fire times oldest first are strictly increasing, and newest
		// first gives the same times.
		fires := []time.Time{prev}
		for range 10 {
			f := s.Next(fires[len(fires)-1])
			if !f.After(fires[len(fires)-1]) {
				t.Fatalf("%q in %v: fire times not increasing: %v then %v", expr, loc, fires[len(fires)-1], f)
			}
			fires = append(fires, f)
		}
		f := fires[len(fires)-1]
		for i := len(fires) - 2; i >= 0; i-- {
			f = s.Prev(f.Add(-time.Nanosecond))
			if !f.Equal(fires[i]) {
				t.Fatalf("%q in %v: newest first gives %v, oldest first %v", expr, loc, f, fires[i])
			}
		}
	})
}

// TestStringRoundTrip checks that String gives text that parses to an
// equal schedule, whatever the location given to Parse.
func TestStringRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		expr := exprGen.Draw(t, "expr")
		loc := zoneGen.Draw(t, "zone")
		s := mustParse(t, expr, loc)
		text := s.String()
		s2, err := Parse(text, rapid.SampledFrom(zones).Draw(t, "otherZone"))
		if err != nil {
			t.Fatalf("Parse(%q.String() = %q): %v", expr, text, err)
		}
		if !equal(s, s2) {
			t.Fatalf("Parse(%q.String() = %q).String() = %q: not equal", expr, text, s2.String())
		}
	})
}
