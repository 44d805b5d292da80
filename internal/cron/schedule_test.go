package cron

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestWeekdays(t *testing.T) {
	for _, loc := range zones {
		t.Run(loc.String(), func(t *testing.T) {
			s := mustParse(t, "0 2 * * 1-5", loc)
			from := time.Date(2026, 1, 1, 0, 0, 0, 0, loc)
			to := time.Date(2027, 1, 1, 0, 0, 0, 0, loc)
			n := 0
			for f := s.Next(from); f.Before(to); f = s.Next(f) {
				if wd := f.Weekday(); wd == time.Saturday || wd == time.Sunday {
					t.Errorf("%v fires on a %v: %v", s, wd, f)
				}
				n++
			}
			if n != 261 { // the weekdays of 2026
				t.Errorf("%v fires %d times in 2026, want 261", s, n)
			}
		})
	}
}

func TestNextPrev(t *testing.T) {
	tests := []struct {
		expr       string
		at         string
		next, prev string
	}{
		{"0 2 * * 1-5", "2026-01-09T12:00:00Z", "2026-01-12T02:00:00Z", "2026-01-09T02:00:00Z"}, // Friday to Monday
		{"0 2 * * 1-5", "2026-01-12T02:00:00Z", "2026-01-13T02:00:00Z", "2026-01-12T02:00:00Z"}, // at a fire time
		{"0 0 29 2 *", "2026-06-01T00:00:00Z", "2028-02-29T00:00:00Z", "2024-02-29T00:00:00Z"},
		{"0 0 29 2 *", "2099-01-01T00:00:00Z", "2104-02-29T00:00:00Z", "2096-02-29T00:00:00Z"},   // 2100 is not a leap year
		{"0 0 29 2 */7", "2100-01-01T00:00:00Z", "2128-02-29T00:00:00Z", "2088-02-29T00:00:00Z"}, // the longest gap
		{"0 0 29 2 */7", "2088-02-29T00:00:00Z", "2128-02-29T00:00:00Z", "2088-02-29T00:00:00Z"},
		{"0 0 31 * *", "2026-04-15T00:00:00Z", "2026-05-31T00:00:00Z", "2026-03-31T00:00:00Z"},
		{"0 0 13 * 5", "2026-02-01T00:00:00Z", "2026-02-06T00:00:00Z", "2026-01-30T00:00:00Z"},   // the 13th or a Friday
		{"0 0 13 * 5", "2026-02-10T00:00:00Z", "2026-02-13T00:00:00Z", "2026-02-06T00:00:00Z"},   // Friday the 13th
		{"0 0 */13 * 5", "2026-01-01T00:00:00Z", "2026-02-27T00:00:00Z", "2025-11-14T00:00:00Z"}, // 1st, 14th or 27th, and a Friday
		{"0 0 1 1 *", "2026-01-01T00:00:00Z", "2027-01-01T00:00:00Z", "2026-01-01T00:00:00Z"},
		{"59 23 31 12 *", "2026-12-31T23:59:00.5Z", "2027-12-31T23:59:00Z", "2026-12-31T23:59:00Z"},
		{"*/7 * * * *", "2026-01-01T00:59:30Z", "2026-01-01T01:00:00Z", "2026-01-01T00:56:00Z"},
		{"0 12 * JAN,JUL MON", "2026-01-27T00:00:00Z", "2026-07-06T12:00:00Z", "2026-01-26T12:00:00Z"},
		{"0 0 1 1 *", "0001-01-01T00:00:00Z", "0002-01-01T00:00:00Z", "0001-01-01T00:00:00Z"},
		{"0 0 1 1 *", "1969-12-31T23:59:59Z", "1970-01-01T00:00:00Z", "1969-01-01T00:00:00Z"},
		{"30 4 * * *", "-0400-03-01T00:00:00Z", "-0400-03-01T04:30:00Z", "-0400-02-29T04:30:00Z"},
	}
	for _, tt := range tests {
		t.Run(tt.expr+" "+tt.at, func(t *testing.T) {
			s := mustParse(t, tt.expr, nil)
			at := parseTime(t, tt.at)
			if got := s.Next(at); !got.Equal(parseTime(t, tt.next)) {
				t.Errorf("%q: Next(%s) = %v, want %s", tt.expr, tt.at, got, tt.next)
			}
			if got := s.Prev(at); !got.Equal(parseTime(t, tt.prev)) {
				t.Errorf("%q: Prev(%s) = %v, want %s", tt.expr, tt.at, got, tt.prev)
			}
		})
	}
}

