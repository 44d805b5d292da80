package tranche_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/internal/kindtest"
)

// TestKindLevels checks that every kind this package declares has its
// level beside it, but KindLog, whose records carry theirs, so that a new
// kind cannot log at INFO by omission.
func TestKindLevels(t *testing.T) {
	for _, k := range kindtest.Declared(t, ".") {
		_, ok := tranche.KindLevel(tranche.Kind(k))
		if want := tranche.Kind(k) != tranche.KindLog; ok != want {
			t.Errorf("kind %q: has a level %v, want %v", k, ok, want)
		}
	}
	if _, ok := tranche.KindLevel("backfill.failed"); ok {
		t.Error(`the root gives a level to "backfill.failed", a kind of package backfill`)
	}
}

// TestSlogHookForeignLevel checks that SlogHook logs a kind another
// package defines at the level its event carries, and this package's
// kinds at their own whatever the event says.
func TestSlogHookForeignLevel(t *testing.T) {
	var buf bytes.Buffer
	hook := tranche.SlogHook(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	at := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		e    tranche.Event
		want string
	}{
		{tranche.Event{Kind: "other.trouble", Level: slog.LevelWarn, Time: at}, "level=WARN msg=other.trouble"},
		{tranche.Event{Kind: "other.step", Level: slog.LevelDebug, Time: at}, "level=DEBUG msg=other.step"},
		{tranche.Event{Kind: "other.failed", Level: slog.LevelError, Trigger: "backfill", Time: at}, "level=WARN msg=other.failed"},
		{tranche.Event{Kind: tranche.KindRunFailed, Time: at}, "level=ERROR msg=run.failed"},
		{tranche.Event{Kind: tranche.KindWriteStarted, Level: slog.LevelError, Time: at}, "level=DEBUG msg=write.started"},
		{tranche.Event{Kind: tranche.KindLog, Level: slog.LevelWarn, Message: "hello", Time: at}, "level=WARN msg=hello"},
	} {
		buf.Reset()
		hook(t.Context(), c.e)
		if !strings.Contains(buf.String(), c.want) {
			t.Errorf("%s logged %q; want %q", c.e.Kind, buf.String(), c.want)
		}
	}
}
