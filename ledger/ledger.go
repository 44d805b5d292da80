package ledger

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"time"

	"github.com/tranche-dev/tranche"
)

// A Ledger records every attempt at every partition of a DAG, so that a
// backfill run again resumes instead of starting over, and so that several
// workers sharing one backfill each land a partition exactly once.
//
// A ledger keys partitions by the DAG's identity (backfill.DAGIdentity) and
// the partition's bounds. History is shared: an ordinary run of a
// partition recorded through backfill.RunRecorded counts for every later backfill
// of the same DAG.
//
// Every claim and transition is atomic and fenced: a [Lease] names the
// attempt it holds, and [Leaser.Heartbeat] and [Leaser.Finish] fail with
// [ErrFenced] once a newer attempt has taken the partition over, so a
// worker that stalled past its lease cannot record a result over the
// newer one. Leases are judged by the ledger's clock, never a worker's,
// and so is a claim's earliest start ([ClaimRequest.NotBefore]): a
// scheduler whose clock runs fast cannot start a slot before it closes.
//
// memledger.New is the in-memory implementation; the SQL ledgers live
// in their own modules. ledgertest.Run checks any implementation.
type Ledger interface {
	Reader
	Leaser
	Writer
}

// A Reader reads a ledger: the attempts of a DAG's partitions, its
// revision, its recent successes, the backfills' records and the
// schedule's pause. It is all that a backfill's status, grid, plan and
// watch, and the pages that draw them, need, and all that a ledger
// opened for reading offers (sqlite.OpenReader, postgres.OpenReader),
// so that a program which only reads cannot write by mistake.
type Reader interface {
	// Latest yields the latest attempt of each recorded partition of dag
	// whose start lies in [from, to), oldest partition first.
	Latest(ctx context.Context, dag string, from, to time.Time) iter.Seq2[Attempt, error]

	// History returns every attempt at the partition of dag starting at
	// start, oldest first.
	History(ctx context.Context, dag string, start time.Time) ([]Attempt, error)

	// Revision returns the revision of dag: a number that grows with
	// every claim and every finish of its attempts, each of which
	// records the revision of its change (Attempt.Revision). Plans record
	// it to notice a ledger that moved on, and bound RerunAll with it,
	// which needs it to be a watermark: every change committed after
	// Revision returned r has a revision above r.
	Revision(ctx context.Context, dag string) (int64, error)

	// RevisionIn returns the highest revision above after of the
	// attempts at the partitions of dag that start in [from, to), or 0
	// when none of them changed after revision after. A plan made at
	// revision r is stale when RevisionIn of its partitions from r is
	// not 0: changes to other partitions of the DAG leave it alone. Its
	// cost grows with the changes after after, not with the partitions
	// of the range, so that checking a plan of a million partitions
	// costs little.
	RevisionIn(ctx context.Context, dag string, from, to time.Time, after int64) (int64, error)

	// RecentSuccesses returns up to n succeeded attempts of dag,
	// wherever their partitions lie, the last to finish first: by
	// revision, highest first, then by partition start, latest first.
	// Plans estimate their duration from them. It returns none for
	// n < 1 or a DAG with no success.
	RecentSuccesses(ctx context.Context, dag string, n int) ([]Attempt, error)

	// Backfill returns the record of a backfill, or an error matching
	// [ErrUnknownBackfill].
	Backfill(ctx context.Context, id string) (BackfillRecord, error)

	// Backfills returns every recorded backfill, oldest first.
	Backfills(ctx context.Context) ([]BackfillRecord, error)

	// SchedulePause returns the pause of the schedule of dag as
	// [Writer.SetSchedulePause] last changed it: the zero value when it
	// never did.
	SchedulePause(ctx context.Context, dag string) (SchedulePause, error)
}