// parseTime parses RFC 3339 times, negative years included.
func parseTime(tb testing.TB, s string) time.Time {
	tb.Helper()
	if s[0] == '-' {
		t := mustTime(tb, "2000"+s[5:])
		y := -mustTime(tb, s[1:]).Year()
		return time.Date(y, t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), t.Location())
	}
	return mustTime(tb, s)
}

func TestExclude(t *testing.T) {
	weekdays := mustParse(t, "0 2 * * 1-5", newYork)
	holidays := weekdays.Exclude(Date{2026, time.December, 25}, Date{2027, time.January, 1}, Date{2026, time.February, 30})
	tests := []struct {
		name     string
		s        *Schedule
		from, to string
		want     []string
	}{
		{"holidays", holidays, "2026-12-24T00:00:00-05:00", "2027-01-06T00:00:00-05:00", []string{
			"2026-12-24T02:00:00-05:00", "2026-12-28T02:00:00-05:00", "2026-12-29T02:00:00-05:00",
			"2026-12-30T02:00:00-05:00", "2026-12-31T02:00:00-05:00", "2027-01-04T02:00:00-05:00",
			"2027-01-05T02:00:00-05:00",
		}},
		{"original unchanged", weekdays, "2026-12-24T00:00:00-05:00", "2026-12-29T00:00:00-05:00", []string{
			"2026-12-24T02:00:00-05:00", "2026-12-25T02:00:00-05:00", "2026-12-28T02:00:00-05:00",
		}},
		{"excluded DST day", mustParse(t, "0 */6 * * *", newYork).Exclude(Date{2026, time.November, 1}),
			"2026-10-31T12:00:00-04:00", "2026-11-02T12:00:00-05:00", []string{
				"2026-10-31T12:00:00-04:00", "2026-10-31T18:00:00-04:00", "2026-11-02T00:00:00-05:00",
				"2026-11-02T06:00:00-05:00",
			}},
		{"124 years between fires", mustParse(t, "0 0 29 2 */7", time.UTC).Exclude(Date{2060, time.February, 29}, Date{2088, time.February, 29}, Date{2128, time.February, 29}),
			"2030-01-01T00:00:00Z", "2180-01-01T00:00:00Z", []string{"2032-02-29T00:00:00Z", "2156-02-29T00:00:00Z"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := firesBetween(t, tt.s, mustTime(t, tt.from), mustTime(t, tt.to))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("%v from %s to %s (-want +got):\n%s", tt.s, tt.from, tt.to, diff)
			}
		})
	}
	// Excluding more keeps what was excluded before.
	more := holidays.Exclude(Date{2026, time.December, 31}, Date{2026, time.December, 25})
	if got, want := len(more.excluded), 3; got != want {
		t.Errorf("Exclude twice: %d excluded dates, want %d", got, want)
	}
	if got := more.Next(mustTime(t, "2026-12-30T03:00:00-05:00")); !got.Equal(mustTime(t, "2027-01-04T02:00:00-05:00")) {
		t.Errorf("Exclude twice: Next = %v, want 2027-01-04T02:00:00-05:00", got)
	}
}

