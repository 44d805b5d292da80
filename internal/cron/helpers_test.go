package cron

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	_ "time/tzdata"

	"github.com/tranche-dev/tranche/internal/calendar"
	"pgregory.net/rapid"
)

func mustLoad(name string) *time.Location {
	loc, err := time.LoadLocation(name)
	if err != nil {
		panic(err)
	}
	return loc
}

var (
	newYork  = mustLoad("America/New_York")
	berlin   = mustLoad("Europe/Berlin")
	lordHowe = mustLoad("Australia/Lord_Howe")
	santiago = mustLoad("America/Santiago")
	zones    = []*time.Location{time.UTC, newYork, lordHowe, berlin}
)

func mustParse(tb fataler, expr string, loc *time.Location) *Schedule {
	tb.Helper()
	s, err := Parse(expr, loc)
	if err != nil {
		tb.Fatalf("Parse(%q): %v", expr, err)
	}
	return s
}

// equal reports whether two schedules are the same: same fields, same
// wildcards, same zone name and same excluded dates.
func equal(a, b *Schedule) bool {
	return a.minute == b.minute && a.hour == b.hour && a.dom == b.dom &&
		a.month == b.month && a.dow == b.dow && a.star == b.star &&
		a.Location().String() == b.Location().String() &&
		slices.Equal(a.excluded, b.excluded)
}

// genElem draws one list element of field i in any of the accepted forms.
func genElem(t *rapid.T, i int, label string) string {
	f := &specs[i]
	value := func(name string, lo, hi int) string {
		v := rapid.IntRange(lo, hi).Draw(t, name)
		if f.names != nil && v < len(f.names) && f.names[v] != "" && rapid.Bool().Draw(t, name+"IsName") {
			n := f.names[v]
			if rapid.Bool().Draw(t, name+"Lower") {
				n = strings.ToLower(n)
			}
			return n
		}
		return strconv.Itoa(v)
	}
	step := func() string {
		return strconv.Itoa(rapid.IntRange(1, f.starMax-f.min+1).Draw(t, label+"Step"))
	}
	switch rapid.IntRange(0, 4).Draw(t, label+"Kind") {
	case 0:
		return value(label+"Value", f.min, f.max)
	case 1:
		lo := rapid.IntRange(f.min, f.max).Draw(t, label+"Lo")
		hi := rapid.IntRange(lo, f.max).Draw(t, label+"Hi")
		return strconv.Itoa(lo) + "-" + strconv.Itoa(hi)
	case 2:
		lo := rapid.IntRange(f.min, f.max).Draw(t, label+"Lo")
		hi := rapid.IntRange(lo, f.max).Draw(t, label+"Hi")
		return strconv.Itoa(lo) + "-" + strconv.Itoa(hi) + "/" + step()
	case 3:
		return value(label+"Start", f.min, f.starMax) + "/" + step()
	default:
		return "*/" + step()
	}
}

// genField draws field i, a wildcard half of the time.
func genField(t *rapid.T, i int) string {
	name := specs[i].name
	switch rapid.IntRange(0, 5).Draw(t, name+"Form") {
	case 0, 1, 2:
		return "*"
	case 3:
		return "*/" + strconv.Itoa(rapid.IntRange(1, specs[i].starMax-specs[i].min+1).Draw(t, name+"Step"))
	}
	n := rapid.IntRange(1, 3).Draw(t, name+"Len")
	elems := make([]string, n)
	for j := range elems {
		elems[j] = genElem(t, i, fmt.Sprintf("%s%d", name, j))
	}
	return strings.Join(elems, ",")
}

// exprGen draws valid expressions, macros included.
var exprGen = rapid.Custom(func(t *rapid.T) string {
	if rapid.IntRange(0, 9).Draw(t, "isMacro") == 0 {
		return rapid.SampledFrom([]string{"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"}).Draw(t, "macro")
	}
	var fields [nFields]string
	for i := range fields {
		fields[i] = genField(t, i)
	}
	return strings.Join(fields[:], " ")
}).Filter(func(expr string) bool {
	_, err := Parse(expr, nil)
	return err == nil
})

var zoneGen = rapid.SampledFrom(zones)

// instantGen draws instants between 1900 and 2150 with any sub-second
// part; half of them lie within two days of a change of offset of loc.
func instantGen(loc *time.Location) *rapid.Generator[time.Time] {
	return instantGenYears(loc, 1900, 2150)
}

