// Package hookcall delivers an event to a hook the way every OnEvent of
// this module does (the runner's, a backfill's, a scheduler's): one call
// at a time, a panic recovered and returned as a tranche.PanicError with
// the stack of the hook that panicked, so that a broken hook cannot take
// a run, a backfill or a scheduler down half-recorded.
//
// The root package cannot be imported from here (it imports this
// package), so Call is generic in the panic error's type: any type whose
// underlying type is Panic's, as tranche.PanicError's is. A field added
// to tranche.PanicError and not here fails to compile where Call is
// called, not at run time.
package hookcall

import (
	"context"
	"runtime/debug"
	"sync"
)

// Panic is the shape of tranche.PanicError: the value passed to panic,
// the stack where it was raised, and what panicked.
type Panic = struct {
	Value any
	Stack []byte
	Where string
}

// Call calls hook(ctx, e), holding mu unless it is nil (a caller that
// holds its own lock), and returns nil, or the panic hook raised as a *P
// whose Where is where(): with the panic's value and the stack of the
// goroutine that panicked, taken before it unwinds; or, when the value
// is itself a *P (tranche.Hooks raises the first of its hooks' panics
// again once the others ran), that panic's value and stack, its Where
// after where()'s, so that the stack is the hook's and not Hooks'.
func Call[P ~Panic, E any](mu *sync.Mutex, ctx context.Context, hook func(context.Context, E), e E, where func() string) (err *P) {
	if mu != nil {
		mu.Lock()
		defer mu.Unlock()
	}
	defer func() {
		v := recover()
		if v == nil {
			return
		}
		var p P
		if again, ok := v.(*P); ok {
			inner := Panic(*again)
			p = P(Panic{Value: inner.Value, Stack: inner.Stack, Where: where() + ", " + inner.Where})
		} else {
			p = P(Panic{Value: v, Stack: debug.Stack(), Where: where()})
		}
		err = &p
	}()
	hook(ctx, e)
	return nil
}
