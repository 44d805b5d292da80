package tranchecli

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/ledger"
)

// gridStyle is how a grid is drawn: in colour (ANSI escapes) or in
// plain text, and how wide.
type gridStyle struct {
	color bool
	width int                     // columns of the screen
	stale []tranche.TimePartition // succeeded partitions that ran other code, newest first
}

// Stale cells: succeeded, but some partition in them ran other code.
const (
	staleGlyph = "~"
	staleSGR   = "36" // cyan
)

// gridStates are the states a grid shows, in the legend's order, each
// with its plain glyph and its colour (an SGR parameter).
var gridStates = []struct {
	state ledger.State
	glyph string
	sgr   string
}{
	{ledger.StateSucceeded, "#", "32"}, // green
	{ledger.StateFailed, "X", "31"},    // red
	{ledger.StateRunning, ">", "33"},   // yellow
	{ledger.StateCanceled, "-", "35"},  // magenta
	{ledger.StatePending, ".", "90"},   // grey
}

// colorGlyph is the cell of a coloured grid: its colour tells the state.
const colorGlyph = "■"

// cellText is a cell of state st.
func (st gridStyle) cellText(s ledger.State) string {
	for _, gs := range gridStates {
		if gs.state == s {
			if st.color {
				return "\x1b[" + gs.sgr + "m" + colorGlyph + "\x1b[0m"
			}
			return gs.glyph
		}
	}
	// A state added after this package: draw it, unnamed.
	return "?"
}

// writeGrid draws g as a calendar: a row per Grid row, labelled by its
// key, each cell in its column (a row that starts before the backfill
// keeps its leading columns blank), then a legend counting the
// backfill's partitions by state.
func writeGrid(w io.Writer, g *backfill.Grid, counts map[ledger.State]int, st gridStyle) {
	each := "one per partition"
	if g.Cell != g.Window.Granularity() {
		each = fmt.Sprintf("one per %s of %s partitions, showing the worst state in it", g.Cell, g.Window.Granularity())
	}
	fmt.Fprintf(w, "cells: %s; rows: %s\n", each, g.Row)
	rows := g.Rows()
	label, cols := 0, 0
	for _, r := range rows {
		label = max(label, len(r[0].Row.Key()))
		cols = max(cols, r[len(r)-1].Column+1)
	}
	// Two screen columns a cell when the widest row fits so, else one;
	// a row still too wide goes on over the next lines.
	cw := 2
	if label+2+cols*cw > st.width {
		cw = 1
	}
	perLine := max(1, (st.width-label-2)/cw)
	for _, r := range rows {
		var b strings.Builder
		key := r[0].Row.Key()
		line := func(first bool) {
			if first {
				fmt.Fprintf(&b, "%-*s  ", label, key)
			} else {
				fmt.Fprintf(&b, "%-*s  ", label, "")
			}
		}
		line(true)
		col, onLine := 0, 0
		for _, c := range r {
			for ; col <= c.Column; col++ {
				if onLine == perLine {
					b.WriteString("\n")
					line(false)
					onLine = 0
				}
				onLine++
				if col < c.Column {
					b.WriteString(strings.Repeat(" ", cw))
					continue
				}
				if c.State() == ledger.StateSucceeded && st.staleIn(c.Span) {
					b.WriteString(st.staleText())
				} else {
					b.WriteString(st.cellText(c.State()))
				}
				if cw == 2 {
					b.WriteString(" ")
				}
			}
		}
		for l := range strings.SplitSeq(b.String(), "\n") {
			io.WriteString(w, strings.TrimRight(l, " ")+"\n")
		}
	}
	var legend []string
	for _, gs := range gridStates {
		legend = append(legend, fmt.Sprintf("%s %s %d", st.cellText(gs.state), gs.state, counts[gs.state]))
	}
	if len(st.stale) > 0 {
		legend = append(legend, fmt.Sprintf("%s stale %d", st.staleText(), len(st.stale)))
	}
	fmt.Fprintf(w, "\n%s\n", strings.Join(legend, "   "))
}

// staleText is a stale cell.
func (st gridStyle) staleText() string {
	if st.color {
		return "\x1b[" + staleSGR + "m" + colorGlyph + "\x1b[0m"
	}
	return staleGlyph
}

// staleIn reports whether a stale partition lies in span; the stale
// partitions are newest first.
func (st gridStyle) staleIn(span tranche.TimePartition) bool {
	// The first partition starting before the span's end: descending
	// starts put those at or after it first.
	i, _ := slices.BinarySearchFunc(st.stale, span.End, func(p tranche.TimePartition, end time.Time) int {
		if p.Start.Before(end) {
			return 1
		}
		return -1
	})
	return i < len(st.stale) && !st.stale[i].Start.Before(span.Start) && st.stale[i].Start.Before(span.End)
}
