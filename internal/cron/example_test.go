package cron_test

import (
	"fmt"
	"time"

	"github.com/tranche-dev/tranche/internal/cron"
)

// A daily job at 02:30 in New York fires once on the day the clock skips
// from 02:00 to 03:00, at 03:00.
func Example() {
	s, err := cron.Parse("CRON_TZ=America/New_York 30 2 * * *", nil)
	if err != nil {
		panic(err)
	}
	t := time.Date(2026, 3, 6, 12, 0, 0, 0, time.UTC)
	for range 4 {
		t = s.Next(t)
		fmt.Println(t.Format(time.RFC3339))
	}
	// Output:
	// 2026-03-07T02:30:00-05:00
	// 2026-03-08T03:00:00-04:00
	// 2026-03-09T02:30:00-04:00
	// 2026-03-10T02:30:00-04:00
}

// Newest first: repeated Prev from just before the last fire time.
func ExampleSchedule_Prev() {
	s, err := cron.Parse("0 * * * *", nil)
	if err != nil {
		panic(err)
	}
	t := time.Date(2026, 1, 1, 3, 30, 0, 0, time.UTC)
	for f := s.Prev(t); f.After(time.Date(2026, 1, 1, 0, 30, 0, 0, time.UTC)); f = s.Prev(f.Add(-time.Nanosecond)) {
		fmt.Println(f.Format("15:04"))
	}
	// Output:
	// 03:00
	// 02:00
	// 01:00
}

// Weekdays at 09:00, except the holidays.
func ExampleSchedule_Exclude() {
	s, err := cron.Parse("0 9 * * MON-FRI", time.UTC)
	if err != nil {
		panic(err)
	}
	s = s.Exclude(cron.Date{Year: 2026, Month: time.December, Day: 25}, cron.Date{Year: 2027, Month: time.January, Day: 1})
	t := time.Date(2026, 12, 23, 12, 0, 0, 0, time.UTC)
	for range 4 {
		t = s.Next(t)
		fmt.Println(t.Format("Mon Jan 2"))
	}
	// Output:
	// Thu Dec 24
	// Mon Dec 28
	// Tue Dec 29
	// Wed Dec 30
}

func ExampleParse_error() {
	_, err := cron.Parse("0 0 31 4,6 *", nil)
	fmt.Println(err)
	_, err = cron.Parse("0 25 * * *", nil)
	fmt.Println(err)
	// Output:
	// cron: "0 0 31 4,6 *" never fires: April and June have no 31st
	// cron: hour field "25": 25 is out of range 0-23
}
