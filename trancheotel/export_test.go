package trancheotel

import (
	"context"

	"github.com/tranche-dev/tranche"
)

// NewHookWithRuns is NewHook with a function that counts the runs whose
// state the hook holds, attempts of one run apart.
func NewHookWithRuns(opts ...Option) (func(context.Context, tranche.Event), func() int) {
	h := newHook(opts)
	return h.onEvent, func() int {
		h.mu.Lock()
		defer h.mu.Unlock()
		n := 0
		for _, r := range h.runs {
			for ; r != nil; r = r.prev {
				n++
			}
		}
		return n
	}
}

// DurationBuckets are the histograms' bucket boundaries.
var DurationBuckets = durationBuckets
