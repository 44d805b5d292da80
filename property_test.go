package tranche_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/tranche-dev/tranche"
)

// Property tests over random zones, granularities and instants. The zones
// include every trap of CALENDAR.md: 30-minute DST, +05:45 and +12:45,
// a skipped date, midnight transitions, and transitions off the hour.

var propertyZones = []string{
	"UTC", "America/New_York", "Europe/Berlin", "Australia/Lord_Howe", "Asia/Kathmandu",
	"Pacific/Chatham", "Pacific/Apia", "America/Sao_Paulo", "America/Santiago", "America/St_Johns",
	"Asia/Tehran", "Africa/Casablanca", "Europe/Dublin", "America/Havana",
}

var propertyGranularities = func() []tranche.TimeGranularity {
	gs := []tranche.TimeGranularity{tranche.Minute, tranche.Hour, tranche.Day, tranche.Week, tranche.Month, tranche.Quarter, tranche.Year}
	for _, s := range []string{"5m", "10m", "15m", "30m", "2h", "3h", "4h", "6h", "8h", "12h", "24h", "2d", "3d", "7d", "2w", "2mo", "3mo", "4mo", "6mo", "2q", "5y", "10y",
		// cron schedules: fixed hours (one slot a day, DST-adjusted), wildcard
		// hours (every real instant), weekdays with holidays, a fixed zone
		"cron(0 2 * * *)", "cron(*/15 * * * *)", "cron(30 1,13 * * *)", "cron(0 */6 * * *)",
		"cron(0 2 * * 1-5; except 2024-12-25 2026-01-01)", "cron(0 0 1 * *)", "cron(CRON_TZ=Asia/Tokyo 0 9 * * MON-FRI)",
	} {
		g, err := tranche.ParseGranularity(s)
		if err != nil {
			panic(err)
		}
		gs = append(gs, g)
	}
	return gs
}()

// loadZones loads every zone once: LoadLocation parses the zone file on
// each call.
var loadZones = sync.OnceValue(func() map[string]*time.Location {
	m := map[string]*time.Location{}
	for _, name := range propertyZones {
		loc, err := time.LoadLocation(name)
		if err != nil {
			panic(err)
		}
		m[name] = loc
	}
	return m
})

