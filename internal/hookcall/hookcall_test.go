package hookcall_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/internal/hookcall"
)

//go:noinline
func panickingHook(context.Context, tranche.Event) { panic("boom") }

func TestCall(t *testing.T) {
	where := func() string { return "event hook on run.started" }
	boom := errors.New("boom error")
	for _, c := range []struct {
		name      string
		hook      func(context.Context, tranche.Event)
		wantValue any    // nil: no panic
		wantWhere string // the error's Where
	}{
		{"no panic", func(context.Context, tranche.Event) {}, nil, ""},
		{"panic", panickingHook, "boom", "event hook on run.started"},
		{"panic with an error", func(context.Context, tranche.Event) { panic(boom) }, boom, "event hook on run.started"},
		{"raised again by Hooks", tranche.Hooks(func(context.Context, tranche.Event) {}, panickingHook), "boom",
			"event hook on run.started, hook 1 of Hooks"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := hookcall.Call[tranche.PanicError](nil, t.Context(), c.hook, tranche.Event{Kind: tranche.KindRunStarted}, where)
			if c.wantValue == nil {
				if err != nil {
					t.Fatalf("Call = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Call = nil, want the hook's panic")
			}
			if err.Value != c.wantValue || err.Where != c.wantWhere {
				t.Errorf("Call = {Value: %v, Where: %q}, want {%v, %q}", err.Value, err.Where, c.wantValue, c.wantWhere)
			}
			// The stack is the goroutine's that panicked, taken before it
			// unwound: it holds the hook's frame, also when Hooks raised
			// the panic again.
			if c.name != "panic with an error" && !strings.Contains(string(err.Stack), "panickingHook") {
				t.Errorf("the stack does not hold the hook that panicked:\n%s", err.Stack)
			}
			if c.wantValue == boom && !errors.Is(err, boom) {
				t.Errorf("errors.Is(%v, boom) = false", err)
			}
		})
	}
}

// TestCallSerializes calls a hook from many goroutines under one mutex:
// no two calls overlap, and every call is made.
func TestCallSerializes(t *testing.T) {
	var mu sync.Mutex
	var inside, overlaps, calls atomic.Int64
	hook := func(context.Context, int) {
		if inside.Add(1) > 1 {
			overlaps.Add(1)
		}
		calls.Add(1)
		inside.Add(-1)
	}
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			for range 100 {
				if err := hookcall.Call[tranche.PanicError](&mu, t.Context(), hook, i, func() string { return "" }); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if n := overlaps.Load(); n != 0 {
		t.Errorf("%d calls overlapped another", n)
	}
	if n := calls.Load(); n != 64*100 {
		t.Errorf("%d calls, want %d", n, 64*100)
	}
}
