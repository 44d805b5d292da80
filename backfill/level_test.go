package backfill_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/internal/kindtest"
	"github.com/tranche-dev/tranche/ledger/memledger"
)

// TestKindLevels checks that every kind this package declares has its
// level beside it, so that a new kind cannot log at INFO by omission, and
// pins the levels SlogHook logged them at before they moved here.
func TestKindLevels(t *testing.T) {
	for _, k := range kindtest.Declared(t, ".") {
		if _, ok := backfill.KindLevel(tranche.Kind(k)); !ok {
			t.Errorf("kind %q has no level", k)
		}
	}
	for k, want := range map[tranche.Kind]slog.Level{
		backfill.KindFailed: slog.LevelError, backfill.KindPartitionFailed: slog.LevelError,
		backfill.KindUnfinished: slog.LevelWarn, backfill.KindPartitionUnclaimed: slog.LevelWarn,
		backfill.KindLeaseRenewFailed: slog.LevelWarn, backfill.KindLeaseRenewSlow: slog.LevelWarn,
		backfill.KindStarted: slog.LevelInfo, backfill.KindPartitionSucceeded: slog.LevelInfo,
		backfill.KindPartitionClaimed: slog.LevelDebug, backfill.KindPartitionHeld: slog.LevelDebug,
		backfill.KindPartitionStarted: slog.LevelDebug,
	} {
		if got, _ := backfill.KindLevel(k); got != want {
			t.Errorf("%s: level %v, want %v", k, got, want)
		}
	}
}

// TestBackfillEventLevels runs a backfill with a failing partition: each
// event it emits carries its kind's level, and SlogHook logs it there
// (the failures of a backfill demoted to WARN).
func TestBackfillEventLevels(t *testing.T) {
	var logged bytes.Buffer
	slogHook := tranche.SlogHook(slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelDebug})))
	probe := &bfProbe{hook: func(_ context.Context, target string) error {
		if target == "2026-01-02" {
			return errors.New("boom")
		}
		return nil
	}}
	seen := map[tranche.Kind]bool{}
	b := &backfill.Backfill{
		DAG: bfDAG(t, probe, false), Window: bfDays(t, 1, 3), Ledger: memledger.New(nil),
		OnFailure: tranche.FailContinue,
		OnEvent: func(ctx context.Context, e tranche.Event) {
			if want, ok := backfill.KindLevel(e.Kind); ok {
				seen[e.Kind] = true
				if e.Level != want {
					t.Errorf("%s: Level %v, want %v", e.Kind, e.Level, want)
				}
			}
			slogHook(ctx, e)
		},
	}
	if _, err := b.Run(t.Context()); err == nil {
		t.Fatal("a backfill with a failing partition returned nil")
	}
	for _, k := range []tranche.Kind{backfill.KindStarted, backfill.KindPartitionClaimed, backfill.KindPartitionFailed, backfill.KindFailed} {
		if !seen[k] {
			t.Errorf("no %s event", k)
		}
	}
	for _, want := range []string{"level=DEBUG msg=partition.claimed", "level=WARN msg=partition.failed", "level=WARN msg=backfill.failed", "level=INFO msg=backfill.started"} {
		if !strings.Contains(logged.String(), want) {
			t.Errorf("logged:\n%s\nwant a line with %q", logged.String(), want)
		}
	}
}
