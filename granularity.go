package tranche

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/tranche-dev/tranche/internal/cron"
	"github.com/tranche-dev/tranche/internal/partition"
)

// unit is a base calendar unit, as the partition engine numbers them.
type unit = partition.Unit

const (
	unitInvalid = partition.Invalid
	unitMinute  = partition.Minute
	unitHour    = partition.Hour
	unitDay     = partition.Day
	unitWeek    = partition.Week
	unitMonth   = partition.Month
	unitQuarter = partition.Quarter
	unitYear    = partition.Year
	unitCron    = partition.Cron // a cron schedule's slots; see ParseCron
)

var unitNames = [...]string{"", "minute", "hour", "day", "week", "month", "quarter", "year", "cron"}

// unitShort holds the short suffixes of the canonical form ("15m", "1mo").
var unitShort = [...]string{"", "m", "h", "d", "w", "mo", "q", "y", ""}

// unitParent is how many of a unit fit its parent unit, for the units whose
// multiples must divide it (minutes in an hour, hours in a day, ...); 0
// means any multiple is accepted.
var unitParent = [...]int{0, 60, 24, 0, 0, 12, 4, 0, 0}

var unitParentName = [...]string{"", "hour", "day", "", "", "year", "year", "", ""}

// maxMultiple keeps bucket arithmetic far from overflow; no calendar use
// comes near it.
const maxMultiple = 1_000_000

// TimeGranularity is the length of a partition: one of the calendar units
// [Minute], [Hour], [Day], [Week], [Month], [Quarter] and [Year], or a
// multiple of one made with [Every].
//
// A TimeGranularity is a small comparable value: equal granularities are
// equal with ==, and each has one canonical text form, its String, which
// [ParseGranularity] and UnmarshalText accept. The zero value is invalid:
// functions that compute partitions panic on it; it marshals to empty
// text, which UnmarshalText reads back as the zero value, so that a struct
// holding an unset granularity encodes and decodes without omitzero.
type TimeGranularity struct {
	unit unit
	n    int32
	cron *cron.Spec // for unitCron: shared by equal schedules
}

// The calendar units. Week is the ISO week, starting on Monday.
var (
	Minute  = TimeGranularity{unit: unitMinute, n: 1}
	Hour    = TimeGranularity{unit: unitHour, n: 1}
	Day     = TimeGranularity{unit: unitDay, n: 1}
	Week    = TimeGranularity{unit: unitWeek, n: 1}
	Month   = TimeGranularity{unit: unitMonth, n: 1}
	Quarter = TimeGranularity{unit: unitQuarter, n: 1}
	Year    = TimeGranularity{unit: unitYear, n: 1}
)

// Every returns the granularity of n consecutive units: Every(15, Minute)
// is a quarter hour, Every(6, Hour) starts at local 00, 06, 12 and 18.
// Partitions of a multiple are aligned to the calendar, not to the first
// partition a program asks for (see the package documentation for the
// rules). Every(1, u) == u.
//
// Every panics if unit is not one of the seven calendar units, if n is
// below 1, or if n does not divide the parent unit where the rules require
// it: minutes must divide 60, hours 24, months 12 and quarters 4.
// [ParseGranularity] returns the same refusals as errors.
func Every(n int, unit TimeGranularity) TimeGranularity {
	g, err := every(n, unit)
	if err != nil {
		panic("tranche: " + err.Error())
	}
	return g
}

func every(n int, base TimeGranularity) (TimeGranularity, error) {
	if base.unit == unitInvalid || base.unit == unitCron || base.n != 1 {
		return TimeGranularity{}, fmt.Errorf("Every takes a calendar unit (Minute, Hour, Day, Week, Month, Quarter or Year), not %v", base)
	}
	u := base.unit
	if n < 1 || n > maxMultiple {
		return TimeGranularity{}, fmt.Errorf("every %d %ss: the multiple must be between 1 and %d", n, unitNames[u], maxMultiple)
	}
	if p := unitParent[u]; p != 0 && p%n != 0 {
		return TimeGranularity{}, fmt.Errorf("every %d %ss: %d does not divide the %d %ss of a%s %s; use one of %s",
			n, unitNames[u], n, p, unitNames[u], article(unitParentName[u]), unitParentName[u], divisors(p))
	}
	if u == unitMinute && n == 60 {
		// 60 minutes make exactly the partitions and keys of an hour: one
		// value, one canonical form.
		return Hour, nil
	}
	return TimeGranularity{unit: u, n: int32(n)}, nil
}

func article(noun string) string {
	if noun == "hour" {
		return "n"
	}
	return ""
}

func divisors(p int) string {
	var b strings.Builder
	for d := 1; d <= p; d++ {
		if p%d == 0 {
			if b.Len() > 0 {
				b.WriteString(", ")
			}
			b.WriteString(strconv.Itoa(d))
		}
	}
	return b.String()
}

// IsValid reports whether g is a usable granularity (not the zero value).
func (g TimeGranularity) IsValid() bool { return g.unit != unitInvalid }

