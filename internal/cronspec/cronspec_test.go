package cronspec_test

import (
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/internal/cron"
	"github.com/tranche-dev/tranche/internal/cronspec"
)

// TestOf checks that Of reads the parsed form ParseCron kept, the same
// one for equal schedules, and nil for a calendar granularity.
func TestOf(t *testing.T) {
	g, err := tranche.ParseCron("CRON_TZ=Europe/Berlin 30 2 * * MON-FRI", "2026-12-25", "2026-01-01", "2026-12-25")
	if err != nil {
		t.Fatal(err)
	}
	spec := cronspec.Of(g)
	if spec == nil {
		t.Fatal("Of(schedule) = nil")
	}
	if got, want := "cron("+spec.Text+")", g.String(); got != want {
		t.Errorf("spec text %q, String %q", got, want)
	}
	if spec.Cadence != cron.Daily || spec.Days != "* * 1-5" {
		t.Errorf("cadence %v, days %q; want daily, \"* * 1-5\"", spec.Cadence, spec.Days)
	}
	if spec.Zone == nil || spec.Zone.String() != "Europe/Berlin" {
		t.Errorf("zone %v, want Europe/Berlin", spec.Zone)
	}
	if got, want := spec.Identity(), "schedule(daily; days * * 1-5; zone Europe/Berlin; except 2026-01-01 2026-12-25)"; got != want {
		t.Errorf("Identity() = %q, want %q", got, want)
	}
	again, err := tranche.ParseCron("CRON_TZ=Europe/Berlin 30 2 * * 1-5", "2026-01-01", "2026-12-25")
	if err != nil {
		t.Fatal(err)
	}
	if cronspec.Of(again) != spec {
		t.Error("equal schedules have different specs")
	}
	for _, g := range []tranche.TimeGranularity{tranche.Day, tranche.Every(15, tranche.Minute), {}} {
		if s := cronspec.Of(g); s != nil {
			t.Errorf("Of(%v) = %+v, want nil", g, s)
		}
	}
	plain, _ := tranche.ParseCron("*/5 * * * *")
	if s := cronspec.Of(plain); s == nil || s.Zone != nil || s.Cadence != cron.Irregular || s.Identity() != "" {
		t.Errorf("Of(%v) = %+v; want an irregular spec without zone", plain, s)
	}
	if s := cronspec.Of(plain).Schedule(time.UTC); s.Location() != time.UTC {
		t.Errorf("Schedule(UTC) in %v", s.Location())
	}
}
