package tranche_test

import (
	"fmt"
	"time"

	"github.com/tranche-dev/tranche"
)

// A job that runs at 02:00 on weekdays loads the slot its fire time
// closes; a holiday's load folds into the next weekday's slot.
func ExampleParseCron() {
	ny, _ := time.LoadLocation("America/New_York")
	g, err := tranche.ParseCron("0 2 * * MON-FRI", "2026-12-25")
	if err != nil {
		panic(err)
	}
	w, err := tranche.SlotWindow(g, "2026-12-23", "2026-12-29", time.Date(2027, 1, 4, 9, 0, 0, 0, ny))
	if err != nil {
		panic(err)
	}
	for p := range w.OldestFirst() {
		fmt.Printf("%s loads [%s, %s)\n", p.Key(), p.Start.Format("Mon Jan 2 15:04"), p.End.Format("Mon Jan 2 15:04"))
	}
	// Output:
	// 2026-12-23T02:00:00-05:00 loads [Tue Dec 22 02:00, Wed Dec 23 02:00)
	// 2026-12-24T02:00:00-05:00 loads [Wed Dec 23 02:00, Thu Dec 24 02:00)
	// 2026-12-28T02:00:00-05:00 loads [Thu Dec 24 02:00, Mon Dec 28 02:00)
	// 2026-12-29T02:00:00-05:00 loads [Mon Dec 28 02:00, Tue Dec 29 02:00)
}

// A fire time names its slot by its instant: whatever offset spells it,
// the slot of a CRON_TZ schedule is in the schedule's zone, the slot
// SlotWindow holds, so a backfill of it and one of a range share one DAG
// identity.
func ExampleSlotAt() {
	g, err := tranche.ParseCron("CRON_TZ=Asia/Tokyo 0 2 * * *")
	if err != nil {
		panic(err)
	}
	for _, s := range []string{"2026-10-03T02:00:00+09:00", "2026-10-02T17:00:00Z", "2026-10-02T12:00:00-05:00"} {
		fire, err := time.Parse(time.RFC3339, s)
		if err != nil {
			panic(err)
		}
		p, err := tranche.SlotAt(g, fire)
		if err != nil {
			panic(err)
		}
		fmt.Printf("%s: %s in %v\n", s, p.Key(), p.Start.Location())
	}
	// Output:
	// 2026-10-03T02:00:00+09:00: 2026-10-03T02:00:00+09:00 in Asia/Tokyo
	// 2026-10-02T17:00:00Z: 2026-10-03T02:00:00+09:00 in Asia/Tokyo
	// 2026-10-02T12:00:00-05:00: 2026-10-03T02:00:00+09:00 in Asia/Tokyo
}