// instantGenYears is instantGen between the starts of two years.
func instantGenYears(loc *time.Location, fromYear, toYear int) *rapid.Generator[time.Time] {
	from := time.Date(fromYear, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	to := time.Date(toYear, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	changes := offsetChanges(loc, from, to)
	return rapid.Custom(func(t *rapid.T) time.Time {
		var u int64
		if len(changes) > 0 && rapid.Bool().Draw(t, "nearChange") {
			u = rapid.SampledFrom(changes).Draw(t, "change") + rapid.Int64Range(-2*86400, 2*86400).Draw(t, "delta")
		} else {
			u = rapid.Int64Range(from, to).Draw(t, "unix")
		}
		// Land on whole minutes often: fire times are there.
		switch rapid.IntRange(0, 2).Draw(t, "align") {
		case 0:
			u -= u % 60
			return time.Unix(u, 0).In(loc)
		case 1:
			u -= u % 60
			return time.Unix(u, 0).Add(-time.Nanosecond).In(loc)
		}
		return time.Unix(u, rapid.Int64Range(0, 999_999_999).Draw(t, "nanos")).In(loc)
	})
}

var changeCache sync.Map // of changeKey to []int64

type changeKey struct {
	zone     string
	from, to int64
}

// offsetChanges lists the instants in [from, to) where loc changes its
// UTC offset, plus the last UTC day of some leap years, where Go's
// ZoneBounds errs.
func offsetChanges(loc *time.Location, from, to int64) []int64 {
	key := changeKey{loc.String(), from, to}
	if c, ok := changeCache.Load(key); ok {
		return c.([]int64)
	}
	var changes []int64
	for u := from; u < to; {
		sp := calendar.SpanAt(loc, u)
		if sp.End == calendar.Forever || sp.End >= to {
			break
		}
		if offsetAt(loc, sp.End) != sp.Offset {
			changes = append(changes, sp.End)
		}
		u = sp.End
	}
	for _, y := range []int{2040, 2044, 2096, 2104} {
		if u := time.Date(y, 12, 31, 12, 0, 0, 0, time.UTC).Unix(); from <= u && u < to {
			changes = append(changes, u)
		}
	}
	changeCache.Store(key, changes)
	return changes
}

// oracle computes fire times by brute force, minute by minute, straight
// from the rules in the package documentation. It needs a zone whose
// offsets are whole minutes over the instants it is asked about.
type oracle struct {
	s        *Schedule
	excluded map[Date]bool
}

func newOracle(s *Schedule, excluded ...Date) *oracle {
	o := &oracle{s: s, excluded: map[Date]bool{}}
	for _, d := range excluded {
		o.excluded[d] = true
	}
	return o
}

// matches reports whether the wall minute w (minutes since 1970-01-01
// 00:00 of the wall clock) matches the expression.
func (o *oracle) matches(w int64) bool {
	t := time.Unix(w*60, 0).UTC()
	y, m, d := t.Date()
	h, mi, _ := t.Clock()
	s := o.s
	if s.minute&(1<<mi) == 0 || s.hour&(1<<h) == 0 || s.month&(1<<m) == 0 {
		return false
	}
	domOK := s.dom&(1<<d) != 0
	dowOK := s.dow&(1<<t.Weekday()) != 0
	domWild := s.star&(1<<fDom) != 0
	dowWild := s.star&(1<<fDow) != 0
	var ok bool
	if domWild || dowWild {
		ok = domOK && dowOK
	} else {
		ok = domOK || dowOK
	}
	return ok && !o.excluded[Date{y, m, d}]
}

// fires returns the fire times in [from, to), in Unix seconds.
func (o *oracle) fires(tb fataler, from, to int64) []int64 {
	tb.Helper()
	loc := o.s.Location()
	wildcardHour := o.s.star&(1<<fHour) != 0
	start := from - from%60 - 2*86400 // warm up: see wall times shown before from
	var out []int64
	seen := map[int64]bool{}
	var prev int64
	for u := start; u < to; u += 60 {
		_, off := time.Unix(u, 0).In(loc).Zone()
		if off%60 != 0 {
			tb.Fatalf("oracle: %v has offset %ds, not whole minutes", time.Unix(u, 0).In(loc), off)
		}
		w := (u + int64(off)) / 60
		if wildcardHour {
			if o.matches(w) {
				out = append(out, u)
			}
		} else {
			fire := false
			if u > start && w > prev+1 { // the clock jumped over prev+1 .. w-1
				for x := prev + 1; x < w; x++ {
					if o.matches(x) && !seen[x] {
						seen[x], fire = true, true
					}
				}
			}
			if o.matches(w) && !seen[w] {
				seen[w], fire = true, true
			}
			if fire {
				out = append(out, u)
			}
		}
		prev = w
	}
	i, _ := slices.BinarySearch(out, from)
	return out[i:]
}

// fataler is what testing.TB and *rapid.T have in common.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

// fmtUnix formats Unix seconds in loc, for messages.
func fmtUnix(u int64, loc *time.Location) string {
	return time.Unix(u, 0).In(loc).Format(time.RFC3339)
}