// A Leaser runs partitions under leases: it claims them, renews and
// releases the leases, and records each attempt's outcome, fenced so
// that a stale holder records nothing. A worker's backfill and a
// scheduler use it; a ledger may also be a [BatchFinisher], its optional
// extension.
type Leaser interface {
	// Claim starts a new attempt at each partition of req, all or none,
	// under a lease of req.Lease. It fails with an error matching
	// [ErrNotClaimable] when any partition is held under a live lease
	// by another attempt or its history does not call for a run under
	// req.Policy, when req.Backfill was canceled (then also matching
	// [ErrBackfillCanceled]), when req.NotBefore is after the ledger's
	// clock (then an [*EarlyError], which says how long to wait), or
	// when, for a backfill's claim, another version of the DAG landed or
	// holds a partition since the backfill was created
	// ([ClaimRequest.JudgeVersion]; a landed one also matches
	// [ErrSuperseded]). A partition whose
	// holder's lease has expired is taken over: the stale attempt is
	// recorded failed and the new one starts.
	Claim(ctx context.Context, req ClaimRequest) (*Lease, error)

	// ClaimNext hands the next jobs of a backfill to one of the workers
	// that share it, so that they never race for a partition. req.Jobs
	// are the jobs the worker would run next, in the backfill's order;
	// ClaimNext examines them in that order and claims, each under a
	// lease of its own as [Leaser.Claim] would, the first req.Want that
	// are claimable, in one atomic step.
	//
	// The ledger keeps a cursor for each DAG, backfill and order: the
	// start of the last job it examined for any worker ([Job.Start]),
	// and the revision at which it moved. When the cursor moved after
	// req.Revision (another worker was handed jobs after this worker's
	// plan was made), the jobs at or before it in the order are passed
	// over without being read: they were examined for that worker. The
	// others are judged as Claim judges a partition; those another
	// transaction is claiming at that moment are passed over too, and
	// never waited for. The cursor then moves to the last job examined,
	// unless every job was passed over: then it stays, so that it never
	// moves back over jobs it was given to others.
	//
	// It returns one [Grant] for each job examined, in order: the first
	// len(grants) of req.Jobs; a job left unexamined (Want was reached)
	// can be given again. A job not granted, passed over or refused,
	// has an error matching [ErrNotClaimable]. A canceled backfill fails
	// the call, claiming nothing, with an error matching both
	// [ErrBackfillCanceled] and ErrNotClaimable ([CanceledError]).
	ClaimNext(ctx context.Context, req NextRequest) ([]Grant, error)

	// Release withdraws the attempts of a lease whose partitions never
	// started running (a worker claimed ahead of what it ran, then
	// stopped): each partition's history is as if the lease had never
	// been claimed, so that no rerun policy counts it as a run. Release
	// moves the DAG's revision, but, as a lease that expires,
	// it is not a change [Reader.RevisionIn] reports. An attempt that the
	// lease took over stays failed, as the takeover recorded it. It fails with
	// [ErrFenced], withdrawing nothing, when any partition has been
	// taken over or finished.
	Release(ctx context.Context, lease *Lease) error

	// Heartbeat extends the lease by d from now. It fails with
	// [ErrFenced] when the lease no longer holds the latest attempt of
	// every partition.
	Heartbeat(ctx context.Context, lease *Lease, d time.Duration) error

	// Finish records the outcome of each leased partition (outcomes[i]
	// for lease.Partitions[i]) and ends the lease. It fails with
	// [ErrFenced], recording nothing, when any partition has been taken
	// over.
	Finish(ctx context.Context, lease *Lease, outcomes []Outcome) error
}

// A Writer records backfills and an operator's amendments to them and
// to a DAG's schedule: a cancel, a resume, a pause. It is what the
// write commands of a program and the pages' write actions need beside
// a [Reader].
type Writer interface {
	// PutBackfill records a backfill if its ID is new and returns the
	// stored record either way.
	PutBackfill(ctx context.Context, b BackfillRecord) (BackfillRecord, error)

	// CancelBackfill marks a backfill canceled, recording when
	// (BackfillRecord.CanceledAt) unless it was canceled already:
	// workers claim nothing more for it until it is resumed. With
	// opts.StopRunning, it also asks the workers to stop the partitions
	// they are running for it (BackfillRecord.StopRunning), which they
	// notice at their next heartbeat; without, those finish. A backfill
	// canceled again with StopRunning keeps its first CanceledAt and
	// gains StopRunning; canceled again without, it keeps StopRunning
	// as it was. It fails with [ErrUnknownBackfill] for an unknown id.
	CancelBackfill(ctx context.Context, id string, opts CancelOptions) error

	// ResumeBackfill undoes CancelBackfill: workers may claim for the
	// backfill again, and running it plans again every partition that
	// has not succeeded. It records when (BackfillRecord.ResumedAt) and
	// clears StopRunning if the backfill was canceled, and changes
	// nothing if it was not. It fails with [ErrUnknownBackfill] for an
	// unknown id.
	ResumeBackfill(ctx context.Context, id string) error

	// SetSchedulePause pauses the schedule of dag (p.Paused) or resumes
	// it, recording p.By and p.Note, and when by the ledger's clock
	// (SchedulePause.Since, and PausedAt when it pauses), and returns
	// what it stored. Pausing a paused schedule, or resuming one that is
	// not paused, changes nothing: the pause in force keeps who paused
	// it and since when. Every scheduler of dag reads it
	// ([Reader.SchedulePause]) before it starts a slot; backfills and
	// runs by hand ignore it.
	SetSchedulePause(ctx context.Context, dag string, p SchedulePause) (SchedulePause, error)
}

