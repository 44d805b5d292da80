package backfill

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/internal/slotmatch"
	"github.com/tranche-dev/tranche/ledger"
)

// WindowStatus reads from l the state of the partitions of window w of
// the DAG identity dag ([DAGIdentity]), whatever recorded their attempts:
// a partition counts by the state of its latest attempt, made by any
// backfill or by an ordinary run ([RunRecorded]), and a partition never
// attempted is [ledger.StatePending]. It is the status of a DAG over a
// span of time, as a partition health bar draws it, where [StatusOf] is
// that of one backfill over its own partitions: the two agree on every
// partition the backfill covers, since a ledger keeps one history per
// DAG.
//
// The status's Record names dag and w (its Window is w's text form) and
// no backfill: its ID is empty and it is never canceled. Blocked is
// empty, since what stops a backfill (its cancellation, its failure
// policy) is the backfill's. [Status.Grid] draws the window,
// [Status.Partitions] lists it and [Status.Done] reports whether every
// partition of w succeeded.
//
// w must be in the granularity and location dag was named for (those
// DAGIdentity was given); a ledger keys attempts by their start, so a
// window of another granularity finds only the partitions that happen to
// start where its own do. As with StatusOf, a [ledger.LatestReader]
// counts in one aggregate query however many partitions w holds, a cron
// schedule's slots too unless a daily or hourly schedule moved among
// them; another ledger reads every partition's latest attempt.
func WindowStatus(ctx context.Context, l ledger.Reader, dag string, w tranche.TimePartitionWindow) (*Status, error) {
	s, err := windowStatus(l, dag, w)
	if err != nil {
		return nil, err
	}
	if _, err := s.tally(ctx, nil); err != nil {
		return nil, err
	}
	return s, nil
}

// WindowGrid draws the partitions of window w of the DAG identity dag
// as they stand in l now, in at most maxCells cells (at least 1): the
// grid of [WindowStatus]'s status, without counting the window first.
// The counts of its cells add up to that status's Counts, so a page that
// shows both needs the grid alone: through a [ledger.LatestReader], one
// aggregate query.
func WindowGrid(ctx context.Context, l ledger.Reader, dag string, w tranche.TimePartitionWindow, maxCells int) (*Grid, error) {
	s, err := windowStatus(l, dag, w)
	if err != nil {
		return nil, err
	}
	return s.Grid(ctx, maxCells)
}

// errNoDAG refuses a status of no DAG.
var errNoDAG = errors.New("tranche: status of a window: empty DAG identity; give the DAG's identity (backfill.DAGIdentity), as its backfills record it")

// windowStatus returns the status of w's partitions of dag, not yet
// counted.
func windowStatus(l ledger.Reader, dag string, w tranche.TimePartitionWindow) (*Status, error) {
	switch {
	case dag == "":
		return nil, errNoDAG
	case w.Len() == 0:
		return nil, fmt.Errorf("tranche: status of DAG %s: empty window %v; give a window of at least one partition", dag, w)
	case l == nil:
		return nil, fmt.Errorf("tranche: status of DAG %s: nil ledger", dag)
	}
	return &Status{
		Record: ledger.BackfillRecord{DAG: dag, Window: w.String(), Chunk: 1},
		Window: w, Counts: map[ledger.State]int{}, ledger: l,
		sel:   selection{window: w, total: w.Len()},
		match: slotmatch.New(w.Granularity(), w.Location()),
	}, nil
}

// Summary is what an operator asks of a DAG first: its latest run, its
// latest backfill, and whether a scheduler keeps it live. [SummaryOf]
// reads it.
type Summary struct {
	DAG string // the DAG's identity

	// LatestRun is the DAG's latest run: the latest attempt, of the
	// newest partition that has one, triggered live, catch-up or by hand
	// ([ledger.Attempt].Trigger other than [ledger.TriggerBackfill]). A
	// backfill's run is never the latest run, however recent: a
	// backfill of last year running now says nothing of whether today's
	// data landed. Nil when no such attempt was found within
	// [SummaryLookback] of now.
	LatestRun *ledger.Attempt

	// LatestBackfill is the status of the DAG's latest backfill: the
	// newest open one (not canceled, neither done nor failed), else the
	// newest that failed, until the partitions it failed succeed (by any
	// run), else the newest of all; nil when the DAG has none.
	LatestBackfill *Status

	// Scheduler is what the ledger shows of the DAG's live scheduler.
	Scheduler SchedulerSeen

	// Limit is the DAG's limit of runs at once across every process
	// ([ledger.Limiter]), with its runs and the slots waiting for it:
	// the zero value when it has none, or the ledger keeps none.
	Limit ledger.Limit
}

