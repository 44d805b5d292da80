package tranche

import (
	"fmt"
	"time"

	"github.com/tranche-dev/tranche/internal/calendar"
	"github.com/tranche-dev/tranche/internal/partition"
)

// Keys: TimePartition.Key formats them and ParsePartitionKey parses them
// back, exactly.

// Key returns the partition's stable name, formatted from its start in its
// location: "2006-01-02T15:04Z07:00" for Minute and Hour multiples (the
// offset tells apart the two 01:00 hours of a fall-back night),
// "2006-01-02" for days, "2006-W01" (the ISO week) for weeks, "2006-01"
// for months, "2006-Q1" for quarters and "2006" for years. The slot of a
// cron schedule is named by the fire time that ends it, in RFC 3339
// ("2026-01-05T02:00:00-05:00").
// [ParsePartitionKey] inverts it. The zero TimePartition, which a
// [Batch] of an unpartitioned asset holds, has the key "".
func (p TimePartition) Key() string {
	if !p.Granularity.IsValid() {
		return ""
	}
	var buf [32]byte
	return string(appendKey(buf[:0], p.Granularity, p.Start, p.End))
}

func appendKey(b []byte, g TimeGranularity, start, end time.Time) []byte {
	if g.unit == unitCron {
		// A slot is named by the fire time that closes it.
		return end.AppendFormat(b, time.RFC3339)
	}
	t := start
	_, off := t.Zone()
	day := calendar.FloorDiv(t.Unix()+int64(off), partition.SecondsPerDay)
	y, m, d := calendar.CivilFromDays(day)
	switch g.unit {
	case unitMinute, unitHour:
		b = appendDate(b, y, m, d)
		sec := calendar.Mod(t.Unix()+int64(off), partition.SecondsPerDay)
		b = append(b, 'T')
		b = append2(b, int(sec/3600))
		b = append(b, ':')
		b = append2(b, int(sec/60%60))
		return appendOffset(b, off)
	case unitDay:
		return appendDate(b, y, m, d)
	case unitWeek:
		wy, w := calendar.ISOWeek(day)
		b = appendYear(b, wy)
		b = append(b, '-', 'W')
		return append2(b, w)
	case unitMonth:
		b = appendYear(b, y)
		b = append(b, '-')
		return append2(b, m)
	case unitQuarter:
		b = appendYear(b, y)
		return append(b, '-', 'Q', byte('1'+(m-1)/3))
	case unitYear:
		return appendYear(b, y)
	}
	return append(b, "invalid"...)
}

func appendDate(b []byte, y int64, m, d int) []byte {
	b = appendYear(b, y)
	b = append(b, '-')
	b = append2(b, m)
	b = append(b, '-')
	return append2(b, d)
}

func appendYear(b []byte, y int64) []byte {
	if y < 0 || y > 9999 {
		return fmt.Appendf(b, "%d", y)
	}
	return append(b, byte('0'+y/1000), byte('0'+y/100%10), byte('0'+y/10%10), byte('0'+y%10))
}

func append2(b []byte, v int) []byte {
	return append(b, byte('0'+v/10), byte('0'+v%10))
}

func appendOffset(b []byte, off int) []byte {
	if off == 0 {
		return append(b, 'Z')
	}
	sign := byte('+')
	if off < 0 {
		sign, off = '-', -off
	}
	b = append(b, sign)
	b = append2(b, off/3600)
	b = append(b, ':')
	return append2(b, off/60%60)
}

