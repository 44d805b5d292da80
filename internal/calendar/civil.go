// Package calendar holds the date and zone arithmetic under tranche's
// partitions: proleptic Gregorian dates as day numbers, ISO weeks, and the
// stretches of time during which a location keeps one UTC offset.
//
// Everything works on Unix seconds and day numbers (days since 1970-01-01)
// so that the partition code never builds a boundary from a raw time.Date,
// whose answer for a skipped or repeated wall time is unspecified.
package calendar

// FloorDiv returns a/b rounded toward negative infinity; b must be positive.
func FloorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}

// Mod returns a modulo b in [0, b); b must be positive.
func Mod(a, b int64) int64 {
	m := a % b
	if m < 0 {
		m += b
	}
	return m
}

// Digits parses a run of ASCII digits, the fields of dates, times and
// offsets in text forms: "0042" is 42; "", a sign or any other byte is
// not a number.
func Digits(s string) (int, bool) {
	if s == "" {
		return 0, false
	}
	v := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		v = v*10 + int(s[i]-'0')
	}
	return v, true
}

// DaysFromCivil returns the day number of the proleptic Gregorian date
// y-m-d, counting from 1970-01-01 as day 0. Month and day must be in range.
func DaysFromCivil(y int64, m, d int) int64 {
	// Howard Hinnant's days_from_civil: years start in March so that the
	// leap day is the last day of the year.
	if m <= 2 {
		y--
	}
	era := FloorDiv(y, 400)
	yoe := y - era*400
	mp := int64((m + 9) % 12)
	doy := (153*mp+2)/5 + int64(d) - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}

// CivilFromDays is the inverse of DaysFromCivil.
func CivilFromDays(days int64) (y int64, m, d int) {
	z := days + 719468
	era := FloorDiv(z, 146097)
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	d = int(doy - (153*mp+2)/5 + 1)
	if mp < 10 {
		m = int(mp + 3)
	} else {
		m = int(mp - 9)
	}
	y = yoe + era*400
	if m <= 2 {
		y++
	}
	return y, m, d
}

// Weekday returns the ISO weekday of a day number: 0 for Monday to 6 for
// Sunday.
func Weekday(days int64) int64 {
	return Mod(days+3, 7) // 1970-01-01 was a Thursday
}

// ISOWeek returns the ISO 8601 week-year and week of a day number.
func ISOWeek(days int64) (year int64, week int) {
	thursday := days - Weekday(days) + 3
	year, _, _ = CivilFromDays(thursday)
	return year, int((thursday-DaysFromCivil(year, 1, 1))/7) + 1
}

// ISOWeekStart returns the day number of the Monday that starts ISO week
// (year, week). Week may exceed the year's last week; the caller checks the
// result with ISOWeek.
func ISOWeekStart(year int64, week int) int64 {
	jan4 := DaysFromCivil(year, 1, 4)
	return jan4 - Weekday(jan4) + int64(week-1)*7
}

// DaysIn returns the number of days in month m of year y.
func DaysIn(y int64, m int) int {
	switch m {
	case 2:
		if y%4 == 0 && (y%100 != 0 || y%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}
