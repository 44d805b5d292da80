package crosscheck

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	_ "time/tzdata"

	robfig "github.com/robfig/cron/v3"
	"github.com/tranche-dev/tranche/internal/cron"
	"pgregory.net/rapid"
)

func mustLoad(name string) *time.Location {
	loc, err := time.LoadLocation(name)
	if err != nil {
		panic(err)
	}
	return loc
}

var newYork = mustLoad("America/New_York")

// field bounds for the generator, in the order of the expression.
var bounds = [5]struct{ min, max int }{{0, 59}, {0, 23}, {1, 31}, {1, 12}, {0, 6}}

var (
	monthNames = []string{"jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"}
	dayNames   = []string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}
)

// genField draws field i in a form on which the two parsers agree: no 7
// for Sunday, no list holding *, and */n with n > 1 in a day field only
// when the other day field is * (robfig/cron treats */2 as a restriction
// there, Vixie cron and tranche as a wildcard).
func genField(t *rapid.T, i int, dayStep bool) string {
	b := bounds[i]
	name := strconv.Itoa(i)
	value := func(label string, lo, hi int) string {
		v := rapid.IntRange(lo, hi).Draw(t, label)
		if rapid.IntRange(0, 3).Draw(t, label+"name") == 0 {
			switch i {
			case 3:
				return strings.ToUpper(monthNames[v-1])
			case 4:
				return dayNames[v]
			}
		}
		return strconv.Itoa(v)
	}
	switch rapid.IntRange(0, 5).Draw(t, "form"+name) {
	case 0, 1, 2:
		return "*"
	case 3:
		if i >= 2 && !dayStep {
			return "*"
		}
		return "*/" + strconv.Itoa(rapid.IntRange(1, b.max-b.min+1).Draw(t, "step"+name))
	}
	var elems []string
	for j := range rapid.IntRange(1, 3).Draw(t, "len"+name) {
		label := name + "." + strconv.Itoa(j)
		lo := rapid.IntRange(b.min, b.max).Draw(t, "lo"+label)
		switch rapid.IntRange(0, 3).Draw(t, "kind"+label) {
		case 0:
			elems = append(elems, value("v"+label, b.min, b.max))
		case 1:
			hi := rapid.IntRange(lo, b.max).Draw(t, "hi"+label)
			elems = append(elems, strconv.Itoa(lo)+"-"+strconv.Itoa(hi))
		case 2:
			hi := rapid.IntRange(lo, b.max).Draw(t, "hi"+label)
			elems = append(elems, strconv.Itoa(lo)+"-"+strconv.Itoa(hi)+"/"+strconv.Itoa(rapid.IntRange(1, b.max-b.min+1).Draw(t, "s"+label)))
		default:
			elems = append(elems, strconv.Itoa(lo)+"/"+strconv.Itoa(rapid.IntRange(1, b.max-b.min+1).Draw(t, "s"+label)))
		}
	}
	return strings.Join(elems, ",")
}

var exprGen = rapid.Custom(func(t *rapid.T) string {
	if rapid.IntRange(0, 9).Draw(t, "isMacro") == 0 {
		return rapid.SampledFrom([]string{"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"}).Draw(t, "macro")
	}
	var f [5]string
	f[0], f[1], f[3] = genField(t, 0, true), genField(t, 1, true), genField(t, 3, true)
	f[2] = genField(t, 2, true)
	f[4] = genField(t, 4, f[2] == "*")
	if f[4] != "*" && strings.HasPrefix(f[2], "*/") {
		f[2] = "*"
	}
	return strings.Join(f[:], " ")
}).Filter(func(expr string) bool {
	_, err := cron.Parse(expr, nil)
	return err == nil
})

// changes lists the instants between 1995 and 2065 where New York changes
// its UTC offset.
var changes = func() []int64 {
	var out []int64
	off := func(u int64) int {
		_, o := time.Unix(u, 0).In(newYork).Zone()
		return o
	}
	from := time.Date(1995, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	to := time.Date(2065, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	for u := from; u < to; u += 3600 {
		if off(u) != off(u+3600) {
			out = append(out, u+3600)
		}
	}
	return out
}()

// nearChange reports whether t lies within two days of a change of
// offset in New York.
func nearChange(t time.Time) bool {
	u := t.Unix()
	for _, c := range changes {
		if c-2*86400 < u && u < c+2*86400 {
			return true
		}
	}
	return false
}

// TestAgainstRobfig compares Next with robfig/cron's Next on random
// expressions and instants in UTC and in New York, away from changes of
// offset, where the two must agree.
func TestAgainstRobfig(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		expr := exprGen.Draw(t, "expr")
		loc := rapid.SampledFrom([]*time.Location{time.UTC, newYork}).Draw(t, "zone")
		u := rapid.Int64Range(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).Unix(), time.Date(2060, 1, 1, 0, 0, 0, 0, time.UTC).Unix()).Draw(t, "unix")
		if rapid.Bool().Draw(t, "wholeMinute") {
			u -= u % 60
		}
		at := time.Unix(u, int64(rapid.IntRange(0, 999_999_999).Draw(t, "nanos"))).In(loc)
		if loc == newYork && nearChange(at) {
			t.Skip("near a change of offset")
		}

		text := "CRON_TZ=" + loc.String() + " " + expr
		ours, err := cron.Parse(text, nil)
		if err != nil {
			t.Fatalf("cron.Parse(%q): %v", text, err)
		}
		theirs, err := robfig.ParseStandard(text)
		if err != nil {
			t.Fatalf("robfig ParseStandard(%q): %v", text, err)
		}
		want := theirs.Next(at)
		if want.IsZero() {
			t.Skip("robfig/cron gives up after five years")
		}
		got := ours.Next(at)
		if loc == newYork && (nearChange(want) || nearChange(got)) {
			t.Skip("fires near a change of offset")
		}
		if !got.Equal(want) {
			t.Fatalf("%q: Next(%v) = %v, robfig/cron says %v", text, at, got, want)
		}
		if prev := ours.Prev(want); !prev.Equal(want) {
			t.Fatalf("%q: Prev(%v) = %v, want the same fire time", text, want, prev)
		}
	})
}

