package lease

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tranche-dev/tranche"
)

// FinishGrace is how long the call that records an attempt's outcome may
// take once the run's context has ended: outcomes of the runs in flight
// when a program stops are still recorded, while a ledger that hangs
// holds the program no longer than that.
const FinishGrace = 30 * time.Second

// FinishContext returns the context to record outcomes under after ctx
// ends: ctx's values, without its cancellation, for FinishGrace.
func FinishContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), FinishGrace)
}

// RunFailed is why a run that returned no error did not succeed: its
// state and the errors of its failed assets.
func RunFailed(runID string, res *tranche.Result) error {
	var errs []error
	for _, o := range res.Assets {
		if o.Err != nil && o.State == tranche.StateFailed {
			errs = append(errs, o.Err)
		}
	}
	if runID == "" {
		return fmt.Errorf("run %s: %w", res.State, errors.Join(errs...))
	}
	return fmt.Errorf("run %s %s: %w", runID, res.State, errors.Join(errs...))
}