var (
	minInstant = time.Date(1972, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	maxInstant = time.Date(2040, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
)

func drawZone(t *rapid.T) *time.Location {
	return loadZones()[rapid.SampledFrom(propertyZones).Draw(t, "zone")]
}

func drawGranularity(t *rapid.T) tranche.TimeGranularity {
	return rapid.SampledFrom(propertyGranularities).Draw(t, "granularity")
}

// nominal is a granularity's usual length in seconds, to scale random
// spans.
func nominal(g tranche.TimeGranularity) int64 {
	p := tranche.PartitionOf(g, time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC))
	return p.End.Unix() - p.Start.Unix()
}

// maxSpan bounds the spans the properties draw, so that a window of ten
// years or a lookback of decades stays within the supported range (from
// 1972) and within time.Duration.
const maxSpan = 30 * 366 * 86400

// budget is how many partitions of g fit in maxSpan.
func budget(g tranche.TimeGranularity) int64 { return max(1, maxSpan/nominal(g)) }

// drawInstant draws an instant in loc between 1972 and 2040: uniformly, or
// near one of loc's offset changes (found with ZoneBounds), where the
// partition rules have their special cases.
func drawInstant(t *rapid.T, loc *time.Location, label string) time.Time {
	return drawInstantAfter(t, loc, label, minInstant)
}

// drawInstantAfter is drawInstant from the Unix second from on.
func drawInstantAfter(t *rapid.T, loc *time.Location, label string, from int64) time.Time {
	u := rapid.Int64Range(from, maxInstant).Draw(t, label+" unix")
	at := time.Unix(u, 0).In(loc)
	switch rapid.IntRange(0, 2).Draw(t, label+" kind") {
	case 1: // near the next offset change
		if _, end := at.ZoneBounds(); !end.IsZero() && end.After(at) && end.Unix() < maxInstant {
			at = end
		}
		at = at.Add(time.Duration(drawJitter(t, label)) * time.Second)
	case 2: // near the previous one
		if start, _ := at.ZoneBounds(); !start.IsZero() && !start.After(at) && start.Unix() >= from {
			at = start
		}
		at = at.Add(time.Duration(drawJitter(t, label)) * time.Second)
	}
	if at.Unix() < from {
		at = time.Unix(from, 0).In(loc)
	}
	if rapid.Bool().Draw(t, label+" subsecond") {
		at = at.Add(time.Duration(rapid.Int64Range(0, int64(time.Second-1)).Draw(t, label+" ns")))
	}
	return at
}

func drawJitter(t *rapid.T, label string) int64 {
	return rapid.OneOf(
		rapid.Int64Range(-2, 2),
		rapid.Int64Range(-2*3600, 2*3600),
		rapid.Int64Range(-3*86400, 3*86400),
	).Draw(t, label+" jitter")
}

// drawWindow draws a window of up to about 40 partitions.
func drawWindow(t *rapid.T) (tranche.TimePartitionWindow, *time.Location, tranche.TimeGranularity) {
	loc := drawZone(t)
	g := drawGranularity(t)
	first := drawInstant(t, loc, "first")
	k := rapid.Int64Range(0, min(40, budget(g))).Draw(t, "partitions")
	last := first.Add(time.Duration(rapid.Int64Range(0, k*nominal(g)).Draw(t, "span")) * time.Second)
	w, err := tranche.NewTimePartitionWindow(g, first, last)
	if err != nil {
		t.Fatalf("NewTimePartitionWindow(%v, %v, %v): %v", g, first, last, err)
	}
	return w, loc, g
}

func samePartition(t *rapid.T, what string, want, got tranche.TimePartition) {
	t.Helper()
	if !want.Equal(got) {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
}

func TestPropertyPartitionsTileTime(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		loc := drawZone(t)
		g := drawGranularity(t)
		at := drawInstant(t, loc, "at")
		p := tranche.PartitionOf(g, at)

		if !p.Start.Before(p.End) {
			t.Fatalf("PartitionOf(%v, %v) = %v is empty", g, at, p)
		}
		if at.Before(p.Start) || !at.Before(p.End) {
			t.Fatalf("PartitionOf(%v, %v) = %v does not contain it", g, at, p)
		}
		if p.Start.Location() != loc || p.End.Location() != loc || p.Granularity != g {
			t.Fatalf("PartitionOf(%v, %v) = %v is in %v, granularity %v", g, at, p, p.Start.Location(), p.Granularity)
		}
		next, prev := p.Next(), p.Prev()
		if !next.Start.Equal(p.End) || !prev.End.Equal(p.Start) {
			t.Fatalf("%v: Next %v, Prev %v do not adjoin it", p, next, prev)
		}
		if !next.Start.Before(next.End) || !prev.Start.Before(prev.End) {
			t.Fatalf("%v: Next %v or Prev %v is empty", p, next, prev)
		}
		samePartition(t, "Prev().Next()", p, prev.Next())
		samePartition(t, "Next().Prev()", p, next.Prev())

		// Every instant of [Start, End) maps back to p, and End to Next.
		samePartition(t, "PartitionOf(Start)", p, tranche.PartitionOf(g, p.Start))
		samePartition(t, "PartitionOf(End-1s)", p, tranche.PartitionOf(g, p.End.Add(-time.Second)))
		samePartition(t, "PartitionOf(End-1ns)", p, tranche.PartitionOf(g, p.End.Add(-time.Nanosecond)))
		samePartition(t, "PartitionOf(End)", next, tranche.PartitionOf(g, p.End))
		samePartition(t, "PartitionOf(Start-1ns)", prev, tranche.PartitionOf(g, p.Start.Add(-time.Nanosecond)))
		for range 3 {
			d := rapid.Int64Range(0, int64(p.End.Sub(p.Start))-1).Draw(t, "interior")
			samePartition(t, "PartitionOf(interior)", p, tranche.PartitionOf(g, p.Start.Add(time.Duration(d))))
		}
		if q := tranche.PartitionOf(g, at.UTC()); q.Start.Location() != time.UTC {
			t.Fatalf("PartitionOf(%v, %v) is in %v, want UTC", g, at.UTC(), q.Start.Location())
		}

		// Keys round-trip, and each names one partition.
		for _, q := range []tranche.TimePartition{prev, p, next} {
			back, err := tranche.ParsePartitionKey(g, q.Key(), loc)
			if err != nil {
				t.Fatalf("ParsePartitionKey(%v, %q, %v): %v", g, q.Key(), loc, err)
			}
			samePartition(t, "ParsePartitionKey(Key())", q, back)
		}
		if prev.Key() == p.Key() || p.Key() == next.Key() {
			t.Fatalf("neighbours share a key: %v %v %v", prev, p, next)
		}
	})
}