// String returns the canonical text form: the unit's name for a single
// unit ("day", "week"), or the multiple and the short unit ("15m", "6h",
// "3d", "2w", "3mo", "2q", "5y").
func (g TimeGranularity) String() string {
	switch {
	case g.unit == unitInvalid:
		return "invalid"
	case g.unit == unitCron:
		return "cron(" + g.cron.Text + ")"
	case g.n == 1:
		return unitNames[g.unit]
	}
	return strconv.Itoa(int(g.n)) + unitShort[g.unit]
}

// MarshalText implements [encoding.TextMarshaler] with the String form;
// the zero value marshals to empty text.
func (g TimeGranularity) MarshalText() ([]byte, error) {
	if !g.IsValid() {
		return []byte{}, nil
	}
	return []byte(g.String()), nil
}

// UnmarshalText implements [encoding.TextUnmarshaler] with
// [ParseGranularity]; empty text is the zero value, as MarshalText writes
// it.
func (g *TimeGranularity) UnmarshalText(text []byte) error {
	if len(text) == 0 {
		*g = TimeGranularity{}
		return nil
	}
	v, err := ParseGranularity(string(text))
	if err != nil {
		return err
	}
	*g = v
	return nil
}

var unitAliases = map[string]unit{
	"m": unitMinute, "min": unitMinute, "mins": unitMinute, "minute": unitMinute, "minutes": unitMinute, "minutely": unitMinute,
	"h": unitHour, "hr": unitHour, "hrs": unitHour, "hour": unitHour, "hours": unitHour, "hourly": unitHour,
	"d": unitDay, "day": unitDay, "days": unitDay, "daily": unitDay,
	"w": unitWeek, "wk": unitWeek, "week": unitWeek, "weeks": unitWeek, "weekly": unitWeek,
	"mo": unitMonth, "mon": unitMonth, "month": unitMonth, "months": unitMonth, "monthly": unitMonth,
	"q": unitQuarter, "quarter": unitQuarter, "quarters": unitQuarter, "quarterly": unitQuarter,
	"y": unitYear, "yr": unitYear, "year": unitYear, "years": unitYear, "yearly": unitYear, "annual": unitYear,
}

const acceptedGranularities = "minute, hour, day, week, month, quarter, year, a count and a unit (15m, 6h, 1d, 2w, 1mo, 1q, 1y), or a cron schedule: cron(0 2 * * 1-5)"

// ParseGranularity parses a granularity: a unit's name ("day", "hourly"),
// or a count followed by a unit, with or without a space ("15m", "6h",
// "1d", "2w", "3mo", "1q", "1y", "15 minutes"). Units are case-insensitive.
// "1d" and "day" parse to the same value, whose String is "day". A cron
// schedule is written "cron(0 2 * * 1-5)", with holidays
// "cron(0 2 * * 1-5; except 2026-12-25 2026-12-26)" (see [ParseCron]).
// A refused text is a [*ParseError] of Type "granularity" whose Reason
// says what was wrong and lists the accepted forms.
func ParseGranularity(s string) (TimeGranularity, error) {
	if inner, ok := strings.CutPrefix(strings.TrimSpace(s), "cron("); ok {
		if inner, ok = strings.CutSuffix(inner, ")"); ok {
			g, err := parseCronText(inner)
			if err != nil {
				return TimeGranularity{}, &ParseError{Type: "granularity", Text: s, Reason: reasonOf(err), Err: err}
			}
			return g, nil
		}
	}
	text := strings.ToLower(strings.TrimSpace(s))
	i := 0
	for i < len(text) && text[i] >= '0' && text[i] <= '9' {
		i++
	}
	n := 1
	if i > 0 {
		v, err := strconv.Atoi(text[:i])
		if err != nil || v > maxMultiple {
			return TimeGranularity{}, granularityError(s, fmt.Sprintf("the count must be between 1 and %d", maxMultiple))
		}
		n = v
	}
	unitText := strings.TrimSpace(text[i:])
	u, ok := unitAliases[unitText]
	if !ok {
		var what string
		switch {
		case text == "":
			what = "empty"
		case unitText == "":
			what = "a count without a unit"
		case unitText[0] == '.' || unitText[0] == ',':
			what = "the count must be a whole number"
		case text[0] == '-' || text[0] == '+':
			what = "the count must be a whole number from 1, without a sign"
		default:
			what = fmt.Sprintf("unknown unit %q", unitText)
		}
		return TimeGranularity{}, granularityError(s, what+"; accepted: "+acceptedGranularities)
	}
	g, err := every(n, TimeGranularity{unit: u, n: 1})
	if err != nil {
		return TimeGranularity{}, granularityError(s, err.Error())
	}
	return g, nil
}

func granularityError(s, reason string) error {
	return &ParseError{Type: "granularity", Text: s, Reason: reason}
}

// subday reports whether g is a multiple of Minute or Hour, whose
// boundaries are wall-clock instants rather than dates.
func (g TimeGranularity) subday() bool { return g.unit == unitMinute || g.unit == unitHour }

func (g TimeGranularity) mustBeValid(fn string) {
	if !g.IsValid() {
		panic("tranche: " + fn + " with the zero TimeGranularity")
	}
}
