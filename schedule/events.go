package schedule

import (
	"log/slog"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/ledger"
)

// Scheduler and slot events. A scheduler emits them, and the events of
// every run it makes, to its OnEvent hook. Slot events carry the slot in
// [tranche.Event.Partition] and its key in Target; those of a slot that
// runs, and every event of its run, carry its [ledger.Trigger] in
// [tranche.Event.Trigger], as the ledger records it on the slot's attempt.
const (
	KindStarted tranche.Kind = "schedule.started" // Run began; Target is the first slot it waits for
	KindStopped tranche.Kind = "schedule.stopped" // Run ended: its context ended and its runs are over

	// KindPaused reports that the scheduler found its schedule paused
	// ([Scheduler.Pause]), when it starts or once it runs; KindResumed,
	// resumed. Their attributes by, note and since say who, why and
	// when, by the ledger's clock.
	KindPaused  tranche.Kind = "schedule.paused"
	KindResumed tranche.Kind = "schedule.resumed"

	// KindClaimed: this scheduler holds the slot's lease; its run starts
	// (with a Budget, once it has a place). Duration is the lag from the
	// slot's close (its End) to the claim, by the scheduler's clock.
	KindClaimed   tranche.Kind = "slot.claimed"
	KindSucceeded tranche.Kind = "slot.succeeded" // its run succeeded and is recorded
	KindFailed    tranche.Kind = "slot.failed"    // its run failed and is recorded failed (Err says why); no scheduler runs it again

	// KindInterrupted reports a run stopped before it ended: Run's
	// context ended, or the lease was lost (Err says which). Nothing is
	// recorded: the attempt is left to its lease, after which any
	// scheduler on the ledger takes the slot over and runs it again, as
	// after a crash. A slot whose context ended while it waited for a
	// place in the Budget never ran: its claim is withdrawn
	// ([ledger.Leaser.Release]), and the slot is claimable at once.
	KindInterrupted tranche.Kind = "slot.interrupted"

	KindHeld      tranche.Kind = "slot.held"      // another worker (a replica, a backfill) runs the slot; it is watched until that ends
	KindElsewhere tranche.Kind = "slot.elsewhere" // the slot has a finished attempt by another worker, or is one a moved schedule covered: not run here

	// KindMissed reports a slot that came due while no scheduler ran,
	// older than the catch-up window, with no attempt in the ledger: it
	// is not run, and is recorded canceled, its error saying it was
	// missed, so that no later start reports it again and a backfill
	// (rerun policy failed, its default) runs it.
	KindMissed tranche.Kind = "slot.missed"

	// KindSkipped reports a slot not run under its overlap policy: it
	// came due while an earlier one still ran ([OverlapSkip]), while the
	// queue was full ([OverlapBufferOne], [Scheduler].MaxQueue), or with
	// a later one ([OverlapCancelOther]). It is recorded canceled, its
	// error saying it was skipped and why, for a backfill to run.
	KindSkipped tranche.Kind = "slot.skipped"

	// KindCanceled reports a run stopped because a later slot came due,
	// under [OverlapCancelOther]: it is recorded canceled, its error
	// saying so, for a backfill to run again.
	KindCanceled tranche.Kind = "slot.canceled"

	// KindEarly reports a claim of a due slot, to run it or to record it
	// skipped or missed, that the ledger refused as early: the slot has
	// not closed (plus Delay) by the ledger's clock, which runs behind
	// this scheduler's. Duration is how long until it does, by the
	// ledger's clock, after which the slot is claimed again (or, under
	// [OverlapSkip], whether it runs is decided again); the ledger_time
	// attribute is the ledger's time at the refusal. It is DEBUG: the
	// slot is run, or not, at its close, as it should be.
	KindEarly tranche.Kind = "slot.early"

	// KindLimited reports a slot whose claim the DAG's limit refused
	// ([ledger.Limiter]): as many runs as the limit allows hold leases
	// (Err says how many). The ledger records the slot's demand, so
	// that no backfill starts a partition before it; it is claimed again
	// every few tens of milliseconds, and runs once a run ends. Sent
	// once a slot.
	KindLimited tranche.Kind = "slot.limited"

	// KindWaiting reports a due slot of an asset of a DAG of several
	// granularities that waits for a partition it maps to (the
	// attribute upstream names the first that has not succeeded): it
	// is claimed once they all have, or at its deadline
	// ([Scheduler].WaitUpstream) recorded missed, or, with RunLate, run
	// anyway ([KindLate], the same attribute). Sent once a slot.
	KindWaiting tranche.Kind = "slot.waiting"
	KindLate    tranche.Kind = "slot.late"

	// KindStale reports a slot that succeeded before a partition it
	// maps to succeeded again (the attribute reason says which), found
	// under [Scheduler].RerunStale: it runs again.
	KindStale tranche.Kind = "slot.stale"

	// KindQueue reports a change in the number of due slots this
	// scheduler waits to run (queued behind a running one, or held by
	// another worker): the attribute queued. It is DEBUG.
	KindQueue tranche.Kind = "schedule.queue"

	// KindLedgerError reports a call to the ledger that failed (Err):
	// reading the history, or claiming a slot. The scheduler tries again
	// a heartbeat interval later.
	KindLedgerError tranche.Kind = "schedule.ledger_error"
)

// kindLevel is the level of events of kind k, for each kind above, set
// on the events a scheduler emits ([tranche.Event.Level]) so that
// [tranche.SlogHook] logs them at it; ok is false for any other kind. A
// failed slot is INFO: its run's own events (run.failed) are the ERROR
// that pages, once.
func kindLevel(k tranche.Kind) (level slog.Level, ok bool) {
	switch k {
	case KindLedgerError:
		return slog.LevelWarn, true
	case KindEarly, KindQueue:
		return slog.LevelDebug, true
	case KindStarted, KindStopped, KindPaused, KindResumed, KindClaimed, KindSucceeded, KindFailed,
		KindInterrupted, KindHeld, KindElsewhere, KindMissed, KindSkipped, KindCanceled, KindLimited,
		KindWaiting, KindLate, KindStale:
		return slog.LevelInfo, true
	}
	return 0, false
}

// TriggerOf returns the trigger an event carries ([tranche.Event].Trigger),
// or "" for an event without one.
func TriggerOf(e tranche.Event) ledger.Trigger { return ledger.Trigger(e.Trigger) }
