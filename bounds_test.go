package tranche_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tranche-dev/tranche"
)

func TestWindowBetween(t *testing.T) {
	tests := []struct {
		name     string
		zone     string
		g        tranche.TimeGranularity
		from, to string // RFC 3339
		want     string // the window's String
		wantLen  int
	}{
		{"days", "America/New_York", tranche.Day, "2024-03-01T00:00:00-05:00", "2024-04-01T00:00:00-04:00",
			"day 2024-03-01..2024-03-31 America/New_York", 31},
		{"one 23-hour day", "America/New_York", tranche.Day, "2024-03-10T05:00:00Z", "2024-03-11T04:00:00Z",
			"day 2024-03-10..2024-03-10 America/New_York", 1},
		{"the 25 hours of a fall-back day", "America/New_York", tranche.Hour, "2024-11-03T00:00:00-04:00", "2024-11-04T00:00:00-05:00",
			"hour 2024-11-03T00:00-04:00..2024-11-03T23:00-05:00 America/New_York", 25},
		{"to between the two 01:00 hours", "America/New_York", tranche.Hour, "2024-11-03T00:00:00-04:00", "2024-11-03T01:00:00-05:00",
			"hour 2024-11-03T00:00-04:00..2024-11-03T01:00-04:00 America/New_York", 2},
		{"Apia over the skipped day", "Pacific/Apia", tranche.Day, "2011-12-29T00:00:00-10:00", "2012-01-01T00:00:00+14:00",
			"day 2011-12-29..2011-12-31 Pacific/Apia", 2},
		{"Sao Paulo from the skipped midnight's 01:00", "America/Sao_Paulo", tranche.Day, "2018-11-04T01:00:00-02:00", "2018-11-06T00:00:00-02:00",
			"day 2018-11-04..2018-11-05 America/Sao_Paulo", 2},
		{"Lord Howe 90-minute hour", "Australia/Lord_Howe", tranche.Hour, "2024-04-07T01:00:00+11:00", "2024-04-07T02:00:00+10:30",
			"hour 2024-04-07T01:00+11:00..2024-04-07T01:00+11:00 Australia/Lord_Howe", 1},
		{"ISO weeks", "UTC", tranche.Week, "2026-12-28T00:00:00Z", "2027-01-11T00:00:00Z",
			"week 2026-W53..2027-W01 UTC", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			from, to := instant(t, tt.from, tt.zone), instant(t, tt.to, tt.zone)
			w, err := tranche.WindowBetween(tt.g, from, to)
			if err != nil {
				t.Fatalf("WindowBetween(%v, %v, %v): %v", tt.g, from, to, err)
			}
			if diff := cmp.Diff(tt.want, w.String()); diff != "" {
				t.Errorf("WindowBetween(%v, %v, %v) mismatch (-want +got):\n%s", tt.g, from, to, diff)
			}
			if w.Len() != tt.wantLen {
				t.Errorf("Len() = %d, want %d", w.Len(), tt.wantLen)
			}
			if !w.Start().Equal(from) || !w.End().Equal(to) {
				t.Errorf("[Start, End) = [%v, %v), want [%v, %v)", w.Start(), w.End(), from, to)
			}
		})
	}
}

func TestWindowBetweenSameInstantOtherZones(t *testing.T) {
	from := instant(t, "2024-03-01T00:00:00-05:00", "America/New_York")
	want, err := tranche.WindowBetween(tranche.Day, from, instant(t, "2024-04-01T00:00:00-04:00", "America/New_York"))
	if err != nil {
		t.Fatal(err)
	}
	for _, zone := range []string{"UTC", "Europe/Berlin", "Asia/Kathmandu", "Pacific/Chatham", "America/Los_Angeles"} {
		t.Run(zone, func(t *testing.T) {
			to := instant(t, "2024-04-01T04:00:00Z", zone)
			got, err := tranche.WindowBetween(tranche.Day, from, to)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("WindowBetween(day, %v, %v) mismatch (-want +got):\n%s", from, to, diff)
			}
			// A bound in another fixed-offset zone, as parsed from text.
			fixed, err := time.Parse(time.RFC3339, to.Format(time.RFC3339))
			if err != nil {
				t.Fatal(err)
			}
			got, err = tranche.WindowBetween(tranche.Day, from, fixed)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("WindowBetween(day, %v, %v) mismatch (-want +got):\n%s", from, fixed, diff)
			}
		})
	}
}

