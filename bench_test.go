package tranche_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
)

// Benchmarks of the core, each beside the simplest hand-written
// alternative a user would write, so that one run compares them:
//
//	go test -run '^$' -bench '^Benchmark(SideBySide|DailyYear|HourlyMonth|PartitionOf|Lookback|ParsePartitionKey|Key|CenturyOfMinutes)$' -benchmem -count 10 .
//
// BENCHMARKS.md holds the medians and the ratios.

var (
	sinkStart, sinkEnd time.Time
	sinkPartition      tranche.TimePartition
	sinkWindow         tranche.TimePartitionWindow
	sinkString         string
	sinkInt            int
)

func benchZone(b *testing.B, name string) *time.Location {
	b.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		b.Fatal(err)
	}
	return loc
}

// BenchmarkDailyYear iterates over the 366 days of 2024 in New York (two
// DST days), yielding each day's [start, end).
func BenchmarkDailyYear(b *testing.B) {
	ny := benchZone(b, "America/New_York")
	first := time.Date(2024, 1, 1, 0, 0, 0, 0, ny)
	last := time.Date(2024, 12, 31, 0, 0, 0, 0, ny)
	const days = 366

	b.Run("tranche/All", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			w, err := tranche.NewTimePartitionWindow(tranche.Day, first, last)
			if err != nil {
				b.Fatal(err)
			}
			for p := range w.All() {
				sinkStart, sinkEnd = p.Start, p.End
			}
		}
	})
	b.Run("tranche/OldestFirst", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			w, err := tranche.NewTimePartitionWindow(tranche.Day, first, last)
			if err != nil {
				b.Fatal(err)
			}
			for p := range w.OldestFirst() {
				sinkStart, sinkEnd = p.Start, p.End
			}
		}
	})
	// The loop a user writes: the next midnight from the calendar date.
	b.Run("hand/time.Date", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			t := first
			for range days {
				y, m, d := t.Date()
				next := time.Date(y, m, d+1, 0, 0, 0, 0, ny)
				sinkStart, sinkEnd = t, next
				t = next
			}
		}
	})
	b.Run("hand/AddDate", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			t := first
			for range days {
				next := t.AddDate(0, 0, 1)
				sinkStart, sinkEnd = t, next
				t = next
			}
		}
	})
}

// BenchmarkHourlyMonth iterates over the 721 hours of November 2024 in
// New York (the fall-back night has 25).
func BenchmarkHourlyMonth(b *testing.B) {
	ny := benchZone(b, "America/New_York")
	first := time.Date(2024, 11, 1, 0, 0, 0, 0, ny)
	end := time.Date(2024, 12, 1, 0, 0, 0, 0, ny)
	last := end.Add(-time.Hour)

	b.Run("tranche/All", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			w, err := tranche.NewTimePartitionWindow(tranche.Hour, first, last)
			if err != nil {
				b.Fatal(err)
			}
			for p := range w.All() {
				sinkStart, sinkEnd = p.Start, p.End
			}
		}
	})
	b.Run("tranche/OldestFirst", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			w, err := tranche.NewTimePartitionWindow(tranche.Hour, first, last)
			if err != nil {
				b.Fatal(err)
			}
			for p := range w.OldestFirst() {
				sinkStart, sinkEnd = p.Start, p.End
			}
		}
	})
	// The loop a user writes: add an hour until the end.
	b.Run("hand/Add", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for t := first; t.Before(end); {
				next := t.Add(time.Hour)
				sinkStart, sinkEnd = t, next
				t = next
			}
		}
	})
}

func BenchmarkPartitionOf(b *testing.B) {
	ny := benchZone(b, "America/New_York")
	t := time.Date(2024, 11, 3, 12, 34, 56, 0, ny)
	b.Run("tranche/Day", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sinkPartition = tranche.PartitionOf(tranche.Day, t)
		}
	})
	b.Run("hand/Day", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			y, m, d := t.Date()
			sinkStart, sinkEnd = time.Date(y, m, d, 0, 0, 0, 0, ny), time.Date(y, m, d+1, 0, 0, 0, 0, ny)
		}
	})
	b.Run("tranche/Hour", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sinkPartition = tranche.PartitionOf(tranche.Hour, t)
		}
	})
	// Truncate works on absolute time: right in New York, wrong in
	// Kathmandu; it is what users write.
	b.Run("hand/Hour", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			s := t.Truncate(time.Hour)
			sinkStart, sinkEnd = s, s.Add(time.Hour)
		}
	})
	b.Run("tranche/Month", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sinkPartition = tranche.PartitionOf(tranche.Month, t)
		}
	})
	b.Run("hand/Month", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			y, m, _ := t.Date()
			sinkStart, sinkEnd = time.Date(y, m, 1, 0, 0, 0, 0, ny), time.Date(y, m+1, 1, 0, 0, 0, 0, ny)
		}
	})
}

