package backfill

import (
	"context"
	"fmt"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/ledger"
)

// A Grid is a calendar picture of a backfill's partitions, for a terminal
// or a page: cells in time order, each counting the states of the latest
// attempts of the partitions it covers, laid out in rows of a coarser
// calendar unit (a day of hours, a month of days, a year of months).
//
// A cell is one partition while the backfill has at most the cells asked
// for; beyond that, cells aggregate the partitions of an hour, a day, a
// month or a year, whichever is the finest that fits.
type Grid struct {
	Window tranche.TimePartitionWindow // the partitions drawn: the backfill's, or the span of its chosen ones
	Cell   tranche.TimeGranularity     // the span of a cell: the window's granularity, or a coarser one
	Row    tranche.TimeGranularity     // the span of a row of cells
	Cells  []Cell                      // oldest first; cells covering no partition of the backfill are left out
}

// A Cell is one cell of a [Grid]: a span at the grid's Cell granularity
// and the partitions of the backfill in it, counted by the state of their
// latest attempt (ledger.StatePending for those never attempted).
type Cell struct {
	Span       tranche.TimePartition // the cell's span; its Key labels the cell
	Row        tranche.TimePartition // the span of the cell's row
	Column     int                   // the cell's place in its row, from 0 at the row's start
	Partitions int                   // the backfill's partitions in the cell
	Counts     map[ledger.State]int
}

// State is the one state a cell shows: failed if any of its partitions
// failed, else running, canceled, pending, in that order, and succeeded
// only when every partition succeeded.
func (c Cell) State() ledger.State {
	for _, s := range []ledger.State{ledger.StateFailed, ledger.StateRunning, ledger.StateCanceled, ledger.StatePending} {
		if c.Counts[s] > 0 {
			return s
		}
	}
	return ledger.StateSucceeded
}

// Rows groups the grid's cells by row, oldest row first.
func (g *Grid) Rows() [][]Cell {
	var rows [][]Cell
	for i, c := range g.Cells {
		if i == 0 || !c.Row.Equal(g.Cells[i-1].Row) {
			rows = append(rows, nil)
		}
		rows[len(rows)-1] = append(rows[len(rows)-1], c)
	}
	return rows
}

// Grid draws the backfill's partitions as they stand in its ledger now,
// in at most maxCells cells (at least 1).
//
// From a ledger that is a [ledger.LatestReader], aggregated cells are
// counted, a range per cell, and cells of one partition each (up to
// 4,096 of them) read in one request of their latest attempts, as
// StatusOf counts (a schedule's slots too, as StatusOf says); otherwise
// Grid reads every partition's latest attempt.
func (s *Status) Grid(ctx context.Context, maxCells int) (*Grid, error) {
	g, _, err := s.grid(ctx, maxCells, nil)
	return g, err
}