func TestSearchEnds(t *testing.T) {
	s := mustParse(t, "0 0 * * *", nil)
	far := time.Unix(1<<60, 0)
	if got := s.Next(far); !got.IsZero() {
		t.Errorf("Next(%v) = %v, want the zero Time", far, got)
	}
	if got := s.Prev(time.Unix(-1<<60, 0)); !got.IsZero() {
		t.Errorf("Prev(-2^60 s) = %v, want the zero Time", got)
	}
	var zero Schedule
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if got := zero.Next(now); !got.IsZero() {
		t.Errorf("zero Schedule: Next = %v, want the zero Time", got)
	}
	if got := zero.Prev(now); !got.IsZero() {
		t.Errorf("zero Schedule: Prev = %v, want the zero Time", got)
	}
	if got := zero.Location(); got != time.UTC {
		t.Errorf("zero Schedule: Location = %v, want UTC", got)
	}
	// Many excluded dates still end: the bound grows with them.
	var dates []Date
	for y := 2026; y < 2226; y++ {
		dates = append(dates, Date{y, time.January, 1})
	}
	yearly := mustParse(t, "@yearly", nil).Exclude(dates...)
	if got, want := yearly.Next(now), time.Date(2226, 1, 1, 0, 0, 0, 0, time.UTC); !got.Equal(want) {
		t.Errorf("@yearly excluding 2026-2225: Next = %v, want %v", got, want)
	}
	if got, want := yearly.Prev(time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC).Add(-1)), time.Date(2299, 1, 1, 0, 0, 0, 0, time.UTC); !got.Equal(want) {
		t.Errorf("@yearly excluding 2026-2225: Prev = %v, want %v", got, want)
	}
	if got, want := yearly.Prev(time.Date(2226, 1, 1, 0, 0, 0, 0, time.UTC).Add(-1)), time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC); !got.Equal(want) {
		t.Errorf("@yearly excluding 2026-2225: Prev = %v, want %v", got, want)
	}
}

func TestLocation(t *testing.T) {
	tests := []struct {
		expr string
		loc  *time.Location
		want string
	}{
		{"0 2 * * *", nil, "UTC"},
		{"0 2 * * *", newYork, "America/New_York"},
		{"CRON_TZ=Europe/Berlin 0 2 * * *", newYork, "Europe/Berlin"},
		{"TZ=Australia/Lord_Howe 0 2 * * *", nil, "Australia/Lord_Howe"},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			s := mustParse(t, tt.expr, tt.loc)
			if got := s.Location().String(); got != tt.want {
				t.Errorf("Parse(%q, %v).Location() = %s, want %s", tt.expr, tt.loc, got, tt.want)
			}
			if got := s.Next(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)).Location().String(); got != tt.want {
				t.Errorf("Parse(%q, %v).Next(...) is in %s, want %s", tt.expr, tt.loc, got, tt.want)
			}
		})
	}
}

// TestConcurrentUse runs Next and Prev from many goroutines at once on
// one schedule and its copies, in eras with different offsets, so that
// they contend for the span cache, and compares with answers computed
// alone.
func TestConcurrentUse(t *testing.T) {
	s := mustParse(t, "*/5 * * * *", newYork)
	c := s.Exclude(Date{2026, time.July, 4}) // shares the cache
	starts := []time.Time{
		time.Date(1950, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 10, 30, 0, 0, 0, 0, time.UTC),
		time.Date(2040, 12, 30, 0, 0, 0, 0, time.UTC), time.Date(2100, 6, 1, 0, 0, 0, 0, time.UTC),
	}
	const steps = 2000
	walk := func(s *Schedule, from time.Time) []time.Time {
		out := make([]time.Time, 0, 2*steps)
		f := from
		for range steps {
			f = s.Next(f)
			out = append(out, f)
		}
		for range steps {
			f = s.Prev(f.Add(-time.Nanosecond))
			out = append(out, f)
		}
		return out
	}
	want := make([][]time.Time, 2*len(starts))
	for i, from := range starts {
		want[2*i] = walk(mustParse(t, "*/5 * * * *", newYork), from)
		want[2*i+1] = walk(mustParse(t, "*/5 * * * *", newYork).Exclude(Date{2026, time.July, 4}), from)
	}
	got := make([][]time.Time, len(want))
	done := make(chan int)
	for i, from := range starts {
		go func() { got[2*i] = walk(s, from); done <- 2 * i }()
		go func() { got[2*i+1] = walk(c, from); done <- 2*i + 1 }()
	}
	for range want {
		<-done
	}
	for i := range want {
		if diff := cmp.Diff(want[i], got[i]); diff != "" {
			t.Errorf("walk %d from %v differs when run concurrently (-alone +concurrent):\n%s", i, starts[i/2], diff)
		}
	}
}
