package ledger

import (
	"cmp"
	"context"
	"iter"
	"time"
)

// A LatestReader is a [Reader] that answers the questions of a backfill's
// status, grid, plan and watch where it keeps its attempts, in a cost
// that grows with the answer, not with the partitions asked about: counts
// of latest attempts, a few latest attempts picked by state, and the
// partitions that changed after a revision. It is optional, as
// [io.WriterTo] is to an io.Reader: package backfill asks a ledger for it
// with a type assertion and reads every latest attempt through
// [Reader.Latest] when the ledger lacks it. Its answers must be those
// derived from Latest; ledgertest checks that they are.
type LatestReader interface {
	// CountLatest counts the latest attempts of the partitions of
	// req.DAG starting in each of req.Ranges, in groups that agree on
	// what [ClaimRequest.Judge] reads of an attempt: its state, whether
	// the lease of a running one is live at req.Now, and whether the
	// revision of a succeeded one is above req.Revision. It returns each group with a count once, in no
	// particular order. Partitions never attempted are not counted.
	CountLatest(ctx context.Context, req CountRequest) ([]LatestCount, error)

	// FindLatest yields the latest attempts of the partitions of
	// req.DAG starting in req.Ranges whose state is one of req.States,
	// oldest partition first; with req.Newest > 0, only the req.Newest
	// of them that finished last (by Finished, latest first, then by
	// start, latest first), in that order.
	FindLatest(ctx context.Context, req FindRequest) iter.Seq2[Attempt, error]

	// ChangedIn returns the starts of the partitions of dag starting in
	// [from, to) that have an attempt whose revision is above after,
	// each once, oldest first. Like [Reader.RevisionIn], its cost grows
	// with the changes after after, not with the partitions of the
	// range.
	ChangedIn(ctx context.Context, dag string, from, to time.Time, after int64) ([]time.Time, error)
}

// A Range is the partitions starting in [From, To).
type Range struct{ From, To time.Time }

// Contains reports whether a partition starting at start lies in r.
func (r Range) Contains(start time.Time) bool { return !start.Before(r.From) && start.Before(r.To) }

// CountRequest asks [LatestReader.CountLatest] for counts of latest
// attempts.
type CountRequest struct {
	DAG string
	// Ranges are the spans counted apart, in order and not
	// overlapping; LatestCount.Range is an index into them.
	Ranges []Range
	// Now is the instant leases are judged at: live while Now is
	// before an attempt's LeaseUntil, as Judge reads them.
	Now time.Time
	// Revision splits the attempts whose revision is above it from the
	// others, as Judge reads a RerunAll request's Revision.
	Revision int64
}

// LatestCount is one group of [LatestReader.CountLatest]: the latest
// attempts of the partitions of one range that agree on everything
// [ClaimRequest.Judge] reads.
type LatestCount struct {
	Range int   // the index of the range in CountRequest.Ranges
	State State // the attempts' state
	Live  bool  // running, and CountRequest.Now is before their LeaseUntil
	Above bool  // succeeded, and their revision is above CountRequest.Revision
	N     int   // how many
}

// Sample returns an attempt of c's group as req judges it: its state,
// its lease live at req.Now or not, its revision above req.Revision or
// not. It is what a caller passes to [ClaimRequest.Judge] for the whole
// group, since Judge reads nothing else.
func (c LatestCount) Sample(req CountRequest) *Attempt {
	a := &Attempt{State: c.State, LeaseUntil: req.Now, Revision: req.Revision}
	if c.Live {
		a.LeaseUntil = req.Now.Add(time.Nanosecond)
	}
	if c.Above {
		a.Revision++
	}
	return a
}

// CountOf returns the group of [LatestReader.CountLatest]'s answer that
// a, the latest attempt of a partition in range i, falls in, with N 1:
// the derivation from [Reader.Latest] that a LatestReader must agree
// with.
func CountOf(i int, a Attempt, req CountRequest) LatestCount {
	return LatestCount{Range: i, State: a.State, N: 1,
		Live:  a.State == StateRunning && req.Now.Before(a.LeaseUntil),
		Above: a.State == StateSucceeded && a.Revision > req.Revision}
}

// FindRequest asks [LatestReader.FindLatest] for latest attempts.
type FindRequest struct {
	DAG    string
	Ranges []Range // in order and not overlapping
	States []State // the states wanted; none yields nothing
	// Newest, when positive, keeps only that many attempts, those that
	// finished last.
	Newest int
}

// FinishedLater orders attempts as [LatestReader.FindLatest] does with
// FindRequest.Newest: by Finished, latest first, then by partition
// start, latest first.
func FinishedLater(a, b Attempt) int {
	return cmp.Or(b.Finished.Compare(a.Finished), b.Start.Compare(a.Start))
}

// A BriefReader is a [Reader] that reads the latest attempts of a range
// of partitions in brief: each partition's start, state and instants,
// what the status of a DAG of several granularities weighs of every
// partition (its state, and whether an upstream partition succeeded
// again after it ran), without the strings of a whole [Attempt]. It is
// optional, as [LatestReader] is: package backfill asks a ledger for
// it with a type assertion and reads [Reader.Latest] when the ledger
// lacks it. Its answers must be [BriefOf] Latest's; ledgertest checks
// that they are.
type BriefReader interface {
	// LatestBriefs yields the brief of the latest attempt of each
	// recorded partition of dag whose start lies in [from, to), oldest
	// partition first.
	LatestBriefs(ctx context.Context, dag string, from, to time.Time) iter.Seq2[Brief, error]
}

// Brief is the part of a partition's latest attempt that
// [BriefReader.LatestBriefs] reads: the fields of [Attempt] of the same
// names, Finished only once it finished and LeaseUntil only while it
// runs.
type Brief struct {
	Start      time.Time // the partition's start
	State      State
	Started    time.Time
	Finished   time.Time // zero while running
	LeaseUntil time.Time // zero unless running
}

// BriefOf returns the brief of attempt a: the derivation from
// [Reader.Latest] that a BriefReader must agree with.
func BriefOf(a Attempt) Brief {
	b := Brief{Start: a.Start, State: a.State, Started: a.Started}
	if a.State == StateRunning {
		b.LeaseUntil = a.LeaseUntil
	} else {
		b.Finished = a.Finished
	}
	return b
}