// SchedulePause says whether an operator paused the schedule of a DAG,
// who and why ([Writer.SetSchedulePause]). A paused schedule starts no
// slot; the slots that come due meanwhile are missed, as while no
// scheduler runs.
type SchedulePause struct {
	Paused bool
	By     string // who paused it, or resumed it last
	Note   string // why, in their words; "" for nothing said
	// Since is when, by the ledger's clock, the schedule was paused, or
	// last resumed; PausedAt when it was last paused. Zero if never.
	// A ledger sets both; those of a request are ignored.
	Since, PausedAt time.Time
}

// CancelOptions are the options of [Writer.CancelBackfill]; the zero
// value cancels the backfill and lets its running partitions finish.
// Options added later keep that meaning at their zero values.
type CancelOptions struct {
	// StopRunning also asks the workers to stop the partitions they are
	// running for the backfill (BackfillRecord.StopRunning).
	StopRunning bool
}

// Errors a [Ledger] returns, matched with errors.Is. ErrFenced is
// tranche.ErrFenced, named here too as the contract's word for a ledger's
// refusal of a stale lease, which is how implementations and callers of
// this package write it; it is also matched by a worker's refusal to
// write or record a success once its lease has lapsed by its own clock
// (see the Lease field of
// [github.com/tranche-dev/tranche/backfill.Backfill]), and by a fenced
// destination's refusal of a stale write ([tranche.StaleWriteError]).
var (
	ErrNotClaimable     = errors.New("ledger: partition not claimable")
	ErrFenced           = tranche.ErrFenced
	ErrUnknownBackfill  = errors.New("ledger: unknown backfill")
	ErrBackfillCanceled = errors.New("ledger: backfill canceled")
	// ErrSuperseded is matched, with ErrNotClaimable, by the refusal of
	// a backfill's claim of a partition that another version of its DAG
	// landed after the backfill was created (see
	// [ClaimRequest.JudgeVersion]): a deploy's new code, whose rows the
	// old code's backfill must not replace.
	ErrSuperseded = errors.New("ledger: partition landed by another version of the DAG")
)

// State is the state of a partition attempt. New states may be added.
type State string

// The states of a partition. Pending is never stored: a partition with no
// attempt is pending.
const (
	StatePending   State = "pending"
	StateRunning   State = "running"
	StateSucceeded State = "succeeded"
	StateFailed    State = "failed"
	StateCanceled  State = "canceled"
)

// Terminal reports whether s is a final state of an attempt.
func (s State) Terminal() bool {
	return s == StateSucceeded || s == StateFailed || s == StateCanceled
}

// RerunPolicy decides which recorded partitions a backfill runs again.
type RerunPolicy string

const (
	// RerunNone runs only partitions with no recorded run.
	RerunNone RerunPolicy = "none"
	// RerunFailed also runs partitions whose latest run failed or was
	// canceled: running the same backfill again resumes it. The default.
	RerunFailed RerunPolicy = "failed"
	// RerunAll runs every partition once more, including those that
	// succeeded before the plan was made.
	RerunAll RerunPolicy = "all"
	// RerunStale runs what RerunFailed runs and the stale partitions:
	// those whose latest success ran under another code version than
	// the request's ([ClaimRequest.CodeVersion]), as after a change of
	// an asset's code. A backfill of a DAG of several granularities
	// also runs those that a partition they map to succeeded again
	// after they began, and their dependents (see package backfill).
	RerunStale RerunPolicy = "stale"
)

