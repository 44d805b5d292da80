package tranche_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // the zone tests need no system zoneinfo

	"github.com/google/go-cmp/cmp"

	"github.com/tranche-dev/tranche"
)

// loadLocation loads a zone or fails the test.
func loadLocation(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatalf("LoadLocation(%q): %v", name, err)
	}
	return loc
}

// instant parses an RFC 3339 literal and moves it to zone.
func instant(t testing.TB, rfc3339, zone string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, rfc3339)
	if err != nil {
		t.Fatalf("bad test literal %q: %v", rfc3339, err)
	}
	return v.In(loadLocation(t, zone))
}

// span is a partition written out as text, so that table cases carry
// their expected values literally.
type span struct {
	Key        string
	Start, End string // RFC 3339, in the partition's location
	Duration   time.Duration
}

func spanOf(p tranche.TimePartition) span {
	return span{p.Key(), p.Start.Format(time.RFC3339), p.End.Format(time.RFC3339), p.End.Sub(p.Start)}
}

func keysOf(w tranche.TimePartitionWindow) []string {
	var keys []string
	for p := range w.OldestFirst() {
		keys = append(keys, p.Key())
	}
	return keys
}

func TestPartitionOf(t *testing.T) {
	every6h := tranche.Every(6, tranche.Hour)
	tests := []struct {
		name string
		zone string
		g    tranche.TimeGranularity
		at   string // RFC 3339; moved to zone
		want span
	}{
		// New York: 23 and 25 hour days.
		{"New York spring day", "America/New_York", tranche.Day, "2024-03-10T12:00:00-04:00",
			span{"2024-03-10", "2024-03-10T00:00:00-05:00", "2024-03-11T00:00:00-04:00", 23 * time.Hour}},
		{"New York fall day", "America/New_York", tranche.Day, "2024-11-03T12:00:00-05:00",
			span{"2024-11-03", "2024-11-03T00:00:00-04:00", "2024-11-04T00:00:00-05:00", 25 * time.Hour}},
		{"New York hour before the gap", "America/New_York", tranche.Hour, "2024-03-10T01:59:59-05:00",
			span{"2024-03-10T01:00-05:00", "2024-03-10T01:00:00-05:00", "2024-03-10T03:00:00-04:00", time.Hour}},
		{"New York hour after the gap", "America/New_York", tranche.Hour, "2024-03-10T03:00:00-04:00",
			span{"2024-03-10T03:00-04:00", "2024-03-10T03:00:00-04:00", "2024-03-10T04:00:00-04:00", time.Hour}},
		{"New York first 01:00", "America/New_York", tranche.Hour, "2024-11-03T01:30:00-04:00",
			span{"2024-11-03T01:00-04:00", "2024-11-03T01:00:00-04:00", "2024-11-03T01:00:00-05:00", time.Hour}},
		{"New York second 01:00", "America/New_York", tranche.Hour, "2024-11-03T01:30:00-05:00",
			span{"2024-11-03T01:00-05:00", "2024-11-03T01:00:00-05:00", "2024-11-03T02:00:00-05:00", time.Hour}},
		{"New York 15m in the second 01:00", "America/New_York", tranche.Every(15, tranche.Minute), "2024-11-03T01:00:00-05:00",
			span{"2024-11-03T01:00-05:00", "2024-11-03T01:00:00-05:00", "2024-11-03T01:15:00-05:00", 15 * time.Minute}},

		// Every(6, Hour) starts at local 00, 06, 12 and 18.
		{"6h New York fall first", "America/New_York", every6h, "2026-11-01T01:30:00-05:00",
			span{"2026-11-01T00:00-04:00", "2026-11-01T00:00:00-04:00", "2026-11-01T06:00:00-05:00", 7 * time.Hour}},
		{"6h New York fall second", "America/New_York", every6h, "2026-11-01T06:00:00-05:00",
			span{"2026-11-01T06:00-05:00", "2026-11-01T06:00:00-05:00", "2026-11-01T12:00:00-05:00", 6 * time.Hour}},
		{"6h New York spring first", "America/New_York", every6h, "2026-03-08T05:59:59-04:00",
			span{"2026-03-08T00:00-05:00", "2026-03-08T00:00:00-05:00", "2026-03-08T06:00:00-04:00", 5 * time.Hour}},

		// Berlin.
		{"Berlin spring day", "Europe/Berlin", tranche.Day, "2024-03-31T12:00:00+02:00",
			span{"2024-03-31", "2024-03-31T00:00:00+01:00", "2024-04-01T00:00:00+02:00", 23 * time.Hour}},
		{"Berlin fall day", "Europe/Berlin", tranche.Day, "2024-10-27T12:00:00+01:00",
			span{"2024-10-27", "2024-10-27T00:00:00+02:00", "2024-10-28T00:00:00+01:00", 25 * time.Hour}},
		{"Berlin first 02:00", "Europe/Berlin", tranche.Hour, "2024-10-27T00:00:00Z",
			span{"2024-10-27T02:00+02:00", "2024-10-27T02:00:00+02:00", "2024-10-27T02:00:00+01:00", time.Hour}},
		{"Berlin second 02:00", "Europe/Berlin", tranche.Hour, "2024-10-27T01:59:59Z",
			span{"2024-10-27T02:00+01:00", "2024-10-27T02:00:00+01:00", "2024-10-27T03:00:00+01:00", time.Hour}},

		// London's winter keys end in Z.
		{"London winter hour", "Europe/London", tranche.Hour, "2024-01-15T09:30:00Z",
			span{"2024-01-15T09:00Z", "2024-01-15T09:00:00Z", "2024-01-15T10:00:00Z", time.Hour}},
		{"London summer hour", "Europe/London", tranche.Hour, "2024-07-15T09:30:00+01:00",
			span{"2024-07-15T09:00+01:00", "2024-07-15T09:00:00+01:00", "2024-07-15T10:00:00+01:00", time.Hour}},

		// Lord Howe: 30-minute DST.
		{"Lord Howe 90-minute hour", "Australia/Lord_Howe", tranche.Hour, "2024-04-06T15:10:00Z",
			span{"2024-04-07T01:00+11:00", "2024-04-07T01:00:00+11:00", "2024-04-07T02:00:00+10:30", 90 * time.Minute}},
		{"Lord Howe after the 90-minute hour", "Australia/Lord_Howe", tranche.Hour, "2024-04-07T02:00:00+10:30",
			span{"2024-04-07T02:00+10:30", "2024-04-07T02:00:00+10:30", "2024-04-07T03:00:00+10:30", time.Hour}},
		{"Lord Howe fall day", "Australia/Lord_Howe", tranche.Day, "2024-04-07T12:00:00+10:30",
			span{"2024-04-07", "2024-04-07T00:00:00+11:00", "2024-04-08T00:00:00+10:30", 24*time.Hour + 30*time.Minute}},
		{"Lord Howe hour before the jump", "Australia/Lord_Howe", tranche.Hour, "2024-10-06T01:59:59+10:30",
			span{"2024-10-06T01:00+10:30", "2024-10-06T01:00:00+10:30", "2024-10-06T02:30:00+11:00", time.Hour}},
		{"Lord Howe 30-minute hour", "Australia/Lord_Howe", tranche.Hour, "2024-10-06T02:40:00+11:00",
			span{"2024-10-06T02:30+11:00", "2024-10-06T02:30:00+11:00", "2024-10-06T03:00:00+11:00", 30 * time.Minute}},
		{"Lord Howe spring day", "Australia/Lord_Howe", tranche.Day, "2024-10-06T12:00:00+11:00",
			span{"2024-10-06", "2024-10-06T00:00:00+10:30", "2024-10-07T00:00:00+11:00", 23*time.Hour + 30*time.Minute}},

		// Kathmandu: +05:45.
		{"Kathmandu day", "Asia/Kathmandu", tranche.Day, "2024-06-15T10:20:00+05:45",
			span{"2024-06-15", "2024-06-15T00:00:00+05:45", "2024-06-16T00:00:00+05:45", 24 * time.Hour}},
		{"Kathmandu hour", "Asia/Kathmandu", tranche.Hour, "2024-06-15T10:20:00+05:45",
			span{"2024-06-15T10:00+05:45", "2024-06-15T10:00:00+05:45", "2024-06-15T11:00:00+05:45", time.Hour}},
		{"Kathmandu 15m", "Asia/Kathmandu", tranche.Every(15, tranche.Minute), "2024-06-15T10:20:00+05:45",
			span{"2024-06-15T10:15+05:45", "2024-06-15T10:15:00+05:45", "2024-06-15T10:30:00+05:45", 15 * time.Minute}},

		// Chatham: +12:45, +13:45 in summer; the clock goes back from 03:45 to 02:45.
		{"Chatham day", "Pacific/Chatham", tranche.Day, "2024-06-15T10:20:00+12:45",
			span{"2024-06-15", "2024-06-15T00:00:00+12:45", "2024-06-16T00:00:00+12:45", 24 * time.Hour}},
		{"Chatham hour", "Pacific/Chatham", tranche.Hour, "2024-06-15T10:20:00+12:45",
			span{"2024-06-15T10:00+12:45", "2024-06-15T10:00:00+12:45", "2024-06-15T11:00:00+12:45", time.Hour}},
		{"Chatham hour cut by the set-back", "Pacific/Chatham", tranche.Hour, "2024-04-07T03:30:00+13:45",
			span{"2024-04-07T03:00+13:45", "2024-04-07T03:00:00+13:45", "2024-04-07T02:45:00+12:45", 45 * time.Minute}},
		{"Chatham quarter hour after the set-back", "Pacific/Chatham", tranche.Hour, "2024-04-07T02:50:00+12:45",
			span{"2024-04-07T02:45+12:45", "2024-04-07T02:45:00+12:45", "2024-04-07T03:00:00+12:45", 15 * time.Minute}},

		// Apia skipped 2011-12-30.
		{"Apia 12-29", "Pacific/Apia", tranche.Day, "2011-12-29T12:00:00-10:00",
			span{"2011-12-29", "2011-12-29T00:00:00-10:00", "2011-12-31T00:00:00+14:00", 24 * time.Hour}},
		{"Apia 12-31", "Pacific/Apia", tranche.Day, "2011-12-31T00:00:00+14:00",
			span{"2011-12-31", "2011-12-31T00:00:00+14:00", "2012-01-01T00:00:00+14:00", 24 * time.Hour}},
		{"Apia week", "Pacific/Apia", tranche.Week, "2011-12-31T00:00:00+14:00",
			span{"2011-W52", "2011-12-26T00:00:00-10:00", "2012-01-02T00:00:00+14:00", 6 * 24 * time.Hour}},

		// São Paulo: midnight transitions.
		{"Sao Paulo midnight skipped", "America/Sao_Paulo", tranche.Day, "2018-11-04T12:00:00-02:00",
			span{"2018-11-04", "2018-11-04T01:00:00-02:00", "2018-11-05T00:00:00-02:00", 23 * time.Hour}},
		{"Sao Paulo day before the skip", "America/Sao_Paulo", tranche.Day, "2018-11-03T23:59:59-03:00",
			span{"2018-11-03", "2018-11-03T00:00:00-03:00", "2018-11-04T01:00:00-02:00", 24 * time.Hour}},
		{"Sao Paulo midnight repeated", "America/Sao_Paulo", tranche.Day, "2019-02-16T23:30:00-03:00",
			span{"2019-02-16", "2019-02-16T00:00:00-02:00", "2019-02-17T00:00:00-03:00", 25 * time.Hour}},

		// Havana: transitions at midnight.
		{"Havana spring", "America/Havana", tranche.Day, "2024-03-10T12:00:00-04:00",
			span{"2024-03-10", "2024-03-10T01:00:00-04:00", "2024-03-11T00:00:00-04:00", 23 * time.Hour}},
		{"Havana fall", "America/Havana", tranche.Day, "2024-11-03T00:30:00-05:00",
			span{"2024-11-03", "2024-11-03T00:00:00-04:00", "2024-11-04T00:00:00-05:00", 25 * time.Hour}},
		{"Havana fall second midnight hour", "America/Havana", tranche.Hour, "2024-11-03T00:30:00-05:00",
			span{"2024-11-03T00:00-05:00", "2024-11-03T00:00:00-05:00", "2024-11-03T01:00:00-05:00", time.Hour}},

		// Santiago: the clock jumps from 24:00 to 01:00, and goes back from 24:00 to 23:00.
		{"Santiago midnight skipped", "America/Santiago", tranche.Day, "2024-09-08T12:00:00-03:00",
			span{"2024-09-08", "2024-09-08T01:00:00-03:00", "2024-09-09T00:00:00-03:00", 23 * time.Hour}},
		{"Santiago 23:00 repeated", "America/Santiago", tranche.Day, "2024-04-06T23:30:00-04:00",
			span{"2024-04-06", "2024-04-06T00:00:00-03:00", "2024-04-07T00:00:00-04:00", 25 * time.Hour}},
		{"Santiago first 23:00", "America/Santiago", tranche.Hour, "2024-04-06T23:30:00-03:00",
			span{"2024-04-06T23:00-03:00", "2024-04-06T23:00:00-03:00", "2024-04-06T23:00:00-04:00", time.Hour}},
		{"Santiago second 23:00", "America/Santiago", tranche.Hour, "2024-04-06T23:30:00-04:00",
			span{"2024-04-06T23:00-04:00", "2024-04-06T23:00:00-04:00", "2024-04-07T00:00:00-04:00", time.Hour}},

		// St. John's: transitions at 00:01, so partitions start off the hour.
		{"St Johns one-minute hour", "America/St_Johns", tranche.Hour, "1995-10-29T00:00:30-02:30",
			span{"1995-10-29T00:00-02:30", "1995-10-29T00:00:00-02:30", "1995-10-28T23:01:00-03:30", time.Minute}},
		{"St Johns hour from 23:01", "America/St_Johns", tranche.Hour, "1995-10-28T23:30:00-03:30",
			span{"1995-10-28T23:01-03:30", "1995-10-28T23:01:00-03:30", "1995-10-29T00:00:00-03:30", 59 * time.Minute}},
		{"St Johns day never reopens", "America/St_Johns", tranche.Day, "1995-10-28T23:30:00-03:30",
			span{"1995-10-29", "1995-10-29T00:00:00-02:30", "1995-10-30T00:00:00-03:30", 25 * time.Hour}},

		// ISO weeks across new year.
		{"2021-01-01 in 2020-W53", "UTC", tranche.Week, "2021-01-01T12:00:00Z",
			span{"2020-W53", "2020-12-28T00:00:00Z", "2021-01-04T00:00:00Z", 7 * 24 * time.Hour}},
		{"2025-12-31 in 2026-W01", "UTC", tranche.Week, "2025-12-31T12:00:00Z",
			span{"2026-W01", "2025-12-29T00:00:00Z", "2026-01-05T00:00:00Z", 7 * 24 * time.Hour}},
		{"2027-01-03 in 2026-W53", "UTC", tranche.Week, "2027-01-03T23:59:59Z",
			span{"2026-W53", "2026-12-28T00:00:00Z", "2027-01-04T00:00:00Z", 7 * 24 * time.Hour}},
		{"2024-12-30 in 2025-W01", "UTC", tranche.Week, "2024-12-30T00:00:00Z",
			span{"2025-W01", "2024-12-30T00:00:00Z", "2025-01-06T00:00:00Z", 7 * 24 * time.Hour}},
		{"New York week over the fall-back", "America/New_York", tranche.Week, "2024-11-03T12:00:00-05:00",
			span{"2024-W44", "2024-10-28T00:00:00-04:00", "2024-11-04T00:00:00-05:00", 7*24*time.Hour + time.Hour}},

		// February and month ends.
		{"February 1900", "UTC", tranche.Month, "1900-02-10T00:00:00Z",
			span{"1900-02", "1900-02-01T00:00:00Z", "1900-03-01T00:00:00Z", 28 * 24 * time.Hour}},
		{"February 2000", "UTC", tranche.Month, "2000-02-29T23:59:59Z",
			span{"2000-02", "2000-02-01T00:00:00Z", "2000-03-01T00:00:00Z", 29 * 24 * time.Hour}},
		{"February 2024", "UTC", tranche.Month, "2024-02-29T12:00:00Z",
			span{"2024-02", "2024-02-01T00:00:00Z", "2024-03-01T00:00:00Z", 29 * 24 * time.Hour}},
		{"February 2100", "UTC", tranche.Month, "2100-02-28T12:00:00Z",
			span{"2100-02", "2100-02-01T00:00:00Z", "2100-03-01T00:00:00Z", 28 * 24 * time.Hour}},
		{"New York March", "America/New_York", tranche.Month, "2024-03-31T23:59:59-04:00",
			span{"2024-03", "2024-03-01T00:00:00-05:00", "2024-04-01T00:00:00-04:00", 31*24*time.Hour - time.Hour}},

		// Quarters, years and multiples.
		{"quarter", "Europe/Berlin", tranche.Quarter, "2024-05-15T00:00:00+02:00",
			span{"2024-Q2", "2024-04-01T00:00:00+02:00", "2024-07-01T00:00:00+02:00", 91 * 24 * time.Hour}},
		{"year", "UTC", tranche.Year, "2024-05-15T00:00:00Z",
			span{"2024", "2024-01-01T00:00:00Z", "2025-01-01T00:00:00Z", 366 * 24 * time.Hour}},
		{"3 months", "UTC", tranche.Every(3, tranche.Month), "2024-06-30T00:00:00Z",
			span{"2024-04", "2024-04-01T00:00:00Z", "2024-07-01T00:00:00Z", 91 * 24 * time.Hour}},
		{"2 quarters", "UTC", tranche.Every(2, tranche.Quarter), "2024-08-15T00:00:00Z",
			span{"2024-Q3", "2024-07-01T00:00:00Z", "2025-01-01T00:00:00Z", 184 * 24 * time.Hour}},
		{"10 years", "UTC", tranche.Every(10, tranche.Year), "2024-08-15T00:00:00Z",
			span{"2020", "2020-01-01T00:00:00Z", "2030-01-01T00:00:00Z", 3653 * 24 * time.Hour}},
		{"3 days from the epoch", "UTC", tranche.Every(3, tranche.Day), "1970-01-05T00:00:00Z",
			span{"1970-01-04", "1970-01-04T00:00:00Z", "1970-01-07T00:00:00Z", 3 * 24 * time.Hour}},
		{"3 days before the epoch", "UTC", tranche.Every(3, tranche.Day), "1969-12-31T00:00:00Z",
			span{"1969-12-29", "1969-12-29T00:00:00Z", "1970-01-01T00:00:00Z", 3 * 24 * time.Hour}},
		{"2 weeks from 1969-12-29", "UTC", tranche.Every(2, tranche.Week), "1970-01-12T00:00:00Z",
			span{"1970-W03", "1970-01-12T00:00:00Z", "1970-01-26T00:00:00Z", 14 * 24 * time.Hour}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			at := instant(t, tt.at, tt.zone)
			p := tranche.PartitionOf(tt.g, at)
			if diff := cmp.Diff(tt.want, spanOf(p)); diff != "" {
				t.Errorf("PartitionOf(%v, %v) mismatch (-want +got):\n%s", tt.g, at, diff)
			}
			if at.Before(p.Start) || !at.Before(p.End) {
				t.Errorf("PartitionOf(%v, %v) = %v does not contain it", tt.g, at, p)
			}
			if got := p.Start.Location().String(); got != tt.zone {
				t.Errorf("PartitionOf(%v, %v).Location() = %s, want %s", tt.g, at, got, tt.zone)
			}
			back, err := tranche.ParsePartitionKey(tt.g, p.Key(), loadLocation(t, tt.zone))
			if err != nil {
				t.Fatalf("ParsePartitionKey(%v, %q): %v", tt.g, p.Key(), err)
			}
			if diff := cmp.Diff(p, back); diff != "" {
				t.Errorf("ParsePartitionKey(%v, %q) mismatch (-want +got):\n%s", tt.g, p.Key(), diff)
			}
			if diff := cmp.Diff(p, p.Next().Prev()); diff != "" {
				t.Errorf("Next().Prev() mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(p, p.Prev().Next()); diff != "" {
				t.Errorf("Prev().Next() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDayKeys lists every partition of transition days, written out.
func TestDayKeys(t *testing.T) {
	tests := []struct {
		name        string
		zone        string
		g           tranche.TimeGranularity
		first, last string // RFC 3339
		want        []string
	}{
		{"New York hourly 2024-03-10", "America/New_York", tranche.Hour, "2024-03-10T00:00:00-05:00", "2024-03-10T23:00:00-04:00", []string{
			"2024-03-10T00:00-05:00", "2024-03-10T01:00-05:00", "2024-03-10T03:00-04:00", "2024-03-10T04:00-04:00",
			"2024-03-10T05:00-04:00", "2024-03-10T06:00-04:00", "2024-03-10T07:00-04:00", "2024-03-10T08:00-04:00",
			"2024-03-10T09:00-04:00", "2024-03-10T10:00-04:00", "2024-03-10T11:00-04:00", "2024-03-10T12:00-04:00",
			"2024-03-10T13:00-04:00", "2024-03-10T14:00-04:00", "2024-03-10T15:00-04:00", "2024-03-10T16:00-04:00",
			"2024-03-10T17:00-04:00", "2024-03-10T18:00-04:00", "2024-03-10T19:00-04:00", "2024-03-10T20:00-04:00",
			"2024-03-10T21:00-04:00", "2024-03-10T22:00-04:00", "2024-03-10T23:00-04:00",
		}},
		{"New York hourly 2024-11-03", "America/New_York", tranche.Hour, "2024-11-03T00:00:00-04:00", "2024-11-03T23:00:00-05:00", []string{
			"2024-11-03T00:00-04:00", "2024-11-03T01:00-04:00", "2024-11-03T01:00-05:00", "2024-11-03T02:00-05:00",
			"2024-11-03T03:00-05:00", "2024-11-03T04:00-05:00", "2024-11-03T05:00-05:00", "2024-11-03T06:00-05:00",
			"2024-11-03T07:00-05:00", "2024-11-03T08:00-05:00", "2024-11-03T09:00-05:00", "2024-11-03T10:00-05:00",
			"2024-11-03T11:00-05:00", "2024-11-03T12:00-05:00", "2024-11-03T13:00-05:00", "2024-11-03T14:00-05:00",
			"2024-11-03T15:00-05:00", "2024-11-03T16:00-05:00", "2024-11-03T17:00-05:00", "2024-11-03T18:00-05:00",
			"2024-11-03T19:00-05:00", "2024-11-03T20:00-05:00", "2024-11-03T21:00-05:00", "2024-11-03T22:00-05:00",
			"2024-11-03T23:00-05:00",
		}},
		{"Berlin hourly around 2024-10-27 02:00", "Europe/Berlin", tranche.Hour, "2024-10-27T01:00:00+02:00", "2024-10-27T03:00:00+01:00", []string{
			"2024-10-27T01:00+02:00", "2024-10-27T02:00+02:00", "2024-10-27T02:00+01:00", "2024-10-27T03:00+01:00",
		}},
		{"Lord Howe hourly 2024-10-06 night", "Australia/Lord_Howe", tranche.Hour, "2024-10-06T00:00:00+10:30", "2024-10-06T04:00:00+11:00", []string{
			"2024-10-06T00:00+10:30", "2024-10-06T01:00+10:30", "2024-10-06T02:30+11:00", "2024-10-06T03:00+11:00", "2024-10-06T04:00+11:00",
		}},
		{"Chatham hourly 2024-04-07 night", "Pacific/Chatham", tranche.Hour, "2024-04-07T02:00:00+13:45", "2024-04-07T04:00:00+12:45", []string{
			"2024-04-07T02:00+13:45", "2024-04-07T03:00+13:45", "2024-04-07T02:45+12:45", "2024-04-07T03:00+12:45", "2024-04-07T04:00+12:45",
		}},
		{"6h New York 2026-11-01", "America/New_York", tranche.Every(6, tranche.Hour), "2026-11-01T00:00:00-04:00", "2026-11-01T23:59:59-05:00", []string{
			"2026-11-01T00:00-04:00", "2026-11-01T06:00-05:00", "2026-11-01T12:00-05:00", "2026-11-01T18:00-05:00",
		}},
		{"Apia daily 2011-12-28..31", "Pacific/Apia", tranche.Day, "2011-12-28T00:00:00-10:00", "2011-12-31T00:00:00+14:00", []string{
			"2011-12-28", "2011-12-29", "2011-12-31",
		}},
		{"Santiago hourly 2024-09-08 skipped midnight", "America/Santiago", tranche.Hour, "2024-09-07T22:00:00-04:00", "2024-09-08T02:00:00-03:00", []string{
			"2024-09-07T22:00-04:00", "2024-09-07T23:00-04:00", "2024-09-08T01:00-03:00", "2024-09-08T02:00-03:00",
		}},
		{"Sao Paulo daily 2018-11-03..05", "America/Sao_Paulo", tranche.Day, "2018-11-03T00:00:00-03:00", "2018-11-05T00:00:00-02:00", []string{
			"2018-11-03", "2018-11-04", "2018-11-05",
		}},
		{"ISO weeks across 2026/2027", "UTC", tranche.Week, "2026-12-21T00:00:00Z", "2027-01-11T00:00:00Z", []string{
			"2026-W52", "2026-W53", "2027-W01", "2027-W02",
		}},
		{"quarters", "UTC", tranche.Quarter, "2023-11-01T00:00:00Z", "2024-12-31T00:00:00Z", []string{
			"2023-Q4", "2024-Q1", "2024-Q2", "2024-Q3", "2024-Q4",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			first, last := instant(t, tt.first, tt.zone), instant(t, tt.last, tt.zone)
			w, err := tranche.NewTimePartitionWindow(tt.g, first, last)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, keysOf(w)); diff != "" {
				t.Errorf("keys of %v mismatch (-want +got):\n%s", w, diff)
			}
			if w.Len() != len(tt.want) {
				t.Errorf("%v: Len() = %d, want %d", w, w.Len(), len(tt.want))
			}
		})
	}
}

func TestPartitionsOfADay(t *testing.T) {
	tests := []struct {
		zone, day  string
		g          tranche.TimeGranularity
		wantLen    int
		wantHours  time.Duration
		wantNoWall string // a local hh:mm no partition starts at, if any
	}{
		{"America/New_York", "2024-03-10", tranche.Hour, 23, 23 * time.Hour, "02:00"},
		{"America/New_York", "2024-11-03", tranche.Hour, 25, 25 * time.Hour, ""},
		{"America/New_York", "2026-03-08", tranche.Hour, 23, 23 * time.Hour, "02:00"},
		{"America/New_York", "2026-11-01", tranche.Hour, 25, 25 * time.Hour, ""},
		{"Europe/Berlin", "2024-03-31", tranche.Hour, 23, 23 * time.Hour, "02:00"},
		{"Europe/Berlin", "2024-10-27", tranche.Hour, 25, 25 * time.Hour, ""},
		{"Australia/Lord_Howe", "2024-04-07", tranche.Hour, 24, 24*time.Hour + 30*time.Minute, ""},
		{"Australia/Lord_Howe", "2024-10-06", tranche.Hour, 24, 23*time.Hour + 30*time.Minute, "02:00"},
		{"Asia/Kathmandu", "2024-06-15", tranche.Hour, 24, 24 * time.Hour, ""},
		{"America/New_York", "2024-11-03", tranche.Every(15, tranche.Minute), 100, 25 * time.Hour, ""},
		{"America/New_York", "2024-03-10", tranche.Every(15, tranche.Minute), 92, 23 * time.Hour, "02:15"},
		{"America/Sao_Paulo", "2018-11-04", tranche.Hour, 23, 23 * time.Hour, "00:00"},
		{"America/Havana", "2024-11-03", tranche.Hour, 25, 25 * time.Hour, ""},
	}
	for _, tt := range tests {
		t.Run(tt.zone+" "+tt.day+" "+tt.g.String(), func(t *testing.T) {
			loc := loadLocation(t, tt.zone)
			day, err := tranche.ParsePartitionKey(tranche.Day, tt.day, loc)
			if err != nil {
				t.Fatal(err)
			}
			w, err := tranche.NewTimePartitionWindow(tt.g, day.Start, day.End.Add(-time.Nanosecond))
			if err != nil {
				t.Fatal(err)
			}
			if w.Len() != tt.wantLen {
				t.Errorf("%s has %d %v partitions, want %d", tt.day, w.Len(), tt.g, tt.wantLen)
			}
			if got := w.End().Sub(w.Start()); got != tt.wantHours || day.End.Sub(day.Start) != tt.wantHours {
				t.Errorf("%s lasts %v (window) and %v (day), want %v", tt.day, got, day.End.Sub(day.Start), tt.wantHours)
			}
			n := 0
			for p := range w.OldestFirst() {
				n++
				if tt.wantNoWall != "" && p.Start.Format("15:04") == tt.wantNoWall {
					t.Errorf("partition %v starts at local %s, which the clocks skip", p, tt.wantNoWall)
				}
			}
			if n != tt.wantLen {
				t.Errorf("OldestFirst yields %d partitions, want %d", n, tt.wantLen)
			}
		})
	}
}

func TestPartitionNextPrev(t *testing.T) {
	ny := "America/New_York"
	p := tranche.PartitionOf(tranche.Hour, instant(t, "2024-11-03T00:30:00-04:00", ny))
	var got []span
	for range 4 {
		got = append(got, spanOf(p))
		p = p.Next()
	}
	want := []span{
		{"2024-11-03T00:00-04:00", "2024-11-03T00:00:00-04:00", "2024-11-03T01:00:00-04:00", time.Hour},
		{"2024-11-03T01:00-04:00", "2024-11-03T01:00:00-04:00", "2024-11-03T01:00:00-05:00", time.Hour},
		{"2024-11-03T01:00-05:00", "2024-11-03T01:00:00-05:00", "2024-11-03T02:00:00-05:00", time.Hour},
		{"2024-11-03T02:00-05:00", "2024-11-03T02:00:00-05:00", "2024-11-03T03:00:00-05:00", time.Hour},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Next from 00:00 mismatch (-want +got):\n%s", diff)
	}
	// And back again.
	got = got[:0]
	for range 4 {
		p = p.Prev()
		got = append(got, spanOf(p))
	}
	slices.Reverse(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Prev from 03:00 mismatch (-want +got):\n%s", diff)
	}

	apia := tranche.PartitionOf(tranche.Day, instant(t, "2011-12-29T12:00:00-10:00", "Pacific/Apia"))
	if diff := cmp.Diff(span{"2011-12-31", "2011-12-31T00:00:00+14:00", "2012-01-01T00:00:00+14:00", 24 * time.Hour}, spanOf(apia.Next())); diff != "" {
		t.Errorf("Apia 2011-12-29 Next mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(span{"2011-12-29", "2011-12-29T00:00:00-10:00", "2011-12-31T00:00:00+14:00", 24 * time.Hour}, spanOf(apia.Next().Prev())); diff != "" {
		t.Errorf("Apia 2011-12-31 Prev mismatch (-want +got):\n%s", diff)
	}
}

func TestPartitionCompareEqualString(t *testing.T) {
	a := tranche.PartitionOf(tranche.Day, instant(t, "2024-03-10T12:00:00-04:00", "America/New_York"))
	b := tranche.PartitionOf(tranche.Day, instant(t, "2024-03-10T20:00:00-04:00", "America/New_York")) // another *Location
	if !a.Equal(b) || a.Compare(b) != 0 {
		t.Errorf("the same day from two LoadLocation calls: Equal %v, Compare %d; want true, 0", a.Equal(b), a.Compare(b))
	}
	if a.Compare(a.Next()) != -1 || a.Next().Compare(a) != 1 {
		t.Errorf("Compare does not order %v before %v", a, a.Next())
	}
	if a.Equal(tranche.PartitionOf(tranche.Day, a.Start.UTC())) {
		t.Errorf("%v equals the UTC day holding its start", a)
	}
	if a.Equal(tranche.PartitionOf(tranche.Hour, a.Start)) {
		t.Errorf("%v equals the hour at its start", a)
	}
	want := "2024-03-10 [2024-03-10T00:00:00-05:00, 2024-03-11T00:00:00-04:00)"
	if diff := cmp.Diff(want, a.String()); diff != "" {
		t.Errorf("String mismatch (-want +got):\n%s", diff)
	}
	if got := (tranche.TimePartition{}).String(); got != "zero partition" {
		t.Errorf("zero TimePartition String = %q", got)
	}
	// A batch of an unpartitioned asset holds the zero partition, whose
	// key is "", as its destination names it.
	if got := (tranche.TimePartition{}).Key(); got != "" {
		t.Errorf("zero TimePartition Key = %q, want \"\"", got)
	}
}

func TestPartitionOfZeroGranularityPanics(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "zero TimeGranularity") {
			t.Errorf("PartitionOf with the zero granularity panicked with %v", r)
		}
	}()
	tranche.PartitionOf(tranche.TimeGranularity{}, time.Now())
}

func TestParsePartitionKeyErrors(t *testing.T) {
	tests := []struct {
		name     string
		g        tranche.TimeGranularity
		key      string
		zone     string
		wantErrs []string
	}{
		// Not the start of a partition: the error names the partition holding it.
		{"half past", tranche.Hour, "2024-11-03T01:30-04:00", "America/New_York",
			[]string{`"2024-11-03T01:30-04:00"`, "not the start of a hour partition", "lies in 2024-11-03T01:00-04:00"}},
		{"inside 15m", tranche.Every(15, tranche.Minute), "2024-06-15T10:20+05:45", "Asia/Kathmandu",
			[]string{`"2024-06-15T10:20+05:45"`, "not the start of a 15m partition", "lies in 2024-06-15T10:15+05:45"}},
		{"inside the 90-minute hour", tranche.Hour, "2024-04-07T01:30+10:30", "Australia/Lord_Howe",
			[]string{"not the start", "lies in 2024-04-07T01:00+11:00"}},
		{"inside 6h", tranche.Every(6, tranche.Hour), "2026-11-01T03:00-05:00", "America/New_York",
			[]string{"not the start of a 6h partition", "lies in 2026-11-01T00:00-04:00"}},
		{"inside 3 days", tranche.Every(3, tranche.Day), "1970-01-05", "UTC",
			[]string{`"1970-01-05"`, "not the start of a 3d partition", "lies in 1970-01-04"}},
		{"inside 2 weeks", tranche.Every(2, tranche.Week), "1970-W04", "UTC",
			[]string{`"1970-W04"`, "lies in 1970-W03"}},
		{"inside 3 months", tranche.Every(3, tranche.Month), "2024-02", "UTC",
			[]string{`"2024-02"`, "not the start of a 3mo partition", "lies in 2024-01"}},
		{"inside 2 quarters", tranche.Every(2, tranche.Quarter), "2024-Q4", "UTC",
			[]string{"lies in 2024-Q3"}},
		{"inside 10 years", tranche.Every(10, tranche.Year), "2024", "UTC",
			[]string{"not the start of a 10y partition", "lies in 2020"}},
		{"the skipped hour", tranche.Hour, "2024-03-10T02:00-05:00", "America/New_York",
			[]string{"2024-03-10T03:00-04:00"}},

		// A wrong offset names the right key.
		{"summer with winter offset", tranche.Hour, "2024-07-01T12:00-05:00", "America/New_York",
			[]string{`"2024-07-01T12:00-05:00"`, "offset -05:00", "America/New_York is at -04:00", "the key is 2024-07-01T13:00-04:00"}},
		{"UTC key in Berlin", tranche.Hour, "2024-01-15T09:00Z", "Europe/Berlin",
			[]string{"offset Z", "Europe/Berlin is at +01:00", "the key is 2024-01-15T10:00+01:00"}},

		// A date that never occurs.
		{"Apia 2011-12-30", tranche.Day, "2011-12-30", "Pacific/Apia",
			[]string{`"2011-12-30"`, "never occurs in Pacific/Apia", "the next partition is 2011-12-31"}},

		// Malformed keys name the form wanted.
		{"empty", tranche.Day, "", "UTC", []string{`""`, "not a day key", "2006-01-02"}},
		{"month for a day", tranche.Day, "2024-03", "UTC", []string{`"2024-03"`, "want the form 2006-01-02"}},
		{"no zero padding", tranche.Day, "2024-3-1", "UTC", []string{"want the form 2006-01-02"}},
		{"month 13", tranche.Day, "2024-13-01", "UTC", []string{"want the form 2006-01-02"}},
		{"February 30", tranche.Day, "2024-02-30", "UTC", []string{`"2024-02-30"`}},
		{"February 29 2100", tranche.Day, "2100-02-29", "UTC", []string{`"2100-02-29"`}},
		{"February 29 1900", tranche.Month, "1900-02-29", "UTC", []string{"want the form 2006-01"}},
		{"no offset", tranche.Hour, "2024-11-03T01:00", "America/New_York", []string{"want the form 2006-01-02T15:04Z07:00"}},
		{"seconds", tranche.Hour, "2024-11-03T01:00:00-04:00", "America/New_York", []string{"want the form 2006-01-02T15:04Z07:00"}},
		{"+00:00 for Z", tranche.Hour, "2024-01-15T09:00+00:00", "UTC", []string{"want the form 2006-01-02T15:04Z07:00"}},
		{"hour 24", tranche.Hour, "2024-01-15T24:00Z", "UTC", []string{"want the form"}},
		{"day key for an hour", tranche.Hour, "2024-01-15", "UTC", []string{"not a hour key"}},
		{"week 54", tranche.Week, "2024-W54", "UTC", []string{"want the form 2006-W01"}},
		{"2025 has no W53", tranche.Week, "2025-W53", "UTC", []string{`"2025-W53"`}},
		{"week 0", tranche.Week, "2024-W00", "UTC", []string{"want the form 2006-W01"}},
		{"single digit week", tranche.Week, "2024-W1", "UTC", []string{"want the form 2006-W01"}},
		{"Q5", tranche.Quarter, "2024-Q5", "UTC", []string{"want the form 2006-Q1"}},
		{"lowercase q", tranche.Quarter, "2024-q1", "UTC", []string{"want the form 2006-Q1"}},
		{"two-digit year", tranche.Year, "24", "UTC", []string{"want the form 2006"}},
		{"year with spaces", tranche.Year, " 2024", "UTC", []string{"want the form 2006"}},
		{"month 00", tranche.Month, "2024-00", "UTC", []string{"want the form 2006-01"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := tranche.ParsePartitionKey(tt.g, tt.key, loadLocation(t, tt.zone))
			if err == nil {
				t.Fatalf("ParsePartitionKey(%v, %q, %s) = %v, want an error", tt.g, tt.key, tt.zone, p)
			}
			for _, want := range tt.wantErrs {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("ParsePartitionKey(%v, %q, %s) error %q does not contain %q", tt.g, tt.key, tt.zone, err, want)
				}
			}
		})
	}
	t.Run("nil location", func(t *testing.T) {
		if _, err := tranche.ParsePartitionKey(tranche.Day, "2024-01-01", nil); err == nil {
			t.Error("ParsePartitionKey with a nil location: no error")
		}
	})
	t.Run("zero granularity", func(t *testing.T) {
		if _, err := tranche.ParsePartitionKey(tranche.TimeGranularity{}, "2024-01-01", time.UTC); err == nil {
			t.Error("ParsePartitionKey with the zero granularity: no error")
		}
	})
}

func TestPartitionError(t *testing.T) {
	loc := loadLocation(t, "America/New_York")
	first, err := tranche.ParsePartitionKey(tranche.Day, "2024-03-10", loc)
	if err != nil {
		t.Fatal(err)
	}
	oldest := first.Prev().Prev()
	var err0 error = &tranche.PartitionError{Asset: "orders", Oldest: oldest, First: first}
	wrapped := fmt.Errorf("backfill: %w", err0)

	var pe *tranche.PartitionError
	if !errors.As(wrapped, &pe) {
		t.Fatalf("errors.As(%v) found no *PartitionError", wrapped)
	}
	if pe.Asset != "orders" || !pe.First.Equal(first) || !pe.Oldest.Equal(oldest) {
		t.Errorf("errors.As found %+v", pe)
	}
	if got, ok := errors.AsType[*tranche.PartitionError](wrapped); !ok || got != pe {
		t.Errorf("errors.AsType = %v, %v", got, ok)
	}
	want := `backfill: tranche: asset "orders": partition 2024-03-08 is before its first partition 2024-03-10; clamp the window to start at 2024-03-10T00:00:00-05:00`
	if diff := cmp.Diff(want, wrapped.Error()); diff != "" {
		t.Errorf("Error() mismatch (-want +got):\n%s", diff)
	}
}
