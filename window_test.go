package tranche_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tranche-dev/tranche"
)

// newestFirstKeys lists a window's keys in the order All yields them.
func newestFirstKeys(w tranche.TimePartitionWindow) []string {
	var keys []string
	for p := range w.All() {
		keys = append(keys, p.Key())
	}
	return keys
}

func TestLookback(t *testing.T) {
	tests := []struct {
		name             string
		zone             string
		now              string // RFC 3339
		lookback, offset int
		g                tranche.TimeGranularity
		wantAll          []string // newest first
		wantStart        string
		wantEnd          string
	}{
		{"monthly 3 ending last month", "UTC", "2024-03-31T12:00:00Z", 3, 1, tranche.Month,
			[]string{"2024-02", "2024-01", "2023-12"}, "2023-12-01T00:00:00Z", "2024-03-01T00:00:00Z"},
		{"monthly 1, offset 3", "UTC", "2024-05-31T23:59:59Z", 1, 3, tranche.Month,
			[]string{"2024-02"}, "2024-02-01T00:00:00Z", "2024-03-01T00:00:00Z"},
		{"daily 7 ending yesterday", "America/New_York", "2026-08-18T09:00:00-04:00", 7, 1, tranche.Day,
			[]string{"2026-08-17", "2026-08-16", "2026-08-15", "2026-08-14", "2026-08-13", "2026-08-12", "2026-08-11"},
			"2026-08-11T00:00:00-04:00", "2026-08-18T00:00:00-04:00"},
		{"daily 7, offset 8", "America/New_York", "2026-08-18T09:00:00-04:00", 7, 8, tranche.Day,
			[]string{"2026-08-10", "2026-08-09", "2026-08-08", "2026-08-07", "2026-08-06", "2026-08-05", "2026-08-04"},
			"2026-08-04T00:00:00-04:00", "2026-08-11T00:00:00-04:00"},
		{"today, incomplete", "America/New_York", "2026-08-18T09:00:00-04:00", 1, 0, tranche.Day,
			[]string{"2026-08-18"}, "2026-08-18T00:00:00-04:00", "2026-08-19T00:00:00-04:00"},
		{"weekly across new year", "UTC", "2026-01-01T12:00:00Z", 1, 1, tranche.Week,
			[]string{"2025-W52"}, "2025-12-22T00:00:00Z", "2025-12-29T00:00:00Z"},
		{"24 hours ending 23:00 on a 25-hour day", "America/New_York", "2024-11-03T23:30:00-05:00", 24, 0, tranche.Hour,
			[]string{
				"2024-11-03T23:00-05:00", "2024-11-03T22:00-05:00", "2024-11-03T21:00-05:00", "2024-11-03T20:00-05:00",
				"2024-11-03T19:00-05:00", "2024-11-03T18:00-05:00", "2024-11-03T17:00-05:00", "2024-11-03T16:00-05:00",
				"2024-11-03T15:00-05:00", "2024-11-03T14:00-05:00", "2024-11-03T13:00-05:00", "2024-11-03T12:00-05:00",
				"2024-11-03T11:00-05:00", "2024-11-03T10:00-05:00", "2024-11-03T09:00-05:00", "2024-11-03T08:00-05:00",
				"2024-11-03T07:00-05:00", "2024-11-03T06:00-05:00", "2024-11-03T05:00-05:00", "2024-11-03T04:00-05:00",
				"2024-11-03T03:00-05:00", "2024-11-03T02:00-05:00", "2024-11-03T01:00-05:00", "2024-11-03T01:00-04:00",
			},
			"2024-11-03T01:00:00-04:00", "2024-11-04T00:00:00-05:00"},
		{"3 hours over the spring gap", "America/New_York", "2024-03-10T03:10:00-04:00", 3, 0, tranche.Hour,
			[]string{"2024-03-10T03:00-04:00", "2024-03-10T01:00-05:00", "2024-03-10T00:00-05:00"},
			"2024-03-10T00:00:00-05:00", "2024-03-10T04:00:00-04:00"},
		{"Apia 3 days ending yesterday", "Pacific/Apia", "2012-01-01T12:00:00+14:00", 3, 1, tranche.Day,
			[]string{"2011-12-31", "2011-12-29", "2011-12-28"}, "2011-12-28T00:00:00-10:00", "2012-01-01T00:00:00+14:00"},
		{"quarters", "Europe/Berlin", "2024-01-15T00:00:00+01:00", 2, 1, tranche.Quarter,
			[]string{"2023-Q4", "2023-Q3"}, "2023-07-01T00:00:00+02:00", "2024-01-01T00:00:00+01:00"},
		{"6h over the fall-back", "America/New_York", "2026-11-01T13:00:00-05:00", 2, 1, tranche.Every(6, tranche.Hour),
			[]string{"2026-11-01T06:00-05:00", "2026-11-01T00:00-04:00"}, "2026-11-01T00:00:00-04:00", "2026-11-01T12:00:00-05:00"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := instant(t, tt.now, tt.zone)
			w, err := tranche.Lookback(now, tt.lookback, tt.offset, tt.g)
			if err != nil {
				t.Fatalf("Lookback(%v, %d, %d, %v): %v", now, tt.lookback, tt.offset, tt.g, err)
			}
			if diff := cmp.Diff(tt.wantAll, newestFirstKeys(w)); diff != "" {
				t.Errorf("Lookback(%v, %d, %d, %v).All() mismatch (-want +got):\n%s", now, tt.lookback, tt.offset, tt.g, diff)
			}
			got := []string{w.Start().Format(time.RFC3339), w.End().Format(time.RFC3339)}
			if diff := cmp.Diff([]string{tt.wantStart, tt.wantEnd}, got); diff != "" {
				t.Errorf("Lookback(%v, %d, %d, %v) [Start, End) mismatch (-want +got):\n%s", now, tt.lookback, tt.offset, tt.g, diff)
			}
			if w.Len() != tt.lookback {
				t.Errorf("Len() = %d, want %d", w.Len(), tt.lookback)
			}
			// The same window built from its ends.
			v, err := tranche.NewTimePartitionWindow(tt.g, w.Start(), w.End().Add(-time.Second))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(v, w); diff != "" {
				t.Errorf("Lookback differs from NewTimePartitionWindow(Start, End-1s) (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLookbackOffsetsAreAdjacent(t *testing.T) {
	now := instant(t, "2026-08-18T09:00:00-04:00", "America/New_York")
	recent, err := tranche.Lookback(now, 7, 1, tranche.Day)
	if err != nil {
		t.Fatal(err)
	}
	older, err := tranche.Lookback(now, 7, 8, tranche.Day)
	if err != nil {
		t.Fatal(err)
	}
	if !older.End().Equal(recent.Start()) {
		t.Errorf("offset 8 ends at %v, offset 1 starts at %v: want adjacent", older.End(), recent.Start())
	}
	both := slices.Concat(keysOf(older), keysOf(recent))
	want := []string{
		"2026-08-04", "2026-08-05", "2026-08-06", "2026-08-07", "2026-08-08", "2026-08-09", "2026-08-10",
		"2026-08-11", "2026-08-12", "2026-08-13", "2026-08-14", "2026-08-15", "2026-08-16", "2026-08-17",
	}
	if diff := cmp.Diff(want, both); diff != "" {
		t.Errorf("offsets 8 and 1 mismatch (-want +got):\n%s", diff)
	}
}

func TestLookbackErrors(t *testing.T) {
	now := instant(t, "2026-08-18T09:00:00-04:00", "America/New_York")
	tests := []struct {
		name             string
		lookback, offset int
		g                tranche.TimeGranularity
		wantErr          string
	}{
		{"lookback 0", 0, 1, tranche.Day, "lookback 0 must be at least 1"},
		{"lookback -3", -3, 1, tranche.Day, "lookback -3 must be at least 1"},
		{"offset -1", 7, -1, tranche.Day, "offset -1 must be 0"},
		{"zero granularity", 7, 1, tranche.TimeGranularity{}, "zero TimeGranularity"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := tranche.Lookback(now, tt.lookback, tt.offset, tt.g)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Lookback(now, %d, %d, %v) = %v, %v; want an error containing %q", tt.lookback, tt.offset, tt.g, w, err, tt.wantErr)
			}
		})
	}
}

func TestClampStart(t *testing.T) {
	ny := "America/New_York"
	now := instant(t, "2026-08-18T09:00:00-04:00", ny)
	w, err := tranche.Lookback(now, 7, 1, tranche.Day)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		start   string
		want    []string
		wantOK  bool
		wantLen int
	}{
		{"inside", "2026-08-15T00:00:00-04:00", []string{"2026-08-15", "2026-08-16", "2026-08-17"}, true, 3},
		{"inside, mid-day", "2026-08-15T17:45:00-04:00", []string{"2026-08-15", "2026-08-16", "2026-08-17"}, true, 3},
		{"the newest partition", "2026-08-17T23:59:59-04:00", []string{"2026-08-17"}, true, 1},
		{"at the window's start", "2026-08-11T00:00:00-04:00", keysOf(w), true, 7},
		{"before the window", "2020-01-01T00:00:00Z", keysOf(w), true, 7},
		{"at the window's end", "2026-08-18T00:00:00-04:00", nil, false, 0},
		{"after the window", "2027-01-01T00:00:00Z", nil, false, 0},
		{"in another zone", "2026-08-15T04:00:00Z", []string{"2026-08-15", "2026-08-16", "2026-08-17"}, true, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start, err := time.Parse(time.RFC3339, tt.start)
			if err != nil {
				t.Fatal(err)
			}
			got, ok := w.ClampStart(start)
			if ok != tt.wantOK {
				t.Fatalf("ClampStart(%v) ok = %v, want %v", start, ok, tt.wantOK)
			}
			if diff := cmp.Diff(tt.want, keysOf(got)); diff != "" {
				t.Errorf("ClampStart(%v) mismatch (-want +got):\n%s", start, diff)
			}
			if got.Len() != tt.wantLen {
				t.Errorf("ClampStart(%v).Len() = %d, want %d", start, got.Len(), tt.wantLen)
			}
			if ok && !got.End().Equal(w.End()) {
				t.Errorf("ClampStart(%v) moved the end to %v", start, got.End())
			}
		})
	}
	t.Run("empty window", func(t *testing.T) {
		if got, ok := (tranche.TimePartitionWindow{}).ClampStart(now); ok || got.Len() != 0 {
			t.Errorf("empty window ClampStart = %v, %v", got, ok)
		}
	})
	t.Run("over the Apia gap", func(t *testing.T) {
		apia := "Pacific/Apia"
		w, err := tranche.NewTimePartitionWindow(tranche.Day, instant(t, "2011-12-27T00:00:00-10:00", apia), instant(t, "2012-01-02T00:00:00+14:00", apia))
		if err != nil {
			t.Fatal(err)
		}
		got, ok := w.ClampStart(instant(t, "2011-12-29T18:00:00-10:00", apia))
		want := []string{"2011-12-29", "2011-12-31", "2012-01-01", "2012-01-02"}
		if diff := cmp.Diff(want, keysOf(got)); !ok || diff != "" {
			t.Errorf("ClampStart mismatch (-want +got):\n%s", diff)
		}
		if got.Len() != 4 {
			t.Errorf("Len() = %d, want 4", got.Len())
		}
	})
}