// SchedulerSeen is a scheduler as the ledger sees it: through the
// triggers of the attempts it recorded, since a scheduler writes nothing
// else. A scheduler is seen when it runs a slot; it is overdue when the
// slot after the last it ran came due, plus the delay it ran that one
// with, more than [DefaultLease] ago, and no one has run that slot.
type SchedulerSeen struct {
	// Last is the latest attempt of the newest slot a scheduler ran
	// (trigger live or catch-up); nil when none was found within
	// SummaryLookback: no scheduler runs the DAG, or none has yet.
	Last *ledger.Attempt
	// Delay is how long after its close the Last slot started, when its
	// trigger was live: the scheduler's Delay, as the ledger shows it.
	Delay time.Duration
	// Next is the slot after Last, and NextDue when it comes due: its
	// end plus Delay. Zero without Last or a granularity.
	Next    tranche.TimePartition
	NextDue time.Time
	// Missed counts the slots from Next on that came due (plus Delay)
	// by now and have no attempt: those a scheduler started now would
	// catch up or report missed.
	Missed int
	// Waiting reports that no scheduler has been seen for longer than
	// it should have been: Next came due more than DefaultLease ago and
	// has no attempt. Pages and commands show it as "waiting for
	// scheduler". Never while the schedule is paused.
	Waiting bool
	// Pause is the schedule's pause ([ledger.Reader.SchedulePause]):
	// while Pause.Paused no scheduler starts a slot, and pages and
	// commands say who paused it, since when and why.
	Pause ledger.SchedulePause
}

// SummaryLookback bounds how far before now [SummaryOf] looks for the
// DAG's latest run and its scheduler's last slot: a read of the latest
// attempts of a year and a month, widened in steps from a day, so that a
// minutely schedule costs a read of its last day, not of every minute of
// its history.
const SummaryLookback = 400 * 24 * time.Hour

// maxSummaryBackfills is how many of a DAG's newest backfills SummaryOf
// counts, at most, to find its latest.
const maxSummaryBackfills = 50

// SummaryOf reads the [Summary] of the DAG identity dag from l at now.
// g and loc are the DAG's granularity and zone, which name its slots; a
// zero g takes those of the DAG's newest backfill (without one, the
// summary has no Next slot).
func SummaryOf(ctx context.Context, l ledger.Reader, dag string, g tranche.TimeGranularity, loc *time.Location, now time.Time) (*Summary, error) {
	if dag == "" {
		return nil, errNoDAG
	}
	sum := &Summary{DAG: dag}
	records, err := l.Backfills(ctx)
	if err != nil {
		return nil, err
	}
	var mine []ledger.BackfillRecord
	for _, r := range slices.Backward(records) {
		if r.DAG == dag {
			mine = append(mine, r)
		}
	}
	if !g.IsValid() && len(mine) > 0 {
		if w, err := tranche.ParseTimePartitionWindow(mine[0].Window); err == nil {
			g, loc = w.Granularity(), w.Location()
		}
	}
	if sum.LatestBackfill, err = latestBackfill(ctx, l, mine, now); err != nil {
		return nil, err
	}
	runs, err := RunSummary(ctx, l, dag, g, loc, now)
	if err != nil {
		return nil, err
	}
	sum.LatestRun, sum.Scheduler, sum.Limit = runs.LatestRun, runs.Scheduler, runs.Limit
	return sum, nil
}

