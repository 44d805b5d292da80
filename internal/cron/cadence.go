package cron

import (
	"math/bits"
	"strings"
)

// Cadence is how often a schedule fires on the days it fires.
type Cadence int

const (
	// Irregular is every schedule that is neither Daily nor Hourly.
	Irregular Cadence = iota
	// Daily schedules fire once on each day they fire: one minute and
	// one hour ("30 2 * * 1-5").
	Daily
	// Hourly schedules fire once in every hour of each day they fire:
	// one minute and an hour field of * ("5 * * * *").
	Hourly
)

// String returns "daily", "hourly" or "irregular".
func (c Cadence) String() string {
	switch c {
	case Daily:
		return "daily"
	case Hourly:
		return "hourly"
	}
	return "irregular"
}

// Cadence returns how s fires on its days, and the day fields of its
// canonical form ("* * 1-5": day of month, month, day of week), which
// with the cadence, the location and the excluded dates say on which days
// (and, hourly, in which hours) s fires, whatever its minute and, daily,
// its hour. Two schedules with the same cadence, days, location and
// excluded dates fire once in the same days (or hours): "0 2 * * *" and
// "0 1 * * *" do, and so do "5 * * * *" and "50 * * * *".
//
// An hour field that lists every hour without * ("0-23") is Irregular:
// such a schedule fires once per wall time across daylight saving time,
// where "*" fires at every real hour.
func (s *Schedule) Cadence() (Cadence, string) {
	fields := strings.Fields(s.String())
	days := strings.Join(fields[len(fields)-3:], " ")
	if bits.OnesCount64(s.minute) != 1 {
		return Irregular, days
	}
	switch {
	case bits.OnesCount32(s.hour) == 1:
		return Daily, days
	case s.star&(1<<fHour) != 0 && bits.OnesCount32(s.hour) == 24:
		return Hourly, days
	}
	return Irregular, days
}