// ParsePartitionKey returns the partition of g in loc whose key is key: it
// inverts [TimePartition.Key] exactly. It refuses a key in another form
// than g's, a date that does not exist, a key that names an instant inside
// a partition rather than its start (the error names the partition that
// holds it), and, for Minute and Hour multiples, an offset that loc does
// not have at that instant. A refused key is a [*ParseError] of Type
// "partition key" whose Reason says what was wrong ("month 13 is out of
// range (01 to 12)", "not the start of a 3d partition; it lies in
// 1970-01-04").
func ParsePartitionKey(g TimeGranularity, key string, loc *time.Location) (TimePartition, error) {
	if !g.IsValid() {
		return TimePartition{}, fmt.Errorf("tranche: ParsePartitionKey with the zero TimeGranularity")
	}
	if loc == nil {
		return TimePartition{}, fmt.Errorf("tranche: ParsePartitionKey(%v, %q) with a nil location", g, key)
	}
	c := newCursor(g, loc)
	switch {
	case c.g.IsSchedule():
		return parseSlotKey(&c, key)
	case g.subday():
		return parseSubdayKey(&c, key)
	}
	day, ok := parseCoarseKey(g.unit, key)
	if !ok {
		return TimePartition{}, malformedKey(g, key)
	}
	s := c.FirstInstant(day)
	p := c.partition(s)
	switch {
	case unix(p.Start) == s && p.hasKey(key):
		return p, nil
	case c.FirstDayOf(day) != day:
		return TimePartition{}, keyError(key, "not the start of a %v partition; it lies in %s", g, p.Key())
	case c.Date(s) != day:
		return TimePartition{}, keyError(key, "the date never occurs in %v: the clocks skip it; the next partition is %s", loc, p.Key())
	}
	return TimePartition{}, keyError(key, "no partition of its own in %v: its first instant lies in %s", loc, p.Key())
}

// keyError returns the ParseError of a refused key.
func keyError(key, format string, args ...any) error {
	return &ParseError{Type: "partition key", Text: key, Reason: fmt.Sprintf(format, args...)}
}

// malformedKey refuses a key that is not in g's form, saying what is out
// of range when it can.
func malformedKey(g TimeGranularity, key string) error {
	if r := fieldReason(key); r != "" {
		return keyError(key, "not a %v key: %s; want the form %s", g, r, keyForm[g.unit])
	}
	return keyError(key, "not a %v key; want the form %s", g, keyForm[g.unit])
}

var keyForm = [...]string{
	unitMinute:  "2006-01-02T15:04Z07:00",
	unitHour:    "2006-01-02T15:04Z07:00",
	unitDay:     "2006-01-02",
	unitWeek:    "2006-W01",
	unitMonth:   "2006-01",
	unitQuarter: "2006-Q1",
	unitYear:    "2006",
}

// hasKey reports whether p.Key() == key without allocating.
func (p TimePartition) hasKey(key string) bool {
	var buf [32]byte
	return string(appendKey(buf[:0], p.Granularity, p.Start, p.End)) == key
}

// partition returns the partition that holds the instant u.
func (c *cursor) partition(u int64) TimePartition {
	s, e := c.Bounds(u)
	return TimePartition{Start: at(s, c.loc), End: at(e, c.loc), Granularity: c.g}
}

func parseSubdayKey(c *cursor, key string) (TimePartition, error) {
	u, off, ok := parseMinuteKey(key)
	if !ok {
		return TimePartition{}, malformedKey(c.g, key)
	}
	p := c.partition(u)
	if s := unix(p.Start); s != u {
		return TimePartition{}, keyError(key, "not the start of a %v partition; it lies in %s", c.g, p.Key())
	}
	if have := c.Span(u).Offset; have != off {
		return TimePartition{}, keyError(key, "offset %s, but %v is at %s then; the key is %s",
			appendOffset(nil, int(off)), c.loc, appendOffset(nil, int(have)), p.Key())
	}
	return p, nil
}

