package tranche

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The package's errors, all here: the error types, found with errors.As,
// and the values matched with errors.Is.

// PartitionError reports a partition or window that reaches before an
// asset's first partition. Find it with errors.As (or errors.AsType),
// which gives the asset and both partitions. To run only what the asset
// can take, clamp the window with [TimePartitionWindow.ClampStart] at
// First.Start.
type PartitionError struct {
	Asset  string        // the asset's name
	Oldest TimePartition // the oldest partition asked for
	First  TimePartition // the asset's first partition
}

func (e *PartitionError) Error() string {
	return fmt.Sprintf("tranche: asset %q: partition %s is before its first partition %s; clamp the window to start at %s",
		e.Asset, e.Oldest.Key(), e.First.Key(), e.First.Start.Format(time.RFC3339))
}

// ParseError reports text that one of the package's parsers refused: a
// bound ([ParseBound], [SlotWindow]), a partition key
// ([ParsePartitionKey]), a granularity ([ParseGranularity]), a cron
// expression ([ParseCron]), or the text form of a window or partition.
// Find it with errors.As (or errors.AsType); its Reason says what was
// wrong and what would be accepted.
type ParseError struct {
	// Type names what was parsed: "bound", "partition key",
	// "granularity", "cron", "window" or "partition".
	Type string
	// Text is the text as given.
	Text string
	// Reason says what was wrong with Text and, where it helps, what
	// would be accepted, as in "month 13 is out of range (01 to 12)" or
	// "relative words such as yesterday are not times: use Lookback".
	Reason string
	// Err is the error of a part of Text, when one caused this one (the
	// key of a window, a cron field), else nil.
	Err error
}

func (e *ParseError) Error() string {
	return "tranche: " + e.Type + " " + strconv.Quote(e.Text) + ": " + e.Reason
}

// Unwrap returns Err.
func (e *ParseError) Unwrap() error { return e.Err }

// reasonOf returns err's text for the Reason of an enclosing ParseError:
// without the package prefix.
func reasonOf(err error) string {
	return strings.TrimPrefix(err.Error(), "tranche: ")
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

// ErrFenced is matched by every refusal of a write, or of a record of
// success, made under an attempt that a newer one has overtaken: a fenced
// destination's refusal of a stale write ([StaleWriteError]), a ledger's
// refusal of a lapsed lease (ledger.ErrFenced is this same value), and a
// worker's refusal to write once its lease has lapsed by its own clock.
var ErrFenced = errors.New("tranche: lease lost to a newer attempt")

// StaleWriteError is a fenced destination's refusal of a write by an
// attempt older than the one that last wrote the partition: a worker
// that lost its partition to another while it was paused or cut off. It
// matches [ErrFenced].
type StaleWriteError struct {
	Asset, Key string // the partition ("" for an unpartitioned asset)
	Token      int64  // the refused write's token
	Latest     int64  // the token of the partition's last write
}

func (e *StaleWriteError) Error() string {
	where := "unpartitioned"
	if e.Key != "" {
		where = "partition " + e.Key
	}
	return fmt.Sprintf("tranche: asset %q, %s: write of token %d refused: token %d wrote it since (%v)",
		e.Asset, where, e.Token, e.Latest, ErrFenced)
}

// Is reports whether target is [ErrFenced].
func (e *StaleWriteError) Is(target error) bool { return target == ErrFenced }

// ErrSkip is returned by an [Asset.Materialize] (possibly wrapped) to say that
// there is nothing to materialize for this partition or window: nothing is
// written, the asset is reported skipped, and so are the assets that
// depend on it. A skip is not a failure.
var ErrSkip = errors.New("tranche: skip")
