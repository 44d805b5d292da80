package tranche

import (
	"errors"
	"fmt"
	"time"
)

// Status is how a run or an asset ended. Its string value is stable.
type Status string

// The statuses of runs and assets. A run is StatusCompleted when every
// asset completed or was skipped, StatusFailed when an asset failed, and
// StatusCanceled when its context was canceled before any asset failed.
const (
	StatusCompleted Status = "completed"
	StatusFailed    Status = "failed"
	StatusCanceled  Status = "canceled" // the asset did not finish
	StatusSkipped   Status = "skipped"  // assets only: see ErrSkip
)

// Result reports how a run went, asset by asset.
type Result struct {
	RunID   string
	Attempt int    // the run's attempt: 1 unless a backfill retries it
	Target  string // the partition's key, the window's text form, or empty
	Status  Status
	Start   time.Time
	End     time.Time

	// Assets holds one outcome per asset, in the DAG's order.
	Assets []AssetResult

	// Completed, Failed, Canceled and Skipped name the assets that ended
	// so, in the DAG's order.
	Completed, Failed, Canceled, Skipped []string

	// Rows is the number of rows the run's assets wrote, all assets
	// together.
	Rows int

	// HookErr reports the hooks that panicked during the run, each panic
	// a [*PanicError] naming the event's kind, joined with errors.Join;
	// nil when none did. A panicking hook does not change the run's
	// outcome.
	HookErr error
}

// Asset returns the outcome of the named asset, and whether the run
// had that asset.
func (r *Result) Asset(asset string) (AssetResult, bool) {
	for _, o := range r.Assets {
		if o.Asset == asset {
			return o, true
		}
	}
	return AssetResult{}, false
}

// AssetResult is how one asset ended in a run.
type AssetResult struct {
	Asset    string
	Status   Status
	Start    time.Time // zero if the asset never started
	End      time.Time
	Attempts int // calls made; 0 if it never started

	// Rows is the number of rows the asset returned and wrote, and
	// RowsByPartition the same count per partition key (with 0 for the
	// partitions of a window that got no rows). RowsByPartition is nil
	// for unpartitioned assets, and for partitioned assets without a
	// Partitioning.Column.
	Rows            int
	RowsByPartition map[string]int

	// Err is why the asset failed (an [*AssetError]), was canceled or
	// skipped; nil when it completed.
	Err error
}

// AssetError is the failure of an asset in a run: the error of its last
// attempt, which may be a [*PanicError], a timeout (matching
// context.DeadlineExceeded), a destination's refusal, or any error the
// asset returned.
type AssetError struct {
	Asset    string
	Target   string // the partition's key or the window's text form; empty for none
	Attempts int
	Err      error
}

// Error names the asset, the target and the number of attempts, then
// gives the last attempt's error.
func (e *AssetError) Error() string {
	target := ""
	if e.Target != "" {
		target = " for " + e.Target
	}
	tries := ""
	if e.Attempts > 1 {
		tries = fmt.Sprintf(" after %d attempts", e.Attempts)
	}
	return fmt.Sprintf("tranche: asset %q failed%s%s: %v", e.Asset, target, tries, e.Err)
}

// Unwrap returns the error of the asset's last attempt.
func (e *AssetError) Unwrap() error { return e.Err }

// PanicError is a panic recovered from an asset, a destination or a hook,
// with the stack of the goroutine that panicked.
type PanicError struct {
	Value any    // the value passed to panic
	Stack []byte // the stack trace, as runtime/debug.Stack formats it
	Where string // what panicked: "asset daily", "destination files", "event hook, for run.started of run …"
}

// Error names what panicked and the panic value; the stack is in Stack.
func (e *PanicError) Error() string {
	return fmt.Sprintf("tranche: %s panicked: %v", e.Where, e.Value)
}

// Unwrap returns the panic value if it is an error, so that errors.Is
// and errors.As look into it, and nil otherwise.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// errCanceled builds the error of an asset that did not finish.
func errCanceled(asset string, cause error) error {
	if cause == nil {
		cause = errors.New("context canceled")
	}
	return fmt.Errorf("tranche: asset %q canceled: %w", asset, cause)
}