// year bounds the benchmarks: every five minutes of 2026 in New York.
var (
	yearFrom = time.Date(2026, 1, 1, 0, 0, 0, 0, newYork)
	yearTo   = time.Date(2027, 1, 1, 0, 0, 0, 0, newYork)
)

const every5 = "CRON_TZ=America/New_York */5 * * * *"

func robfigYear(b *testing.B) {
	s, err := robfig.ParseStandard(every5)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		n = 0
		for f := s.Next(yearFrom.Add(-time.Nanosecond)); f.Before(yearTo); f = s.Next(f) {
			n++
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/fire")
}

func trancheYear(b *testing.B) {
	s, err := cron.Parse(every5, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		n = 0
		for f := s.Next(yearFrom.Add(-time.Nanosecond)); f.Before(yearTo); f = s.Next(f) {
			n++
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/fire")
}

func trancheYearNewestFirst(b *testing.B) {
	s, err := cron.Parse(every5, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		n = 0
		for f := s.Prev(yearTo.Add(-time.Nanosecond)); !f.Before(yearFrom); f = s.Prev(f.Add(-time.Nanosecond)) {
			n++
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/fire")
}

// BenchmarkYear enumerates a year of "*/5 * * * *" fire times in New York
// with a loop over robfig/cron's Next and with ours, side by side, and
// ours newest first (robfig/cron has no previous fire time).
func BenchmarkYear(b *testing.B) {
	b.Run("robfig-Next", robfigYear)
	b.Run("tranche-Next", trancheYear)
	b.Run("tranche-Prev", trancheYearNewestFirst)
}

// yearLoop times one enumeration of the year with next, returning the
// time per fire time.
func yearLoop(next func(time.Time) time.Time) time.Duration {
	start := time.Now()
	n := 0
	for f := next(yearFrom.Add(-time.Nanosecond)); f.Before(yearTo); f = next(f) {
		n++
	}
	return time.Since(start) / time.Duration(n)
}

// BenchmarkYearSideBySide alternates a year with robfig/cron and a year
// with ours within each iteration, so that both see the same machine
// load, and reports the per-fire times and their ratio.
func BenchmarkYearSideBySide(b *testing.B) {
	theirs, err := robfig.ParseStandard(every5)
	if err != nil {
		b.Fatal(err)
	}
	ours, err := cron.Parse(every5, nil)
	if err != nil {
		b.Fatal(err)
	}
	var robfigTotal, oursTotal time.Duration
	for b.Loop() {
		robfigTotal += yearLoop(theirs.Next)
		oursTotal += yearLoop(ours.Next)
	}
	b.ReportMetric(float64(robfigTotal.Nanoseconds())/float64(b.N), "robfig-ns/fire")
	b.ReportMetric(float64(oursTotal.Nanoseconds())/float64(b.N), "tranche-ns/fire")
	b.ReportMetric(float64(robfigTotal)/float64(oursTotal), "speedup")
}

// TestSpeedup checks the performance goal: ours at least three times as
// fast as robfig/cron over the year, with no allocation. It measures, so
// it runs only when CROSSCHECK_SPEEDUP is set.
func TestSpeedup(t *testing.T) {
	if os.Getenv("CROSSCHECK_SPEEDUP") == "" {
		t.Skip("set CROSSCHECK_SPEEDUP=1 to measure")
	}
	theirs, err := robfig.ParseStandard(every5)
	if err != nil {
		t.Fatal(err)
	}
	ours, err := cron.Parse(every5, nil)
	if err != nil {
		t.Fatal(err)
	}
	var ratios []float64
	for range 5 {
		r := yearLoop(theirs.Next)
		o := yearLoop(ours.Next)
		ratios = append(ratios, float64(r)/float64(o))
		t.Logf("robfig/cron %v per fire time, ours %v: %.1fx", r, o, float64(r)/float64(o))
	}
	slices.Sort(ratios)
	if median := ratios[len(ratios)/2]; median < 3 {
		t.Errorf("ours is %.1fx as fast as robfig/cron (median of 5), want at least 3x", median)
	}
	allocs := testing.AllocsPerRun(3, func() {
		yearLoop(ours.Next)
		for f := ours.Prev(yearTo.Add(-time.Nanosecond)); !f.Before(yearFrom); f = ours.Prev(f.Add(-time.Nanosecond)) {
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per year of fire times, want 0", allocs)
	}
}
