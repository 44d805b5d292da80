package ledger

import (
	"fmt"
	"math"
	"time"

	"github.com/tranche-dev/tranche"
)

// The rules every Ledger applies, word for word in their messages, so that
// ledgers answer alike: the in-memory ledger, and those in other modules
// (package sqlledger), which call these methods.

// Validate checks a claim request before a ledger looks at it: a DAG
// identity, a worker, at least one partition, each a real partition named
// once and keyable by Unix nanoseconds (starting between 1678 and 2262), a
// positive lease and a known rerun policy.
func (req ClaimRequest) Validate() error {
	switch {
	case req.DAG == "":
		return fmt.Errorf("tranche: claim without a DAG identity")
	case req.Worker == "":
		return fmt.Errorf("tranche: claim without a worker name")
	case len(req.Partitions) == 0:
		return fmt.Errorf("tranche: claim of no partitions")
	case req.Lease <= 0:
		return fmt.Errorf("tranche: claim with lease %v; it must be positive", req.Lease)
	}
	if _, err := parseRerunPolicy(string(req.Policy)); err != nil {
		return err
	}
	for i, p := range req.Partitions {
		switch {
		case !p.Granularity.IsValid() || !p.Start.Before(p.End):
			return fmt.Errorf("tranche: claim of partition %d, %v: not a partition", i, p)
		case p.Start.Before(minLedgerTime) || p.Start.After(maxLedgerTime):
			return fmt.Errorf("tranche: claim of partition %v: a ledger keeps partitions starting from %s to %s",
				p, minLedgerTime.Format(time.RFC3339), maxLedgerTime.Format(time.RFC3339))
		}
	}
	return checkDistinct(req.Partitions)
}

// checkDistinct refuses a chunk that names one partition twice, which would
// start two attempts with one number. Chunks come in order, or nearly.
func checkDistinct(ps []tranche.TimePartition) error {
	for i := 1; i < len(ps); i++ {
		if ps[i-1].Start.Before(ps[i].Start) {
			continue
		}
		seen := make(map[int64]bool, len(ps))
		for _, p := range ps {
			if seen[p.Start.UnixNano()] {
				return fmt.Errorf("tranche: claim of partition %s twice", p.Key())
			}
			seen[p.Start.UnixNano()] = true
		}
		return nil
	}
	return nil
}

// The partition starts a ledger can key by Unix nanoseconds.
var (
	minLedgerTime = time.Unix(0, math.MinInt64).UTC()
	maxLedgerTime = time.Unix(0, math.MaxInt64).UTC()
)

// An Action is what the claim rules decide for one partition: whether a
// request may start an attempt at it, and if not, why. [ClaimRequest.Judge]
// gives it; a ledger's Claim refuses (through [ClaimRequest.Admits]) and a
// backfill's plan runs or skips by the same action, so the two never
// disagree. Its string value is stable: plans print it and their JSON
// holds it.
type Action string

// The actions of [ClaimRequest.Judge].
const (
	// ActionRun: no attempt yet, a failed or canceled one the policy
	// reruns, a running one whose lease expired (taken over), or a
	// success that the policy reruns.
	ActionRun           Action = "run"
	ActionSkipRunning   Action = "skip: running elsewhere" // running under another attempt's live lease
	ActionSkipSucceeded Action = "skip: succeeded"         // succeeded, and the policy does not rerun it
	ActionSkipRecorded  Action = "skip: recorded"          // failed or canceled, and the policy is RerunNone
	// ActionSkipSuperseded: another version of the DAG (an identity
	// whose backfills share its name) landed the partition after the
	// backfill was created, and the policy is not RerunAll (see
	// [ClaimRequest.JudgeVersion]).
	ActionSkipSuperseded Action = "skip: landed by a newer version"
)

// Judge applies the claim rules of [Leaser.Claim] to a partition whose
// latest attempt is latest (nil if none), at the ledger's time now, under
// req's Policy ("" is RerunFailed) and Revision.
func (req ClaimRequest) Judge(latest *Attempt, now time.Time) Action {
	switch {
	case latest == nil:
		return ActionRun
	case latest.State == StateRunning:
		if now.Before(latest.LeaseUntil) {
			return ActionSkipRunning
		}
		return ActionRun // the holder's lease expired: take it over
	case latest.State == StateSucceeded:
		if req.Policy == RerunAll && latest.Revision <= req.Revision {
			return ActionRun
		}
		if req.Policy == RerunStale && latest.CodeVersion != req.CodeVersion {
			return ActionRun
		}
		return ActionSkipSucceeded
	case req.Policy == RerunNone:
		return ActionSkipRecorded
	}
	return ActionRun
}

