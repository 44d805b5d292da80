package tranche_test

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
)

// Fuzz targets for every parser. Run one with, for example,
// go test -run '^$' -fuzz FuzzParsePartitionKey -fuzztime 30s .

var fuzzZones = []string{
	"UTC", "America/New_York", "Europe/Berlin", "Australia/Lord_Howe", "Asia/Kathmandu",
	"Pacific/Chatham", "Pacific/Apia", "America/Sao_Paulo", "America/Santiago", "America/St_Johns",
	"America/Havana", "Europe/London",
}

func fuzzZone(t *testing.T, i uint8) *time.Location {
	return loadLocation(t, fuzzZones[int(i)%len(fuzzZones)])
}

// fuzzGranularities holds every unit and multiples of each.
var fuzzGranularities = []string{
	"minute", "hour", "day", "week", "month", "quarter", "year",
	"5m", "15m", "30m", "2h", "6h", "24h", "3d", "2w", "3mo", "2q", "10y",
}

func FuzzParseGranularity(f *testing.F) {
	for _, s := range append(fuzzGranularities, "1d", "15 minutes", "daily", "0d", "7m", "5h", "-1d", "", "99999999999999999999y", "1.5h", "60m",
		"cron(0 2 * * *)", "cron(0 2 * * 1-5; except 2026-12-25)", "cron(CRON_TZ=Asia/Kathmandu */15 * * * *)", "cron(0 25 * * *)", "cron(0 2 * * *; holidays 2026-12-25)", "cron(@daily)") {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		g, err := tranche.ParseGranularity(s)
		if err != nil {
			if g.IsValid() {
				t.Errorf("ParseGranularity(%q) = %v with error %v", s, g, err)
			}
			if !strings.Contains(err.Error(), strconv.Quote(s)) {
				t.Errorf("ParseGranularity(%q) error %q does not name the value", s, err)
			}
			return
		}
		if !g.IsValid() {
			t.Fatalf("ParseGranularity(%q) = the zero granularity, no error", s)
		}
		back, err := tranche.ParseGranularity(g.String())
		if err != nil || back != g {
			t.Errorf("ParseGranularity(%q) = %v, %v; want %v (from %q)", g.String(), back, err, g, s)
		}
	})
}

func FuzzParsePartitionKey(f *testing.F) {
	// Keys of every unit, transition days included.
	seeds := []struct {
		g    string
		key  string
		zone uint8
	}{
		{"minute", "2024-11-03T01:59-04:00", 1},
		{"hour", "2024-11-03T01:00-05:00", 1},
		{"hour", "2024-03-10T03:00-04:00", 1},
		{"hour", "2024-04-07T01:00+11:00", 3},
		{"hour", "2024-10-06T02:30+11:00", 3},
		{"15m", "2024-06-15T10:15+05:45", 4},
		{"hour", "2024-04-07T02:45+12:45", 5},
		{"hour", "1995-10-28T23:01-03:30", 9},
		{"hour", "2024-01-15T09:00Z", 11},
		{"6h", "2026-11-01T00:00-04:00", 1},
		{"day", "2024-03-10", 1},
		{"day", "2011-12-30", 6},
		{"day", "2018-11-04", 7},
		{"day", "2024-09-08", 8},
		{"3d", "1970-01-04", 0},
		{"week", "2026-W53", 0},
		{"week", "2020-W53", 2},
		{"2w", "1970-W03", 0},
		{"month", "2024-02", 0},
		{"3mo", "2024-04", 2},
		{"quarter", "2024-Q1", 2},
		{"2q", "2024-Q3", 0},
		{"year", "2024", 0},
		{"10y", "2020", 10},
		{"day", "2024-02-30", 0},
		{"hour", "2024-11-03T01:30-04:00", 1},
		{"hour", "2024-07-01T12:00-05:00", 1},
	}
	for _, s := range seeds {
		f.Add(s.g, s.key, s.zone)
	}
	f.Fuzz(func(t *testing.T, gs, key string, zone uint8) {
		g, err := tranche.ParseGranularity(gs)
		if err != nil {
			return
		}
		loc := fuzzZone(t, zone)
		p, err := tranche.ParsePartitionKey(g, key, loc)
		if err != nil {
			if !strings.Contains(err.Error(), strconv.Quote(key)) {
				t.Errorf("ParsePartitionKey(%v, %q, %v) error %q does not name the key", g, key, loc, err)
			}
			return
		}
		if got := p.Key(); got != key {
			t.Fatalf("ParsePartitionKey(%v, %q, %v) = %v, whose key is %q", g, key, loc, p, got)
		}
		if !p.Start.Before(p.End) || p.Start.Location() != loc || p.Granularity != g {
			t.Fatalf("ParsePartitionKey(%v, %q, %v) = %v in %v", g, key, loc, p, p.Start.Location())
		}
		if q := tranche.PartitionOf(g, p.Start); !q.Equal(p) {
			t.Fatalf("ParsePartitionKey(%v, %q, %v) = %v, but PartitionOf its start is %v", g, key, loc, p, q)
		}
	})
}

