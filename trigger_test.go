package tranche_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/tranchetest"
)

// TestEventTrigger runs a failing asset under each trigger: every event of
// the run carries RunOptions.Trigger, in its field, its slog attributes
// and its JSON, the asset reads it (Materialization.Trigger), and
// SlogHook logs the failures of a backfill at WARN and every other at
// ERROR, so that a handler at ERROR pages for the live schedule and runs
// by hand alone.
func TestEventTrigger(t *testing.T) {
	for _, c := range []struct {
		trigger string
		level   string
	}{{"live", "ERROR"}, {"catch-up", "ERROR"}, {"manual", "ERROR"}, {"", "ERROR"}, {"backfill", "WARN"}} {
		t.Run(c.trigger, func(t *testing.T) {
			var events []tranche.Event
			var logged bytes.Buffer
			slogHook := tranche.SlogHook(slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelWarn})))
			var seen string
			a := tranchetest.Func("a", func(_ context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
				seen = m.Trigger()
				return nil, errors.New("boom")
			})
			a.Partitioning = tranche.Partitioning{Granularity: tranche.Day}
			r := tranche.Runner{OnEvent: func(ctx context.Context, e tranche.Event) {
				events = append(events, e)
				slogHook(ctx, e)
			}}
			p := tranche.PartitionOf(tranche.Day, time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))
			if _, err := r.RunWith(t.Context(), tranchetest.NewDAG(t, a), p, &tranche.RunOptions{Trigger: c.trigger}); err == nil {
				t.Fatal("RunWith of a failing asset = nil error")
			}
			if seen != c.trigger {
				t.Errorf("the asset reads trigger %q; want %q", seen, c.trigger)
			}
			for _, e := range events {
				if e.Trigger != c.trigger {
					t.Errorf("%s: Trigger %q; want %q", e.Kind, e.Trigger, c.trigger)
				}
				b, err := json.Marshal(e)
				if err != nil {
					t.Fatal(err)
				}
				var v map[string]any
				if err := json.Unmarshal(b, &v); err != nil {
					t.Fatal(err)
				}
				if got, _ := v["trigger"].(string); got != c.trigger {
					t.Errorf("%s: JSON %s; want trigger %q", e.Kind, b, c.trigger)
				}
			}
			lines := strings.Split(strings.TrimSpace(logged.String()), "\n")
			if len(lines) != 2 { // asset.failed and run.failed
				t.Fatalf("logged at WARN and above:\n%s\nwant 2 lines", logged.String())
			}
			for _, line := range lines {
				if !strings.Contains(line, "level="+c.level) {
					t.Errorf("logged %q; want level %s", line, c.level)
				}
				if c.trigger != "" && !strings.Contains(line, "trigger="+c.trigger) {
					t.Errorf("logged %q; want trigger=%s", line, c.trigger)
				}
			}
		})
	}
}