func TestPropertyWindows(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		w, loc, g := drawWindow(t)
		oldest := slices.Collect(w.OldestFirst())
		if len(oldest) != w.Len() || w.Len() < 1 {
			t.Fatalf("%v: OldestFirst yields %d partitions, Len() = %d", w, len(oldest), w.Len())
		}
		if !oldest[0].Start.Equal(w.Start()) || !oldest[len(oldest)-1].End.Equal(w.End()) {
			t.Fatalf("%v: OldestFirst runs [%v, %v), the window [%v, %v)", w, oldest[0].Start, oldest[len(oldest)-1].End, w.Start(), w.End())
		}
		samePartition(t, "Oldest()", oldest[0], w.Oldest())
		samePartition(t, "Newest()", oldest[len(oldest)-1], w.Newest())
		for i, p := range oldest {
			if !p.Start.Before(p.End) || p.Start.Location() != loc || p.Granularity != g {
				t.Fatalf("%v: partition %d is %v", w, i, p)
			}
			if i > 0 && !oldest[i-1].End.Equal(p.Start) {
				t.Fatalf("%v: gap or overlap between %v and %v", w, oldest[i-1], p)
			}
			if !w.Contains(p.Start) || !w.Contains(p.End.Add(-time.Nanosecond)) {
				t.Fatalf("%v does not contain its partition %v", w, p)
			}
		}
		i := rapid.IntRange(0, len(oldest)-1).Draw(t, "index")
		samePartition(t, "PartitionOf(partition's start)", oldest[i], tranche.PartitionOf(g, oldest[i].Start))
		if i+1 < len(oldest) {
			samePartition(t, "Next of a partition", oldest[i+1], oldest[i].Next())
		}

		all := slices.Collect(w.All())
		slices.Reverse(all)
		if !slices.EqualFunc(oldest, all, tranche.TimePartition.Equal) {
			t.Fatalf("%v: All is not the reverse of OldestFirst", w)
		}

		// Chunks tile the window, newest first.
		n := rapid.IntRange(1, w.Len()+2).Draw(t, "chunk size")
		var chunked []tranche.TimePartition
		end := w.End()
		chunks := slices.Collect(w.Chunks(n))
		for i, c := range chunks {
			if c.Len() < 1 || c.Len() > n || (i < len(chunks)-1 && c.Len() != n) {
				t.Fatalf("%v.Chunks(%d): chunk %d (%v) has %d partitions", w, n, i, c, c.Len())
			}
			if !c.End().Equal(end) {
				t.Fatalf("%v.Chunks(%d): chunk %d (%v) ends at %v, want %v", w, n, i, c, c.End(), end)
			}
			end = c.Start()
			got := slices.Collect(c.All())
			if len(got) != c.Len() {
				t.Fatalf("chunk %v yields %d partitions, Len() = %d", c, len(got), c.Len())
			}
			chunked = append(chunked, got...)
		}
		if !end.Equal(w.Start()) {
			t.Fatalf("%v.Chunks(%d) stop at %v, want %v", w, n, end, w.Start())
		}
		slices.Reverse(chunked)
		if !slices.EqualFunc(oldest, chunked, tranche.TimePartition.Equal) {
			t.Fatalf("%v.Chunks(%d) do not hold the window's partitions", w, n)
		}

		// The text forms round-trip.
		back, err := tranche.ParseTimePartitionWindow(w.String())
		if err != nil {
			t.Fatalf("ParseTimePartitionWindow(%q): %v", w.String(), err)
		}
		if !back.Equal(w) || back.Len() != w.Len() {
			t.Fatalf("ParseTimePartitionWindow(%q) = %v (Len %d), want %v (Len %d)", w.String(), back, back.Len(), w, w.Len())
		}
		text, err := w.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var un tranche.TimePartitionWindow
		if err := un.UnmarshalText(text); err != nil || !un.Equal(w) {
			t.Fatalf("UnmarshalText(%q) = %v, %v; want %v", text, un, err, w)
		}

		// The same window from half-open bounds, and its length counted
		// from the calendar.
		between, err := tranche.WindowBetween(g, w.Start(), w.End().UTC())
		if err != nil || !between.Equal(w) || between.Len() != w.Len() {
			t.Fatalf("WindowBetween(%v, %v, %v) = %v (Len %d), %v; want %v (Len %d)", g, w.Start(), w.End(), between, between.Len(), err, w, w.Len())
		}
	})
}