// parseRerunPolicy parses "none", "failed" or "all"; "" is "failed".
func parseRerunPolicy(s string) (RerunPolicy, error) {
	switch p := RerunPolicy(s); p {
	case "":
		return RerunFailed, nil
	case RerunNone, RerunFailed, RerunAll, RerunStale:
		return p, nil
	}
	return "", fmt.Errorf("tranche: unknown rerun policy %q; accepted: none, failed, all, stale", s)
}

// ClaimRequest asks a [Ledger] to start attempts at some partitions.
type ClaimRequest struct {
	DAG        string                  // the DAG's identity
	Backfill   string                  // the backfill's id; "" for an ordinary run
	Worker     string                  // who claims
	RunID      string                  // the run that will materialize the partitions
	Partitions []tranche.TimePartition // one, or a chunk run as one window
	Lease      time.Duration           // how long the claim holds without a heartbeat
	Policy     RerunPolicy             // which recorded partitions may run again
	// Revision bounds RerunAll: a partition that succeeded at a later
	// revision, after the plan was made, is not run again.
	Revision int64
	// Trigger says why the partitions run, recorded on each attempt
	// (Attempt.Trigger); "" means [TriggerBackfill] when Backfill is
	// set and [TriggerManual] otherwise (see [TriggerOf]).
	Trigger Trigger
	// CodeVersion is the version of the code the attempts run (the
	// assets' declared versions, as package backfill writes them; ""
	// for none), recorded with each attempt ([Attempt.CodeVersion]) and
	// judged by RerunStale.
	CodeVersion string
	// NotBefore, when not zero, is the earliest instant by the ledger's
	// clock at which the claim may start its attempts: one made sooner is
	// refused with an [*EarlyError], which matches [ErrNotClaimable] and
	// carries the ledger's time, so that the caller knows how long to
	// wait. A scheduler sets it to a slot's close plus its delay: the
	// clock that judges leases then judges the close too, and a replica
	// whose clock runs fast cannot start a slot early. Zero, as backfills
	// and runs by hand leave it, bounds nothing.
	NotBefore time.Time
	// Record says that the claim only records outcomes, finished at
	// once, and runs nothing (a scheduler's record of a slot it skips
	// or missed): a DAG's limit ([Limiter]) does not hold it back.
	Record bool
}

// NextRequest asks [Leaser.ClaimNext] for the next jobs of a backfill.
type NextRequest struct {
	DAG      string // the DAG's identity
	Backfill string // the backfill's id; never ""
	Worker   string // who claims
	// Jobs are the candidates, in the backfill's order: starts
	// ascending, or descending when Descending is set. No two share a
	// partition.
	Jobs       []Job
	Descending bool // newest first: the order a cursor of its own follows
	// Want is how many jobs to claim; the call examines jobs until it
	// has claimed Want, or examined them all. It must be positive.
	Want   int
	Lease  time.Duration // as ClaimRequest.Lease
	Policy RerunPolicy   // as ClaimRequest.Policy
	// Revision is the revision of the worker's plan: it bounds RerunAll,
	// as ClaimRequest.Revision does, and tells whether the cursor moved
	// after the plan was made.
	Revision int64
	Trigger  Trigger // as ClaimRequest.Trigger: "" is TriggerBackfill
	// CodeVersion is as ClaimRequest.CodeVersion.
	CodeVersion string
}

// Job is one claim of [Leaser.ClaimNext]: a partition, or a chunk of
// adjacent partitions claimed all or none, and the run that will
// materialize it.
type Job struct {
	RunID      string
	Partitions []tranche.TimePartition // oldest first
}

// Start returns the start of the job's oldest partition, which a cursor
// records.
func (j Job) Start() time.Time { return j.Partitions[0].Start }

// Grant is what [Leaser.ClaimNext] did with one job: the Lease that
// claims it, or the error, matching [ErrNotClaimable], that says why
// not.
type Grant struct {
	Lease *Lease
	Err   error
}