func TestWindowBetweenErrors(t *testing.T) {
	ny := "America/New_York"
	tests := []struct {
		name       string
		zone       string
		g          tranche.TimeGranularity
		from, to   string
		wantBound  string // the bound the error names, or "" for another error
		wantBefore string
		wantAfter  string
		wantErr    string
	}{
		{"from at noon", ny, tranche.Day, "2024-03-10T12:00:00-04:00", "2024-03-12T00:00:00-04:00",
			"from", "2024-03-10T00:00:00-05:00", "2024-03-11T00:00:00-04:00",
			"tranche: from 2024-03-10T12:00:00-04:00 is not a day boundary in America/New_York; the nearest are 2024-03-10T00:00:00-05:00 and 2024-03-11T00:00:00-04:00"},
		{"to at noon", ny, tranche.Day, "2024-03-10T00:00:00-05:00", "2024-03-11T12:00:00-04:00",
			"to", "2024-03-11T00:00:00-04:00", "2024-03-12T00:00:00-04:00", "tranche: to 2024-03-11T12:00:00-04:00 is not a day boundary"},
		{"to a nanosecond late", ny, tranche.Hour, "2024-03-10T00:00:00-05:00", "2024-03-10T03:00:00.000000001-04:00",
			"to", "2024-03-10T03:00:00-04:00", "2024-03-10T04:00:00-04:00", "tranche: to 2024-03-10T03:00:00.000000001-04:00 is not a hour boundary"},
		{"to at the skipped 02:30", ny, tranche.Hour, "2024-03-10T00:00:00-05:00", "2024-03-10T07:30:00Z",
			"to", "2024-03-10T03:00:00-04:00", "2024-03-10T04:00:00-04:00", ""},
		{"from at UTC midnight", ny, tranche.Day, "2024-03-01T00:00:00Z", "2024-03-02T00:00:00-05:00",
			"from", "2024-02-29T00:00:00-05:00", "2024-03-01T00:00:00-05:00", ""},
		{"from at Sao Paulo's missing midnight", "America/Sao_Paulo", tranche.Day, "2018-11-04T02:00:00Z", "2018-11-05T00:00:00-02:00",
			"from", "2018-11-03T00:00:00-03:00", "2018-11-04T01:00:00-02:00", ""},
		{"from mid-week", "UTC", tranche.Week, "2027-01-01T00:00:00Z", "2027-01-11T00:00:00Z",
			"from", "2026-12-28T00:00:00Z", "2027-01-04T00:00:00Z", ""},
		{"to inside Lord Howe's 90-minute hour", "Australia/Lord_Howe", tranche.Hour, "2024-04-07T00:00:00+11:00", "2024-04-07T01:30:00+10:30",
			"to", "2024-04-07T01:00:00+11:00", "2024-04-07T02:00:00+10:30", ""},

		{"empty", ny, tranche.Day, "2024-03-10T00:00:00-05:00", "2024-03-10T05:00:00Z",
			"", "", "", "tranche: empty window: from and to are both 2024-03-10T00:00:00-05:00; to must be later"},
		{"inverted", ny, tranche.Day, "2024-03-11T00:00:00-04:00", "2024-03-10T00:00:00-05:00",
			"", "", "", "tranche: inverted window: from 2024-03-11T00:00:00-04:00 is later than to 2024-03-10T00:00:00-05:00"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			from, to := instant(t, tt.from, tt.zone), instant(t, tt.to, tt.zone)
			w, err := tranche.WindowBetween(tt.g, from, to)
			if err == nil {
				t.Fatalf("WindowBetween(%v, %v, %v) = %v, want an error", tt.g, from, to, w)
			}
			if tt.wantErr != "" && !strings.HasPrefix(err.Error(), tt.wantErr) {
				t.Errorf("error %q does not start with %q", err, tt.wantErr)
			}
			if tt.wantBound == "" {
				return
			}
			// The error names the bound, the granularity and the
			// nearest boundaries, which PartitionOf at the bound gives.
			bound := from
			if tt.wantBound == "to" {
				bound = to.In(from.Location())
			}
			p := tranche.PartitionOf(tt.g, bound)
			if got := []string{p.Start.Format(time.RFC3339), p.End.Format(time.RFC3339)}; !cmp.Equal(got, []string{tt.wantBefore, tt.wantAfter}) {
				t.Errorf("PartitionOf at the bound spans %v, want %s and %s", got, tt.wantBefore, tt.wantAfter)
			}
			want := fmt.Sprintf("tranche: %s %s is not a %v boundary in %s; the nearest are %s and %s",
				tt.wantBound, bound.Format(time.RFC3339Nano), tt.g, tt.zone, tt.wantBefore, tt.wantAfter)
			if err.Error() != want {
				t.Errorf("error %q, want %q", err, want)
			}
		})
	}
	t.Run("zero granularity", func(t *testing.T) {
		from := instant(t, "2024-03-10T00:00:00-05:00", ny)
		if _, err := tranche.WindowBetween(tranche.TimeGranularity{}, from, from.Add(time.Hour)); err == nil {
			t.Error("no error for the zero granularity")
		}
	})
}

