package cron

import (
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"time"
)

// Field indexes, in the order of the expression.
const (
	fMinute = iota
	fHour
	fDom
	fMonth
	fDow
	nFields
)

// fieldSpec describes the text one field accepts.
type fieldSpec struct {
	name     string
	min, max int      // values the text may name (day-of-week: 0-7)
	starMax  int      // last value of * and of a/n (day-of-week: 6)
	names    []string // names by value, if the field has them
	nameKind string   // "month" or "day", for error messages
}

var monthNames = []string{1: "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"}

var dayNames = []string{"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"}

var specs = [nFields]fieldSpec{
	{name: "minute", min: 0, max: 59, starMax: 59},
	{name: "hour", min: 0, max: 23, starMax: 23},
	{name: "day-of-month", min: 1, max: 31, starMax: 31},
	{name: "month", min: 1, max: 12, starMax: 12, names: monthNames, nameKind: "month"},
	{name: "day-of-week", min: 0, max: 7, starMax: 6, names: dayNames, nameKind: "day"},
}

var macros = map[string]string{
	"@yearly":   "0 0 1 1 *",
	"@annually": "0 0 1 1 *",
	"@monthly":  "0 0 1 * *",
	"@weekly":   "0 0 * * 0",
	"@daily":    "0 0 * * *",
	"@midnight": "0 0 * * *",
	"@hourly":   "0 * * * *",
}

// Parse parses a cron expression: five fields (minute, hour, day of month,
// month, day of week) or a macro such as @daily, optionally preceded by
// CRON_TZ=Zone or TZ=Zone. loc is the zone used when the expression has no
// such prefix; nil means UTC. See the package documentation for the syntax
// and for the schedule's behaviour across daylight-saving transitions.
//
// Parse refuses an expression that can never fire, such as "0 0 30 2 *".
func Parse(expr string, loc *time.Location) (*Schedule, error) {
	text := strings.TrimSpace(expr)
	if text == "" {
		return nil, errors.New("cron: empty expression")
	}
	if loc == nil {
		loc = time.UTC
	}
	for _, prefix := range []string{"CRON_TZ=", "TZ="} {
		if !strings.HasPrefix(text, prefix) {
			continue
		}
		rest := text[len(prefix):]
		name, after := rest, ""
		if i := strings.IndexAny(rest, " \t\n\v\f\r"); i >= 0 {
			name, after = rest[:i], rest[i:]
		}
		if name == "" {
			return nil, fmt.Errorf("cron: %s prefix without a zone in %q", prefix, expr)
		}
		l, err := time.LoadLocation(name)
		if err != nil {
			return nil, fmt.Errorf("cron: unknown time zone %q in %q", name, expr)
		}
		loc = l
		text = strings.TrimSpace(after)
		if text == "" {
			return nil, fmt.Errorf("cron: no schedule after %s%s in %q", prefix, name, expr)
		}
		break
	}
	if strings.HasPrefix(text, "@") {
		m, ok := macros[strings.ToLower(text)]
		if !ok {
			return nil, fmt.Errorf("cron: unknown macro %q (want @yearly, @annually, @monthly, @weekly, @daily, @midnight or @hourly)", text)
		}
		text = m
	}
	fields := strings.Fields(text)
	if len(fields) != nFields {
		return nil, fmt.Errorf("cron: %q has %d fields, want 5 (minute hour day-of-month month day-of-week)", expr, len(fields))
	}
	s := &Schedule{loc: loc}
	var sets [nFields]uint64
	for i, f := range fields {
		set, star, err := parseField(f, &specs[i])
		if err != nil {
			return nil, fmt.Errorf("cron: %s field %q: %v", specs[i].name, f, err)
		}
		sets[i] = set
		if star {
			s.star |= 1 << i
		}
	}
	s.minute = sets[fMinute]
	s.hour = uint32(sets[fHour])
	s.dom = uint32(sets[fDom])
	s.month = uint16(sets[fMonth])
	s.dow = uint8(sets[fDow])
	if err := s.checkFires(); err != nil {
		return nil, fmt.Errorf("cron: %q never fires: %v", expr, err)
	}
	s.init()
	return s, nil
}

// parseField parses one field into a bit set of its values. star reports
// whether the field is a wildcard: "*" or "*/n".
func parseField(text string, f *fieldSpec) (set uint64, star bool, err error) {
	elems := strings.Split(text, ",")
	for _, e := range elems {
		b, err := parseElem(e, f)
		if err != nil {
			return 0, false, err
		}
		set |= b
	}
	if f.max == 7 && set&(1<<7) != 0 { // day-of-week 7 is Sunday
		set = set&^(1<<7) | 1
	}
	star = len(elems) == 1 && strings.HasPrefix(text, "*")
	return set, star, nil
}

