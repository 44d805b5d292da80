package tranche_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/tranche-dev/tranche"
)

// at parses an RFC 3339 instant and moves it to a zone, the way to name an
// instant on a DST day without relying on time.Date's choice of offset.
func at(rfc3339, zone string) time.Time {
	loc, err := time.LoadLocation(zone)
	if err != nil {
		panic(err)
	}
	t, err := time.Parse(time.RFC3339, rfc3339)
	if err != nil {
		panic(err)
	}
	return t.In(loc)
}

func ExamplePartitionOf() {
	// The day New York springs forward lasts 23 hours.
	p := tranche.PartitionOf(tranche.Day, at("2024-03-10T12:00:00-04:00", "America/New_York"))
	fmt.Println(p)
	fmt.Println(p.End.Sub(p.Start))

	// The partition follows the location of the instant.
	fmt.Println(tranche.PartitionOf(tranche.Day, at("2024-03-10T12:00:00-04:00", "Asia/Kathmandu")))
	// Output:
	// 2024-03-10 [2024-03-10T00:00:00-05:00, 2024-03-11T00:00:00-04:00)
	// 23h0m0s
	// 2024-03-10 [2024-03-10T00:00:00+05:45, 2024-03-11T00:00:00+05:45)
}

func ExampleTimePartition_Key() {
	// The night New York falls back has two hours at 01:00; their keys
	// carry the offset.
	p := tranche.PartitionOf(tranche.Hour, at("2024-11-03T01:30:00-04:00", "America/New_York"))
	fmt.Println(p.Key())
	fmt.Println(p.Next().Key())

	t := at("2027-01-01T12:00:00Z", "UTC")
	for _, g := range []tranche.TimeGranularity{tranche.Minute, tranche.Day, tranche.Week, tranche.Month, tranche.Quarter, tranche.Year} {
		fmt.Printf("%-7v %s\n", g, tranche.PartitionOf(g, t).Key())
	}
	// Output:
	// 2024-11-03T01:00-04:00
	// 2024-11-03T01:00-05:00
	// minute  2027-01-01T12:00Z
	// day     2027-01-01
	// week    2026-W53
	// month   2027-01
	// quarter 2027-Q1
	// year    2027
}

func ExampleParsePartitionKey() {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		panic(err)
	}
	p, err := tranche.ParsePartitionKey(tranche.Hour, "2024-11-03T01:00-05:00", ny)
	if err != nil {
		panic(err)
	}
	fmt.Println(p)

	// A key must name the start of a partition.
	_, err = tranche.ParsePartitionKey(tranche.Hour, "2024-11-03T01:30-04:00", ny)
	fmt.Println(err)

	// Pacific/Apia skipped 2011-12-30: that day has no partition.
	apia, err := time.LoadLocation("Pacific/Apia")
	if err != nil {
		panic(err)
	}
	_, err = tranche.ParsePartitionKey(tranche.Day, "2011-12-30", apia)
	fmt.Println(err)
	// Output:
	// 2024-11-03T01:00-05:00 [2024-11-03T01:00:00-05:00, 2024-11-03T02:00:00-05:00)
	// tranche: partition key "2024-11-03T01:30-04:00": not the start of a hour partition; it lies in 2024-11-03T01:00-04:00
	// tranche: partition key "2011-12-30": the date never occurs in Pacific/Apia: the clocks skip it; the next partition is 2011-12-31
}

func ExampleTimePartitionWindow_All() {
	w, err := tranche.NewTimePartitionWindow(tranche.Day,
		at("2024-03-09T00:00:00-05:00", "America/New_York"),
		at("2024-03-11T00:00:00-04:00", "America/New_York"))
	if err != nil {
		panic(err)
	}
	// Newest first: an interrupted backfill leaves the recent days done.
	for p := range w.All() {
		fmt.Println(p.Key(), p.End.Sub(p.Start))
	}
	// Output:
	// 2024-03-11 24h0m0s
	// 2024-03-10 23h0m0s
	// 2024-03-09 24h0m0s
}

func ExampleTimePartitionWindow_OldestFirst() {
	// The hours around New York's spring gap: no partition at 02:00.
	w, err := tranche.NewTimePartitionWindow(tranche.Hour,
		at("2024-03-10T00:00:00-05:00", "America/New_York"),
		at("2024-03-10T04:00:00-04:00", "America/New_York"))
	if err != nil {
		panic(err)
	}
	for p := range w.OldestFirst() {
		fmt.Println(p.Key())
	}
	fmt.Println(w.Len(), "partitions")
	// Output:
	// 2024-03-10T00:00-05:00
	// 2024-03-10T01:00-05:00
	// 2024-03-10T03:00-04:00
	// 2024-03-10T04:00-04:00
	// 4 partitions
}

func ExampleTimePartitionWindow_Chunks() {
	w, err := tranche.NewTimePartitionWindow(tranche.Day, at("2024-01-01T00:00:00Z", "UTC"), at("2024-01-10T00:00:00Z", "UTC"))
	if err != nil {
		panic(err)
	}
	// At most 4 days per chunk, newest first; the oldest chunk holds the rest.
	for c := range w.Chunks(4) {
		fmt.Println(c, c.Len())
	}
	// Output:
	// day 2024-01-07..2024-01-10 UTC 4
	// day 2024-01-03..2024-01-06 UTC 4
	// day 2024-01-01..2024-01-02 UTC 2
}