func TestNewTimePartitionWindow(t *testing.T) {
	ny := "America/New_York"
	t.Run("last converted to first's location", func(t *testing.T) {
		w, err := tranche.NewTimePartitionWindow(tranche.Day, instant(t, "2024-03-09T12:00:00-05:00", ny), instant(t, "2024-03-12T03:00:00Z", "UTC"))
		if err != nil {
			t.Fatal(err)
		}
		// 03:00Z on 03-12 is 23:00 on 03-11 in New York.
		if diff := cmp.Diff([]string{"2024-03-09", "2024-03-10", "2024-03-11"}, keysOf(w)); diff != "" {
			t.Errorf("keys mismatch (-want +got):\n%s", diff)
		}
		if w.Location().String() != ny {
			t.Errorf("Location() = %v, want %s", w.Location(), ny)
		}
	})
	t.Run("one partition", func(t *testing.T) {
		at := instant(t, "2024-03-10T12:00:00-04:00", ny)
		w, err := tranche.NewTimePartitionWindow(tranche.Day, at, at)
		if err != nil {
			t.Fatal(err)
		}
		if w.Len() != 1 || !w.Oldest().Equal(w.Newest()) || w.Oldest().Key() != "2024-03-10" {
			t.Errorf("one-day window: Len %d, Oldest %v, Newest %v", w.Len(), w.Oldest(), w.Newest())
		}
	})
	t.Run("inverted", func(t *testing.T) {
		first := instant(t, "2024-03-10T12:00:00-04:00", ny)
		last := instant(t, "2024-03-09T12:00:00-05:00", ny)
		_, err := tranche.NewTimePartitionWindow(tranche.Day, first, last)
		want := "tranche: inverted window: last 2024-03-09T12:00:00-05:00 (partition 2024-03-09) is before first 2024-03-10T12:00:00-04:00 (partition 2024-03-10)"
		if err == nil {
			t.Fatal("no error for an inverted window")
		}
		if diff := cmp.Diff(want, err.Error()); diff != "" {
			t.Errorf("error mismatch (-want +got):\n%s", diff)
		}
	})
	t.Run("zero granularity", func(t *testing.T) {
		if _, err := tranche.NewTimePartitionWindow(tranche.TimeGranularity{}, time.Now(), time.Now()); err == nil {
			t.Error("no error for the zero granularity")
		}
	})
	t.Run("contains", func(t *testing.T) {
		w, err := tranche.NewTimePartitionWindow(tranche.Day, instant(t, "2024-03-09T00:00:00-05:00", ny), instant(t, "2024-03-10T00:00:00-05:00", ny))
		if err != nil {
			t.Fatal(err)
		}
		for _, tt := range []struct {
			at   string
			want bool
		}{
			{"2024-03-09T00:00:00-05:00", true},
			{"2024-03-08T23:59:59-05:00", false},
			{"2024-03-10T23:59:59-04:00", true},
			{"2024-03-11T00:00:00-04:00", false},
		} {
			if got := w.Contains(instant(t, tt.at, "UTC")); got != tt.want {
				t.Errorf("Contains(%s) = %v, want %v", tt.at, got, tt.want)
			}
		}
	})
}

