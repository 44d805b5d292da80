package tranche

import (
	"fmt"
	"strings"
	"time"

	"github.com/tranche-dev/tranche/internal/calendar"
)

// The parsers' explanations: what is wrong with a text that does not
// parse, beyond "it is not a time", so that a typo is found at once.

// relativeWords are the words of relative times people type for bounds.
var relativeWords = map[string]bool{
	"yesterday": true, "today": true, "tomorrow": true, "now": true, "ago": true,
	"last": true, "next": true, "this": true, "previous": true,
}

// relativeWord returns the word of s that makes it a relative time
// ("yesterday", "last week", "-7d", "7 days ago"), or "".
func relativeWord(s string) string {
	words := strings.Fields(strings.ToLower(s))
	for _, w := range words {
		if relativeWords[w] {
			return w
		}
	}
	if len(words) == 1 && len(s) > 1 && (s[0] == '-' || s[0] == '+') && s[1] >= '0' && s[1] <= '9' {
		return words[0] // "-7d", "+1h"
	}
	return ""
}

// fieldReason explains what is out of range or malformed in text that
// begins like a date ("2024-13-01", "2024-02-30T10:00Z", "2024-3-1"), a
// month ("2024-13"), an ISO week ("2026-W54") or a quarter ("2024-Q5");
// "" when it finds nothing to say.
func fieldReason(s string) string {
	if len(s) < 7 || s[4] != '-' {
		return ""
	}
	y, ok := calendar.Digits(s[:4])
	if !ok {
		return ""
	}
	switch {
	case s[5] == 'W':
		w, ok := calendar.Digits(s[6:])
		if !ok {
			return ""
		}
		last := 52
		if _, w53 := calendar.ISOWeek(calendar.ISOWeekStart(int64(y), 53)); w53 == 53 {
			last = 53
		}
		if w < 1 || w > last {
			return fmt.Sprintf("week %s is out of range: %04d has ISO weeks 01 to %d", s[6:], y, last)
		}
		return ""
	case s[5] == 'Q':
		if q, ok := calendar.Digits(s[6:]); !ok || q < 1 || q > 4 {
			return fmt.Sprintf("quarter %s is out of range (1 to 4)", s[6:])
		}
		return ""
	}
	// A month or a date, and perhaps a time after it.
	end := 5
	for end < len(s) && s[end] >= '0' && s[end] <= '9' {
		end++
	}
	m, ok := calendar.Digits(s[5:end])
	switch {
	case !ok:
		return ""
	case end-5 != 2:
		return fmt.Sprintf("month %s is not two digits; write months and days with two digits, as in 2024-03-01", s[5:end])
	case m < 1 || m > 12:
		return fmt.Sprintf("month %s is out of range (01 to 12)", s[5:end])
	case end == len(s) || s[end] != '-':
		return ""
	}
	start := end + 1
	end = start
	for end < len(s) && s[end] >= '0' && s[end] <= '9' {
		end++
	}
	d, ok := calendar.Digits(s[start:end])
	switch {
	case !ok:
		return ""
	case end-start != 2:
		return fmt.Sprintf("day %s is not two digits; write months and days with two digits, as in 2024-03-01", s[start:end])
	case d < 1 || d > calendar.DaysIn(int64(y), m):
		return fmt.Sprintf("day %s is out of range: %s %04d has %d days", s[start:end], time.Month(m), y, calendar.DaysIn(int64(y), m))
	case end == len(s):
		return ""
	case s[end] != 'T' && s[end] != 't' && s[end] != ' ':
		return fmt.Sprintf("%q follows the date; write T or a space before the time", s[end:end+1])
	}
	return clockReason(s[end+1:])
}

// clockReason explains what is out of range in a time of day "15:04",
// "15:04:05", perhaps followed by fractions and an offset.
func clockReason(s string) string {
	h, ok1 := digitsPrefix(s, 2)
	if !ok1 || len(s) < 5 || s[2] != ':' {
		return ""
	}
	m, ok2 := digitsPrefix(s[3:], 2)
	switch {
	case h > 23:
		return fmt.Sprintf("hour %s is out of range (00 to 23)", s[:2])
	case !ok2:
		return ""
	case m > 59:
		return fmt.Sprintf("minute %s is out of range (00 to 59)", s[3:5])
	}
	rest := s[5:]
	if len(rest) >= 3 && rest[0] == ':' {
		if sec, ok := digitsPrefix(rest[1:], 2); ok && sec > 59 {
			return fmt.Sprintf("second %s is out of range (00 to 59)", rest[1:3])
		}
		rest = rest[3:]
	}
	rest = strings.TrimLeft(rest, ".0123456789")
	if len(rest) >= 3 && (rest[0] == '+' || rest[0] == '-') {
		if oh, ok := digitsPrefix(rest[1:], 2); ok && oh > 23 {
			return fmt.Sprintf("offset %s is out of range (-23:59 to +23:59)", rest)
		}
	}
	return ""
}

// digitsPrefix parses the first n bytes of s as digits.
func digitsPrefix(s string, n int) (int, bool) {
	if len(s) < n {
		return 0, false
	}
	return calendar.Digits(s[:n])
}
