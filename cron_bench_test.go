package tranche_test

import (
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
)

// BenchmarkCronWindow ranges over a year of "*/5 * * * *" slots in New
// York (105,120 slots), the schedule as a granularity: per slot, the
// partition with both bounds, in either order.
func BenchmarkCronWindow(b *testing.B) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		b.Fatal(err)
	}
	g, err := tranche.ParseCron("*/5 * * * *")
	if err != nil {
		b.Fatal(err)
	}
	w, err := tranche.NewTimePartitionWindow(g, time.Date(2026, 1, 1, 0, 0, 0, 0, ny), time.Date(2026, 12, 31, 23, 59, 0, 0, ny))
	if err != nil {
		b.Fatal(err)
	}
	for _, order := range []struct {
		name string
		seq  func() func(func(tranche.TimePartition) bool)
	}{{"OldestFirst", func() func(func(tranche.TimePartition) bool) { return w.OldestFirst() }},
		{"NewestFirst", func() func(func(tranche.TimePartition) bool) { return w.All() }}} {
		b.Run(order.name, func(b *testing.B) {
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				for p := range order.seq() {
					n++
					_ = p
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/slot")
		})
	}
}
