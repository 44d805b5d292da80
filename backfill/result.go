package backfill

import (
	"fmt"
	"strings"
	"time"
)

// Report is what one worker's run of a backfill did. RanHere + Skipped +
// Elsewhere + Held + NotRun + Unclaimed == Total.
type Report struct {
	Backfill string
	Worker   string
	Total    int // partitions in the window, or chosen

	Succeeded int // partitions this worker ran that succeeded
	// Failed counts the partitions this worker ran that failed, or lost
	// to a newer attempt (fenced). Under WaitForOthers, a partition lost
	// and then taken over again, once the worker that took it died, counts
	// by its last run here: a partition counts once.
	Failed  int
	Skipped int // partitions that had succeeded already, or were left alone by the rerun policy
	// Superseded counts those of Skipped that another version of the
	// DAG landed after the backfill was created (a deploy: the new
	// code's rows, which this backfill leaves; see
	// ledger.ClaimRequest.JudgeVersion).
	Superseded int
	Elsewhere  int // partitions other workers held during the run, and finished: succeeded there (or, under RerunNone, failed there)
	Held       int // partitions other workers held during the run, not succeeded when it ended: running there still, or failed there
	NotRun     int // partitions left pending: the backfill stopped, was canceled, or its context ended
	Unclaimed  int // partitions whose claims failed (the ledger unreachable): never run, nor recorded

	Failures      []Failure // the failed partitions, in the order they failed
	ClaimFailures []Failure // the partitions Unclaimed counts, with why their claims failed
	Duration      time.Duration
	Plan          *Plan

	// Assets, for a DAG of several granularities, is what the backfill
	// did with each asset, in the DAG's order; the counts above sum
	// them, in asset partitions. Nil for a DAG of one.
	Assets []AssetReport

	// HookErr joins the panics of OnEvent, each a [*PanicError]; nil when
	// none panicked. A panicking hook does not change the backfill.
	HookErr error
}

// RanHere returns the partitions this worker ran.
func (r *Report) RanHere() int { return r.Succeeded + r.Failed }

// Done reports whether the run left nothing for a later run to do: every
// partition of the window succeeded, here or elsewhere, or was left alone
// by the rerun policy. [StatusOf] tells whether every partition has
// succeeded.
func (r *Report) Done() bool {
	return r.Succeeded+r.Skipped+r.Elsewhere == r.Total
}

// String summarizes the report in one line.
func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "backfill %s by %s: %d partitions: %d succeeded here, %d failed here, %d skipped, %d done elsewhere",
		r.Backfill, r.Worker, r.Total, r.Succeeded, r.Failed, r.Skipped, r.Elsewhere)
	if r.Superseded > 0 {
		fmt.Fprintf(&b, ", %d of the skipped landed by a newer version of the DAG", r.Superseded)
	}
	if r.Held > 0 {
		fmt.Fprintf(&b, ", %d held by other workers (not done)", r.Held)
	}
	fmt.Fprintf(&b, ", %d not run", r.NotRun)
	if r.Unclaimed > 0 {
		fmt.Fprintf(&b, ", %d not claimed (the ledger failed; neither run nor recorded)", r.Unclaimed)
	}
	fmt.Fprintf(&b, ", in %v", r.Duration.Round(time.Millisecond))
	return b.String()
}

// Failure is a partition that failed in a backfill.
type Failure struct {
	Key string
	Err error
}