func TestWindowTextForm(t *testing.T) {
	tests := []struct {
		name        string
		zone        string
		g           tranche.TimeGranularity
		first, last string
		want        string
	}{
		{"days", "America/New_York", tranche.Day, "2024-01-01T00:00:00-05:00", "2024-01-31T00:00:00-05:00",
			"day 2024-01-01..2024-01-31 America/New_York"},
		{"the two 01:00 hours", "America/New_York", tranche.Hour, "2024-11-03T01:00:00-04:00", "2024-11-03T01:00:00-05:00",
			"hour 2024-11-03T01:00-04:00..2024-11-03T01:00-05:00 America/New_York"},
		{"15 minutes in Kathmandu", "Asia/Kathmandu", tranche.Every(15, tranche.Minute), "2024-06-15T10:00:00+05:45", "2024-06-15T11:59:00+05:45",
			"15m 2024-06-15T10:00+05:45..2024-06-15T11:45+05:45 Asia/Kathmandu"},
		{"ISO weeks", "UTC", tranche.Week, "2026-12-28T00:00:00Z", "2027-01-04T00:00:00Z",
			"week 2026-W53..2027-W01 UTC"},
		{"quarters", "Europe/Berlin", tranche.Every(2, tranche.Quarter), "2024-01-01T00:00:00+01:00", "2025-12-31T00:00:00+01:00",
			"2q 2024-Q1..2025-Q3 Europe/Berlin"},
		{"Apia", "Pacific/Apia", tranche.Day, "2011-12-29T00:00:00-10:00", "2011-12-31T00:00:00+14:00",
			"day 2011-12-29..2011-12-31 Pacific/Apia"},
		{"years", "UTC", tranche.Every(5, tranche.Year), "1999-01-01T00:00:00Z", "2030-01-01T00:00:00Z",
			"5y 1995..2030 UTC"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := tranche.NewTimePartitionWindow(tt.g, instant(t, tt.first, tt.zone), instant(t, tt.last, tt.zone))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, w.String()); diff != "" {
				t.Errorf("String() mismatch (-want +got):\n%s", diff)
			}
			back, err := tranche.ParseTimePartitionWindow(w.String())
			if err != nil {
				t.Fatalf("ParseTimePartitionWindow(%q): %v", w.String(), err)
			}
			if diff := cmp.Diff(w, back); diff != "" {
				t.Errorf("ParseTimePartitionWindow(%q) mismatch (-want +got):\n%s", w.String(), diff)
			}
			if back.Len() != w.Len() {
				t.Errorf("ParseTimePartitionWindow(%q).Len() = %d, want %d", w.String(), back.Len(), w.Len())
			}

			b, err := json.Marshal(map[string]tranche.TimePartitionWindow{"w": w})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(fmt.Sprintf(`{"w":%q}`, tt.want), string(b)); diff != "" {
				t.Errorf("json.Marshal mismatch (-want +got):\n%s", diff)
			}
			var m map[string]tranche.TimePartitionWindow
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(w, m["w"]); diff != "" {
				t.Errorf("json.Unmarshal(%s) mismatch (-want +got):\n%s", b, diff)
			}
		})
	}
}