func ExampleLookback() {
	now := at("2026-08-18T09:00:00-04:00", "America/New_York")

	// The seven days ending yesterday.
	w, err := tranche.Lookback(now, 7, 1, tranche.Day)
	if err != nil {
		panic(err)
	}
	fmt.Println(w)
	fmt.Println(w.Start(), "to", w.End())

	// Today, still incomplete.
	today, err := tranche.Lookback(now, 1, 0, tranche.Day)
	if err != nil {
		panic(err)
	}
	fmt.Println(today)
	// Output:
	// day 2026-08-11..2026-08-17 America/New_York
	// 2026-08-11 00:00:00 -0400 EDT to 2026-08-18 00:00:00 -0400 EDT
	// day 2026-08-18..2026-08-18 America/New_York
}

func ExampleTimePartitionWindow_ClampStart() {
	now := at("2026-08-18T09:00:00-04:00", "America/New_York")
	w, err := tranche.Lookback(now, 7, 1, tranche.Day)
	if err != nil {
		panic(err)
	}
	// The asset's data begins on 2026-08-15 at noon: its day is kept.
	clamped, ok := w.ClampStart(at("2026-08-15T12:00:00-04:00", "America/New_York"))
	fmt.Println(clamped, clamped.Len(), ok)

	// Data beginning today leaves nothing of a window ending yesterday.
	_, ok = w.ClampStart(at("2026-08-18T00:00:00-04:00", "America/New_York"))
	fmt.Println(ok)
	// Output:
	// day 2026-08-15..2026-08-17 America/New_York 3 true
	// false
}

func ExampleEvery() {
	sixHours := tranche.Every(6, tranche.Hour)
	fmt.Println(sixHours)

	// Aligned to local 00, 06, 12 and 18; the first lasts 7 hours on the
	// night New York falls back.
	day := tranche.PartitionOf(tranche.Day, at("2026-11-01T12:00:00-05:00", "America/New_York"))
	w, err := tranche.WindowBetween(sixHours, day.Start, day.End)
	if err != nil {
		panic(err)
	}
	for p := range w.OldestFirst() {
		fmt.Println(p.Key(), p.End.Sub(p.Start))
	}
	// Output:
	// 6h
	// 2026-11-01T00:00-04:00 7h0m0s
	// 2026-11-01T06:00-05:00 6h0m0s
	// 2026-11-01T12:00-05:00 6h0m0s
	// 2026-11-01T18:00-05:00 6h0m0s
}

func ExampleParseGranularity() {
	for _, s := range []string{"15m", "1d", "daily", "2w", "3mo"} {
		g, err := tranche.ParseGranularity(s)
		if err != nil {
			panic(err)
		}
		fmt.Printf("%q -> %v (day: %v)\n", s, g, g == tranche.Day)
	}
	_, err := tranche.ParseGranularity("7m")
	fmt.Println(err)
	// Output:
	// "15m" -> 15m (day: false)
	// "1d" -> day (day: true)
	// "daily" -> day (day: true)
	// "2w" -> 2w (day: false)
	// "3mo" -> 3mo (day: false)
	// tranche: granularity "7m": every 7 minutes: 7 does not divide the 60 minutes of an hour; use one of 1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30, 60
}

func ExampleWindowBetween() {
	// Half-open bounds, as a scheduler passes them; the same instant in
	// any zone is the same bound.
	from := at("2024-03-01T00:00:00-05:00", "America/New_York")
	to := at("2024-04-01T04:00:00Z", "UTC")
	w, err := tranche.WindowBetween(tranche.Day, from, to)
	if err != nil {
		panic(err)
	}
	fmt.Println(w, w.Len())

	// A bound off a partition boundary names the nearest ones, which
	// PartitionOf gives too.
	to = at("2024-03-10T12:00:00-04:00", "America/New_York")
	_, err = tranche.WindowBetween(tranche.Day, from, to)
	fmt.Println(err)
	p := tranche.PartitionOf(tranche.Day, to)
	fmt.Println(p.Start, p.End)
	// Output:
	// day 2024-03-01..2024-03-31 America/New_York 31
	// tranche: to 2024-03-10T12:00:00-04:00 is not a day boundary in America/New_York; the nearest are 2024-03-10T00:00:00-05:00 and 2024-03-11T00:00:00-04:00
	// 2024-03-10 00:00:00 -0500 EST 2024-03-11 00:00:00 -0400 EDT
}

func ExampleParseBound() {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		panic(err)
	}
	t, err := tranche.ParseBound("2026-01-01T00:00:00Z", nil)
	fmt.Println(t, err)
	t, err = tranche.ParseBound("2026-01-01", berlin)
	fmt.Println(t, err)
	// An offset is kept as a fixed zone, the same on every host.
	t, err = tranche.ParseBound("2026-01-01T00:00:00+01:00", nil)
	fmt.Println(t, err)

	// Without an offset or a zone, the bound is ambiguous by up to a day.
	_, err = tranche.ParseBound("2026-01-01", nil)
	fmt.Println(err)
	// Wall times the clocks skip or repeat are refused too.
	_, err = tranche.ParseBound("2024-10-27T02:30", berlin)
	fmt.Println(err)
	// A refusal is a *ParseError saying what was wrong.
	_, err = tranche.ParseBound("2026-13-01", berlin)
	if pe, ok := errors.AsType[*tranche.ParseError](err); ok {
		fmt.Printf("%s %q: %s\n", pe.Type, pe.Text, pe.Reason)
	}
	// Output:
	// 2026-01-01 00:00:00 +0000 UTC <nil>
	// 2026-01-01 00:00:00 +0100 CET <nil>
	// 2026-01-01 00:00:00 +0100 +01:00 <nil>
	// tranche: bound "2026-01-01": no UTC offset and no zone was given; write it with an offset, as in 2026-01-01T00:00:00Z, or name its zone
	// tranche: bound "2024-10-27T02:30": it occurs twice in Europe/Berlin, at 2024-10-27T02:30:00+02:00 and 2024-10-27T02:30:00+01:00; write it with the offset you mean
	// bound "2026-13-01": month 13 is out of range (01 to 12)
}
