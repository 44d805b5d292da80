package tranche

import (
	"errors"
	"fmt"
	"time"
)

// State is how a run or an asset ended. Its string value is stable.
type State string

// The states a run or an asset ends in. A run is StateSucceeded when
// every asset succeeded or was skipped, StateFailed when an asset failed, and
// StateCanceled when its context was canceled before any asset failed.
const (
	StateSucceeded State = "succeeded"
	StateFailed    State = "failed"
	StateCanceled  State = "canceled" // the asset did not finish
	StateSkipped   State = "skipped"  // assets only: see ErrSkip
)

// Result reports how a run went, asset by asset.
type Result struct {
	RunID   string
	Attempt int    // the run's attempt: 1 unless a backfill retries it
	Target  string // the partition's key, the window's text form, or empty
	State   State
	Start   time.Time
	End     time.Time

	// Assets holds one outcome per asset, in the DAG's order.
	Assets []AssetResult

	// Succeeded, Failed, Canceled and Skipped name the assets that ended
	// so, in the DAG's order.
	Succeeded, Failed, Canceled, Skipped []string

	// Rows is the number of rows the run's assets wrote, all assets
	// together.
	Rows int

	// HookErr reports the hooks that panicked during the run, each panic
	// a [*PanicError] naming the event's kind, joined with errors.Join;
	// nil when none did. A panicking hook does not change the run's
	// outcome.
	HookErr error
}

// AssetResult is how one asset ended in a run.
type AssetResult struct {
	Asset    string
	State    State
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
	// skipped; nil when it succeeded.
	Err error
}

func errCanceled(asset string, cause error) error {
	if cause == nil {
		cause = errors.New("context canceled")
	}
	return fmt.Errorf("tranche: asset %q canceled: %w", asset, cause)
}