// RunSummary reads the [Summary] of the DAG identity dag from l at now
// without its backfills: its LatestRun and Scheduler, which [SummaryOf]
// reads too, for a page that lists the DAG's backfills itself. g and loc
// are the DAG's granularity and zone; with a zero g, Scheduler has no
// Next slot.
func RunSummary(ctx context.Context, l ledger.Reader, dag string, g tranche.TimeGranularity, loc *time.Location, now time.Time) (*Summary, error) {
	if dag == "" {
		return nil, errNoDAG
	}
	sum := &Summary{DAG: dag}

	// The newest attempts, in windows widening back from now, until a
	// run and a scheduler's slot are found.
	for back := 24 * time.Hour; ; back *= 8 {
		back = min(back, SummaryLookback)
		for a, err := range l.Latest(ctx, dag, now.Add(-back), now.Add(time.Hour)) {
			if err != nil {
				return nil, fmt.Errorf("tranche: reading ledger: %w", err)
			}
			if a.Trigger != ledger.TriggerBackfill {
				sum.LatestRun = &a
			}
			if a.Trigger == ledger.TriggerLive || a.Trigger == ledger.TriggerCatchUp {
				sum.Scheduler.Last = &a
			}
		}
		if sum.Scheduler.Last != nil || back == SummaryLookback {
			break
		}
	}
	pause, err := l.SchedulePause(ctx, dag)
	if err != nil {
		return nil, err
	}
	sum.Scheduler.Pause = pause
	if lim, ok := l.(ledger.LimitReader); ok {
		if sum.Limit, err = lim.Limit(ctx, dag); err != nil {
			return nil, err
		}
	}
	if err := sum.Scheduler.next(ctx, l, dag, g, loc, now); err != nil {
		return nil, err
	}
	sum.Scheduler.Waiting = sum.Scheduler.Waiting && !sum.Scheduler.Pause.Paused
	return sum, nil
}

// next fills the slot after Last, when it is due, and what is missed.
func (s *SchedulerSeen) next(ctx context.Context, l ledger.Reader, dag string, g tranche.TimeGranularity, loc *time.Location, now time.Time) error {
	if s.Last == nil || !g.IsValid() {
		return nil
	}
	if loc == nil {
		loc = time.UTC
	}
	if s.Last.Trigger == ledger.TriggerLive && !s.Last.Started.Before(s.Last.End) {
		s.Delay = s.Last.Started.Sub(s.Last.End).Truncate(time.Second)
	}
	s.Next = tranche.PartitionOf(g, s.Last.End.In(loc))
	s.NextDue = s.Next.End.Add(s.Delay)
	if now.Before(s.NextDue) {
		return nil
	}
	attempted := map[int64]bool{}
	for a, err := range l.Latest(ctx, dag, s.Next.Start, now) {
		if err != nil {
			return fmt.Errorf("tranche: reading ledger: %w", err)
		}
		attempted[a.Start.Unix()] = true
	}
	const maxCounted = 100_000
	for p := s.Next; !now.Before(p.End.Add(s.Delay)) && s.Missed < maxCounted; p = p.Next() {
		if !attempted[p.Start.Unix()] {
			s.Missed++
		}
	}
	s.Waiting = !attempted[s.Next.Start.Unix()] && now.Sub(s.NextDue) > DefaultLease
	return nil
}

// latestBackfill returns the status of the latest of records (newest
// first), as Summary.LatestBackfill chooses it.
func latestBackfill(ctx context.Context, l ledger.Reader, records []ledger.BackfillRecord, now time.Time) (*Status, error) {
	var failed, newest *Status
	for i, r := range records {
		if i == maxSummaryBackfills {
			break
		}
		s, err := StatusOf(ctx, l, r.ID, now)
		if err != nil {
			return nil, err
		}
		bad := s.Counts[ledger.StateFailed]+s.Counts[ledger.StateCanceled] > 0
		if newest == nil {
			newest = s
		}
		if !r.Canceled && !s.Done() && !bad {
			return s, nil
		}
		if bad && failed == nil {
			failed = s
		}
	}
	if failed != nil {
		return failed, nil
	}
	return newest, nil
}