// parseSlotKey parses the key of a cron schedule's slot: its fire time.
func parseSlotKey(c *cursor, key string) (TimePartition, error) {
	fire, err := time.Parse(time.RFC3339, key)
	if err != nil {
		reason := "not a %v key"
		if r := fieldReason(key); r != "" {
			reason += ": " + r
		}
		return TimePartition{}, keyError(key, reason+"; want a fire time in RFC 3339, as in 2026-01-05T02:00:00Z", c.g)
	}
	p, err := slotIn(c.g, fire.In(c.loc), c.loc)
	if err != nil {
		return TimePartition{}, &ParseError{Type: "partition key", Text: key, Reason: reasonOf(err), Err: err}
	}
	if !p.hasKey(key) {
		return TimePartition{}, keyError(key, "an offset %v does not have then; the key is %s", c.loc, p.Key())
	}
	return p, nil
}

// parseMinuteKey parses "2006-01-02T15:04Z07:00" into Unix seconds and the
// offset, without allocating.
func parseMinuteKey(s string) (u, off int64, ok bool) {
	if len(s) < len("2006-01-02T15:04Z") || s[10] != 'T' || s[13] != ':' {
		return 0, 0, false
	}
	day, ok := parseDate(s[:10])
	if !ok {
		return 0, 0, false
	}
	h, ok1 := calendar.Digits(s[11:13])
	m, ok2 := calendar.Digits(s[14:16])
	if !ok1 || !ok2 || h > 23 || m > 59 {
		return 0, 0, false
	}
	switch zone := s[16:]; {
	case zone == "Z":
	case len(zone) == 6 && (zone[0] == '+' || zone[0] == '-') && zone[3] == ':':
		oh, ok1 := calendar.Digits(zone[1:3])
		om, ok2 := calendar.Digits(zone[4:6])
		if !ok1 || !ok2 || om > 59 || (oh == 0 && om == 0) {
			return 0, 0, false // a zero offset is written Z
		}
		off = int64(oh*3600 + om*60)
		if zone[0] == '-' {
			off = -off
		}
	default:
		return 0, 0, false
	}
	return day*partition.SecondsPerDay + int64(h*3600+m*60) - off, off, true
}

// parseCoarseKey parses a Day-or-coarser key into the first date it names.
func parseCoarseKey(u unit, s string) (day int64, ok bool) {
	if len(s) < 4 {
		return 0, false
	}
	y, ok := calendar.Digits(s[:4])
	if !ok {
		return 0, false
	}
	year, rest := int64(y), s[4:]
	switch u {
	case unitDay:
		return parseDate(s)
	case unitWeek:
		if len(rest) != 4 || rest[0] != '-' || rest[1] != 'W' {
			return 0, false
		}
		w, ok := calendar.Digits(rest[2:])
		if !ok || w < 1 {
			return 0, false
		}
		day = calendar.ISOWeekStart(year, w)
		if wy, ww := calendar.ISOWeek(day); wy != year || ww != w {
			return 0, false
		}
		return day, true
	case unitMonth:
		if len(rest) != 3 || rest[0] != '-' {
			return 0, false
		}
		m, ok := calendar.Digits(rest[1:])
		if !ok || m < 1 || m > 12 {
			return 0, false
		}
		return calendar.DaysFromCivil(year, m, 1), true
	case unitQuarter:
		if len(rest) != 3 || rest[0] != '-' || rest[1] != 'Q' || rest[2] < '1' || rest[2] > '4' {
			return 0, false
		}
		return calendar.DaysFromCivil(year, int(rest[2]-'1')*3+1, 1), true
	case unitYear:
		if rest != "" {
			return 0, false
		}
		return calendar.DaysFromCivil(year, 1, 1), true
	}
	return 0, false
}

// parseDate parses "2006-01-02" into a day number.
func parseDate(s string) (int64, bool) {
	if len(s) != 10 || s[4] != '-' || s[7] != '-' {
		return 0, false
	}
	y, ok1 := calendar.Digits(s[:4])
	m, ok2 := calendar.Digits(s[5:7])
	d, ok3 := calendar.Digits(s[8:10])
	if !ok1 || !ok2 || !ok3 || m < 1 || m > 12 || d < 1 || d > calendar.DaysIn(int64(y), m) {
		return 0, false
	}
	return calendar.DaysFromCivil(int64(y), m, d), true
}
