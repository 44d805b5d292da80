package cron

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func mustTime(tb testing.TB, s string) time.Time {
	tb.Helper()
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		tb.Fatal(err)
	}
	return t
}

// firesBetween lists the fire times in [from, to) oldest first with Next,
// and checks that Prev lists the same ones newest first.
func firesBetween(tb testing.TB, s *Schedule, from, to time.Time) []string {
	tb.Helper()
	var got []string
	for f := s.Next(from.Add(-time.Nanosecond)); f.Before(to); f = s.Next(f) {
		got = append(got, f.Format(time.RFC3339))
	}
	var back []string
	for f := s.Prev(to.Add(-time.Nanosecond)); !f.Before(from); f = s.Prev(f.Add(-time.Nanosecond)) {
		back = append([]string{f.Format(time.RFC3339)}, back...)
	}
	if diff := cmp.Diff(got, back); diff != "" {
		tb.Errorf("%v: Next and Prev disagree between %v and %v (-Next +Prev):\n%s", s, from, to, diff)
	}
	return got
}

func TestFireTimesAcrossDST(t *testing.T) {
	tests := []struct {
		name     string
		loc      *time.Location
		expr     string
		from, to string
		want     []string
	}{
		// New York springs forward at 2026-03-08 02:00 EST to 03:00 EDT.
		{"NY spring hourly", newYork, "0 * * * *", "2026-03-08T00:00:00-05:00", "2026-03-08T05:00:00-04:00",
			[]string{"2026-03-08T00:00:00-05:00", "2026-03-08T01:00:00-05:00", "2026-03-08T03:00:00-04:00", "2026-03-08T04:00:00-04:00"}},
		{"NY spring half-hourly", newYork, "*/30 * * * *", "2026-03-08T01:00:00-05:00", "2026-03-08T04:00:00-04:00",
			[]string{"2026-03-08T01:00:00-05:00", "2026-03-08T01:30:00-05:00", "2026-03-08T03:00:00-04:00", "2026-03-08T03:30:00-04:00"}},
		{"NY spring 02:00 daily", newYork, "0 2 * * *", "2026-03-08T00:00:00-05:00", "2026-03-09T00:00:00-04:00",
			[]string{"2026-03-08T03:00:00-04:00"}},
		{"NY spring 02:30 daily", newYork, "30 2 * * *", "2026-03-08T00:00:00-05:00", "2026-03-09T00:00:00-04:00",
			[]string{"2026-03-08T03:00:00-04:00"}},
		{"NY spring two skipped times fire once", newYork, "0,30 2 * * *", "2026-03-08T00:00:00-05:00", "2026-03-09T00:00:00-04:00",
			[]string{"2026-03-08T03:00:00-04:00"}},
		{"NY spring skipped time and 03:00 fire once", newYork, "0 2,3 * * *", "2026-03-08T00:00:00-05:00", "2026-03-09T00:00:00-04:00",
			[]string{"2026-03-08T03:00:00-04:00"}},
		{"NY spring skipped time then 03:30", newYork, "30 2,3 * * *", "2026-03-08T00:00:00-05:00", "2026-03-09T00:00:00-04:00",
			[]string{"2026-03-08T03:00:00-04:00", "2026-03-08T03:30:00-04:00"}},
		{"NY spring every minute of hour 2", newYork, "* 2 * * *", "2026-03-08T00:00:00-05:00", "2026-03-09T00:00:00-04:00",
			[]string{"2026-03-08T03:00:00-04:00"}},
		{"NY spring twice a day", newYork, "30 1,13 * * *", "2026-03-08T00:00:00-05:00", "2026-03-09T00:00:00-04:00",
			[]string{"2026-03-08T01:30:00-05:00", "2026-03-08T13:30:00-04:00"}},
		{"NY spring last minute before the gap", newYork, "59 1 * * *", "2026-03-08T00:00:00-05:00", "2026-03-09T00:00:00-04:00",
			[]string{"2026-03-08T01:59:00-05:00"}},

		// New York falls back at 2026-11-01 02:00 EDT to 01:00 EST.
		{"NY fall hourly", newYork, "0 * * * *", "2026-11-01T00:00:00-04:00", "2026-11-01T03:00:00-05:00",
			[]string{"2026-11-01T00:00:00-04:00", "2026-11-01T01:00:00-04:00", "2026-11-01T01:00:00-05:00", "2026-11-01T02:00:00-05:00"}},
		{"NY fall every 20 minutes", newYork, "*/20 * * * *", "2026-11-01T01:00:00-04:00", "2026-11-01T02:00:00-05:00",
			[]string{"2026-11-01T01:00:00-04:00", "2026-11-01T01:20:00-04:00", "2026-11-01T01:40:00-04:00",
				"2026-11-01T01:00:00-05:00", "2026-11-01T01:20:00-05:00", "2026-11-01T01:40:00-05:00"}},
		{"NY fall every 20 minutes of hour 1", newYork, "*/20 1 * * *", "2026-11-01T00:00:00-04:00", "2026-11-02T00:00:00-05:00",
			[]string{"2026-11-01T01:00:00-04:00", "2026-11-01T01:20:00-04:00", "2026-11-01T01:40:00-04:00"}},
		{"NY fall 01:30 daily", newYork, "30 1 * * *", "2026-11-01T00:00:00-04:00", "2026-11-02T00:00:00-05:00",
			[]string{"2026-11-01T01:30:00-04:00"}},
		{"NY fall 02:00 daily", newYork, "0 2 * * *", "2026-11-01T00:00:00-04:00", "2026-11-02T00:00:00-05:00",
			[]string{"2026-11-01T02:00:00-05:00"}},
		{"NY fall 01:00 and 02:00", newYork, "0 1,2 * * *", "2026-11-01T00:00:00-04:00", "2026-11-02T00:00:00-05:00",
			[]string{"2026-11-01T01:00:00-04:00", "2026-11-01T02:00:00-05:00"}},

		// Berlin springs forward at 2026-03-29 02:00 CET to 03:00 CEST and
		// falls back at 2026-10-25 03:00 CEST to 02:00 CET.
		{"Berlin spring 02:30 daily", berlin, "30 2 * * *", "2026-03-29T00:00:00+01:00", "2026-03-30T00:00:00+02:00",
			[]string{"2026-03-29T03:00:00+02:00"}},
		{"Berlin spring hourly", berlin, "0 * * * *", "2026-03-29T01:00:00+01:00", "2026-03-29T04:00:00+02:00",
			[]string{"2026-03-29T01:00:00+01:00", "2026-03-29T03:00:00+02:00"}},
		{"Berlin fall 02:30 daily", berlin, "30 2 * * *", "2026-10-25T00:00:00+02:00", "2026-10-26T00:00:00+01:00",
			[]string{"2026-10-25T02:30:00+02:00"}},
		{"Berlin fall hourly", berlin, "0 * * * *", "2026-10-25T01:00:00+02:00", "2026-10-25T04:00:00+01:00",
			[]string{"2026-10-25T01:00:00+02:00", "2026-10-25T02:00:00+02:00", "2026-10-25T02:00:00+01:00", "2026-10-25T03:00:00+01:00"}},
		{"Berlin fall two times in the repeated hour", berlin, "15,45 2 * * *", "2026-10-25T00:00:00+02:00", "2026-10-26T00:00:00+01:00",
			[]string{"2026-10-25T02:15:00+02:00", "2026-10-25T02:45:00+02:00"}},

		// Lord Howe Island springs forward half an hour at 2026-10-04
		// 02:00 (+10:30) to 02:30 (+11:00) and falls back half an hour at
		// 2026-04-05 02:00 (+11:00) to 01:30 (+10:30).
		{"Lord Howe spring hourly", lordHowe, "0 * * * *", "2026-10-04T01:00:00+10:30", "2026-10-04T04:00:00+11:00",
			[]string{"2026-10-04T01:00:00+10:30", "2026-10-04T03:00:00+11:00"}},
		{"Lord Howe spring hourly at half past", lordHowe, "30 * * * *", "2026-10-04T01:00:00+10:30", "2026-10-04T04:00:00+11:00",
			[]string{"2026-10-04T01:30:00+10:30", "2026-10-04T02:30:00+11:00", "2026-10-04T03:30:00+11:00"}},
		{"Lord Howe spring skipped 02:15", lordHowe, "15 2 * * *", "2026-10-04T00:00:00+10:30", "2026-10-05T00:00:00+11:00",
			[]string{"2026-10-04T02:30:00+11:00"}},
		{"Lord Howe spring skipped 02:00", lordHowe, "0 2 * * *", "2026-10-04T00:00:00+10:30", "2026-10-05T00:00:00+11:00",
			[]string{"2026-10-04T02:30:00+11:00"}},
		{"Lord Howe spring 02:45 exists", lordHowe, "45 2 * * *", "2026-10-04T00:00:00+10:30", "2026-10-05T00:00:00+11:00",
			[]string{"2026-10-04T02:45:00+11:00"}},
		{"Lord Howe fall hourly at 45", lordHowe, "45 * * * *", "2026-04-05T01:00:00+11:00", "2026-04-05T03:00:00+10:30",
			[]string{"2026-04-05T01:45:00+11:00", "2026-04-05T01:45:00+10:30", "2026-04-05T02:45:00+10:30"}},
		{"Lord Howe fall hourly", lordHowe, "0 * * * *", "2026-04-05T01:00:00+11:00", "2026-04-05T03:00:00+10:30",
			[]string{"2026-04-05T01:00:00+11:00", "2026-04-05T02:00:00+10:30"}},
		{"Lord Howe fall repeated 01:45", lordHowe, "45 1 * * *", "2026-04-05T00:00:00+11:00", "2026-04-06T00:00:00+10:30",
			[]string{"2026-04-05T01:45:00+11:00"}},
		{"Lord Howe fall 01:15 occurs once", lordHowe, "15 1 * * *", "2026-04-05T00:00:00+11:00", "2026-04-06T00:00:00+10:30",
			[]string{"2026-04-05T01:15:00+11:00"}},

		// Santiago skips midnight at 2026-09-06 00:00 (-04:00 to -03:00)
		// and repeats 23:00-24:00 of 2026-04-04 (-03:00 to -04:00).
		{"Santiago skipped midnight", santiago, "0 0 * * *", "2026-09-05T12:00:00-04:00", "2026-09-06T12:00:00-03:00",
			[]string{"2026-09-06T01:00:00-03:00"}},
		{"Santiago spring hourly", santiago, "@hourly", "2026-09-05T22:00:00-04:00", "2026-09-06T03:00:00-03:00",
			[]string{"2026-09-05T22:00:00-04:00", "2026-09-05T23:00:00-04:00", "2026-09-06T01:00:00-03:00", "2026-09-06T02:00:00-03:00"}},
		{"Santiago repeated 23:30", santiago, "30 23 * * *", "2026-04-04T00:00:00-03:00", "2026-04-05T00:00:00-04:00",
			[]string{"2026-04-04T23:30:00-03:00"}},
		{"Santiago midnight after the repeat", santiago, "@daily", "2026-04-04T12:00:00-03:00", "2026-04-05T12:00:00-04:00",
			[]string{"2026-04-05T00:00:00-04:00"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustParse(t, tt.expr, tt.loc)
			got := firesBetween(t, s, mustTime(t, tt.from), mustTime(t, tt.to))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("%q in %v from %s to %s (-want +got):\n%s", tt.expr, tt.loc, tt.from, tt.to, diff)
			}
		})
	}
}