// GridOf reads the status of backfill id from l, as [StatusOf] does, and
// draws its grid in at most maxCells cells (at least 1), as
// [Status.Grid] does, counting the backfill once: the status's Counts
// are the sums of the grid's cells, so a page that shows both costs a
// ledger the grid's reads and the few small ones that explain Blocked,
// where StatusOf then Grid count every partition twice.
func GridOf(ctx context.Context, l ledger.Reader, id string, now time.Time, maxCells int) (*Status, *Grid, error) {
	record, err := l.Backfill(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	s, err := statusOf(l, record)
	if err != nil {
		return nil, nil, err
	}
	var b blockers
	g, lr, err := s.grid(ctx, maxCells, b.see)
	if err != nil {
		return nil, nil, err
	}
	for _, c := range g.Cells {
		for st, n := range c.Counts {
			if n > 0 {
				s.Counts[st] += n
			}
		}
	}
	if lr != nil {
		return s, g, s.explain(ctx, lr, now)
	}
	s.block(b.running, b.lastFailure, now)
	return s, g, nil
}

// grid draws s's grid: through lr's counts or latest attempts where s's
// ledger is a [ledger.LatestReader] whose answers stand for s's
// partitions, returning it; otherwise from every partition's latest
// attempt, passed to each when it is not nil, returning nil.
func (s *Status) grid(ctx context.Context, maxCells int, each func(PartitionStatus)) (*Grid, ledger.LatestReader, error) {
	if maxCells < 1 {
		return nil, nil, fmt.Errorf("tranche: grid of %d cells; want at least 1", maxCells)
	}
	g := newGrid(s.sel.window, s.sel.total, maxCells)
	if g.Cell != s.sel.window.Granularity() || s.sel.total <= planBatch {
		lr, ok, err := s.latestReader(ctx)
		if err != nil {
			return nil, nil, err
		}
		switch {
		case ok && g.Cell != s.sel.window.Granularity():
			return g, lr, s.countCells(ctx, lr, g)
		case ok:
			return g, lr, s.findCells(ctx, lr, g)
		}
	}
	var cells []Cell
	for ps, err := range s.Partitions(ctx) {
		if err != nil {
			return nil, nil, err
		}
		span := tranche.PartitionOf(g.Cell, ps.Partition.Start)
		if n := len(cells); n == 0 || !cells[n-1].Span.Equal(span) {
			cells = append(cells, g.cell(span))
		}
		c := &cells[len(cells)-1]
		c.Partitions++
		c.Counts[ps.State]++
		if each != nil {
			each(ps)
		}
	}
	// Partitions come newest first.
	for i, j := 0, len(cells)-1; i < j; i, j = i+1, j-1 {
		cells[i], cells[j] = cells[j], cells[i]
	}
	g.Cells = cells
	return g, nil, nil
}

// countCells sets g.Cells from lr's counts of the latest attempts in each
// cell, one range per cell and window of the selection (per cell, for a
// whole window), in one query per four thousand cells: a grid of
// aggregated cells costs its cells, not the backfill's partitions.
func (s *Status) countCells(ctx context.Context, lr ledger.LatestReader, g *Grid) error {
	var ranges []ledger.Range
	var at []int // at[k] is the cell of ranges[k]
	for w := range s.sel.windows(OldestFirst) {
		for span := tranche.PartitionOf(g.Cell, w.Start()); span.Start.Before(w.End()); span = span.Next() {
			r := ledger.Range{From: later(span.Start, w.Start()), To: earlier(span.End, w.End())}
			n := partitionsIn(w, r)
			if n == 0 {
				continue
			}
			if k := len(g.Cells); k == 0 || !g.Cells[k-1].Span.Equal(span) {
				g.Cells = append(g.Cells, g.cell(span))
			}
			g.Cells[len(g.Cells)-1].Partitions += n
			ranges, at = append(ranges, r), append(at, len(g.Cells)-1)
		}
	}
	counts, err := lr.CountLatest(ctx, ledger.CountRequest{DAG: s.Record.DAG, Ranges: ranges})
	if err != nil {
		return fmt.Errorf("tranche: reading ledger: %w", err)
	}
	attempted := make([]int, len(g.Cells))
	for _, c := range counts {
		cell := at[c.Range]
		g.Cells[cell].Counts[c.State] += c.N
		attempted[cell] += c.N
	}
	for i := range g.Cells {
		if n := g.Cells[i].Partitions - attempted[i]; n > 0 {
			g.Cells[i].Counts[ledger.StatePending] = n
		}
	}
	return nil
}

// findCells sets g.Cells, a cell per partition, from lr's latest
// attempts of the backfill's partitions, in one request of a range per
// run of adjacent partitions: a grid of chosen partitions far apart
// (slots named one by one) costs a request, not a read per run. The
// caller keeps it to at most planBatch partitions, whose attempts
// FindLatest holds at once.
func (s *Status) findCells(ctx context.Context, lr ledger.LatestReader, g *Grid) error {
	var latest []ledger.Attempt // oldest partition first
	for a, err := range lr.FindLatest(ctx, ledger.FindRequest{DAG: s.Record.DAG, Ranges: s.sel.ranges(),
		States: []ledger.State{ledger.StateRunning, ledger.StateSucceeded, ledger.StateFailed, ledger.StateCanceled}}) {
		if err != nil {
			return fmt.Errorf("tranche: reading ledger: %w", err)
		}
		latest = append(latest, a)
	}
	g.Cells = make([]Cell, 0, s.sel.total)
	k := 0
	for w := range s.sel.windows(OldestFirst) {
		for p := range w.OldestFirst() {
			c := g.cell(p)
			state := ledger.StatePending
			for k < len(latest) && latest[k].Start.Before(p.Start) {
				k++ // between partition starts, which readLatest matches to none either
			}
			if k < len(latest) && latest[k].Start.Equal(p.Start) {
				state = latest[k].State
				k++
			}
			c.Partitions, c.Counts[state] = 1, 1
			g.Cells = append(g.Cells, c)
		}
	}
	return nil
}

// partitionsIn counts the partitions of w that start in r, a span within
// w's, without walking them.
func partitionsIn(w tranche.TimePartitionWindow, r ledger.Range) int {
	first := tranche.PartitionOf(w.Granularity(), r.From.In(w.Location()))
	if first.Start.Before(r.From) {
		first = first.Next()
	}
	last := tranche.PartitionOf(w.Granularity(), r.To.Add(-time.Nanosecond).In(w.Location()))
	if last.Start.Before(first.Start) {
		return 0
	}
	v, err := tranche.NewTimePartitionWindow(w.Granularity(), first.Start, last.Start)
	if err != nil {
		return 0 // unreachable: last starts no earlier than first
	}
	return v.Len()
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// cellUnits are the spans a cell may aggregate, finest first, each with
// the span of its row.
var cellUnits = []struct{ cell, row tranche.TimeGranularity }{
	{tranche.Hour, tranche.Day},
	{tranche.Day, tranche.Month},
	{tranche.Month, tranche.Year},
	{tranche.Year, tranche.Every(10, tranche.Year)},
}

// newGrid chooses the cell and row spans for total partitions of w in at
// most maxCells cells.
func newGrid(w tranche.TimePartitionWindow, total, maxCells int) *Grid {
	g := &Grid{Window: w, Cell: w.Granularity(), Row: rowOf(w.Granularity())}
	if total <= maxCells {
		return g
	}
	for _, u := range cellUnits {
		if !coarser(u.cell, w.Granularity()) {
			continue
		}
		g.Cell, g.Row = u.cell, u.row
		if spans(w, u.cell) <= maxCells {
			break
		}
	}
	return g
}

// cell returns an empty cell of span, in the row of the period its key
// names: its start's, or for a cron schedule's slot, its fire's (its
// end), so that the slot of February 1st 00:00, which runs through
// January, is drawn in February's row as its key reads.
func (g *Grid) cell(span tranche.TimePartition) Cell {
	if g.Cell.IsSchedule() {
		row := tranche.PartitionOf(g.Row, span.End)
		col := 0
		// The first slot of the row fires at or after its start.
		for p := tranche.PartitionOf(g.Cell, row.Start.Add(-time.Nanosecond)); p.End.Before(span.End); p = p.Next() {
			col++
		}
		return Cell{Span: span, Row: row, Column: col, Counts: map[ledger.State]int{}}
	}
	row := tranche.PartitionOf(g.Row, span.Start)
	col := 0
	for p := tranche.PartitionOf(g.Cell, row.Start); p.Start.Before(span.Start); p = p.Next() {
		col++
	}
	return Cell{Span: span, Row: row, Column: col, Counts: map[ledger.State]int{}}
}

// rowOf returns the row span for cells of granularity g drawn one per
// partition.
func rowOf(g tranche.TimeGranularity) tranche.TimeGranularity {
	one := length(tranche.PartitionOf(g, time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)))
	switch {
	case one < time.Hour:
		return tranche.Hour
	case one < 24*time.Hour:
		return tranche.Day
	case one < 7*24*time.Hour:
		return tranche.Month
	case one < 365*24*time.Hour:
		return tranche.Year
	}
	return tranche.Every(10, tranche.Year)
}

// coarser reports whether partitions of u are longer than those of g.
func coarser(u, g tranche.TimeGranularity) bool {
	at := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
	return length(tranche.PartitionOf(u, at)) > length(tranche.PartitionOf(g, at))
}

// spans counts the partitions of u that w touches.
func spans(w tranche.TimePartitionWindow, u tranche.TimeGranularity) int {
	first := tranche.PartitionOf(u, w.Start())
	last := tranche.PartitionOf(u, w.End().Add(-time.Nanosecond))
	v, err := tranche.NewTimePartitionWindow(u, first.Start, last.Start)
	if err != nil {
		return 0
	}
	return v.Len()
}
