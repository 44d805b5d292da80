package cron

import (
	"testing"
	"time"

	"pgregory.net/rapid"
)

// TestNextPrevOracle checks Next and Prev against the brute-force oracle
// on random expressions, zones, excluded dates and instants, half of them
// within two days of a change of offset.
func TestNextPrevOracle(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		loc := zoneGen.Draw(t, "zone")
		checkOracle(t, loc, instantGen(loc).Draw(t, "at"))
	})
}

// oddZones have had unusual changes of offset since 1975: a skipped day
// (Apia, 2011), quarter-hour offsets (Kathmandu, Chatham), DST suspended
// for Ramadan (Casablanca), a two-hour DST (Troll), midnight transitions
// (Havana, Beirut), standard time changes (Moscow, Caracas, Pyongyang).
var oddZones = []*time.Location{
	mustLoad("Pacific/Apia"), mustLoad("Pacific/Kiritimati"), mustLoad("Asia/Kathmandu"),
	mustLoad("Pacific/Chatham"), mustLoad("America/St_Johns"), mustLoad("Africa/Casablanca"),
	mustLoad("Antarctica/Troll"), mustLoad("America/Havana"), mustLoad("Asia/Beirut"),
	mustLoad("Europe/Moscow"), mustLoad("America/Caracas"), mustLoad("Asia/Pyongyang"),
	mustLoad("Asia/Tehran"), mustLoad("Australia/Adelaide"), santiago,
}

// TestNextPrevOracleOddZones is TestNextPrevOracle in oddZones from 1975
// to 2100, where their offsets are whole minutes.
func TestNextPrevOracleOddZones(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		loc := rapid.SampledFrom(oddZones).Draw(t, "zone")
		checkOracle(t, loc, instantGenYears(loc, 1975, 2100).Draw(t, "at"))
	})
}

func checkOracle(t *rapid.T, loc *time.Location, at time.Time) {
	expr := exprGen.Draw(t, "expr")
	s := mustParse(t, expr, loc)
	var excluded []Date
	for i := range rapid.IntRange(0, 3).Draw(t, "excluded") {
		d := at.AddDate(0, 0, rapid.IntRange(-3, 3).Draw(t, "excludedDay"+string(rune('0'+i))))
		excluded = append(excluded, Date{d.Year(), d.Month(), d.Day()})
	}
	s = s.Exclude(excluded...)
	from, to := at.Unix()-3*86400, at.Unix()+3*86400
	fires := newOracle(s, excluded...).fires(t, from, to)

	next := s.Next(at)
	if i := firstAfter(fires, at.Unix()); i < len(fires) {
		if next.Unix() != fires[i] {
			t.Fatalf("%q in %v: Next(%v) = %v, want %s (excluded %v)", expr, loc, at, next, fmtUnix(fires[i], loc), excluded)
		}
	} else if next.Unix() < to {
		t.Fatalf("%q in %v: Next(%v) = %v, want none before %s (excluded %v)", expr, loc, at, next, fmtUnix(to, loc), excluded)
	}

	prev := s.Prev(at)
	if i := firstAfter(fires, at.Unix()) - 1; i >= 0 {
		if prev.Unix() != fires[i] {
			t.Fatalf("%q in %v: Prev(%v) = %v, want %s (excluded %v)", expr, loc, at, prev, fmtUnix(fires[i], loc), excluded)
		}
	} else if prev.Unix() >= from {
		t.Fatalf("%q in %v: Prev(%v) = %v, want none from %s on (excluded %v)", expr, loc, at, prev, fmtUnix(from, loc), excluded)
	}
	if !next.IsZero() && next.Location() != loc || !prev.IsZero() && prev.Location() != loc {
		t.Fatalf("%q: Next and Prev return times in %v and %v, want %v", expr, next.Location(), prev.Location(), loc)
	}
}

// firstAfter returns the index of the first fire time after u.
func firstAfter(fires []int64, u int64) int {
	for i, f := range fires {
		if f > u {
			return i
		}
	}
	return len(fires)
}