func TestFiresPerDay(t *testing.T) {
	tests := []struct {
		loc  *time.Location
		expr string
		date string // local date
		want int
	}{
		{newYork, "0 * * * *", "2026-03-08", 23},
		{newYork, "0 * * * *", "2026-11-01", 25},
		{newYork, "0 * * * *", "2026-11-02", 24},
		{newYork, "*/5 * * * *", "2026-03-08", 276},
		{newYork, "*/5 * * * *", "2026-11-01", 300},
		{newYork, "* * * * *", "2026-11-01", 1500},
		{newYork, "0 2 * * *", "2026-03-08", 1},
		{newYork, "0 2 * * *", "2026-11-01", 1},
		{newYork, "30 1 * * *", "2026-11-01", 1},
		{newYork, "* 2 * * *", "2026-03-08", 1},
		{newYork, "* 1 * * *", "2026-11-01", 60},
		{newYork, "* 0-23 * * *", "2026-11-01", 1440},
		{berlin, "0 * * * *", "2026-03-29", 23},
		{berlin, "0 * * * *", "2026-10-25", 25},
		{lordHowe, "0 * * * *", "2026-10-04", 23},
		{lordHowe, "30 * * * *", "2026-10-04", 24},
		{lordHowe, "0 * * * *", "2026-04-05", 24},
		{lordHowe, "30 * * * *", "2026-04-05", 25}, // 01:30 occurs twice
		{lordHowe, "45 * * * *", "2026-04-05", 25},
		{lordHowe, "*/15 * * * *", "2026-10-04", 94},
		{lordHowe, "*/15 * * * *", "2026-04-05", 98},
		{time.UTC, "*/5 * * * *", "2026-03-08", 288},
	}
	for _, tt := range tests {
		t.Run(tt.loc.String()+" "+tt.expr+" "+tt.date, func(t *testing.T) {
			s := mustParse(t, tt.expr, tt.loc)
			d, err := time.ParseInLocation(time.DateOnly, tt.date, tt.loc)
			if err != nil {
				t.Fatal(err)
			}
			// Count fires whose local date is tt.date, from well before
			// it to well after it.
			got := 0
			for f := s.Next(d.Add(-36 * time.Hour)); f.Before(d.Add(60 * time.Hour)); f = s.Next(f) {
				if f.Format(time.DateOnly) == tt.date {
					got++
				}
			}
			if got != tt.want {
				t.Errorf("%q in %v fires %d times on %s, want %d", tt.expr, tt.loc, got, tt.date, tt.want)
			}
		})
	}
}