func TestPropertyLookback(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		loc := drawZone(t)
		g := drawGranularity(t)
		lookback := rapid.Int64Range(1, min(30, budget(g))).Draw(t, "lookback")
		offset := rapid.Int64Range(0, min(10, budget(g)-lookback)).Draw(t, "offset")
		// Far enough from 1972 for the window to start after it.
		now := drawInstantAfter(t, loc, "now", minInstant+(lookback+offset+1)*nominal(g))
		w, err := tranche.Lookback(now, int(lookback), int(offset), g)
		if err != nil {
			t.Fatalf("Lookback(%v, %d, %d, %v): %v", now, lookback, offset, g, err)
		}
		parts := slices.Collect(w.OldestFirst())
		if w.Len() != int(lookback) || len(parts) != int(lookback) {
			t.Fatalf("Lookback(%v, %d, %d, %v) = %v: Len %d, %d partitions", now, lookback, offset, g, w, w.Len(), len(parts))
		}
		for i := 1; i < len(parts); i++ {
			if !parts[i-1].End.Equal(parts[i].Start) {
				t.Fatalf("%v: gap between %v and %v", w, parts[i-1], parts[i])
			}
		}
		// It ends offset partitions before the current one.
		current := tranche.PartitionOf(g, now)
		p := w.Newest()
		for range offset {
			p = p.Next()
		}
		samePartition(t, "offset partitions after the newest", current, p)
		// Consecutive ticks with lookback 1 tile time: no gap, no overlap.
		tick, prevWindow := now, tranche.TimePartitionWindow{}
		for i := range 4 {
			v, err := tranche.Lookback(tick, 1, int(offset), g)
			if err != nil {
				t.Fatal(err)
			}
			if v.Len() != 1 {
				t.Fatalf("Lookback(%v, 1, %d, %v).Len() = %d", tick, offset, g, v.Len())
			}
			if i > 0 && !v.Start().Equal(prevWindow.End()) {
				t.Fatalf("tick %v: window %v does not start where the previous tick's %v ends", tick, v, prevWindow)
			}
			prevWindow = v
			// The next tick falls anywhere in the next partition.
			next := tranche.PartitionOf(g, tick).Next()
			tick = next.Start.Add(time.Duration(rapid.Int64Range(0, int64(next.End.Sub(next.Start))-1).Draw(t, "tick")))
		}

		// ClampStart never keeps a partition before the start's.
		lo := min(0, max(-3*nominal(g), minInstant-w.Start().Unix()))
		d := rapid.Int64Range(lo, w.End().Unix()-w.Start().Unix()+nominal(g)).Draw(t, "clamp")
		start := time.Unix(w.Start().Unix()+d, rapid.Int64Range(0, 999_999_999).Draw(t, "clamp ns")).In(loc)
		if rapid.Bool().Draw(t, "clamp in UTC") {
			start = start.UTC()
		}
		clamped, ok := w.ClampStart(start)
		if !ok {
			if start.Before(w.End()) {
				t.Fatalf("%v.ClampStart(%v) = false, but the window ends at %v", w, start, w.End())
			}
			if clamped.Len() != 0 {
				t.Fatalf("%v.ClampStart(%v) = %v, false", w, start, clamped)
			}
			return
		}
		if !start.Before(w.End()) {
			t.Fatalf("%v.ClampStart(%v) = %v, true, but the window ends first", w, start, clamped)
		}
		kept := slices.Collect(clamped.OldestFirst())
		if len(kept) != clamped.Len() || len(kept) < 1 {
			t.Fatalf("%v.ClampStart(%v) = %v: %d partitions, Len %d", w, start, clamped, len(kept), clamped.Len())
		}
		held := tranche.PartitionOf(g, start.In(loc))
		for _, q := range kept {
			if q.Start.Before(held.Start) {
				t.Fatalf("%v.ClampStart(%v) keeps %v, before %v", w, start, q, held)
			}
		}
		if !clamped.End().Equal(w.End()) {
			t.Fatalf("%v.ClampStart(%v) ends at %v", w, start, clamped.End())
		}
		if start.After(w.Start()) {
			samePartition(t, "ClampStart oldest", held, kept[0])
		} else if !clamped.Equal(w) {
			t.Fatalf("%v.ClampStart(%v) = %v, want the window itself", w, start, clamped)
		}
		if want := parts[len(parts)-len(kept):]; !slices.EqualFunc(want, kept, tranche.TimePartition.Equal) {
			t.Fatalf("%v.ClampStart(%v) = %v is not a suffix of the window", w, start, clamped)
		}
	})
}

