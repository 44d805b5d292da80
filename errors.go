package tranche

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

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

// BoundaryError reports a window bound that does not lie on a partition
// boundary, with the nearest boundaries on either side.
type BoundaryError struct {
	Bound         string // "from" or "to"
	Value         time.Time
	Granularity   TimeGranularity
	Before, After time.Time // the nearest boundaries at or before and after Value
}

func (e *BoundaryError) Error() string {
	return fmt.Sprintf("tranche: %s %s is not a %v boundary in %v; the nearest are %s and %s",
		e.Bound, e.Value.Format(time.RFC3339Nano), e.Granularity, e.Value.Location(),
		e.Before.Format(time.RFC3339), e.After.Format(time.RFC3339))
}

// ParseError reports text that one of the package's parsers refused: a
// bound ([ParseBound], [SlotWindow]), a partition key
// ([ParsePartitionKey]), a granularity ([ParseGranularity]), a cron
// expression ([ParseCron]), or the text form of a window or partition.
// Find it with errors.As (or errors.AsType); its Reason says what was
// wrong and what would be accepted.
type ParseError struct {
	// Kind names what was parsed: "bound", "partition key",
	// "granularity", "cron", "window" or "partition".
	Kind string
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
	return "tranche: " + e.Kind + " " + strconv.Quote(e.Text) + ": " + e.Reason
}

// Unwrap returns Err.
func (e *ParseError) Unwrap() error { return e.Err }

// reasonOf returns err's text for the Reason of an enclosing ParseError:
// without the package prefix.
func reasonOf(err error) string {
	return strings.TrimPrefix(err.Error(), "tranche: ")
}
