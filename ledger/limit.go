package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// A Limiter is a [Ledger] that holds a concurrency limit for each DAG,
// shared by every process that claims partitions of the DAG in it:
// scheduler replicas, backfill workers and runs by hand. It is
// optional, as [BatchFinisher] is; memledger and the SQL ledgers
// implement it, and a ledger that does not claims as if no DAG had a
// limit.
//
// An operator sets a limit, as a schedule's pause, rather than the
// code: every process of the DAG obeys the one number at its next claim,
// whatever version of the program it runs, and a change needs no deploy.
//
// Under a limit of n, the ledger's Claim and ClaimNext start an attempt
// only while fewer than n runs of the DAG hold live leases (a run is a
// lease: a partition, or a chunk claimed as one). A scheduler's claim of
// a slot (trigger [TriggerLive] or [TriggerCatchUp], no backfill)
// refused for the limit records the slot's demand, which lasts as the
// claim's lease would and is renewed by each claim refused again; while
// a demand lasts, a backfill's claim starts nothing, so that the slot
// goes ahead of every backfill partition not yet started. A partition
// running is never stopped for the limit, nor for a demand: a slot
// waits for at most the runs in flight. A claim that records an outcome
// at once ([ClaimRequest.Record]) is not held back.
//
// A claim refused for the limit fails, or a ClaimNext grant is refused,
// with an error matching [ErrLimited] and [ErrNotClaimable]; ClaimNext
// under a limit claims at most the runs the limit leaves, as if Want
// were that many, and when it leaves none examines no job: it returns
// one grant, the first job's, refused with ErrLimited, and its cursor
// does not move. The caller waits and claims again.
type Limiter interface {
	LimitReader

	// SetLimit sets the limit of dag (l.Max; 0 removes it), recording
	// l.By and l.Note and when by the ledger's clock (Limit.Since), and
	// returns what it stored. It takes effect at the next claim of any
	// process; runs in flight beyond a lowered limit finish.
	SetLimit(ctx context.Context, dag string, l Limit) (Limit, error)
}

// A LimitReader reads the limits a [Limiter] holds: every Limiter, and a
// ledger opened to read only whose writer is one (sqlledger.Reader).
type LimitReader interface {
	// Limit returns the limit of dag as SetLimit last set it, the zero
	// value (no limit) when it never did, with the runs of dag holding
	// live leases and the slots whose demand lasts, by the ledger's
	// clock.
	Limit(ctx context.Context, dag string) (Limit, error)
}

// Limit is the concurrency limit of a DAG in a [Limiter].
type Limit struct {
	// Max is how many runs of the DAG may hold leases at once, across
	// every process; 0 for no limit. Negative values are refused.
	Max  int
	By   string // who set it last
	Note string // why, in their words
	// Group, when not "", names the DAGs that share this limit: every
	// DAG whose limit was set with the same Group. A claim of any of
	// them counts the runs, and waits for the slots' demands, of them
	// all, against its own DAG's Max (set them alike). A DAG of several
	// granularities, whose assets are recorded under DAG identities of
	// their own, is limited as a whole so, grouped by its name. "" for
	// a limit of the DAG alone.
	Group string
	// Since is when, by the ledger's clock, it was set last; zero if
	// never. A ledger sets it; a request's is ignored.
	Since time.Time

	// Running and Waiting are read by [Limiter.Limit]: the runs of the
	// DAG holding live leases, and the slots of its schedule waiting
	// for the limit (their demand lasts), those of every DAG of its
	// Group under one. A request's are ignored.
	Running, Waiting int
}

// ErrLimited is matched, with [ErrNotClaimable], by the refusal of a claim
// for the DAG's limit ([Limiter]): the claimer waits and claims again.
var ErrLimited = errors.New("ledger: the DAG's limit of runs at once is reached")

// LimitError is the refusal of a claim for the limit of its DAG. It
// matches [ErrLimited] and [ErrNotClaimable].
type LimitError struct {
	DAG     string
	Max     int  // the limit
	Running int  // the runs holding live leases
	Demand  bool // refused for a scheduler's slot waiting, not for the count
}

func (e *LimitError) Error() string {
	if e.Demand && e.Running < e.Max {
		return fmt.Sprintf("%v: %d running, limit %d, and a slot of the DAG's schedule waits to go first", ErrLimited, e.Running, e.Max)
	}
	return fmt.Sprintf("%v: %d running, limit %d", ErrLimited, e.Running, e.Max)
}

// Unwrap returns ErrLimited and ErrNotClaimable.
func (e *LimitError) Unwrap() []error { return []error{ErrLimited, ErrNotClaimable} }

// Demands reports whether a claim of req refused for its DAG's limit
// records its partitions' demand: a scheduler's claim of a slot to run.
func (req ClaimRequest) Demands() bool {
	return req.Backfill == "" && !req.Record && (req.Trigger == TriggerLive || req.Trigger == TriggerCatchUp)
}

// AdmitsLimit applies a [Limiter]'s rule to req: under limit (0: none),
// with running runs holding live leases and, when demand is set, a
// scheduler's slot waiting, it returns a [*LimitError] when req may not
// start a run. A backfill's claim waits for the demand; any other claim
// only for the count; one that records an outcome at once for nothing.
func (req ClaimRequest) AdmitsLimit(limit, running int, demand bool) error {
	switch {
	case limit <= 0 || req.Record:
		return nil
	case running >= limit, demand && req.Backfill != "":
		return &LimitError{DAG: req.DAG, Max: limit, Running: running, Demand: demand}
	}
	return nil
}

// Allowance returns how many jobs a ClaimNext of a backfill may claim
// under limit (0: none, so Want), with running runs holding live
// leases and, when demand is set, a scheduler's slot waiting.
func (req NextRequest) Allowance(limit, running int, demand bool) int {
	switch {
	case limit <= 0:
		return req.Want
	case demand:
		return 0
	}
	return min(req.Want, max(limit-running, 0))
}

// Check validates the limit a [Limiter.SetLimit] is given.
func (l Limit) Check() error {
	if l.Max < 0 {
		return fmt.Errorf("tranche: a DAG's limit of %d runs at once: want 0 (none) or more", l.Max)
	}
	return nil
}