func TestWindowTextFormErrors(t *testing.T) {
	tests := []struct {
		in       string
		wantErrs []string
	}{
		{"", []string{`window ""`, "GRANULARITY OLDEST..NEWEST ZONE"}},
		{"day 2024-01-01 UTC", []string{`"day 2024-01-01 UTC"`, "GRANULARITY OLDEST..NEWEST ZONE"}},
		{"day 2024-01-01..2024-01-31", []string{"GRANULARITY OLDEST..NEWEST ZONE"}},
		{"fortnight 2024-01-01..2024-01-31 UTC", []string{`granularity "fortnight": unknown unit "fortnight"`}},
		{"day 2024-01-01..2024-01-31 Mars/Olympus", []string{`unknown zone "Mars/Olympus"`}},
		{"day 2024-01-31..2024-01-01 UTC", []string{"inverted window"}},
		{"day 2011-12-30..2011-12-31 Pacific/Apia", []string{`partition key "2011-12-30": the date never occurs in Pacific/Apia`}},
		{"day 2024-01-01..2024-01-31 Local", []string{`unknown zone "Local": it names the host's zone`}},
		{"day 2024-01-01..2024-01-31 +24:00", []string{`unknown zone "+24:00"`}},
		{"day 2024-01-01..2024-01-31 +00:00", []string{`unknown zone "+00:00"`}}, // UTC is written UTC
		{"hour 2024-11-03T01:30-04:00..2024-11-03T02:00-05:00 America/New_York", []string{"lies in 2024-11-03T01:00-04:00"}},
		{"month 2024-01..2024-13 UTC", []string{`"2024-13"`, "2006-01"}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			w, err := tranche.ParseTimePartitionWindow(tt.in)
			if err == nil {
				t.Fatalf("ParseTimePartitionWindow(%q) = %v, want an error", tt.in, w)
			}
			for _, want := range tt.wantErrs {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("ParseTimePartitionWindow(%q) error %q does not contain %q", tt.in, err, want)
				}
			}
		})
	}
	t.Run("typed", func(t *testing.T) {
		_, err := tranche.ParseTimePartitionWindow("month 2024-01..2024-13 UTC")
		outer, ok := errors.AsType[*tranche.ParseError](err)
		if !ok || outer.Type != "window" || outer.Text != "month 2024-01..2024-13 UTC" {
			t.Fatalf("error %v: want a ParseError of the window", err)
		}
		key, ok := errors.AsType[*tranche.ParseError](outer.Err)
		if !ok || key.Type != "partition key" || key.Text != "2024-13" || key.Reason != "not a month key: month 13 is out of range (01 to 12); want the form 2006-01" {
			t.Fatalf("error %v wraps %#v: want the ParseError of the key", err, outer.Err)
		}
	})
	t.Run("marshal a location named like no zone", func(t *testing.T) {
		loc := time.FixedZone("Mars/Olympus", 3600)
		at := time.Date(2024, 1, 1, 0, 0, 0, 0, loc)
		w, err := tranche.NewTimePartitionWindow(tranche.Day, at, at)
		if err != nil {
			t.Fatal(err)
		}
		if b, err := w.MarshalText(); err == nil || !strings.Contains(err.Error(), `its location "Mars/Olympus" is not a zone database name or a fixed offset`) {
			t.Errorf("MarshalText in a zone without a known name = %q, %v; want an error", b, err)
		}
	})
}

