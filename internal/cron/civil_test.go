package cron

import (
	"testing"

	"github.com/tranche-dev/tranche/internal/calendar"
	"pgregory.net/rapid"
)

// TestCivil checks the fast civil against calendar.CivilFromDays around
// its bounds, around 1970 and at random.
func TestCivil(t *testing.T) {
	check := func(t interface{ Fatalf(string, ...any) }, day int64) {
		y, m, d := civil(day)
		wy, wm, wd := calendar.CivilFromDays(day)
		if y != wy || m != wm || d != wd {
			t.Fatalf("civil(%d) = %d-%d-%d, want %d-%d-%d", day, y, m, d, wy, wm, wd)
		}
	}
	for _, center := range []int64{civilMin, civilMax, 0, -719468, 1 << 31, -1 << 31} {
		for day := center - 1000; day <= center+1000; day++ {
			check(t, day)
		}
	}
	for day := int64(-70 * 366); day < 130*366; day++ { // 1900 to 2100
		check(t, day)
	}
	rapid.Check(t, func(t *rapid.T) {
		check(t, rapid.Int64Range(-1<<45, 1<<45).Draw(t, "day"))
	})
}