func BenchmarkLookback(b *testing.B) {
	ny := benchZone(b, "America/New_York")
	now := time.Date(2026, 8, 18, 9, 0, 0, 0, ny)
	b.Run("tranche/7d-offset1", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			w, err := tranche.Lookback(now, 7, 1, tranche.Day)
			if err != nil {
				b.Fatal(err)
			}
			sinkWindow = w
		}
	})
	b.Run("hand/7d-offset1", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			y, m, d := now.Date()
			sinkStart, sinkEnd = time.Date(y, m, d-7, 0, 0, 0, 0, ny), time.Date(y, m, d, 0, 0, 0, 0, ny)
		}
	})
	b.Run("tranche/24h", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			w, err := tranche.Lookback(now, 24, 0, tranche.Hour)
			if err != nil {
				b.Fatal(err)
			}
			sinkWindow = w
		}
	})
	b.Run("hand/24h", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			end := now.Truncate(time.Hour).Add(time.Hour)
			sinkStart, sinkEnd = end.Add(-24*time.Hour), end
		}
	})
}

func BenchmarkParsePartitionKey(b *testing.B) {
	ny := benchZone(b, "America/New_York")
	b.Run("tranche/Day", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			p, err := tranche.ParsePartitionKey(tranche.Day, "2024-11-03", ny)
			if err != nil {
				b.Fatal(err)
			}
			sinkPartition = p
		}
	})
	b.Run("hand/Day", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			t, err := time.ParseInLocation("2006-01-02", "2024-11-03", ny)
			if err != nil {
				b.Fatal(err)
			}
			y, m, d := t.Date()
			sinkStart, sinkEnd = t, time.Date(y, m, d+1, 0, 0, 0, 0, ny)
		}
	})
	b.Run("tranche/Hour", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			p, err := tranche.ParsePartitionKey(tranche.Hour, "2024-11-03T01:00-05:00", ny)
			if err != nil {
				b.Fatal(err)
			}
			sinkPartition = p
		}
	})
	b.Run("hand/Hour", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			t, err := time.Parse("2006-01-02T15:04Z07:00", "2024-11-03T01:00-05:00")
			if err != nil {
				b.Fatal(err)
			}
			t = t.In(ny)
			sinkStart, sinkEnd = t, t.Add(time.Hour)
		}
	})
}

func BenchmarkKey(b *testing.B) {
	ny := benchZone(b, "America/New_York")
	day := tranche.PartitionOf(tranche.Day, time.Date(2024, 11, 3, 12, 0, 0, 0, ny))
	hour := tranche.PartitionOf(tranche.Hour, time.Date(2024, 11, 3, 12, 0, 0, 0, ny))
	week := tranche.PartitionOf(tranche.Week, time.Date(2024, 11, 3, 12, 0, 0, 0, ny))
	b.Run("tranche/Day", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sinkString = day.Key()
		}
	})
	b.Run("hand/Day", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sinkString = day.Start.Format("2006-01-02")
		}
	})
	b.Run("tranche/Hour", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sinkString = hour.Key()
		}
	})
	b.Run("hand/Hour", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sinkString = hour.Start.Format("2006-01-02T15:04Z07:00")
		}
	})
	b.Run("tranche/Week", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sinkString = week.Key()
		}
	})
}