// TestWindowTextFormFixedZones: a window in a fixed offset without a
// zone database name, as bounds parsed with an offset give, writes the
// offset as its zone and reads back the same, whatever the location's own
// name; the zero window marshals to empty text and back.
func TestWindowTextFormFixedZones(t *testing.T) {
	tests := []struct {
		loc  *time.Location
		want string
	}{
		{time.FixedZone("", 3*3600), "day 2024-01-01..2024-01-02 +03:00"},
		{time.FixedZone("+03:00", 3*3600), "day 2024-01-01..2024-01-02 +03:00"},
		{time.FixedZone("", -(3*3600 + 1800)), "day 2024-01-01..2024-01-02 -03:30"},
		{time.FixedZone("", 5*3600+45*60), "day 2024-01-01..2024-01-02 +05:45"},
		{time.FixedZone("", 0), "day 2024-01-01..2024-01-02 UTC"},
		{time.UTC, "day 2024-01-01..2024-01-02 UTC"},
	}
	for _, tt := range tests {
		first := time.Date(2024, 1, 1, 0, 0, 0, 0, tt.loc)
		w, err := tranche.NewTimePartitionWindow(tranche.Day, first, first.AddDate(0, 0, 1))
		if err != nil {
			t.Fatal(err)
		}
		b, err := w.MarshalText()
		if err != nil {
			t.Fatalf("MarshalText in %v: %v", tt.loc, err)
		}
		if string(b) != tt.want || w.String() != tt.want {
			t.Errorf("window in %q (offset %v) marshals to %q, String %q; want %q", tt.loc, first.Format("-07:00"), b, w.String(), tt.want)
		}
		var back tranche.TimePartitionWindow
		if err := back.UnmarshalText(b); err != nil {
			t.Fatal(err)
		}
		if !back.Equal(w) || back.Len() != w.Len() || back.String() != tt.want {
			t.Errorf("UnmarshalText(%q) = %v, want %v", b, back, w)
		}
	}
	// Two fixed zones without names but with different offsets are not
	// one zone.
	a := time.Date(2024, 1, 1, 0, 0, 0, 0, time.FixedZone("", 3600))
	b := time.Date(2024, 1, 1, 0, 0, 0, 0, time.FixedZone("", 7200)).Add(-time.Hour)
	wa, _ := tranche.NewTimePartitionWindow(tranche.Hour, a, a)
	wb, _ := tranche.NewTimePartitionWindow(tranche.Hour, b, b)
	if wa.Equal(wb) {
		t.Errorf("the hours %v and %v are Equal", wa, wb)
	}

	// The zero window marshals to empty text, and empty text is the zero
	// window, so that a struct holding one encodes without omitzero.
	type job struct{ W tranche.TimePartitionWindow }
	enc, err := json.Marshal(job{})
	if err != nil || string(enc) != `{"W":""}` {
		t.Fatalf("json.Marshal of a zero window = %s, %v; want {\"W\":\"\"}", enc, err)
	}
	got := job{W: wa}
	if err := json.Unmarshal(enc, &got); err != nil || got.W.Len() != 0 {
		t.Fatalf("json.Unmarshal(%s) = %v, %v; want the zero window", enc, got.W, err)
	}
	if _, err := tranche.ParseTimePartitionWindow(""); err == nil {
		t.Error(`ParseTimePartitionWindow("") succeeded; only UnmarshalText takes empty text for the zero window`)
	}
}

