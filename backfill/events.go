package backfill

import (
	"log/slog"

	"github.com/tranche-dev/tranche"
)

// Backfill and partition events. A backfill emits them around the runs
// of its partitions, with [tranche.Event.Backfill] and [tranche.Event.Progress] set.
const (
	KindStarted   tranche.Kind = "backfill.started"
	KindSucceeded tranche.Kind = "backfill.succeeded"
	KindFailed    tranche.Kind = "backfill.failed"
	KindCanceled  tranche.Kind = "backfill.canceled"
	// KindUnfinished ends a run that did its part and left partitions
	// held by other workers, not succeeded (Report.Held): the backfill
	// is not done, though nothing went wrong here (the event has no
	// error).
	KindUnfinished tranche.Kind = "backfill.unfinished"

	KindPartitionClaimed   tranche.Kind = "partition.claimed"   // this worker holds the partition's lease
	KindPartitionStarted   tranche.Kind = "partition.started"   // its run starts
	KindPartitionSucceeded tranche.Kind = "partition.succeeded" // its run succeeded and is recorded
	KindPartitionFailed    tranche.Kind = "partition.failed"    // its run failed
	KindPartitionSkipped   tranche.Kind = "partition.skipped"   // it already succeeded, or a newer version of the DAG landed it (Err matches ledger.ErrSuperseded)
	KindPartitionHeld      tranche.Kind = "partition.held"      // another worker holds its lease
	KindPartitionWaiting   tranche.Kind = "partition.waiting"   // held under a lease that stopped being renewed (Err names its holder; Duration: until it expires): the run waits to take it over
	KindPartitionUnclaimed tranche.Kind = "partition.unclaimed" // its claim failed (Err: the ledger unreachable): neither run nor recorded

	// KindLimited reports that the DAG's limit (ledger.Limiter) holds
	// the run's next claims back: as many runs as it allows hold
	// leases, or a slot of the DAG's schedule waits to go first (Err
	// says which). The run waits and claims again; it is sent when a
	// wait starts, not at each claim refused.
	KindLimited tranche.Kind = "backfill.limited"

	// KindLeaseRenewFailed reports a heartbeat of a running partition's
	// lease that failed or timed out (Err says which, Duration how long
	// it took). The partition runs on, and its lease is renewed again
	// soon; if it cannot be renewed in time, the worker stops the
	// partition (see Backfill.Lease).
	KindLeaseRenewFailed tranche.Kind = "lease.renew_failed"
	// KindLeaseRenewSlow reports a heartbeat that renewed the lease but
	// took longer than the heartbeat interval (Duration).
	KindLeaseRenewSlow tranche.Kind = "lease.renew_slow"
)

// kindLevel is the level of events of kind k, for each kind above, set
// on the events a backfill emits ([tranche.Event.Level]) so that
// [tranche.SlogHook] logs them at it; ok is false for any other kind.
func kindLevel(k tranche.Kind) (level slog.Level, ok bool) {
	switch k {
	case KindFailed, KindPartitionFailed:
		return slog.LevelError, true
	case KindUnfinished, KindPartitionUnclaimed, KindPartitionWaiting, KindLeaseRenewFailed, KindLeaseRenewSlow:
		return slog.LevelWarn, true
	case KindStarted, KindSucceeded, KindCanceled, KindPartitionSucceeded, KindPartitionSkipped, KindLimited:
		return slog.LevelInfo, true
	case KindPartitionClaimed, KindPartitionStarted, KindPartitionHeld:
		return slog.LevelDebug, true
	}
	return 0, false
}
