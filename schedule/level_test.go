package schedule_test

import (
	"log/slog"
	"testing"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/internal/kindtest"
	"github.com/tranche-dev/tranche/schedule"
)

// TestKindLevels checks that every kind this package declares has its
// level beside it, so that a new kind cannot log at INFO by omission.
func TestKindLevels(t *testing.T) {
	for _, k := range kindtest.Declared(t, ".") {
		if _, ok := schedule.KindLevel(tranche.Kind(k)); !ok {
			t.Errorf("kind %q has no level", k)
		}
	}
	if got, _ := schedule.KindLevel(schedule.KindLedgerError); got != slog.LevelWarn {
		t.Errorf("%s: level %v, want WARN", schedule.KindLedgerError, got)
	}
}