func TestWindowEqual(t *testing.T) {
	ny1, ny2 := loadLocation(t, "America/New_York"), loadLocation(t, "America/New_York")
	a, err := tranche.NewTimePartitionWindow(tranche.Day, time.Date(2024, 3, 1, 12, 0, 0, 0, ny1), time.Date(2024, 3, 31, 12, 0, 0, 0, ny1))
	if err != nil {
		t.Fatal(err)
	}
	b, err := tranche.NewTimePartitionWindow(tranche.Day, time.Date(2024, 3, 1, 0, 0, 0, 0, ny2), time.Date(2024, 3, 31, 23, 0, 0, 0, ny2))
	if err != nil {
		t.Fatal(err)
	}
	month, err := tranche.NewTimePartitionWindow(tranche.Month, time.Date(2024, 3, 1, 0, 0, 0, 0, ny1), time.Date(2024, 3, 1, 0, 0, 0, 0, ny1))
	if err != nil {
		t.Fatal(err)
	}
	utc, err := tranche.NewTimePartitionWindow(tranche.Day, time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC), time.Date(2024, 3, 31, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	shorter, _ := a.ClampStart(time.Date(2024, 3, 2, 0, 0, 0, 0, ny1))
	tests := []struct {
		name string
		v, w tranche.TimePartitionWindow
		want bool
	}{
		{"same days, two *Location values", a, b, true},
		{"itself", a, a, true},
		{"day vs month over the same span", a, month, false},
		{"New York vs UTC", a, utc, false},
		{"clamped", a, shorter, false},
		{"empty vs empty", tranche.TimePartitionWindow{}, tranche.TimePartitionWindow{}, true},
		{"empty vs non-empty", tranche.TimePartitionWindow{}, a, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.v.Equal(tt.w); got != tt.want {
				t.Errorf("%v.Equal(%v) = %v, want %v", tt.v, tt.w, got, tt.want)
			}
			if got := tt.w.Equal(tt.v); got != tt.want {
				t.Errorf("%v.Equal(%v) = %v, want %v", tt.w, tt.v, got, tt.want)
			}
		})
	}
	if !month.Start().Equal(a.Start()) || !month.End().Equal(a.End()) {
		t.Errorf("March as a month %v and as days %v should share their bounds", month, a)
	}
}