// sideBySide times ours and alt in alternation, batch calls at a time,
// and reports each one's time per call and their ratio. On a shared,
// noisy machine both see the same load, so the ratio holds up where two
// benchmarks run seconds apart would not.
func sideBySide(b *testing.B, batch int, ours, alt func()) {
	var tOurs, tAlt time.Duration
	for b.Loop() {
		start := time.Now()
		for range batch {
			ours()
		}
		mid := time.Now()
		for range batch {
			alt()
		}
		tOurs += mid.Sub(start)
		tAlt += time.Since(mid)
	}
	calls := float64(b.N) * float64(batch)
	b.ReportMetric(0, "ns/op") // the pair's time means nothing; see the two below
	b.ReportMetric(float64(tOurs.Nanoseconds())/calls, "ours-ns/op")
	b.ReportMetric(float64(tAlt.Nanoseconds())/calls, "alt-ns/op")
	b.ReportMetric(float64(tOurs)/float64(tAlt), "ours/alt")
}

// BenchmarkSideBySide runs each of the comparisons above in alternation
// with its hand-written alternative: the ratios of BENCHMARKS.md.
func BenchmarkSideBySide(b *testing.B) {
	ny := benchZone(b, "America/New_York")
	dayFirst, dayLast := time.Date(2024, 1, 1, 0, 0, 0, 0, ny), time.Date(2024, 12, 31, 0, 0, 0, 0, ny)
	hourFirst, hourEnd := time.Date(2024, 11, 1, 0, 0, 0, 0, ny), time.Date(2024, 12, 1, 0, 0, 0, 0, ny)
	now := time.Date(2024, 11, 3, 12, 34, 56, 0, ny)
	lookbackNow := time.Date(2026, 8, 18, 9, 0, 0, 0, ny)
	day := tranche.PartitionOf(tranche.Day, now)
	hour := tranche.PartitionOf(tranche.Hour, now)

	days := func(w tranche.TimePartitionWindow, err error) tranche.TimePartitionWindow {
		if err != nil {
			b.Fatal(err)
		}
		return w
	}
	handDays := func() {
		t := dayFirst
		for range 366 {
			y, m, d := t.Date()
			next := time.Date(y, m, d+1, 0, 0, 0, 0, ny)
			sinkStart, sinkEnd = t, next
			t = next
		}
	}
	handHours := func() {
		for t := hourFirst; t.Before(hourEnd); {
			next := t.Add(time.Hour)
			sinkStart, sinkEnd = t, next
			t = next
		}
	}
	tests := []struct {
		name      string
		batch     int
		ours, alt func()
	}{
		{"DailyYear/All-vs-time.Date", 1, func() {
			for p := range days(tranche.NewTimePartitionWindow(tranche.Day, dayFirst, dayLast)).All() {
				sinkStart, sinkEnd = p.Start, p.End
			}
		}, handDays},
		{"DailyYear/OldestFirst-vs-time.Date", 1, func() {
			for p := range days(tranche.NewTimePartitionWindow(tranche.Day, dayFirst, dayLast)).OldestFirst() {
				sinkStart, sinkEnd = p.Start, p.End
			}
		}, handDays},
		{"DailyYear/OldestFirst-vs-AddDate", 1, func() {
			for p := range days(tranche.NewTimePartitionWindow(tranche.Day, dayFirst, dayLast)).OldestFirst() {
				sinkStart, sinkEnd = p.Start, p.End
			}
		}, func() {
			t := dayFirst
			for range 366 {
				next := t.AddDate(0, 0, 1)
				sinkStart, sinkEnd = t, next
				t = next
			}
		}},
		{"HourlyMonth/All-vs-Add", 1, func() {
			for p := range days(tranche.NewTimePartitionWindow(tranche.Hour, hourFirst, hourEnd.Add(-time.Hour))).All() {
				sinkStart, sinkEnd = p.Start, p.End
			}
		}, handHours},
		{"HourlyMonth/OldestFirst-vs-Add", 1, func() {
			for p := range days(tranche.NewTimePartitionWindow(tranche.Hour, hourFirst, hourEnd.Add(-time.Hour))).OldestFirst() {
				sinkStart, sinkEnd = p.Start, p.End
			}
		}, handHours},
		{"PartitionOf/Day", 100, func() { sinkPartition = tranche.PartitionOf(tranche.Day, now) }, func() {
			y, m, d := now.Date()
			sinkStart, sinkEnd = time.Date(y, m, d, 0, 0, 0, 0, ny), time.Date(y, m, d+1, 0, 0, 0, 0, ny)
		}},
		{"PartitionOf/Hour", 100, func() { sinkPartition = tranche.PartitionOf(tranche.Hour, now) }, func() {
			s := now.Truncate(time.Hour)
			sinkStart, sinkEnd = s, s.Add(time.Hour)
		}},
		{"PartitionOf/Month", 100, func() { sinkPartition = tranche.PartitionOf(tranche.Month, now) }, func() {
			y, m, _ := now.Date()
			sinkStart, sinkEnd = time.Date(y, m, 1, 0, 0, 0, 0, ny), time.Date(y, m+1, 1, 0, 0, 0, 0, ny)
		}},
		{"Lookback/7d-offset1", 100, func() { sinkWindow, _ = tranche.Lookback(lookbackNow, 7, 1, tranche.Day) }, func() {
			y, m, d := lookbackNow.Date()
			sinkStart, sinkEnd = time.Date(y, m, d-7, 0, 0, 0, 0, ny), time.Date(y, m, d, 0, 0, 0, 0, ny)
		}},
		{"Lookback/24h", 100, func() { sinkWindow, _ = tranche.Lookback(lookbackNow, 24, 0, tranche.Hour) }, func() {
			end := lookbackNow.Truncate(time.Hour).Add(time.Hour)
			sinkStart, sinkEnd = end.Add(-24*time.Hour), end
		}},
		{"ParsePartitionKey/Day", 100, func() { sinkPartition, _ = tranche.ParsePartitionKey(tranche.Day, "2024-11-03", ny) }, func() {
			t, _ := time.ParseInLocation("2006-01-02", "2024-11-03", ny)
			y, m, d := t.Date()
			sinkStart, sinkEnd = t, time.Date(y, m, d+1, 0, 0, 0, 0, ny)
		}},
		{"ParsePartitionKey/Hour", 100, func() { sinkPartition, _ = tranche.ParsePartitionKey(tranche.Hour, "2024-11-03T01:00-05:00", ny) }, func() {
			t, _ := time.Parse("2006-01-02T15:04Z07:00", "2024-11-03T01:00-05:00")
			t = t.In(ny)
			sinkStart, sinkEnd = t, t.Add(time.Hour)
		}},
		{"Key/Day", 100, func() { sinkString = day.Key() }, func() { sinkString = day.Start.Format("2006-01-02") }},
		{"Key/Hour", 100, func() { sinkString = hour.Key() }, func() { sinkString = hour.Start.Format("2006-01-02T15:04Z07:00") }},
	}
	for _, tt := range tests {
		b.Run(tt.name, func(b *testing.B) { sideBySide(b, tt.batch, tt.ours, tt.alt) })
	}
}

