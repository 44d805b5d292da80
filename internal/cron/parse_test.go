package cron

import (
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	tests := []struct {
		expr string
		loc  *time.Location
		want string // String()
	}{
		{"* * * * *", nil, "CRON_TZ=UTC * * * * *"},
		{"0 2 * * 1-5", nil, "CRON_TZ=UTC 0 2 * * 1-5"},
		{"  0\t2  *  * *  ", nil, "CRON_TZ=UTC 0 2 * * *"},
		{"*/15 0-6/2 1,15 JAN-mar/2 mon,WED,Fri", nil, "CRON_TZ=UTC */15 0,2,4,6 1,15 1,3 1,3,5"},
		{"5/15 9-17 * * *", nil, "CRON_TZ=UTC 5,20,35,50 9-17 * * *"},
		{"0 0 * * 7", nil, "CRON_TZ=UTC 0 0 * * 0"},
		{"0 0 * * 5-7", nil, "CRON_TZ=UTC 0 0 * * 0,5-6"},
		{"0 0 * * 0-7", nil, "CRON_TZ=UTC 0 0 * * 0-6"},
		{"0 0 * * sun,SAT", nil, "CRON_TZ=UTC 0 0 * * 0,6"},
		{"0 0 * * 1/2", nil, "CRON_TZ=UTC 0 0 * * 1,3,5"},
		{"0 0 * * */2", nil, "CRON_TZ=UTC 0 0 * * */2"},
		{"0 0 * dec *", nil, "CRON_TZ=UTC 0 0 * 12 *"},
		{"0 0-23 * * *", nil, "CRON_TZ=UTC 0 0-23 * * *"},
		{"0 */1 * * *", nil, "CRON_TZ=UTC 0 * * * *"},
		{"0 */5 * * *", nil, "CRON_TZ=UTC 0 */5 * * *"},
		{"0 */24 * * *", nil, "CRON_TZ=UTC 0 */24 * * *"},
		{"*/60 * * * *", nil, "CRON_TZ=UTC */60 * * * *"},
		{"0 0 1-31 * *", nil, "CRON_TZ=UTC 0 0 1-31 * *"},
		{"00 02 01 01 *", nil, "CRON_TZ=UTC 0 2 1 1 *"},
		{"1,2,3,5,6,59 * * * *", nil, "CRON_TZ=UTC 1-3,5-6,59 * * * *"},
		{"0 0 29 2 *", nil, "CRON_TZ=UTC 0 0 29 2 *"},
		{"0 0 31 1,4 *", nil, "CRON_TZ=UTC 0 0 31 1,4 *"},
		{"0 0 30,31 2 1", nil, "CRON_TZ=UTC 0 0 30-31 2 1"}, // Mondays of February
		{"@yearly", nil, "CRON_TZ=UTC 0 0 1 1 *"},
		{"@annually", nil, "CRON_TZ=UTC 0 0 1 1 *"},
		{"@monthly", nil, "CRON_TZ=UTC 0 0 1 * *"},
		{"@Weekly", nil, "CRON_TZ=UTC 0 0 * * 0"},
		{"@daily", nil, "CRON_TZ=UTC 0 0 * * *"},
		{"@MIDNIGHT", nil, "CRON_TZ=UTC 0 0 * * *"},
		{"@hourly", nil, "CRON_TZ=UTC 0 * * * *"},
		{"0 2 * * *", newYork, "CRON_TZ=America/New_York 0 2 * * *"},
		{"CRON_TZ=Europe/Berlin 0 2 * * *", newYork, "CRON_TZ=Europe/Berlin 0 2 * * *"},
		{"TZ=Australia/Lord_Howe @daily", nil, "CRON_TZ=Australia/Lord_Howe 0 0 * * *"},
		{"CRON_TZ=UTC\t*/5 * * * *", berlin, "CRON_TZ=UTC */5 * * * *"},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			s, err := Parse(tt.expr, tt.loc)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.expr, err)
			}
			if got := s.String(); got != tt.want {
				t.Errorf("Parse(%q).String() = %q, want %q", tt.expr, got, tt.want)
			}
			s2, err := Parse(s.String(), nil)
			if err != nil {
				t.Fatalf("Parse(%q): %v", s.String(), err)
			}
			if !equal(s, s2) {
				t.Errorf("Parse(%q) differs from Parse(%q)", s.String(), tt.expr)
			}
		})
	}
}

