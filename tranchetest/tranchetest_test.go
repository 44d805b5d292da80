package tranchetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
)

// fakeT records the failure of an assertion instead of stopping the test.
type fakeT struct {
	failed bool
	msg    string
}

func (f *fakeT) Helper() {}
func (f *fakeT) Fatalf(format string, args ...any) {
	if !f.failed {
		f.failed, f.msg = true, fmt.Sprintf(format, args...)
	}
}

// check runs an assertion against a fakeT and compares its verdict.
func check(t *testing.T, name string, wantFail bool, wantMsg string, assert func(testingT)) {
	t.Helper()
	f := new(fakeT)
	assert(f)
	switch {
	case f.failed != wantFail:
		t.Errorf("%s: failed = %v (%s), want %v", name, f.failed, f.msg, wantFail)
	case !strings.Contains(f.msg, wantMsg):
		t.Errorf("%s: message %q, want it to contain %q", name, f.msg, wantMsg)
	}
}

var day1 = tranche.PartitionOf(tranche.Day, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))

func TestRecorderAndHelpers(t *testing.T) {
	rec := new(Recorder)
	dest := new(tranche.MemoryDestination)
	src := Rows("src", []tranche.Row{{"day": "2026-01-01", "n": 1}})
	src.Partitioning = tranche.Partitioning{Granularity: tranche.Day, Column: "day"}
	src.Destinations = []tranche.Destination{dest}
	sink := Noop("sink", "src")
	sink.Partitioning = tranche.Partitioning{Granularity: tranche.Day}
	dag := NewDAG(t, src, sink)
	res, err := (&tranche.Runner{OnEvent: rec.OnEvent}).Run(context.Background(), dag, day1)
	RequireSucceeded(t, res, err)
	RequireState(t, res, tranche.StateSucceeded, "src=succeeded", "sink=succeeded")
	RequireKinds(t, rec, "", tranche.KindRunStarted, tranche.KindRunSucceeded)
	RequireKinds(t, rec, "sink", tranche.KindAssetStarted, tranche.KindAssetSucceeded)
	RequireRows(t, dest, "src", "2026-01-01", []tranche.Row{{"day": "2026-01-01", "n": 1}})
	RequireKeys(t, dest, "src", "2026-01-01")
	if n := len(rec.Events()); n != 8 {
		t.Errorf("%d events recorded, want 8", n)
	}
	rec.Reset()
	if len(rec.Events()) != 0 {
		t.Error("Reset kept events")
	}

	failed, ferr := new(tranche.Runner).Run(context.Background(), NewDAG(t, Fail("f", errors.New("nope")), Noop("g", "f")), nil)

	check(t, "succeeded run", false, "", func(t testingT) { requireSucceeded(t, res, err) })
	check(t, "failed run", true, `run `+failed.RunID+` failed, want succeeded: tranche: asset "f" failed: nope`,
		func(t testingT) { requireSucceeded(t, failed, ferr) })
	check(t, "failed run lists outcomes", true, "\n\tg: canceled: ", func(t testingT) { requireSucceeded(t, failed, ferr) })
	check(t, "not started", true, "run did not start: boom", func(t testingT) { requireSucceeded(t, nil, errors.New("boom")) })
	check(t, "hook panic", true, "a hook panicked: x", func(t testingT) {
		requireSucceeded(t, &tranche.Result{State: tranche.StateSucceeded, HookErr: errors.New("x")}, nil)
	})
	check(t, "status", false, "", func(t testingT) { requireState(t, failed, tranche.StateFailed, "f=failed", "g=canceled") })
	check(t, "wrong status", true, "failed, want succeeded", func(t testingT) { requireState(t, failed, tranche.StateSucceeded) })
	check(t, "wrong asset status", true, `asset "g" canceled, want succeeded`, func(t testingT) { requireState(t, failed, tranche.StateFailed, "g=succeeded") })
	check(t, "unknown asset", true, `has no asset "h"`, func(t testingT) { requireState(t, failed, tranche.StateFailed, "h=succeeded") })
	check(t, "bad spec", true, `"g" is not name=state`, func(t testingT) { requireState(t, failed, tranche.StateFailed, "g") })
	check(t, "nil result", true, "nil Result", func(t testingT) { requireState(t, nil, tranche.StateFailed) })

	rec2 := new(Recorder)
	rec2.OnEvent(context.Background(), tranche.Event{Kind: tranche.KindRunStarted})
	check(t, "kinds", false, "", func(t testingT) { requireKinds(t, rec2, "", tranche.KindRunStarted) })
	check(t, "wrong kinds", true, "run events:\n\tgot  [run.started]\n\twant [run.succeeded]", func(t testingT) {
		requireKinds(t, rec2, "", tranche.KindRunSucceeded)
	})
	check(t, "asset kinds", true, `events of asset "a"`, func(t testingT) { requireKinds(t, rec2, "a", tranche.KindLog) })

	check(t, "rows differ", true, `asset "src", partition "2026-01-01": rows differ`, func(t testingT) {
		requireRows(t, dest, "src", "2026-01-01", []tranche.Row{{"n": 2}})
	})
	check(t, "rows not empty", true, "rows differ", func(t testingT) { requireRows(t, dest, "src", "2026-01-01", nil) })
	check(t, "never written", true, `partition "2026-01-02": never written; written partitions: ["2026-01-01"]`, func(t testingT) {
		requireRows(t, dest, "src", "2026-01-02", nil)
	})
	check(t, "keys", true, `asset "src": partitions written:`, func(t testingT) { requireKeys(t, dest, "src") })
	check(t, "bad dag", true, "tranche.NewDAG: ", func(t testingT) { newDAG(t, Noop("a", "missing")) })
}

func TestRecorderIsConcurrencySafe(t *testing.T) {
	rec := new(Recorder)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				rec.OnEvent(context.Background(), tranche.Event{Kind: tranche.KindLog})
				_ = rec.Kinds("")
			}
		})
	}
	wg.Wait()
	if n := len(rec.Events()); n != 800 {
		t.Errorf("%d events, want 800", n)
	}
}

func TestFuncNil(t *testing.T) {
	if a := Func("a", nil); a.Materialize != nil {
		t.Error("Func with a nil function has a Materialize; NewDAG should refuse it")
	}
}