// centuryOfMinutes is the window of every minute from 1970 to 2070 in New
// York: 52,596,000 partitions.
func centuryOfMinutes(tb testing.TB, ny *time.Location) tranche.TimePartitionWindow {
	tb.Helper()
	w, err := tranche.NewTimePartitionWindow(tranche.Minute, time.Date(1970, 1, 1, 0, 0, 0, 0, ny), time.Date(2069, 12, 31, 23, 59, 0, 0, ny))
	if err != nil {
		tb.Fatal(err)
	}
	return w
}

// BenchmarkCenturyOfMinutes builds a window of 52 million partitions and
// measures it with Len: the cost follows the zone's transitions, not the
// partitions.
func BenchmarkCenturyOfMinutes(b *testing.B) {
	ny := benchZone(b, "America/New_York")
	b.Run("create+Len", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sinkInt = centuryOfMinutes(b, ny).Len()
		}
		b.ReportMetric(float64(sinkInt), "partitions")
	})
	// Ranging over all 52 million partitions in constant memory: the heap
	// in use after ranging is the heap in use before.
	b.Run("range", func(b *testing.B) {
		w := centuryOfMinutes(b, ny)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		b.ReportAllocs()
		n := 0
		for b.Loop() {
			n = 0
			for p := range w.OldestFirst() {
				sinkEnd = p.End
				n++
			}
		}
		runtime.ReadMemStats(&after)
		if n != w.Len() {
			b.Fatalf("ranged over %d partitions, Len() = %d", n, w.Len())
		}
		b.ReportMetric(float64(n), "partitions")
		b.ReportMetric(float64(after.HeapAlloc)-float64(before.HeapAlloc), "heap-growth-B")
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/partition")
	})
}