func TestChunks(t *testing.T) {
	loc := "America/New_York"
	w, err := tranche.NewTimePartitionWindow(tranche.Day, instant(t, "2024-03-01T00:00:00-05:00", loc), instant(t, "2024-03-10T00:00:00-05:00", loc))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		n    int
		want []string // String of each chunk, newest first
	}{
		{1, []string{
			"day 2024-03-10..2024-03-10 America/New_York", "day 2024-03-09..2024-03-09 America/New_York",
			"day 2024-03-08..2024-03-08 America/New_York", "day 2024-03-07..2024-03-07 America/New_York",
			"day 2024-03-06..2024-03-06 America/New_York", "day 2024-03-05..2024-03-05 America/New_York",
			"day 2024-03-04..2024-03-04 America/New_York", "day 2024-03-03..2024-03-03 America/New_York",
			"day 2024-03-02..2024-03-02 America/New_York", "day 2024-03-01..2024-03-01 America/New_York",
		}},
		{3, []string{
			"day 2024-03-08..2024-03-10 America/New_York", "day 2024-03-05..2024-03-07 America/New_York",
			"day 2024-03-02..2024-03-04 America/New_York", "day 2024-03-01..2024-03-01 America/New_York",
		}},
		{5, []string{"day 2024-03-06..2024-03-10 America/New_York", "day 2024-03-01..2024-03-05 America/New_York"}},
		{10, []string{"day 2024-03-01..2024-03-10 America/New_York"}},
		{1000, []string{"day 2024-03-01..2024-03-10 America/New_York"}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.n), func(t *testing.T) {
			var got []string
			var lens []int
			for c := range w.Chunks(tt.n) {
				got = append(got, c.String())
				lens = append(lens, c.Len())
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Chunks(%d) mismatch (-want +got):\n%s", tt.n, diff)
			}
			total := 0
			for i, n := range lens {
				total += n
				if n > tt.n || n < 1 || (i < len(lens)-1 && n != tt.n) {
					t.Errorf("Chunks(%d): chunk %d has %d partitions", tt.n, i, n)
				}
			}
			if total != w.Len() {
				t.Errorf("Chunks(%d) hold %d partitions, want %d", tt.n, total, w.Len())
			}
		})
	}
	t.Run("n >= Len yields w", func(t *testing.T) {
		for c := range w.Chunks(w.Len()) {
			if diff := cmp.Diff(w, c); diff != "" {
				t.Errorf("Chunks(Len) mismatch (-want +got):\n%s", diff)
			}
		}
	})
	t.Run("stop early", func(t *testing.T) {
		n := 0
		for range w.Chunks(2) {
			n++
			break
		}
		if n != 1 {
			t.Errorf("break after the first chunk ran %d iterations", n)
		}
	})
	t.Run("empty window", func(t *testing.T) {
		for c := range (tranche.TimePartitionWindow{}).Chunks(3) {
			t.Errorf("the empty window yields chunk %v", c)
		}
	})
	for _, n := range []int{0, -1} {
		t.Run(fmt.Sprintf("panics on %d", n), func(t *testing.T) {
			defer func() {
				r := recover()
				if r == nil || !strings.Contains(fmt.Sprint(r), fmt.Sprintf("Chunks(%d)", n)) {
					t.Errorf("Chunks(%d) panicked with %v", n, r)
				}
			}()
			w.Chunks(n)
		})
	}
}

