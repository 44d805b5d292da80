package cron

import (
	"testing"
	"time"
)

// TestSpecOf checks that parsing a spec's Text gives the spec it was
// made from, for zoned and unzoned expressions, macros and excluded
// days, and that the parse is kept: a second SpecOf returns the same
// spec, as Intern does for an equal one.
func TestSpecOf(t *testing.T) {
	for _, c := range []struct {
		expr string
		days []string
	}{
		{"0 2 * * *", nil},
		{"CRON_TZ=Europe/Berlin 30 2 * * MON-FRI", []string{"2026-01-01", "2026-12-25"}},
		{"TZ=America/New_York @hourly", nil},
		{"*/5 9-17 * * 1-5", []string{"2026-07-04"}},
		{"@monthly", nil},
	} {
		s, err := Parse(c.expr, nil)
		if err != nil {
			t.Fatal(err)
		}
		var dates []Date
		for _, d := range c.days {
			day, _ := time.Parse(time.DateOnly, d)
			dates = append(dates, Date{Year: day.Year(), Month: day.Month(), Day: day.Day()})
		}
		want := NewSpec(s, Zoned(c.expr), dates, c.days)
		got, err := SpecOf(want.Text)
		if err != nil {
			t.Fatalf("SpecOf(%q): %v", want.Text, err)
		}
		if got.Text != want.Text || got.Expr != want.Expr || got.Zone.String() != want.Zone.String() ||
			got.Cadence != want.Cadence || got.Days != want.Days || got.Identity() != want.Identity() ||
			len(got.Excluded) != len(want.Excluded) {
			t.Errorf("SpecOf(%q) = %+v; want %+v", want.Text, got, want)
		}
		for i := range got.Excluded {
			if got.Excluded[i] != want.Excluded[i] || got.ExcludedText[i] != want.ExcludedText[i] {
				t.Errorf("SpecOf(%q) excludes %v %v; want %v %v", want.Text, got.Excluded, got.ExcludedText, want.Excluded, want.ExcludedText)
			}
		}
		if again, _ := SpecOf(want.Text); again != got {
			t.Errorf("SpecOf(%q) parsed twice", want.Text)
		}
		if Intern(want) != got {
			t.Errorf("Intern of a spec of %q does not return the kept one", want.Text)
		}
	}
	if _, err := SpecOf("0 25 * * *"); err == nil {
		t.Error("SpecOf of a bad expression: nil error")
	}
}
