package tranchecli

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/ledger"
)

// gridOfStates builds the grid of the partitions of g from first, one
// cell per partition in rows of row, in the states the letters of
// states give (s succeeded, f failed, r running, c canceled, p pending),
// with the counts of the legend.
func gridOfStates(t *testing.T, g, row tranche.TimeGranularity, first time.Time, states string) (*backfill.Grid, map[ledger.State]int) {
	t.Helper()
	byLetter := map[rune]ledger.State{'s': ledger.StateSucceeded, 'f': ledger.StateFailed, 'r': ledger.StateRunning,
		'c': ledger.StateCanceled, 'p': ledger.StatePending}
	start := tranche.PartitionOf(g, first)
	end := start
	for range len(states) - 1 {
		end = end.Next()
	}
	w, err := tranche.NewTimePartitionWindow(g, start.Start, end.Start)
	if err != nil {
		t.Fatal(err)
	}
	grid := &backfill.Grid{Window: w, Cell: g, Row: row}
	counts := map[ledger.State]int{}
	p := start
	for _, r := range states {
		st := byLetter[r]
		rowSpan := tranche.PartitionOf(row, p.Start)
		col := 0
		for q := tranche.PartitionOf(g, rowSpan.Start); q.Start.Before(p.Start); q = q.Next() {
			col++
		}
		grid.Cells = append(grid.Cells, backfill.Cell{Span: p, Row: rowSpan, Column: col, Partitions: 1, Counts: map[ledger.State]int{st: 1}})
		counts[st]++
		p = p.Next()
	}
	return grid, counts
}

func TestWriteGrid(t *testing.T) {
	utc := func(y int, m time.Month, d, h int) time.Time { return time.Date(y, m, d, h, 0, 0, 0, time.UTC) }
	for _, tc := range []struct {
		name     string
		g, row   tranche.TimeGranularity
		first    time.Time
		states   string
		color    bool
		width    int
		want     string
		wantRows int
	}{
		{
			name: "a week of days", g: tranche.Day, row: tranche.Month, first: utc(2026, 1, 1, 0), states: "ssfsfsp", width: 80,
			want: `cells: one per partition; rows: month
2026-01  # # X # X # .

# succeeded 4   X failed 2   > running 0   - canceled 0   . pending 1
`,
		},
		{
			name: "in colour", g: tranche.Day, row: tranche.Month, first: utc(2026, 1, 1, 0), states: "sfrcp", width: 80, color: true,
			want: "cells: one per partition; rows: month\n" +
				"2026-01  \x1b[32m■\x1b[0m \x1b[31m■\x1b[0m \x1b[33m■\x1b[0m \x1b[35m■\x1b[0m \x1b[90m■\x1b[0m\n\n" +
				"\x1b[32m■\x1b[0m succeeded 1   \x1b[31m■\x1b[0m failed 1   \x1b[33m■\x1b[0m running 1   \x1b[35m■\x1b[0m canceled 1   \x1b[90m■\x1b[0m pending 1\n",
		},
		{
			// A row that starts before the backfill keeps its first
			// columns blank, so that days stay under one another.
			name: "across months", g: tranche.Day, row: tranche.Month, first: utc(2026, 1, 29, 0), states: "sssfsp", width: 80,
			want: `cells: one per partition; rows: month
2026-01                                                          # # #
2026-02  X # .

# succeeded 4   X failed 1   > running 0   - canceled 0   . pending 1
`,
		},
		{
			// 24 hours at two columns each do not fit 40 columns: one
			// each.
			name: "hours in a narrow screen", g: tranche.Hour, row: tranche.Day, first: utc(2026, 1, 1, 0),
			states: "ssssssssssssssssssssssff" + "rrpp", width: 40,
			want: `cells: one per partition; rows: day
2026-01-01  ######################XX
2026-01-02  >>..

# succeeded 22   X failed 2   > running 2   - canceled 0   . pending 2
`,
		},
		{
			// 60 minutes do not fit 30 columns even at one each: the row
			// goes on over the next lines.
			name: "minutes wrap", g: tranche.Minute, row: tranche.Hour, first: utc(2026, 1, 1, 10),
			states: strings.Repeat("s", 59) + "f", width: 30,
			want: `cells: one per partition; rows: hour
2026-01-01T10:00Z  ###########
                   ###########
                   ###########
                   ###########
                   ###########
                   ####X

# succeeded 59   X failed 1   > running 0   - canceled 0   . pending 0
`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, counts := gridOfStates(t, tc.g, tc.row, tc.first, tc.states)
			var b strings.Builder
			writeGrid(&b, g, counts, gridStyle{color: tc.color, width: tc.width})
			if diff := cmp.Diff(tc.want, b.String()); diff != "" {
				t.Errorf("grid (-want +got):\n%s", diff)
			}
			if !tc.color && strings.Contains(b.String(), "\x1b") {
				t.Errorf("a plain grid holds an escape")
			}
		})
	}
}

// TestWriteGridAggregated draws a grid that Status.Grid aggregated:
// the header says what a cell holds.
func TestWriteGridAggregated(t *testing.T) {
	w, err := tranche.NewTimePartitionWindow(tranche.Hour, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 1, 2, 23, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	day := func(d int) tranche.TimePartition {
		return tranche.PartitionOf(tranche.Day, time.Date(2026, 1, d, 0, 0, 0, 0, time.UTC))
	}
	month := tranche.PartitionOf(tranche.Month, day(1).Start)
	g := &backfill.Grid{Window: w, Cell: tranche.Day, Row: tranche.Month, Cells: []backfill.Cell{
		{Span: day(1), Row: month, Column: 0, Partitions: 24, Counts: map[ledger.State]int{ledger.StateSucceeded: 23, ledger.StateFailed: 1}},
		{Span: day(2), Row: month, Column: 1, Partitions: 24, Counts: map[ledger.State]int{ledger.StateSucceeded: 24}},
	}}
	var b strings.Builder
	writeGrid(&b, g, map[ledger.State]int{ledger.StateSucceeded: 47, ledger.StateFailed: 1}, gridStyle{width: 80})
	want := `cells: one per day of hour partitions, showing the worst state in it; rows: month
2026-01  X #

# succeeded 47   X failed 1   > running 0   - canceled 0   . pending 0
`
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("grid (-want +got):\n%s", diff)
	}
}

// TestStaleIn checks which cells hold a stale partition, the stale
// partitions newest first: single days, a month holding some, and spans
// beside them.
func TestStaleIn(t *testing.T) {
	day := func(d int) tranche.TimePartition {
		return tranche.PartitionOf(tranche.Day, time.Date(2026, 1, d, 0, 0, 0, 0, time.UTC))
	}
	st := gridStyle{stale: []tranche.TimePartition{day(9), day(5), day(3)}}
	for d := 1; d <= 12; d++ {
		if got, want := st.staleIn(day(d)), d == 3 || d == 5 || d == 9; got != want {
			t.Errorf("staleIn(2026-01-%02d) = %v; want %v", d, got, want)
		}
	}
	month := tranche.PartitionOf(tranche.Month, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	if !st.staleIn(month) || st.staleIn(tranche.PartitionOf(tranche.Month, time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC))) {
		t.Error("staleIn of January, holding stale days, or of February, holding none, is wrong")
	}
	if (gridStyle{}).staleIn(month) {
		t.Error("staleIn without stale partitions")
	}
}
