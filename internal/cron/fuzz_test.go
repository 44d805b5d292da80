package cron

import (
	"testing"
	"time"
)

// FuzzParse checks that Parse never panics and that whatever it accepts
// prints as text that parses back to an equal schedule, whose fire times
// are consistent.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"* * * * *", "0 2 * * 1-5", "*/15 0-6/2 1,15 JAN-mar/2 mon,WED,Fri",
		"5/15 * * * 7", "0 0 29 2 */7", "0 0 30 2 *", "0 0 31 4,6 *", "@daily", "@hourly",
		"CRON_TZ=America/New_York 30 2 * * *", "TZ=Australia/Lord_Howe 15 2 * * *",
		"CRON_TZ=Mars/Olympus * * * * *", "0 25 * * *", "1,,2 * * * *", "*/0 * * * *", "1-2-3 * * * *",
	} {
		f.Add(seed)
	}
	at := time.Date(2026, 3, 8, 6, 59, 30, 0, time.UTC)
	f.Fuzz(func(t *testing.T, expr string) {
		s, err := Parse(expr, nil)
		if err != nil {
			return
		}
		text := s.String()
		s2, err := Parse(text, nil)
		if err != nil {
			t.Fatalf("Parse(%q) accepted, but Parse of its String %q: %v", expr, text, err)
		}
		if !equal(s, s2) {
			t.Fatalf("Parse(%q).String() = %q parses to %q", expr, text, s2.String())
		}
		if text2 := s2.String(); text2 != text {
			t.Fatalf("String not stable: %q, then %q", text, text2)
		}
		next, prev := s.Next(at), s.Prev(at)
		if !next.After(at) || prev.After(at) || !s.Prev(next).Equal(next) || !s.Next(prev).Equal(next) {
			t.Fatalf("%q: Next(%v) = %v, Prev = %v: inconsistent", expr, at, next, prev)
		}
	})
}