func TestParseBound(t *testing.T) {
	tests := []struct {
		name string
		in   string
		zone string // "" for a nil location
		want string // RFC 3339 with nanoseconds, in the location of the result
	}{
		{"RFC 3339 Z", "2026-01-01T00:00:00Z", "", "2026-01-01T00:00:00Z"},
		{"RFC 3339 offset", "2026-01-01T02:00:00+02:00", "", "2026-01-01T02:00:00+02:00"},
		{"RFC 3339 nanoseconds", "2026-01-01T00:00:00.5Z", "", "2026-01-01T00:00:00.5Z"},
		{"RFC 3339 minutes", "2026-01-01T02:00+02:00", "", "2026-01-01T02:00:00+02:00"},
		{"RFC 3339 moved to the zone", "2026-01-01T00:00:00Z", "America/New_York", "2025-12-31T19:00:00-05:00"},
		{"RFC 3339 spaces trimmed", "  2026-01-01T00:00:00Z\n", "", "2026-01-01T00:00:00Z"},
		{"date in a zone", "2026-01-01", "America/New_York", "2026-01-01T00:00:00-05:00"},
		{"date in Kathmandu", "2024-06-15", "Asia/Kathmandu", "2024-06-15T00:00:00+05:45"},
		{"date with a skipped midnight", "2018-11-04", "America/Sao_Paulo", "2018-11-04T01:00:00-02:00"},
		{"date with a repeated midnight", "2024-11-03", "America/Havana", "2024-11-03T00:00:00-04:00"},
		{"Apia's skipped date starts the next", "2011-12-30", "Pacific/Apia", "2011-12-31T00:00:00+14:00"},
		{"wall time", "2026-01-01T06:00", "Europe/Berlin", "2026-01-01T06:00:00+01:00"},
		{"wall time with seconds", "2026-07-01T06:00:30", "Europe/Berlin", "2026-07-01T06:00:30+02:00"},
		{"wall time with a space", "2026-07-01 06:00", "Europe/Berlin", "2026-07-01T06:00:00+02:00"},
		{"wall time with nanoseconds", "2026-07-01 06:00:00.25", "Europe/Berlin", "2026-07-01T06:00:00.25+02:00"},
		{"wall time once on a fall-back day", "2024-11-03T03:00", "America/New_York", "2024-11-03T03:00:00-05:00"},
		{"Lord Howe after the half-hour gap", "2024-10-06T02:30", "Australia/Lord_Howe", "2024-10-06T02:30:00+11:00"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var loc *time.Location
			if tt.zone != "" {
				loc = loadLocation(t, tt.zone)
			}
			got, err := tranche.ParseBound(tt.in, loc)
			if err != nil {
				t.Fatalf("ParseBound(%q, %v): %v", tt.in, loc, err)
			}
			if diff := cmp.Diff(tt.want, got.Format(time.RFC3339Nano)); diff != "" {
				t.Errorf("ParseBound(%q, %v) mismatch (-want +got):\n%s", tt.in, loc, diff)
			}
			if loc != nil && got.Location() != loc {
				t.Errorf("ParseBound(%q, %v) is in %v", tt.in, loc, got.Location())
			}
		})
	}
}

