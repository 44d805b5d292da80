package lease

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/ledger"
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

// Verdict judges the run of an attempt under kl, which returned res and
// runErr, and returns why it failed, or nil when it succeeded. It must be
// called before kl is released. The rule, the same for every loop:
//
//   - A success counts only while the lease holds by this worker's
//     clock: past that, another worker may have taken the partition
//     over, so the run failed for the lease.
//   - A run stopped because its lease stopped holding failed for that.
//   - Otherwise the run's error, or the errors of its failed assets.
//
// lost reports that the ledger gave the partition to a newer attempt,
// whose outcome is the one that counts: the caller records nothing.
func (kl *Kept) Verdict(res *tranche.Result, runErr error, runID string) (failure error, lost bool) {
	// Read before State, which cancels the run's context with the lapse
	// it finds.
	stoppedBy := context.Cause(kl.ctx)
	held, byLedger := kl.State()
	switch {
	case byLedger:
		return held, true
	case runErr == nil && res != nil && res.State == tranche.StateSucceeded:
		return held, false
	case errors.Is(stoppedBy, ledger.ErrFenced):
		return stoppedBy, false
	case runErr != nil:
		return runErr, false
	default:
		return RunFailed(runID, res), false
	}
}
