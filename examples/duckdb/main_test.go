package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestRun loads January 2026 into a DuckDB file and queries it back,
// then runs again: the ledger skips every day, and the month is the
// same, not loaded twice.
func TestRun(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "demo")
	var first, second strings.Builder
	if err := run(t.Context(), &first, dir, "2026-01"); err != nil {
		t.Fatal(err)
	}
	t.Logf("first run:\n%s", first.String())
	if err := run(t.Context(), &second, dir, "2026-01"); err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitN(first.String(), "\n", 2)
	again := strings.SplitN(second.String(), "\n", 2)
	if lines[0] != "backfill of 2026-01: 31 days loaded, 0 skipped (loaded before)" {
		t.Errorf("the first run's backfill: %q", lines[0])
	}
	if again[0] != "backfill of 2026-01: 0 days loaded, 31 skipped (loaded before)" {
		t.Errorf("the second run's backfill: %q", again[0])
	}
	// 31 days of 96 quarter-hours, 28 of them (7 busy hours) with 3
	// trips: 152 a day.
	want := "4712 trips, 11780 passengers, fares 124265.92\n"
	if !strings.HasPrefix(lines[1], want) {
		t.Errorf("the first run's month: %q; want it to start %q", lines[1], want)
	}
	if lines[1] != again[1] {
		t.Errorf("the month after the second run differs:\n%s\nfrom\n%s", again[1], lines[1])
	}
	for _, s := range []string{"week of 2025-12-29", "week of 2026-01-26", "busiest zone: "} {
		if !strings.Contains(first.String(), s) {
			t.Errorf("the output does not say %q:\n%s", s, first.String())
		}
	}
	if err := run(t.Context(), &second, dir, "January"); err == nil || !strings.Contains(err.Error(), "YYYY-MM") {
		t.Errorf("run with -month January = %v", err)
	}
}