func TestParseWildcards(t *testing.T) {
	tests := []struct {
		expr                string
		fixedHours, andDays bool
	}{
		{"0 * * * *", false, true},
		{"0 */2 * * *", false, true},
		{"0 0-23 * * *", true, true},
		{"0 2 * * *", true, true},
		{"0 0 1 * 1", true, false},    // both restricted: OR
		{"0 0 */2 * 1", true, true},   // */2 is a wildcard: AND
		{"0 0 1 * */2", true, true},   // likewise
		{"0 0 1-31 * 1", true, false}, // 1-31 is not a wildcard
		{"0 0 *,1 * 1", true, false},  // nor is a list that holds *
		{"@hourly", false, true},
		{"@weekly", true, true},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			s := mustParse(t, tt.expr, nil)
			if s.fixed != tt.fixedHours || s.and != tt.andDays {
				t.Errorf("Parse(%q): fixed hours %v, day fields ANDed %v; want %v, %v", tt.expr, s.fixed, s.and, tt.fixedHours, tt.andDays)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		expr string
		loc  *time.Location
		want string
	}{
		{"", nil, `cron: empty expression`},
		{"   ", nil, `cron: empty expression`},
		{"* * * *", nil, `cron: "* * * *" has 4 fields, want 5 (minute hour day-of-month month day-of-week)`},
		{"0 0 * * * *", nil, `cron: "0 0 * * * *" has 6 fields, want 5 (minute hour day-of-month month day-of-week)`},
		{"0 25 * * *", nil, `cron: hour field "25": 25 is out of range 0-23`},
		{"60 * * * *", nil, `cron: minute field "60": 60 is out of range 0-59`},
		{"0 0 0 * *", nil, `cron: day-of-month field "0": 0 is out of range 1-31`},
		{"0 0 32 * *", nil, `cron: day-of-month field "32": 32 is out of range 1-31`},
		{"0 0 * 13 *", nil, `cron: month field "13": 13 is out of range 1-12`},
		{"0 0 * 0 *", nil, `cron: month field "0": 0 is out of range 1-12`},
		{"0 0 * * 8", nil, `cron: day-of-week field "8": 8 is out of range 0-7`},
		{"0 1,25 * * *", nil, `cron: hour field "1,25": 25 is out of range 0-23`},
		{"0 99999999999999999999 * * *", nil, `cron: hour field "99999999999999999999": 99999999999999999999 is out of range 0-23`},
		{"x * * * *", nil, `cron: minute field "x": "x" is not a number`},
		{"-1 * * * *", nil, `cron: minute field "-1": range "-1" is missing a bound`},
		{"/5 * * * *", nil, `cron: minute field "/5": "/5" has nothing before its step`},
		{"+1 * * * *", nil, `cron: minute field "+1": "+1" is not a number`},
		{"0 0 * JANUARY *", nil, `cron: month field "JANUARY": "JANUARY" is not a number or month name`},
		{"0 0 * * MONDAY", nil, `cron: day-of-week field "MONDAY": "MONDAY" is not a number or day name`},
		{"0 0 * * 1-FOO", nil, `cron: day-of-week field "1-FOO": "FOO" is not a number or day name`},
		{"0 0 MON * *", nil, `cron: day-of-month field "MON": "MON" is not a number`},
		{"0 0 * * FRI-MON", nil, `cron: day-of-week field "FRI-MON": range "FRI-MON" starts after it ends`},
		{"0 5-1 * * *", nil, `cron: hour field "5-1": range "5-1" starts after it ends`},
		{"0 1-2-3 * * *", nil, `cron: hour field "1-2-3": "1-2-3" is not a range a-b`},
		{"0 1- * * *", nil, `cron: hour field "1-": range "1-" is missing a bound`},
		{"1,,2 * * * *", nil, `cron: minute field "1,,2": empty list element`},
		{"1, * * * *", nil, `cron: minute field "1,": empty list element`},
		{"*/0 * * * *", nil, `cron: minute field "*/0": step 0 is out of range 1-60`},
		{"*/61 * * * *", nil, `cron: minute field "*/61": step 61 is out of range 1-60`},
		{"0 0 * * */8", nil, `cron: day-of-week field "*/8": step 8 is out of range 1-7`},
		{"*/x * * * *", nil, `cron: minute field "*/x": step "x" is not a number`},
		{"*/ * * * *", nil, `cron: minute field "*/": step "" is not a number`},
		{"1/2/3 * * * *", nil, `cron: minute field "1/2/3": "1/2/3" has more than one step`},
		{"*-5 * * * *", nil, `cron: minute field "*-5": "*-5": * must stand alone or before a step, as in */5`},
		{"** * * * *", nil, `cron: minute field "**": "**": * must stand alone or before a step, as in */5`},
		{"@often", nil, `cron: unknown macro "@often" (want @yearly, @annually, @monthly, @weekly, @daily, @midnight or @hourly)`},
		{"@daily 0", nil, `cron: unknown macro "@daily 0" (want @yearly, @annually, @monthly, @weekly, @daily, @midnight or @hourly)`},
		{"CRON_TZ=Mars/Olympus 0 2 * * *", nil, `cron: unknown time zone "Mars/Olympus" in "CRON_TZ=Mars/Olympus 0 2 * * *"`},
		{"TZ=../etc/passwd 0 2 * * *", nil, `cron: unknown time zone "../etc/passwd" in "TZ=../etc/passwd 0 2 * * *"`},
		{"CRON_TZ= 0 2 * * *", nil, `cron: CRON_TZ= prefix without a zone in "CRON_TZ= 0 2 * * *"`},
		{"CRON_TZ=UTC", nil, `cron: no schedule after CRON_TZ=UTC in "CRON_TZ=UTC"`},
		{"0 0 30 2 *", nil, `cron: "0 0 30 2 *" never fires: February has no 30th`},
		{"0 0 30,31 2 *", nil, `cron: "0 0 30,31 2 *" never fires: February has no 30th or 31st`},
		{"0 0 31 4,6 *", nil, `cron: "0 0 31 4,6 *" never fires: April and June have no 31st`},
		{"0 0 31 2,4,6,9,11 *", nil, `cron: "0 0 31 2,4,6,9,11 *" never fires: February, April, June, September and November have no 31st`},
		{"0 0 31 APR */7", nil, `cron: "0 0 31 APR */7" never fires: April has no 31st`},
		{"CRON_TZ=Europe/Berlin 0 0 30 feb *", nil, `cron: "CRON_TZ=Europe/Berlin 0 0 30 feb *" never fires: February has no 30th`},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			s, err := Parse(tt.expr, tt.loc)
			if err == nil {
				t.Fatalf("Parse(%q) = %v, want error %q", tt.expr, s, tt.want)
			}
			if err.Error() != tt.want {
				t.Errorf("Parse(%q) error:\n got %s\nwant %s", tt.expr, err, tt.want)
			}
		})
	}
}