func TestWindowIteration(t *testing.T) {
	loc := "America/New_York"
	w, err := tranche.NewTimePartitionWindow(tranche.Hour, instant(t, "2024-11-03T00:00:00-04:00", loc), instant(t, "2024-11-03T02:00:00-05:00", loc))
	if err != nil {
		t.Fatal(err)
	}
	want := []span{
		{"2024-11-03T02:00-05:00", "2024-11-03T02:00:00-05:00", "2024-11-03T03:00:00-05:00", time.Hour},
		{"2024-11-03T01:00-05:00", "2024-11-03T01:00:00-05:00", "2024-11-03T02:00:00-05:00", time.Hour},
		{"2024-11-03T01:00-04:00", "2024-11-03T01:00:00-04:00", "2024-11-03T01:00:00-05:00", time.Hour},
		{"2024-11-03T00:00-04:00", "2024-11-03T00:00:00-04:00", "2024-11-03T01:00:00-04:00", time.Hour},
	}
	var all []span
	for p := range w.All() {
		all = append(all, spanOf(p))
	}
	if diff := cmp.Diff(want, all); diff != "" {
		t.Errorf("All() mismatch (-want +got):\n%s", diff)
	}
	var oldest []span
	for p := range w.OldestFirst() {
		oldest = append(oldest, spanOf(p))
	}
	slices.Reverse(want)
	if diff := cmp.Diff(want, oldest); diff != "" {
		t.Errorf("OldestFirst() mismatch (-want +got):\n%s", diff)
	}
	for range w.All() {
		break // a range loop may stop early
	}
	for range w.OldestFirst() {
		break
	}
	var empty tranche.TimePartitionWindow
	for p := range empty.All() {
		t.Errorf("empty All yields %v", p)
	}
	for p := range empty.OldestFirst() {
		t.Errorf("empty OldestFirst yields %v", p)
	}
	if empty.Len() != 0 || !empty.Start().IsZero() || !empty.End().IsZero() || empty.String() != "empty" {
		t.Errorf("empty window: Len %d, Start %v, End %v, String %q", empty.Len(), empty.Start(), empty.End(), empty.String())
	}
}