// Claim returns the ClaimRequest that claims job j of req, as
// [Leaser.Claim] takes it.
func (req NextRequest) Claim(j Job) ClaimRequest {
	return ClaimRequest{DAG: req.DAG, Backfill: req.Backfill, Worker: req.Worker, RunID: j.RunID,
		Partitions: j.Partitions, Lease: req.Lease, Policy: req.Policy, Revision: req.Revision, Trigger: req.Trigger, CodeVersion: req.CodeVersion}
}

// Lease is a held claim: the attempts a worker started and must heartbeat
// and finish.
type Lease struct {
	DAG, Backfill, Worker, RunID string
	Partitions                   []tranche.TimePartition
	Attempts                     []int     // Attempts[i] is the attempt number at Partitions[i]
	Until                        time.Time // when the lease expires, by the ledger's clock
	Trigger                      Trigger   // the claim's, as TriggerOf gives it: never ""
	// Claimed is when the ledger granted the lease, by its clock, to the
	// millisecond: the instant its fencing tokens count from. A ledger
	// sets it in Claim and ClaimNext and never changes it.
	Claimed time.Time
}

// Tokens returns the fencing tokens of the leased partitions, which
// destinations receive as Batch.Token: Tokens()[i] is Partitions[i]'s.
// A token orders the claims of a partition whatever DAG identity made
// them: it is the lease's Claimed in Unix milliseconds, shifted left by
// 20 bits, plus the attempt number (up to 2^20-1), so that a claim the
// ledger granted later has the higher token, and two attempts granted in
// one millisecond are ordered by their numbers. A takeover is granted
// after the lease it takes over expired by the ledger's clock, and a
// rerun after the attempt it reruns finished, so a newer attempt of one
// DAG has the higher token, and the fence of package destination, which
// compares the attempt numbers of two tokens of one DAG identity, does
// not depend on the clock for them; a DAG that changed (a deploy: a new
// identity, whose attempts the ledger numbers from 1) claims a partition
// with a token above those of every claim before it, which the fence
// compares across identities. A lease without Claimed (one made by hand)
// has its attempt numbers as tokens.
func (l *Lease) Tokens() []int64 {
	tokens := make([]int64, len(l.Attempts))
	ms := l.Claimed.UnixMilli()
	if l.Claimed.IsZero() || ms <= 0 {
		ms = 0
	}
	for i, n := range l.Attempts {
		tokens[i] = ms<<tokenAttemptBits | int64(min(n, 1<<tokenAttemptBits-1))
	}
	return tokens
}

// tokenAttemptBits are the low bits of a fencing token that hold the
// attempt number (see [Lease.Tokens]).
const tokenAttemptBits = 20 // internal/fencing reads the same bits

// TokenAttempt returns the attempt number a fencing token of
// [Lease.Tokens] holds in its low bits.
func TokenAttempt(token int64) int { return int(token & (1<<tokenAttemptBits - 1)) }

// Outcome is how one leased partition ended.
type Outcome struct {
	State State // succeeded, failed or canceled
	Err   string
	Rows  int64
	// Ran, when positive, is how long the partition's run took by the
	// worker's clock: the ledger records the attempt's Started as its
	// Finished less Ran (never before the claim), so that an attempt
	// claimed ahead of its run reports how long it ran, not how long it
	// waited.
	Ran time.Duration
}

// Attempt is one recorded attempt at a partition.
type Attempt struct {
	DAG        string
	Backfill   string // "" for an ordinary run
	Start, End time.Time
	Key        string
	RunID      string
	Worker     string
	Number     int // 1 for the first attempt
	State      State
	Started    time.Time
	Finished   time.Time // zero while running
	LeaseUntil time.Time // meaningful while running
	Err        string
	Rows       int64
	Revision   int64 // the ledger revision of the attempt's last change
	// Trigger says why the attempt ran: the claim's trigger, as
	// [TriggerOf] gives it. An attempt recorded by a ledger older than
	// the field reads as TriggerOf("", Backfill).
	Trigger Trigger
	// CodeVersion is the code version its claim gave
	// ([ClaimRequest.CodeVersion]); "" for none, and for attempts a
	// ledger recorded before it kept them.
	CodeVersion string
}