// Admits is [ClaimRequest.Judge] as an error for partition p: nil if the
// request may start an attempt at it, else an error matching
// [ErrNotClaimable] that says why.
func (req ClaimRequest) Admits(latest *Attempt, p tranche.TimePartition, now time.Time) error {
	switch req.Judge(latest, now) {
	case ActionSkipRunning:
		return fmt.Errorf("%w: %s is held by worker %s (attempt %d) until %s",
			ErrNotClaimable, p.Key(), latest.Worker, latest.Number, latest.LeaseUntil.Format(time.RFC3339Nano))
	case ActionSkipSucceeded:
		return fmt.Errorf("%w: %s succeeded (attempt %d by worker %s)", ErrNotClaimable, p.Key(), latest.Number, latest.Worker)
	case ActionSkipRecorded:
		return fmt.Errorf("%w: %s has a recorded run (%s) and the rerun policy is none", ErrNotClaimable, p.Key(), latest.State)
	}
	return nil
}

// CheckNotBefore applies the bound of [ClaimRequest.NotBefore] at the
// ledger's time now: nil when req has none or now has reached it, else an
// [*EarlyError]. A ledger checks it after it refuses the claims of a
// canceled backfill ([CanceledError]) and before it judges the
// partitions, so that a claim made too early is refused alike whatever
// their history.
func (req ClaimRequest) CheckNotBefore(now time.Time) error {
	if req.NotBefore.IsZero() || !req.NotBefore.After(now) {
		return nil
	}
	var p tranche.TimePartition
	if len(req.Partitions) > 0 {
		p = req.Partitions[0]
	}
	return &EarlyError{Partition: p, NotBefore: req.NotBefore, Now: now}
}

// EarlyError is the error of a claim made before its
// [ClaimRequest.NotBefore] by the ledger's clock: a scheduler whose clock
// runs ahead of the ledger's claimed a slot that has not closed yet. It
// matches [ErrNotClaimable]; errors.As finds it, and [EarlyError.Wait]
// says how long until the claim may be made again.
type EarlyError struct {
	Partition tranche.TimePartition // the claim's first partition
	NotBefore time.Time             // the claim's bound
	Now       time.Time             // the ledger's clock when it refused the claim
}

// Wait returns how long after the refusal the ledger's clock reaches
// NotBefore: the time to wait before claiming again, on any clock that
// runs at the ledger's pace.
func (e *EarlyError) Wait() time.Duration { return max(e.NotBefore.Sub(e.Now), 0) }

func (e *EarlyError) Error() string {
	what := e.Partition.Key()
	if what == "" {
		what = "the claim"
	}
	return fmt.Sprintf("%v: %s may be claimed from %s by the ledger's clock, which reads %s: %v early",
		ErrNotClaimable, what, e.NotBefore.UTC().Format(time.RFC3339Nano), e.Now.UTC().Format(time.RFC3339Nano), e.Wait())
}

// Is reports whether target is [ErrNotClaimable].
func (e *EarlyError) Is(target error) bool { return target == ErrNotClaimable }

// JudgeVersion applies the rule of deploys to a partition that
// [ClaimRequest.Judge] lets req claim: other is the latest attempt at the
// same partition (same bounds) under another version of the DAG, an
// identity that a backfill recorded under the same non-empty DAG name
// ([BackfillRecord.DAGName]) as req's backfill, and since is when req's
// backfill was created ([BackfillRecord.Created]).
//
// A backfill does not replace what a newer version of its DAG landed
// after the backfill was created: the old code's backfill, still running
// through a deploy, would otherwise claim every partition the new code
// landed (none succeeded under the old identity) and replace the new
// code's rows with the old code's, and its claim, being the newest, would
// pass every fence. So a success of other finished at or after since is
// [ActionSkipSuperseded], and an attempt of other claimed at or after since
// and still running under a live lease is [ActionSkipRunning]. What other did
// before since does not bind the backfill: a backfill created after a
// deploy, a rollback to the old code among them, replaces what the new
// code landed before it. Under RerunAll, which reruns what succeeded, the
// rule does not apply: that is how an operator rolls back through a
// backfill recorded before the deploy. A claim outside any backfill, and
// a nil other, are always ActionRun.
func (req ClaimRequest) JudgeVersion(other *Attempt, since, now time.Time) Action {
	switch {
	case other == nil || req.Backfill == "" || req.Policy == RerunAll:
		return ActionRun
	case other.State == StateSucceeded && !other.Finished.Before(since):
		return ActionSkipSuperseded
	case other.State == StateRunning && now.Before(other.LeaseUntil) && !other.Started.Before(since):
		return ActionSkipRunning
	}
	return ActionRun
}