func TestParseBoundErrors(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		zone     string
		reason   string   // the ParseError's Reason, whole
		wantErrs []string // in the error's text
	}{
		{"date without a zone", "2026-01-01", "",
			"no UTC offset and no zone was given; write it with an offset, as in 2026-01-01T00:00:00Z, or name its zone",
			[]string{`tranche: bound "2026-01-01": no UTC offset`}},
		{"wall time without a zone", "2026-01-01T06:00", "", "",
			[]string{`bound "2026-01-01T06:00"`, "no UTC offset", "as in 2026-01-01T06:00:00Z"}},
		{"wall time with seconds without a zone", "2026-01-01 06:30:15", "", "",
			[]string{"no UTC offset", "as in 2026-01-01T06:30:15Z"}},
		{"New York spring gap", "2024-03-10T02:30", "America/New_York",
			"it does not exist in America/New_York: the clocks skip it; write it with an offset", nil},
		{"Lord Howe half-hour gap", "2024-10-06T02:15", "Australia/Lord_Howe", "",
			[]string{"does not exist in Australia/Lord_Howe"}},
		{"Sao Paulo skipped midnight", "2018-11-04T00:00", "America/Sao_Paulo", "",
			[]string{"does not exist in America/Sao_Paulo"}},
		{"Apia skipped day", "2011-12-30T12:00", "Pacific/Apia", "",
			[]string{"does not exist in Pacific/Apia"}},
		{"New York repeated 01:30", "2024-11-03T01:30", "America/New_York",
			"it occurs twice in America/New_York, at 2024-11-03T01:30:00-04:00 and 2024-11-03T01:30:00-05:00; write it with the offset you mean", nil},
		{"Berlin repeated 02:30", "2024-10-27 02:30", "Europe/Berlin", "",
			[]string{"occurs twice", "at 2024-10-27T02:30:00+02:00 and 2024-10-27T02:30:00+01:00"}},
		{"Lord Howe repeated 01:45", "2024-04-07T01:45", "Australia/Lord_Howe", "",
			[]string{"occurs twice", "at 2024-04-07T01:45:00+11:00 and 2024-04-07T01:45:00+10:30"}},

		// Not a time at all: the reason says what is wrong.
		{"yesterday", "yesterday", "America/New_York", "",
			[]string{`bound "yesterday": relative words such as yesterday are not times: use Lookback`, "2026-01-01T00:00:00Z"}},
		{"last week", "last week", "UTC", "", []string{"relative words such as last are not times: use Lookback"}},
		{"-7d", "-7d", "", "", []string{"relative words such as -7d are not times: use Lookback"}},
		{"empty", "", "", "", []string{`bound "": empty; write RFC 3339 with an offset`}},
		{"gibberish", "soon-ish", "UTC", "", []string{`bound "soon-ish": not a time; write RFC 3339 with an offset`}},
		{"February 30", "2024-02-30", "UTC", "day 30 is out of range: February 2024 has 29 days", nil},
		{"February 29 2100", "2100-02-29T00:00:00Z", "", "day 29 is out of range: February 2100 has 28 days", nil},
		{"month 13", "2026-13-01T00:00:00Z", "", "month 13 is out of range (01 to 12)", nil},
		{"month 00", "2026-00-01", "UTC", "month 00 is out of range (01 to 12)", nil},
		{"hour 24", "2026-01-01T24:00:00Z", "", "hour 24 is out of range (00 to 23)", nil},
		{"minute 60", "2026-01-01 10:60", "UTC", "minute 60 is out of range (00 to 59)", nil},
		{"second 60", "2026-01-01T10:00:60Z", "", "second 60 is out of range (00 to 59)", nil},
		{"offset +25:00", "2026-01-01T10:00:00+25:00", "", "offset +25:00 is out of range (-23:59 to +23:59)", nil},
		{"no zero padding", "2024-3-1", "UTC", "month 3 is not two digits; write months and days with two digits, as in 2024-03-01", nil},
		{"no zero padding in the day", "2024-03-1", "UTC", "day 1 is not two digits; write months and days with two digits, as in 2024-03-01", nil},
		{"a slash before the time", "2024-03-01/10:00", "UTC", `"/" follows the date; write T or a space before the time`, nil},

		// RFC 3339 writes the years 0001 to 9999 only, in UTC and in the
		// bound's own zone.
		{"before year 1 in UTC", "0000-01-01T0:00+01:00", "",
			"it lies in year -1 in UTC; bounds lie in the years 0001 to 9999, in UTC and in their zone, which RFC 3339 can write", nil},
		{"year 1 at an offset east", "0001-01-01T00:00:00+01:00", "", "", []string{"it lies in year 0 in UTC"}},
		{"year 1 in Tokyo", "0001-01-01", "Asia/Tokyo", "", []string{"it lies in year 0 in UTC"}},
		{"after year 9999 in UTC", "9999-12-31T23:00:00-05:00", "", "", []string{"it lies in year 10000 in UTC"}},
		{"after year 9999 in New York", "9999-12-31T22:00", "America/New_York", "", []string{"it lies in year 10000 in UTC"}},
		{"after year 9999 in Berlin, not in UTC", "9999-12-31T22:00-01:00", "Europe/Berlin", "", []string{"it lies in year 10000 in Europe/Berlin"}},
		{"before year 1 in New York, not in UTC", "0001-01-01T01:00:00Z", "America/New_York", "", []string{"it lies in year 0 in America/New_York"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var loc *time.Location
			if tt.zone != "" {
				loc = loadLocation(t, tt.zone)
			}
			got, err := tranche.ParseBound(tt.in, loc)
			if err == nil {
				t.Fatalf("ParseBound(%q, %v) = %v, want an error", tt.in, loc, got)
			}
			pe, ok := errors.AsType[*tranche.ParseError](err)
			if !ok {
				t.Fatalf("ParseBound(%q, %v) error %v is not a *ParseError", tt.in, loc, err)
			}
			if pe.Type != "bound" || pe.Text != tt.in {
				t.Errorf("ParseBound(%q, %v) error has Kind %q and Text %q", tt.in, loc, pe.Type, pe.Text)
			}
			if tt.reason != "" && pe.Reason != tt.reason {
				t.Errorf("ParseBound(%q, %v) reason\n%q, want\n%q", tt.in, loc, pe.Reason, tt.reason)
			}
			for _, want := range tt.wantErrs {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("ParseBound(%q, %v) error %q does not contain %q", tt.in, loc, err, want)
				}
			}
		})
	}
}

