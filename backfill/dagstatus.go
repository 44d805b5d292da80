package backfill

import (
	"context"
	"errors"
	"fmt"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/internal/slotmatch"
	"github.com/tranche-dev/tranche/ledger"
)

// StatusOfWindow reads from l the state of the partitions of window w of
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
func StatusOfWindow(ctx context.Context, l ledger.Ledger, dag string, w tranche.TimePartitionWindow) (*Status, error) {
	s, err := windowStatus(l, dag, w)
	if err != nil {
		return nil, err
	}
	if _, err := s.tally(ctx, nil); err != nil {
		return nil, err
	}
	return s, nil
}

// GridOfWindow draws the partitions of window w of the DAG identity dag
// as they stand in l now, in at most maxCells cells (at least 1): the
// grid of [StatusOfWindow]'s status, without counting the window first.
// The counts of its cells add up to that status's Counts, so a page that
// shows both needs the grid alone: through a [ledger.LatestReader], one
// aggregate query.
func GridOfWindow(ctx context.Context, l ledger.Ledger, dag string, w tranche.TimePartitionWindow, maxCells int) (*Grid, error) {
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
func windowStatus(l ledger.Ledger, dag string, w tranche.TimePartitionWindow) (*Status, error) {
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