// AdmitsVersion is [ClaimRequest.JudgeVersion] as an error for partition
// p: nil if req may claim it, else an error matching [ErrNotClaimable]
// that says why, which also matches [ErrSuperseded] for
// ActionSkipSuperseded.
func (req ClaimRequest) AdmitsVersion(other *Attempt, p tranche.TimePartition, since, now time.Time) error {
	switch req.JudgeVersion(other, since, now) {
	case ActionSkipSuperseded:
		return supersededError(fmt.Sprintf("%v: %s was landed by another version of the DAG (identity %s, attempt %d by worker %s, finished %s) after backfill %s was created (%s)",
			ErrNotClaimable, p.Key(), other.DAG, other.Number, other.Worker, other.Finished.Format(time.RFC3339Nano), req.Backfill, since.Format(time.RFC3339Nano)))
	case ActionSkipRunning:
		return fmt.Errorf("%w: %s is held by worker %s of another version of the DAG (identity %s, attempt %d) until %s",
			ErrNotClaimable, p.Key(), other.Worker, other.DAG, other.Number, other.LeaseUntil.Format(time.RFC3339Nano))
	}
	return nil
}

// supersededError is the error of [ActionSkipSuperseded]: it matches both
// [ErrNotClaimable] and [ErrSuperseded].
type supersededError string

func (e supersededError) Error() string { return string(e) }

func (e supersededError) Is(target error) bool {
	return target == ErrNotClaimable || target == ErrSuperseded
}

// TakeoverReason is the error a ledger records on an attempt whose lease
// expired at until when worker took its partition over.
func TakeoverReason(until time.Time, worker string) string {
	return fmt.Sprintf("lease expired at %s; taken over by worker %s", until.Format(time.RFC3339Nano), worker)
}

// CheckHeld reports, as an error matching [ErrFenced], that the lease no
// longer holds its i-th partition, whose latest attempt is latest: a newer
// attempt took it over, or it already finished. Nil while it holds it.
func (l *Lease) CheckHeld(i int, latest *Attempt) error {
	if latest == nil || latest.Number != l.Attempts[i] || latest.Worker != l.Worker || latest.State != StateRunning {
		return fmt.Errorf("%w: %s attempt %d of worker %s", ErrFenced, l.Partitions[i].Key(), l.Attempts[i], l.Worker)
	}
	return nil
}

// CheckOutcomes checks what [Leaser.Finish] is given: one terminal outcome
// per leased partition.
func (l *Lease) CheckOutcomes(outcomes []Outcome) error {
	if len(outcomes) != len(l.Partitions) {
		return fmt.Errorf("tranche: Finish with %d outcomes for %d partitions", len(outcomes), len(l.Partitions))
	}
	for _, o := range outcomes {
		if !o.State.Terminal() {
			return fmt.Errorf("tranche: Finish with state %q; want succeeded, failed or canceled", o.State)
		}
	}
	return nil
}

// Validate checks a request of [Leaser.ClaimNext] as [ClaimRequest.Validate]
// checks a claim, each job as the partitions of one claim: a backfill, a
// positive Want, at least one job, each with partitions, and jobs in the
// request's order, no two sharing a partition.
func (req NextRequest) Validate() error {
	switch {
	case req.Backfill == "":
		return fmt.Errorf("tranche: ClaimNext without a backfill")
	case req.Want < 1:
		return fmt.Errorf("tranche: ClaimNext of %d jobs; want 1 or more", req.Want)
	case len(req.Jobs) == 0:
		return fmt.Errorf("tranche: ClaimNext of no jobs")
	}
	for i, j := range req.Jobs {
		if err := req.Claim(j).Validate(); err != nil {
			return fmt.Errorf("job %d: %w", i, err)
		}
		if i > 0 && !req.follows(req.Jobs[i-1], j) {
			order := "oldest first"
			if req.Descending {
				order = "newest first"
			}
			return fmt.Errorf("tranche: ClaimNext: job %d (%s) does not follow job %d (%s) %s", i, j.Partitions[0].Key(), i-1,
				req.Jobs[i-1].Partitions[0].Key(), order)
		}
	}
	return nil
}

// follows reports whether job j comes after job prev in the request's
// order, sharing no partition with it.
func (req NextRequest) follows(prev, j Job) bool {
	first, last := prev, j
	if req.Descending {
		first, last = j, prev
	}
	return !last.Start().Before(first.Partitions[len(first.Partitions)-1].End)
}

// Before reports whether a job starting at a comes before one starting
// at b in the request's order: the rule by which a cursor at a passes
// over a job at b when !req.Before(a, b).
func (req NextRequest) Before(a, b time.Time) bool {
	if req.Descending {
		return a.After(b)
	}
	return a.Before(b)
}

// CanceledError is the error of a claim of canceled backfill id: it
// matches both [ErrNotClaimable] and [ErrBackfillCanceled].
func CanceledError(id string) error { return canceledError(id) }

type canceledError string

func (e canceledError) Error() string {
	return fmt.Sprintf("%v: backfill %s was canceled", ErrNotClaimable, string(e))
}

func (e canceledError) Is(target error) bool {
	return target == ErrNotClaimable || target == ErrBackfillCanceled
}

// PassedError is the error of a job that [Leaser.ClaimNext] passed over:
// the cursor had moved past it for another worker, or another
// transaction was claiming it.
func PassedError(j Job) error {
	return fmt.Errorf("%w: %s was handed to another worker", ErrNotClaimable, j.Partitions[0].Key())
}