func FuzzParseTimePartitionWindow(f *testing.F) {
	for _, s := range []string{
		"day 2024-01-01..2024-01-31 America/New_York",
		"hour 2024-11-03T01:00-04:00..2024-11-03T01:00-05:00 America/New_York",
		"15m 2024-06-15T10:00+05:45..2024-06-15T11:45+05:45 Asia/Kathmandu",
		"week 2026-W53..2027-W01 UTC",
		"2q 2024-Q1..2025-Q3 Europe/Berlin",
		"day 2011-12-29..2011-12-31 Pacific/Apia",
		"day 2011-12-30..2011-12-31 Pacific/Apia",
		"5y 1995..2030 UTC",
		"month 2024-01..2024-13 UTC",
		"day 2024-01-31..2024-01-01 UTC",
		"day 2024-01-01 UTC",
		"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		w, err := tranche.ParseTimePartitionWindow(s)
		if err != nil {
			if !strings.Contains(err.Error(), strconv.Quote(s)) && !strings.Contains(err.Error(), "inverted window") {
				t.Errorf("ParseTimePartitionWindow(%q) error %q does not name the value", s, err)
			}
			return
		}
		if w.Len() < 1 || !w.Start().Before(w.End()) {
			t.Fatalf("ParseTimePartitionWindow(%q) = %v: Len %d, [%v, %v)", s, w, w.Len(), w.Start(), w.End())
		}
		back, err := tranche.ParseTimePartitionWindow(w.String())
		if err != nil || !back.Equal(w) || back.Len() != w.Len() {
			t.Fatalf("ParseTimePartitionWindow(%q) = %v, %v; want %v (from %q)", w.String(), back, err, w, s)
		}
		if w.Len() <= 1000 {
			n := 0
			for range w.All() {
				n++
			}
			if n != w.Len() {
				t.Fatalf("ParseTimePartitionWindow(%q) = %v: All yields %d, Len %d", s, w, n, w.Len())
			}
		}
	})
}

func FuzzParseBound(f *testing.F) {
	for _, s := range []string{
		"2026-01-01T00:00:00Z", "2026-01-01T02:00:00+02:00", "2026-01-01T00:00:00.5Z", "2026-01-01T02:00+02:00",
		"2026-01-01", "2026-01-01T06:00", "2026-07-01 06:00:00.25", "2024-03-10T02:30", "2024-11-03T01:30",
		"2018-11-04", "2011-12-30", "yesterday", "",
	} {
		f.Add(s, uint8(1), true)
		f.Add(s, uint8(0), false)
	}
	f.Fuzz(func(t *testing.T, s string, zone uint8, withZone bool) {
		var loc *time.Location
		if withZone {
			loc = fuzzZone(t, zone)
		}
		got, err := tranche.ParseBound(s, loc)
		if err != nil {
			pe, ok := errors.AsType[*tranche.ParseError](err)
			if !ok || pe.Type != "bound" || pe.Text != s || pe.Reason == "" {
				t.Errorf("ParseBound(%q, %v) error %#v is not the bound's ParseError", s, loc, err)
			}
			if !strings.Contains(err.Error(), strconv.Quote(s)) {
				t.Errorf("ParseBound(%q, %v) error %q does not name the value", s, loc, err)
			}
			return
		}
		if loc != nil && got.Location() != loc {
			t.Fatalf("ParseBound(%q, %v) = %v in %v", s, loc, got, got.Location())
		}
		if loc == nil && got.Location() == time.Local && time.Local.String() != "UTC" {
			t.Fatalf("ParseBound(%q, nil) = %v in time.Local", s, got)
		}
		if y := got.UTC().Year(); y < 1 || y > 9999 {
			t.Fatalf("ParseBound(%q, %v) = %v, outside the years RFC 3339 writes", s, loc, got)
		}
		// An accepted bound reads back the same from RFC 3339, where the
		// offset is whole minutes (every zone from 1972 on; RFC 3339 has no
		// seconds in its offsets, and local mean times before do).
		if _, off := got.Zone(); off%60 != 0 {
			return
		}
		text := got.Format(time.RFC3339Nano)
		back, err := tranche.ParseBound(text, nil)
		if err != nil || !back.Equal(got) {
			t.Fatalf("ParseBound(%q, nil) = %v, %v; want %v (from %q)", text, back, err, got, s)
		}
	})
}

func FuzzPartitionText(f *testing.F) {
	for _, s := range []string{
		"day 2024-03-10 America/New_York", "hour 2024-11-03T01:00-05:00 America/New_York", "15m 2024-06-15T10:15+05:45 Asia/Kathmandu",
		"week 2026-W53 UTC", "2q 2024-Q3 Europe/Berlin", "day 2026-01-01 +01:00", "hour 2026-01-01T00:00-03:30 -03:30",
		"cron(0 2 * * *) 2026-01-05T02:00:00-05:00 America/New_York", "day 2011-12-30 Pacific/Apia", "month 2024-13 UTC",
		"day 2024-01-01 Local", "", " ", "day",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var p tranche.TimePartition
		if err := p.UnmarshalText([]byte(s)); err != nil {
			if _, ok := errors.AsType[*tranche.ParseError](err); !ok {
				t.Errorf("UnmarshalText(%q) error %v is not a ParseError", s, err)
			}
			if !strings.Contains(err.Error(), strconv.Quote(s)) {
				t.Errorf("UnmarshalText(%q) error %q does not name the value", s, err)
			}
			return
		}
		if s == "" {
			if p != (tranche.TimePartition{}) {
				t.Fatalf("UnmarshalText of empty text = %v", p)
			}
			return
		}
		text, err := p.MarshalText()
		if err != nil {
			t.Fatalf("UnmarshalText(%q) = %v, which does not marshal: %v", s, p, err)
		}
		var back tranche.TimePartition
		if err := back.UnmarshalText(text); err != nil || !back.Equal(p) {
			t.Fatalf("UnmarshalText(%q) = %v, %v; want %v (from %q)", text, back, err, p, s)
		}
		if b, err := json.Marshal(p); err != nil || string(b) != strconv.Quote(string(text)) {
			t.Fatalf("json.Marshal(%v) = %s, %v", p, b, err)
		}
	})
}
