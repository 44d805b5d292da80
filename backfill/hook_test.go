package backfill_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/ledger/memledger"
)

// TestBackfillHookContract checks that a backfill's OnEvent keeps the
// runner's hook contract: one event at a time though partitions run
// concurrently, and a context that is never canceled, so that the
// events after the caller cancels are delivered with a live context.
func TestBackfillHookContract(t *testing.T) {
	var inside, overlaps, canceledCtx, events atomic.Int64
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	b := &backfill.Backfill{
		DAG: bfDAG(t, &bfProbe{}, false), Window: bfDays(t, 1, 24), Ledger: memledger.New(nil), Concurrency: 8,
		OnFailure: tranche.FailContinue,
		OnEvent: func(hctx context.Context, e tranche.Event) {
			if inside.Add(1) > 1 {
				overlaps.Add(1)
			}
			defer inside.Add(-1)
			events.Add(1)
			if hctx.Err() != nil {
				canceledCtx.Add(1)
			}
			if e.Kind == backfill.KindPartitionSucceeded {
				cancel() // the backfill's context ends mid-run; its hook's must not
			}
		},
	}
	_, _ = b.Run(ctx)
	if events.Load() == 0 {
		t.Fatal("no events delivered")
	}
	if n := overlaps.Load(); n != 0 {
		t.Errorf("%d OnEvent calls overlapped another; want one at a time", n)
	}
	if n := canceledCtx.Load(); n != 0 {
		t.Errorf("%d OnEvent calls got a canceled context; want a context that is never canceled", n)
	}
}

// A hook's panic inside tranche.Hooks reaches the backfill's HookErr
// with the stack of the hook that panicked, not that of Hooks' panic
// again.
func TestBackfillHookPanicStack(t *testing.T) {
	var panicLine int
	b := &backfill.Backfill{
		DAG: bfDAG(t, &bfProbe{}, false), Window: bfDays(t, 1, 2), Ledger: memledger.New(nil),
		OnEvent: tranche.Hooks(func(context.Context, tranche.Event) {}, func(_ context.Context, e tranche.Event) {
			if e.Kind == backfill.KindStarted {
				_, _, line, _ := runtime.Caller(0)
				panicLine = line + 2 // the line of the panic below
				panic("hook broke")
			}
		}),
	}
	res, err := b.Run(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	pe, ok := errors.AsType[*tranche.PanicError](res.HookErr)
	switch {
	case !ok || pe.Value != "hook broke":
		t.Fatalf("HookErr = %v; want the hook's *PanicError", res.HookErr)
	case !strings.Contains(string(pe.Stack), fmt.Sprintf("hook_test.go:%d", panicLine)):
		t.Errorf("the stack does not hold the hook's panic at hook_test.go:%d:\n%s", panicLine, pe.Stack)
	case !strings.HasSuffix(pe.Where, ", hook 1 of Hooks"):
		t.Errorf("Where = %q; want it to name the hook of Hooks", pe.Where)
	}
}