// parseElem parses one element of a list: *, a value, a range a-b, each
// optionally followed by /step.
func parseElem(e string, f *fieldSpec) (uint64, error) {
	if e == "" {
		return 0, errors.New("empty list element")
	}
	rng, stepText, hasStep := strings.Cut(e, "/")
	step := 1
	if hasStep {
		if strings.Contains(stepText, "/") {
			return 0, fmt.Errorf("%q has more than one step", e)
		}
		size := f.starMax - f.min + 1
		if !isDigits(stepText) {
			return 0, fmt.Errorf("step %q is not a number", stepText)
		}
		n, err := strconv.ParseUint(stepText, 10, 16)
		if err != nil || n < 1 || int(n) > size {
			return 0, fmt.Errorf("step %s is out of range 1-%d", stepText, size)
		}
		step = int(n)
	}
	var lo, hi int
	switch {
	case rng == "" && hasStep:
		return 0, fmt.Errorf("%q has nothing before its step", e)
	case rng == "*":
		lo, hi = f.min, f.starMax
	case strings.Contains(rng, "*"):
		return 0, fmt.Errorf("%q: * must stand alone or before a step, as in */5", e)
	default:
		loText, hiText, isRange := strings.Cut(rng, "-")
		if isRange && (loText == "" || hiText == "") {
			return 0, fmt.Errorf("range %q is missing a bound", rng)
		}
		var err error
		if lo, err = parseValue(loText, f); err != nil {
			return 0, err
		}
		switch {
		case isRange:
			if strings.Contains(hiText, "-") {
				return 0, fmt.Errorf("%q is not a range a-b", e)
			}
			if hi, err = parseValue(hiText, f); err != nil {
				return 0, err
			}
			if lo > hi {
				return 0, fmt.Errorf("range %q starts after it ends", rng)
			}
		case hasStep:
			hi = max(lo, f.starMax) // a/n means a-max/n
		default:
			hi = lo
		}
	}
	var set uint64
	for v := lo; v <= hi; v += step {
		set |= 1 << v
	}
	return set, nil
}

// parseValue parses a number or, in fields that have them, a name.
func parseValue(s string, f *fieldSpec) (int, error) {
	if !isDigits(s) {
		if f.names != nil {
			for v, name := range f.names {
				if name != "" && strings.EqualFold(s, name) {
					return v, nil
				}
			}
			return 0, fmt.Errorf("%q is not a number or %s name", s, f.nameKind)
		}
		return 0, fmt.Errorf("%q is not a number", s)
	}
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil || int(n) < f.min || int(n) > f.max {
		return 0, fmt.Errorf("%s is out of range %d-%d", s, f.min, f.max)
	}
	return int(n), nil
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// maxDays is the longest length of each month, February counting its leap
// day.
var maxDays = [13]int{1: 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}

var fullMonthNames = [13]string{1: "January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"}

// checkFires reports why the schedule can never fire, if it cannot. Every
// month holds every weekday, and every date exists on every weekday in
// some year of the 400-year Gregorian cycle, so only a day of month that
// none of the months has can stop a schedule.
func (s *Schedule) checkFires() error {
	if s.star&(1<<fDom) != 0 || s.star&(1<<fDow) == 0 {
		// A wildcard day of month includes the 1st; a restricted day of
		// week is combined by OR and every month has every weekday.
		return nil
	}
	var months []string
	for m := 1; m <= 12; m++ {
		if s.month&(1<<m) == 0 {
			continue
		}
		if s.dom&(uint32(1)<<(maxDays[m]+1)-1) != 0 {
			return nil
		}
		months = append(months, fullMonthNames[m])
	}
	var days []string
	for d := 30; d <= 31; d++ {
		if s.dom&(1<<d) != 0 {
			days = append(days, ordinal(d))
		}
	}
	verb := "has"
	if len(months) > 1 {
		verb = "have"
	}
	return fmt.Errorf("%s %s no %s", joinAnd(months, "and"), verb, joinAnd(days, "or"))
}

func ordinal(d int) string {
	switch {
	case d%10 == 1 && d != 11:
		return strconv.Itoa(d) + "st"
	case d%10 == 2 && d != 12:
		return strconv.Itoa(d) + "nd"
	case d%10 == 3 && d != 13:
		return strconv.Itoa(d) + "rd"
	}
	return strconv.Itoa(d) + "th"
}

// joinAnd joins words as "a, b and c".
func joinAnd(words []string, conj string) string {
	switch len(words) {
	case 0:
		return ""
	case 1:
		return words[0]
	}
	return strings.Join(words[:len(words)-1], ", ") + " " + conj + " " + words[len(words)-1]
}

// String returns the schedule in canonical form: a CRON_TZ= prefix naming
// its location and five numeric fields, wildcards kept as * or */n and
// other fields written as ascending values and ranges ("1-5,10"). Parsing
// the result gives an equal schedule, for locations that
// [time.LoadLocation] finds by name. Excluded dates are not part of the
// text.
func (s *Schedule) String() string {
	var b strings.Builder
	b.WriteString("CRON_TZ=")
	b.WriteString(s.Location().String())
	sets := [nFields]uint64{s.minute, uint64(s.hour), uint64(s.dom), uint64(s.month), uint64(s.dow)}
	for i, set := range sets {
		b.WriteByte(' ')
		f := &specs[i]
		if s.star&(1<<i) != 0 {
			b.WriteByte('*')
			if step := starStep(set, f); step != 1 {
				b.WriteByte('/')
				b.WriteString(strconv.Itoa(step))
			}
			continue
		}
		writeList(&b, set)
	}
	return b.String()
}

// starStep returns the n of the */n that produced set.
func starStep(set uint64, f *fieldSpec) int {
	first := bits.TrailingZeros64(set)
	rest := set &^ (1 << first)
	if rest == 0 {
		return f.starMax - f.min + 1
	}
	return bits.TrailingZeros64(rest) - first
}

// writeList writes set as ascending values, runs of two or more as ranges.
func writeList(b *strings.Builder, set uint64) {
	sep := false
	for set != 0 {
		lo := bits.TrailingZeros64(set)
		hi := lo + bits.TrailingZeros64(^(set >> lo)) - 1
		set &^= (uint64(2)<<hi - 1) // clear bits lo..hi (and below)
		if sep {
			b.WriteByte(',')
		}
		sep = true
		b.WriteString(strconv.Itoa(lo))
		if hi > lo {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(hi))
		}
	}
}