func TestPropertyGranularityText(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		g := drawGranularity(t)
		back, err := tranche.ParseGranularity(g.String())
		if err != nil || back != g {
			t.Fatalf("ParseGranularity(%q) = %v, %v; want %v", g.String(), back, err, g)
		}
		text, err := g.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var un tranche.TimeGranularity
		if err := un.UnmarshalText(text); err != nil || un != g {
			t.Fatalf("UnmarshalText(%q) = %v, %v; want %v", text, un, err, g)
		}
	})
}

func TestPropertyEveryMultiples(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		unit := rapid.SampledFrom([]tranche.TimeGranularity{tranche.Minute, tranche.Hour, tranche.Day, tranche.Week, tranche.Month, tranche.Quarter, tranche.Year}).Draw(t, "unit")
		n := rapid.IntRange(-5, 200).Draw(t, "n")
		g, err := tranche.ParseGranularity(fmtCount(n) + unit.String())
		panicked := func() (r any) {
			defer func() { r = recover() }()
			tranche.Every(n, unit)
			return nil
		}()
		if (err != nil) != (panicked != nil) {
			t.Fatalf("n=%d unit=%v: ParseGranularity error %v, Every panic %v: want both or neither", n, unit, err, panicked)
		}
		if err == nil && g != tranche.Every(n, unit) {
			t.Fatalf("ParseGranularity(%d %v) = %v, Every = %v", n, unit, g, tranche.Every(n, unit))
		}
	})
}

// fmtCount writes n as a count ParseGranularity reads ("" for none).
func fmtCount(n int) string {
	if n < 0 {
		return "-" + fmtCount(-n)
	}
	return string(rune('0'+n/100)) + string(rune('0'+n/10%10)) + string(rune('0'+n%10)) + " "
}

