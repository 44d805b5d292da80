// Quickstart shows tranche's partitions, windows and lookback, including
// what daylight saving time does to them.
package main

import (
	"fmt"
	"log"
	"time"

	"github.com/tranche-dev/tranche"
)

func main() {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		log.Fatal(err)
	}

	// A window of days, newest first, as a backfill walks it.
	w, err := tranche.NewTimePartitionWindow(tranche.Day,
		time.Date(2026, 10, 30, 0, 0, 0, 0, ny), time.Date(2026, 11, 2, 0, 0, 0, 0, ny))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("window %s holds %d days, newest first:\n", w, w.Len())
	for p := range w.All() {
		fmt.Printf("  %s  %v long\n", p.Key(), p.Duration())
	}

	// The fall-back night has two 01:00 hours, told apart by their offsets.
	night, err := tranche.NewTimePartitionWindow(tranche.Hour,
		time.Date(2026, 11, 1, 0, 0, 0, 0, ny), time.Date(2026, 11, 1, 2, 30, 0, 0, ny))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("hours of the fall-back night, oldest first:")
	for p := range night.OldestFirst() {
		fmt.Println("  " + p.Key())
	}

	// The seven days ending yesterday, as a daily job re-materializes them,
	// clamped to the first day the data exists.
	now := time.Date(2026, 8, 18, 9, 30, 0, 0, ny)
	week, err := tranche.Lookback(now, 7, 1, tranche.Day)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("lookback 7 days, offset 1, at %s: %s\n", now.Format(time.RFC3339), week)
	if clamped, ok := week.ClampStart(time.Date(2026, 8, 15, 0, 0, 0, 0, ny)); ok {
		fmt.Printf("clamped to data from 2026-08-15: %s (%d days)\n", clamped, clamped.Len())
	}

	// Chunks of at most 10 days, newest first, for a chunked backfill.
	year, err := tranche.NewTimePartitionWindow(tranche.Day,
		time.Date(2026, 1, 1, 0, 0, 0, 0, ny), time.Date(2026, 1, 31, 0, 0, 0, 0, ny))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("January in chunks of 10 days:")
	for chunk := range year.Chunks(10) {
		fmt.Printf("  %s (%d days)\n", chunk, chunk.Len())
	}
}