// TestParseBoundRange: the first and last instants RFC 3339 can write, in
// UTC and in the bound's zone, are bounds.
func TestParseBoundRange(t *testing.T) {
	berlin := loadLocation(t, "Europe/Berlin")
	for _, tt := range []struct {
		s   string
		loc *time.Location
	}{
		{"0001-01-01T00:00:00Z", nil}, {"0001-01-01T00:00:00-01:00", nil},
		{"9999-12-31T23:59:59.999999999Z", nil}, {"9999-12-31T23:59:59+01:00", nil},
		{"9999-12-31T21:59:59-01:00", berlin}, {"9999-12-31T23:59:59", berlin},
	} {
		s := tt.s
		got, err := tranche.ParseBound(s, tt.loc)
		if err != nil {
			t.Errorf("ParseBound(%q): %v", s, err)
			continue
		}
		if back, err := tranche.ParseBound(got.Format(time.RFC3339Nano), nil); err != nil || !back.Equal(got) {
			t.Errorf("ParseBound(%q) = %v, which reads back as %v, %v", s, got, back, err)
		}
	}
}

// TestParseBoundOffsets: a bound written with an offset keeps it on every
// host, as time.UTC for a zero offset and a fixed zone named by the offset
// otherwise, never time.Local.
func TestParseBoundOffsets(t *testing.T) {
	tests := []struct {
		in, zone string
		offset   int
	}{
		{"2026-01-01T00:00:00Z", "UTC", 0},
		{"2026-01-01T00:00:00+00:00", "UTC", 0},
		{"2026-01-01T00:00:00-00:00", "UTC", 0},
		{"2026-01-01T00:00+00:00", "UTC", 0},
		{"2026-01-01T00:00:00+01:00", "+01:00", 3600},
		{"2026-07-01T00:00:00+02:00", "+02:00", 7200},
		{"2026-01-01T00:00:00-03:30", "-03:30", -12600},
		{"2026-01-01T00:00+05:45", "+05:45", 20700},
	}
	for _, tt := range tests {
		got, err := tranche.ParseBound(tt.in, nil)
		if err != nil {
			t.Fatal(err)
		}
		name, off := got.Zone()
		if got.Location() == time.Local || got.Location().String() != tt.zone || off != tt.offset {
			t.Errorf("ParseBound(%q, nil) is in %q (%s, offset %d), want %q at offset %d", tt.in, got.Location(), name, off, tt.zone, tt.offset)
		}
		if tt.offset == 0 && got.Location() != time.UTC {
			t.Errorf("ParseBound(%q, nil) is in %v, not time.UTC", tt.in, got.Location())
		}
	}
}

// TestParseBoundThenWindowBetween is the path a command line takes.
func TestParseBoundThenWindowBetween(t *testing.T) {
	loc := loadLocation(t, "America/New_York")
	from, err := tranche.ParseBound("2024-03-01", loc)
	if err != nil {
		t.Fatal(err)
	}
	to, err := tranche.ParseBound("2024-04-01T04:00:00Z", nil)
	if err != nil {
		t.Fatal(err)
	}
	w, err := tranche.WindowBetween(tranche.Day, from, to)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff("day 2024-03-01..2024-03-31 America/New_York", w.String()); diff != "" {
		t.Errorf("window mismatch (-want +got):\n%s", diff)
	}
}
