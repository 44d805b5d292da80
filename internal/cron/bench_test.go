package cron

import (
	"testing"
	"time"
)

// BenchmarkYear enumerates a year of "*/5 * * * *" fire times in New York
// (105,120 of them, DST transitions included) oldest first with Next and
// newest first with Prev. ns/fire is the cost of one fire time.
func BenchmarkYear(b *testing.B) {
	s := mustParse(b, "*/5 * * * *", newYork)
	from := time.Date(2026, 1, 1, 0, 0, 0, 0, newYork)
	to := time.Date(2027, 1, 1, 0, 0, 0, 0, newYork)
	b.Run("OldestFirst", func(b *testing.B) {
		b.ReportAllocs()
		n := 0
		for b.Loop() {
			n = 0
			for f := s.Next(from.Add(-time.Nanosecond)); f.Before(to); f = s.Next(f) {
				n++
			}
		}
		reportPerFire(b, n)
	})
	b.Run("NewestFirst", func(b *testing.B) {
		b.ReportAllocs()
		n := 0
		for b.Loop() {
			n = 0
			for f := s.Prev(to.Add(-time.Nanosecond)); !f.Before(from); f = s.Prev(f.Add(-time.Nanosecond)) {
				n++
			}
		}
		reportPerFire(b, n)
	})
}

func reportPerFire(b *testing.B, n int) {
	if n != 105120 {
		b.Fatalf("%d fire times in 2026, want 105120", n)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/fire")
}

// BenchmarkNext measures single calls for a few kinds of schedules.
func BenchmarkNext(b *testing.B) {
	at := time.Date(2026, 6, 15, 10, 7, 0, 0, newYork)
	for _, expr := range []string{"*/5 * * * *", "0 2 * * 1-5", "0 0 29 2 */7"} {
		s := mustParse(b, expr, newYork)
		b.Run(expr, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				s.Next(at)
			}
		})
	}
}

// BenchmarkPrev is BenchmarkNext backward.
func BenchmarkPrev(b *testing.B) {
	at := time.Date(2026, 6, 15, 10, 7, 0, 0, newYork)
	for _, expr := range []string{"*/5 * * * *", "0 2 * * 1-5", "0 0 29 2 */7"} {
		s := mustParse(b, expr, newYork)
		b.Run(expr, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				s.Prev(at)
			}
		})
	}
}

func BenchmarkParse(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse("*/15 9-17 * JAN-MAR MON-FRI", nil); err != nil {
			b.Fatal(err)
		}
	}
}
