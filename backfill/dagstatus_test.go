package backfill_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/memledger"
)

// janDay returns the partition of January 2026's day d, in UTC.
func janDay(d int) tranche.TimePartition {
	return tranche.PartitionOf(tranche.Day, time.Date(2026, 1, d, 0, 0, 0, 0, time.UTC))
}

// janDays returns the window of January 2026's days first to last, UTC.
func janDays(t testing.TB, first, last int) tranche.TimePartitionWindow {
	t.Helper()
	w, err := tranche.NewTimePartitionWindow(tranche.Day, janDay(first).Start, janDay(last).Start)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// twoBackfills runs two backfills of one daily DAG over overlapping
// windows: the first over January 1st to 5th, the 3rd failing; the
// second over the 4th to 7th rerunning all, the 5th failing this time
// (its later attempt wins over the first backfill's success). It returns
// the DAG's identity and the backfills' ids.
func twoBackfills(t testing.TB, l ledger.Ledger) (dag, first, second string) {
	t.Helper()
	fail := "2026-01-03"
	d, err := tranche.NewDAG(tranche.Asset{
		Name:         "events",
		Partitioning: tranche.Partitioning{Granularity: tranche.Day, Location: time.UTC, Column: "day"},
		Materialize: func(_ context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
			p, err := m.Partition()
			if err != nil {
				return nil, err
			}
			if p.Key() == fail {
				return nil, errors.New("upstream not ready")
			}
			return nil, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	a := &backfill.Backfill{DAG: d, Window: janDays(t, 1, 5), Ledger: l, OnFailure: tranche.FailContinue}
	if res, err := a.Run(context.Background()); res == nil || res.Failed != 1 {
		t.Fatalf("the first backfill: %+v, %v; want one failure", res, err)
	}
	fail = "2026-01-05"
	b := &backfill.Backfill{DAG: d, Window: janDays(t, 4, 7), Ledger: l, OnFailure: tranche.FailContinue, Rerun: ledger.RerunAll}
	if res, err := b.Run(context.Background()); res == nil || res.Failed != 1 {
		t.Fatalf("the second backfill: %+v, %v; want one failure", res, err)
	}
	if first, err = a.ID(); err != nil {
		t.Fatal(err)
	}
	if second, err = b.ID(); err != nil {
		t.Fatal(err)
	}
	return backfill.DAGIdentity(d, tranche.Day, time.UTC), first, second
}

func TestWindowStatus(t *testing.T) {
	ctx := context.Background()
	l := memledger.New(nil)
	dag, first, _ := twoBackfills(t, l)
	tests := []struct {
		name        string
		first, last int
		want        map[ledger.State]int
		states      string // each partition's state, oldest first, by initial
	}{
		{"both windows and beyond", 1, 9, map[ledger.State]int{ledger.StateSucceeded: 5, ledger.StateFailed: 2, ledger.StatePending: 2}, "SSFSFSSPP"},
		{"the later backfill's window", 4, 7, map[ledger.State]int{ledger.StateSucceeded: 3, ledger.StateFailed: 1}, "SFSS"},
		{"before any backfill", 1, 1, map[ledger.State]int{ledger.StateSucceeded: 1}, "S"},
		{"never attempted", 20, 31, map[ledger.State]int{ledger.StatePending: 12}, "PPPPPPPPPPPP"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := janDays(t, tt.first, tt.last)
			for _, lg := range []struct {
				name string
				l    ledger.Ledger
			}{{"counted", l}, {"every attempt", hidden{l}}} {
				s, err := backfill.WindowStatus(ctx, lg.l, dag, w)
				if err != nil {
					t.Fatalf("%s: %v", lg.name, err)
				}
				if !maps.Equal(s.Counts, tt.want) {
					t.Errorf("%s: counts %v; want %v", lg.name, s.Counts, tt.want)
				}
				if s.Record.ID != "" || s.Record.DAG != dag || s.Record.Window != w.String() || !s.Window.Equal(w) || len(s.Blocked) != 0 {
					t.Errorf("%s: record %+v, window %v, blocked %q; want no id, DAG %s, window %v, nothing blocked", lg.name, s.Record, s.Window, s.Blocked, dag, w)
				}
				if done := tt.want[ledger.StateSucceeded] == w.Len(); s.Done() != done {
					t.Errorf("%s: Done() = %t; want %t", lg.name, s.Done(), done)
				}
				var states []byte
				for ps, err := range s.Partitions(ctx) {
					if err != nil {
						t.Fatal(err)
					}
					states = append([]byte{strings.ToUpper(string(ps.State))[0]}, states...) // newest first
				}
				if string(states) != tt.states {
					t.Errorf("%s: partitions %s, oldest first; want %s", lg.name, states, tt.states)
				}
				g, err := backfill.WindowGrid(ctx, lg.l, dag, w, 2000)
				if err != nil {
					t.Fatal(err)
				}
				if got := cellCounts(g); !maps.Equal(got, tt.want) {
					t.Errorf("%s: the grid's cells count %v; want %v", lg.name, got, tt.want)
				}
			}
		})
	}

	// On the first backfill's partitions, the DAG's status and the
	// backfill's agree: both take the latest attempt whatever made it.
	bs, err := backfill.StatusOf(ctx, l, first, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ws, err := backfill.WindowStatus(ctx, l, dag, bs.Window)
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(bs.Counts, ws.Counts) {
		t.Errorf("StatusOf %v; WindowStatus of its window %v", bs.Counts, ws.Counts)
	}
}

// cellCounts adds up the counts of g's cells.
func cellCounts(g *backfill.Grid) map[ledger.State]int {
	out := map[ledger.State]int{}
	for _, c := range g.Cells {
		for st, n := range c.Counts {
			if n > 0 {
				out[st] += n
			}
		}
	}
	return out
}

// A window's status through a LatestReader is one aggregate query, and
// its grid one more, however many partitions the window holds; neither
// reads an attempt.
func TestWindowStatusCounts(t *testing.T) {
	ctx := context.Background()
	ml := memledger.New(nil)
	dag, _, _ := twoBackfills(t, ml)
	first := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	w, err := tranche.NewTimePartitionWindow(tranche.Day, first, time.Date(2099, 12, 31, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	c := newCounting(ml)
	s, err := backfill.WindowStatus(ctx, c, dag, w)
	if err != nil {
		t.Fatal(err)
	}
	if s.Counts[ledger.StateSucceeded] != 5 || s.Counts[ledger.StateFailed] != 2 || s.Counts[ledger.StatePending] != w.Len()-7 {
		t.Errorf("counts %v over %d days; want 5 succeeded, 2 failed, the rest pending", s.Counts, w.Len())
	}
	g, err := backfill.WindowGrid(ctx, c, dag, w, 100)
	if err != nil {
		t.Fatal(err)
	}
	if got := cellCounts(g); !maps.Equal(got, s.Counts) || g.Cell != tranche.Year {
		t.Errorf("the grid of %v cells counts %v; want %v in cells of a year", g.Cell, got, s.Counts)
	}
	calls, _ := c.take()
	if want := map[string]int{"CountLatest": 2}; !maps.Equal(calls, want) {
		t.Errorf("the ledger's calls %v; want %v", calls, want)
	}
}

func TestWindowStatusRefuses(t *testing.T) {
	ctx := context.Background()
	l := memledger.New(nil)
	w := janDays(t, 1, 3)
	tests := []struct {
		name string
		l    ledger.Ledger
		dag  string
		w    tranche.TimePartitionWindow
		want string
	}{
		{"no DAG", l, "", w, "empty DAG identity"},
		{"the zero window", l, "0123456789abcdef", tranche.TimePartitionWindow{}, "status of DAG 0123456789abcdef: empty window"},
		{"no ledger", nil, "0123456789abcdef", w, "nil ledger"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if s, err := backfill.WindowStatus(ctx, tt.l, tt.dag, tt.w); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("WindowStatus: %v, %v; want an error saying %q", s, err, tt.want)
			}
			if g, err := backfill.WindowGrid(ctx, tt.l, tt.dag, tt.w, 10); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("WindowGrid: %v, %v; want an error saying %q", g, err, tt.want)
			}
		})
	}
	if _, err := backfill.WindowGrid(ctx, l, "0123456789abcdef", w, 0); err == nil || !strings.Contains(err.Error(), "want at least 1") {
		t.Errorf("a grid of 0 cells: %v; want a refusal", err)
	}
}

// Over any window of the two backfills' days and around them, the
// window's status counts each partition by its latest attempt as
// History records it, counted or read, and its grid's cells, in any
// number, add up to the same counts.
func TestWindowStatusProperty(t *testing.T) {
	ctx := context.Background()
	l := memledger.New(nil)
	dag, _, _ := twoBackfills(t, l)
	latest := map[string]ledger.State{} // by key, for days with an attempt
	for d := 1; d <= 9; d++ {
		h, err := l.History(ctx, dag, janDay(d).Start)
		if err != nil {
			t.Fatal(err)
		}
		if len(h) > 0 {
			latest[janDay(d).Key()] = h[len(h)-1].State
		}
	}
	rapid.Check(t, func(rt *rapid.T) {
		first := rapid.IntRange(1, 31).Draw(rt, "first")
		last := rapid.IntRange(first, 31).Draw(rt, "last")
		cells := rapid.IntRange(1, 40).Draw(rt, "cells")
		w, err := tranche.NewTimePartitionWindow(tranche.Day, janDay(first).Start, janDay(last).Start)
		if err != nil {
			rt.Fatal(err)
		}
		want := map[ledger.State]int{}
		for p := range w.OldestFirst() {
			st, ok := latest[p.Key()]
			if !ok {
				st = ledger.StatePending
			}
			want[st]++
		}
		for _, lg := range []ledger.Ledger{l, hidden{l}} {
			s, err := backfill.WindowStatus(ctx, lg, dag, w)
			if err != nil {
				rt.Fatal(err)
			}
			if !maps.Equal(s.Counts, want) {
				rt.Fatalf("%T: counts %v; want %v", lg, s.Counts, want)
			}
			g, err := backfill.WindowGrid(ctx, lg, dag, w, cells)
			if err != nil {
				rt.Fatal(err)
			}
			if got := cellCounts(g); !maps.Equal(got, want) {
				rt.Fatalf("%T: a grid of at most %d cells counts %v; want %v", lg, cells, got, want)
			}
		}
	})
}

// The state of a DAG over a span of days, whichever backfill made each
// partition's latest attempt: a partition health bar, where StatusOf
// reads one backfill.
func ExampleWindowStatus() {
	ctx := context.Background()
	l := memledger.New(nil)
	dag, err := exampleDAG(new(tranche.MemoryDestination), "2026-01-02")
	if err != nil {
		fmt.Println(err)
		return
	}
	// Two backfills of the same DAG: January 1st to 3rd (the 2nd fails),
	// then the 2nd to the 4th (the 2nd succeeds this time).
	days := exampleDays()
	b := &backfill.Backfill{DAG: dag, Window: days, Ledger: l, OnFailure: tranche.FailContinue}
	b.Run(ctx)
	later, err := tranche.NewTimePartitionWindow(tranche.Day, days.Start().AddDate(0, 0, 1), days.End())
	if err != nil {
		fmt.Println(err)
		return
	}
	b = &backfill.Backfill{DAG: dag, Window: later, Ledger: l}
	b.Run(ctx)

	// The first week of January, as the ledger holds it.
	week, err := tranche.NewTimePartitionWindow(tranche.Day, days.Start(), days.Start().AddDate(0, 0, 6))
	if err != nil {
		fmt.Println(err)
		return
	}
	s, err := backfill.WindowStatus(ctx, l, backfill.DAGIdentity(dag, tranche.Day, time.UTC), week)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(s.Counts[ledger.StateSucceeded], "succeeded,", s.Counts[ledger.StateFailed], "failed,", s.Counts[ledger.StatePending], "never attempted")
	for ps, err := range s.Partitions(ctx) {
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(ps.Partition.Key(), ps.State)
	}
	// Output:
	// 4 succeeded, 0 failed, 3 never attempted
	// 2026-01-07 pending
	// 2026-01-06 pending
	// 2026-01-05 pending
	// 2026-01-04 succeeded
	// 2026-01-03 succeeded
	// 2026-01-02 succeeded
	// 2026-01-01 succeeded
}