// Duration returns how long a finished attempt ran; zero while running.
func (a Attempt) Duration() time.Duration {
	if a.Finished.IsZero() {
		return 0
	}
	return a.Finished.Sub(a.Started)
}

// Trigger says why a partition ran: its attempt's cause, which hooks,
// statuses and pages read to tell the live schedule from the past. Its
// string values are stable and stored; new triggers may be added.
type Trigger string

const (
	// TriggerLive: a scheduler ran the slot as it came due.
	TriggerLive Trigger = "live"
	// TriggerCatchUp: a scheduler ran the slot after it came due while
	// no scheduler ran, or took it over from one whose lease expired.
	TriggerCatchUp Trigger = "catch-up"
	// TriggerBackfill: a backfill ran the partition.
	TriggerBackfill Trigger = "backfill"
	// TriggerManual: an ordinary run outside any backfill or scheduler,
	// such as backfill.RunRecorded's.
	TriggerManual Trigger = "manual"
)

// TriggerOf returns the trigger a ledger records for a claim of trigger t
// for backfill (its id, "" for none): t, or when t is "",
// [TriggerBackfill] for a backfill's claim and [TriggerManual] for any
// other. Attempts recorded before ledgers kept triggers read as
// TriggerOf("", their backfill).
func TriggerOf(t Trigger, backfill string) Trigger {
	switch {
	case t != "":
		return t
	case backfill != "":
		return TriggerBackfill
	}
	return TriggerManual
}

// BackfillRecord is what a ledger keeps of a backfill besides its
// partitions' attempts.
type BackfillRecord struct {
	ID  string
	DAG string
	// DAGName is the DAG's name (tranche.DAG.Name) as the last run of
	// the backfill gave it: a label, not part of any identity, so that
	// a renamed DAG keeps its history ("" when none was given, or by a
	// ledger older than the field). [Writer.PutBackfill] of a recorded
	// backfill with another non-empty DAGName renames it.
	DAGName string
	Window  string // the window's text form
	// Partitions are the starts of the partitions a backfill of chosen
	// partitions runs ([Backfill.Partitions]), oldest first, all in
	// Window; nil for a backfill of the whole window.
	Partitions []time.Time
	Chunk      int
	Created    time.Time
	Canceled   bool      // canceled, and not resumed since
	CanceledAt time.Time // when it was last canceled; zero if never (or by a ledger older than the field)
	ResumedAt  time.Time // when it was last resumed; zero if never
	// StopRunning: canceled with its running partitions to stop
	// ([Writer.CancelBackfill] with CancelOptions.StopRunning); cleared on resume.
	StopRunning bool
}

// Versions returns the identities of the other versions of b's DAG
// among records: those of the backfills recorded under b's DAGName,
// other than b's own, each once, in the order of records. A DAG without
// a name has none: versions are linked by name alone, since a deploy
// changes the identity ([ClaimRequest.JudgeVersion] judges a partition
// against them).
func (b BackfillRecord) Versions(records []BackfillRecord) []string {
	var ids []string
	for _, r := range records {
		if b.DAGName != "" && r.DAGName == b.DAGName && r.DAG != b.DAG && !slices.Contains(ids, r.DAG) {
			ids = append(ids, r.DAG)
		}
	}
	return ids
}

// MarshalText implements [encoding.TextMarshaler]: "none", "failed",
// "all" or "stale" ("" stays ""), so that JSON, YAML and flag.TextVar
// take a policy as they take a slog.Level.
func (p RerunPolicy) MarshalText() ([]byte, error) {
	switch p {
	case "", RerunNone, RerunFailed, RerunAll, RerunStale:
		return []byte(p), nil
	}
	return nil, fmt.Errorf("tranche: unknown rerun policy %q; accepted: none, failed, all, stale", string(p))
}

// UnmarshalText implements [encoding.TextUnmarshaler]: "none", "failed"
// or "all", and "" as "failed"; any other text is refused with an error
// that lists them. As with slog.Level, it is also the parser.
func (p *RerunPolicy) UnmarshalText(text []byte) error {
	v, err := parseRerunPolicy(string(text))
	if err != nil {
		return err
	}
	*p = v
	return nil
}