// TestDailyOncePerDay checks that a schedule with one fixed time of day
// fires exactly once on every local date, through every transition of
// 2020-2030.
func TestDailyOncePerDay(t *testing.T) {
	for _, loc := range []*time.Location{newYork, berlin, lordHowe, santiago} {
		for _, expr := range []string{"0 0 * * *", "30 1 * * *", "0 2 * * *", "15 2 * * *", "45 2 * * *", "0 3 * * *", "59 23 * * *"} {
			t.Run(loc.String()+" "+expr, func(t *testing.T) {
				s := mustParse(t, expr, loc)
				from := time.Date(2020, 1, 1, 0, 0, 0, 0, loc)
				to := time.Date(2030, 1, 1, 0, 0, 0, 0, loc)
				want := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC) // the date expected next
				for f := s.Next(from.Add(-time.Nanosecond)); f.Before(to); f = s.Next(f) {
					if f.Format(time.DateOnly) != want.Format(time.DateOnly) {
						t.Fatalf("%q in %v: fire time %v, want one on %s", expr, loc, f, want.Format(time.DateOnly))
					}
					want = want.AddDate(0, 0, 1)
				}
			})
		}
	}
}

// TestAroundTransitions asks for Next and Prev from instants just before,
// inside and just after changes of offset.
func TestAroundTransitions(t *testing.T) {
	tests := []struct {
		loc        *time.Location
		expr       string
		at         string
		next, prev string
	}{
		{newYork, "0 2 * * *", "2026-03-08T01:59:59.5-05:00", "2026-03-08T03:00:00-04:00", "2026-03-07T02:00:00-05:00"},
		{newYork, "0 2 * * *", "2026-03-08T01:59:59-05:00", "2026-03-08T03:00:00-04:00", "2026-03-07T02:00:00-05:00"},
		{newYork, "0 2 * * *", "2026-03-08T03:00:00-04:00", "2026-03-09T02:00:00-04:00", "2026-03-08T03:00:00-04:00"},
		{newYork, "0 2 * * *", "2026-03-08T02:59:59.999-04:00", "2026-03-08T03:00:00-04:00", "2026-03-07T02:00:00-05:00"},
		{newYork, "30 2 * * *", "2026-03-08T03:00:00.001-04:00", "2026-03-09T02:30:00-04:00", "2026-03-08T03:00:00-04:00"},
		{newYork, "0 * * * *", "2026-03-08T01:59:59-05:00", "2026-03-08T03:00:00-04:00", "2026-03-08T01:00:00-05:00"},
		{newYork, "0 * * * *", "2026-11-01T01:59:59-04:00", "2026-11-01T01:00:00-05:00", "2026-11-01T01:00:00-04:00"},
		{newYork, "0 * * * *", "2026-11-01T01:00:00-05:00", "2026-11-01T02:00:00-05:00", "2026-11-01T01:00:00-05:00"},
		{newYork, "30 1 * * *", "2026-11-01T01:45:00-05:00", "2026-11-02T01:30:00-05:00", "2026-11-01T01:30:00-04:00"},
		{newYork, "30 1 * * *", "2026-11-01T01:00:00-05:00", "2026-11-02T01:30:00-05:00", "2026-11-01T01:30:00-04:00"},
		{newYork, "30 1 * * *", "2026-11-01T01:29:59-04:00", "2026-11-01T01:30:00-04:00", "2026-10-31T01:30:00-04:00"},
		{newYork, "*/20 1 * * *", "2026-11-01T01:10:00-05:00", "2026-11-02T01:00:00-05:00", "2026-11-01T01:40:00-04:00"},
		{newYork, "*/20 1 * * *", "2026-11-01T01:50:00-04:00", "2026-11-02T01:00:00-05:00", "2026-11-01T01:40:00-04:00"},
		{lordHowe, "15 2 * * *", "2026-10-04T01:59:59.999+10:30", "2026-10-04T02:30:00+11:00", "2026-10-03T02:15:00+10:30"},
		{lordHowe, "15 2 * * *", "2026-10-04T02:30:00+11:00", "2026-10-05T02:15:00+11:00", "2026-10-04T02:30:00+11:00"},
		{lordHowe, "45 * * * *", "2026-04-05T01:50:00+10:30", "2026-04-05T02:45:00+10:30", "2026-04-05T01:45:00+10:30"},
		{lordHowe, "45 * * * *", "2026-04-05T01:59:00+11:00", "2026-04-05T01:45:00+10:30", "2026-04-05T01:45:00+11:00"},
		{lordHowe, "45 1 * * *", "2026-04-05T01:50:00+10:30", "2026-04-06T01:45:00+10:30", "2026-04-05T01:45:00+11:00"},
		{berlin, "30 2 * * *", "2026-10-25T02:40:00+01:00", "2026-10-26T02:30:00+01:00", "2026-10-25T02:30:00+02:00"},
		{santiago, "@daily", "2026-09-05T23:59:59-04:00", "2026-09-06T01:00:00-03:00", "2026-09-05T00:00:00-04:00"},
		{santiago, "30 23 * * *", "2026-04-04T23:40:00-04:00", "2026-04-05T23:30:00-04:00", "2026-04-04T23:30:00-03:00"},
	}
	for _, tt := range tests {
		t.Run(tt.loc.String()+" "+tt.expr+" "+tt.at, func(t *testing.T) {
			s := mustParse(t, tt.expr, tt.loc)
			at := mustTime(t, tt.at)
			if got := s.Next(at).Format(time.RFC3339); got != tt.next {
				t.Errorf("%q in %v: Next(%s) = %s, want %s", tt.expr, tt.loc, tt.at, got, tt.next)
			}
			if got := s.Prev(at).Format(time.RFC3339); got != tt.prev {
				t.Errorf("%q in %v: Prev(%s) = %s, want %s", tt.expr, tt.loc, tt.at, got, tt.prev)
			}
		})
	}
}