// TestRangeAllocatesNothingPerPartition checks that memory stays flat as
// windows grow: ranging a day of minutes and a month of minutes allocate
// the same (nothing per partition), in either order and in chunks.
func TestRangeAllocatesNothingPerPartition(t *testing.T) {
	for _, zone := range []string{"UTC", "America/New_York", "Australia/Lord_Howe"} {
		t.Run(zone, func(t *testing.T) {
			loc := loadLocation(t, zone)
			start := time.Date(2024, 1, 1, 0, 0, 0, 0, loc)
			day, err := tranche.NewTimePartitionWindow(tranche.Minute, start, start.Add(24*time.Hour-time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			month, err := tranche.NewTimePartitionWindow(tranche.Minute, start, time.Date(2024, 1, 31, 23, 59, 0, 0, loc))
			if err != nil {
				t.Fatal(err)
			}
			if day.Len() != 1440 || month.Len() != 31*1440 {
				t.Fatalf("Len: day %d, month %d", day.Len(), month.Len())
			}
			ranges := map[string]func(w tranche.TimePartitionWindow){
				"All": func(w tranche.TimePartitionWindow) {
					for p := range w.All() {
						sinkStart = p.Start
					}
				},
				"OldestFirst": func(w tranche.TimePartitionWindow) {
					for p := range w.OldestFirst() {
						sinkStart = p.Start
					}
				},
				"Chunks": func(w tranche.TimePartitionWindow) {
					for c := range w.Chunks(1440) {
						sinkWindow = c
					}
				},
			}
			for name, f := range ranges {
				small := testing.AllocsPerRun(2, func() { f(day) })
				large := testing.AllocsPerRun(2, func() { f(month) })
				if small != large || large > 4 {
					t.Errorf("%s: %v allocations for a day of minutes, %v for a month", name, small, large)
				}
			}
		})
	}
}

// TestCoreAllocations pins the allocation goals: PartitionOf, Lookback
// and ParsePartitionKey allocate nothing; Key allocates its string once.
func TestCoreAllocations(t *testing.T) {
	ny := loadLocation(t, "America/New_York")
	now := time.Date(2024, 11, 3, 12, 34, 56, 0, ny)
	p := tranche.PartitionOf(tranche.Hour, now)
	tests := []struct {
		name string
		f    func()
		want float64
	}{
		{"PartitionOf day", func() { sinkPartition = tranche.PartitionOf(tranche.Day, now) }, 0},
		{"PartitionOf 15m", func() { sinkPartition = tranche.PartitionOf(tranche.Every(15, tranche.Minute), now) }, 0},
		{"PartitionOf week", func() { sinkPartition = tranche.PartitionOf(tranche.Week, now) }, 0},
		{"Next and Prev", func() { sinkPartition = p.Next().Prev() }, 0},
		{"Lookback", func() { sinkWindow, _ = tranche.Lookback(now, 7, 1, tranche.Day) }, 0},
		{"Lookback hourly", func() { sinkWindow, _ = tranche.Lookback(now, 24, 1, tranche.Hour) }, 0},
		{"NewTimePartitionWindow", func() { sinkWindow, _ = tranche.NewTimePartitionWindow(tranche.Day, now, now.AddDate(1, 0, 0)) }, 0},
		{"ParsePartitionKey day", func() { sinkPartition, _ = tranche.ParsePartitionKey(tranche.Day, "2024-11-03", ny) }, 0},
		{"ParsePartitionKey hour", func() { sinkPartition, _ = tranche.ParsePartitionKey(tranche.Hour, "2024-11-03T01:00-05:00", ny) }, 0},
		{"ParsePartitionKey month", func() { sinkPartition, _ = tranche.ParsePartitionKey(tranche.Month, "2024-11", ny) }, 0},
		{"Key", func() { sinkString = p.Key() }, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := testing.AllocsPerRun(100, tt.f); got != tt.want {
				t.Errorf("%s allocates %v times, want %v", tt.name, got, tt.want)
			}
		})
	}
}
