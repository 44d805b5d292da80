package tranche

import (
	"context"
	"fmt"
	"runtime/debug"
	"slices"
)

// Hooks returns a hook that calls each non-nil hook in turn with every
// event, as slog.NewMultiHandler fans out records. It copies hooks, so
// that a later change to the caller's slice changes nothing. If a hook
// panics, the others are still called, and then the first panic is
// raised again as a [*PanicError] holding the value and the stack of the
// hook that panicked, for the runner to report in [Result.HookErr].
func Hooks(hooks ...func(context.Context, Event)) func(context.Context, Event) {
	hooks = slices.Clone(hooks)
	return func(ctx context.Context, e Event) {
		var first *PanicError
		for i, h := range hooks {
			if h == nil {
				continue
			}
			func() {
				defer func() {
					if v := recover(); v != nil && first == nil {
						// The stack is taken here, before the panic
						// unwinds, so that it holds the hook's frames.
						first = &PanicError{Value: v, Stack: debug.Stack(), Where: fmt.Sprintf("hook %d of Hooks", i)}
					}
				}()
				h(ctx, e)
			}()
		}
		if first != nil {
			panic(first)
		}
	}
}