// slotSchedules are the schedules of TestPropertySlotAtMatchesSlotWindow,
// with their CRON_TZ zones: zoned ones in DST zones (30-minute DST on Lord
// Howe), fixed hours and wildcard hours, and unzoned ones, which follow the
// location they are used in.
var slotSchedules = []struct{ expr, zone string }{
	{"CRON_TZ=America/New_York 0 2 * * *", "America/New_York"},
	{"CRON_TZ=America/New_York 30 1 * * 1-5", "America/New_York"},
	{"CRON_TZ=Australia/Lord_Howe 30 1,13 * * *", "Australia/Lord_Howe"},
	{"CRON_TZ=Australia/Lord_Howe 0 * * * *", "Australia/Lord_Howe"},
	{"CRON_TZ=Europe/Berlin 0 */6 * * *", "Europe/Berlin"},
	{"CRON_TZ=Europe/Berlin 0 2 * * *", "Europe/Berlin"},
	{"CRON_TZ=Asia/Tokyo 0 9 * * MON-FRI", "Asia/Tokyo"},
	{"0 2 * * *", ""},
	{"*/15 * * * *", ""},
}

// TestPropertySlotAtMatchesSlotWindow: the slot SlotAt names by a fire
// time, spelled in any offset, is the slot SlotWindow returns for that
// fire: same bounds, location and key, so that a backfill of the slot and
// one of a range holding it share one DAG identity. A schedule without
// CRON_TZ follows the fire's location as SlotWindow follows now's, so its
// fire is given in now's location.
func TestPropertySlotAtMatchesSlotWindow(t *testing.T) {
	schedules := make([]tranche.TimeGranularity, len(slotSchedules))
	zones := make([]*time.Location, len(slotSchedules)) // nil: unzoned
	for i, s := range slotSchedules {
		g, err := tranche.ParseCron(s.expr)
		if err != nil {
			t.Fatal(err)
		}
		schedules[i] = g
		if s.zone != "" {
			zones[i] = loadLocation(t, s.zone)
		}
	}
	rapid.Check(t, func(t *rapid.T) {
		i := rapid.IntRange(0, len(schedules)-1).Draw(t, "schedule")
		g := schedules[i]
		loc := drawZone(t) // now's location
		// Near the schedule zone's own offset changes, where its fires
		// move, or near now's for an unzoned schedule.
		near := loc
		if zones[i] != nil {
			near = zones[i]
		}
		fire := tranche.PartitionOf(g, drawInstant(t, near, "instant").In(loc)).End
		now := fire.Add(time.Duration(rapid.Int64Range(60, 400*86400).Draw(t, "later")) * time.Second)
		// An offset of whole minutes, as RFC 3339 writes them, from -12:00
		// to +14:00.
		off := rapid.IntRange(-12*60, 14*60).Draw(t, "offset minutes") * 60
		text := fire.In(time.FixedZone("", off)).Format(time.RFC3339)
		w, err := tranche.SlotWindow(g, text, text, now)
		if err != nil {
			t.Fatalf("SlotWindow(%v, %s, %s, %v): %v", g, text, text, now, err)
		}
		if w.Len() != 1 {
			t.Fatalf("SlotWindow(%v, %s, %s) = %v; want one slot", g, text, text, w)
		}
		spelled, err := time.Parse(time.RFC3339, text)
		if err != nil {
			t.Fatal(err)
		}
		if zones[i] == nil {
			spelled = spelled.In(loc)
		}
		p, err := tranche.SlotAt(g, spelled)
		if err != nil {
			t.Fatalf("SlotAt(%v, %s): %v", g, text, err)
		}
		want := w.Newest()
		samePartition(t, fmt.Sprintf("SlotAt(%v, %s)", g, text), want, p)
		if p.Key() != want.Key() || p.Start.Location().String() != want.Start.Location().String() {
			t.Fatalf("SlotAt(%v, %s) = key %s in %v; SlotWindow's is %s in %v", g, text, p.Key(), p.Start.Location(), want.Key(), want.Start.Location())
		}
	})
}
