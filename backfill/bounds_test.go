package backfill_test

import (
	"strings"
	"testing"
	"time"

	"github.com/tranche-dev/tranche/backfill"
)

// FuzzParseSpan reads random bounds in three zones, none of which skips
// a midnight: it never panics, a
// span it returns is in its zone and not empty, a date from is its day's
// first instant and a date to the next day's, and a bound it takes alone
// it takes, to the same instant, beside the other.
func FuzzParseSpan(f *testing.F) {
	for _, s := range [][2]string{
		{"2026-03-29", "2026-03-29"}, {"2026-10-25", "2026-10-25"}, {"2026-03-08T02:30", "2026-03-08T04:00"},
		{"2026-11-01 01:30", "2026-11-02"}, {"2026-02-01T00:00:00Z", "2026-02-07"}, {"9999-12-31", "9999-12-31"},
		{"0001-01-01", "0001-01-01"}, {"2026-02-30", ""}, {"", "2026-01-01T00:00:00+14:00"}, {"yesterday", "now"},
	} {
		f.Add(s[0], s[1], uint8(0))
	}
	var zones []*time.Location
	for _, name := range []string{"UTC", "Europe/Berlin", "America/New_York"} {
		loc, err := time.LoadLocation(name)
		if err != nil {
			f.Fatal(err)
		}
		zones = append(zones, loc)
	}
	f.Fuzz(func(t *testing.T, from, to string, z uint8) {
		loc := zones[int(z)%len(zones)]
		start, end, err := backfill.ParseSpan(from, to, loc)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "tranche: ") {
				t.Errorf("ParseSpan(%q, %q): error %q lacks the package's prefix", from, to, err)
			}
			return
		}
		if !start.IsZero() && !end.IsZero() && !start.Before(end) {
			t.Fatalf("ParseSpan(%q, %q) = %v, %v: not a span", from, to, start, end)
		}
		for _, x := range []time.Time{start, end} {
			if !x.IsZero() && x.Location() != loc {
				t.Errorf("ParseSpan(%q, %q, %v): a bound in %v", from, to, loc, x.Location())
			}
		}
		if day, err := time.ParseInLocation(time.DateOnly, strings.TrimSpace(from), loc); err == nil && !start.Equal(day) {
			t.Errorf("from %q: %v; want its day's start %v", from, start, day)
		}
		if day, err := time.ParseInLocation(time.DateOnly, strings.TrimSpace(to), loc); err == nil {
			if next := day.AddDate(0, 0, 1); !end.Equal(next) {
				t.Errorf("to %q: %v; want the next day's start %v", to, end, next)
			}
		}
		s2, _, err := backfill.ParseSpan(from, "", loc)
		if err != nil || !s2.Equal(start) {
			t.Errorf("from %q alone: %v, %v; beside to %q: %v", from, s2, err, to, start)
		}
		_, e2, err := backfill.ParseSpan("", to, loc)
		if err != nil || !e2.Equal(end) {
			t.Errorf("to %q alone: %v, %v; beside from %q: %v", to, e2, err, from, end)
		}
	})
}
