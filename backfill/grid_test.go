package backfill_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/memledger"
)

// gridRows renders g one row a line: the row's key, then each cell as
// column:key=state/partitions.
func gridRows(g *backfill.Grid) string {
	var b strings.Builder
	for _, row := range g.Rows() {
		b.WriteString(row[0].Row.Key() + ":")
		for _, c := range row {
			fmt.Fprintf(&b, " %d:%s=%s/%d", c.Column, c.Span.Key(), c.State(), c.Partitions)
		}
		b.WriteString("\n")
	}
	return b.String()
}

func TestGrid(t *testing.T) {
	ctx := context.Background()
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	// Four days of hours in New York, over the end of daylight saving
	// time (2026-11-01 has 25 hours), the third day failing once.
	w, err := tranche.NewTimePartitionWindow(tranche.Hour,
		time.Date(2026, 10, 31, 0, 0, 0, 0, ny), time.Date(2026, 11, 3, 23, 0, 0, 0, ny))
	if err != nil {
		t.Fatal(err)
	}
	failed := false
	dag, err := tranche.NewDAG(tranche.Asset{
		Name:         "hits",
		Partitioning: tranche.Partitioning{Granularity: tranche.Hour, Location: ny},
		Materialize: func(_ context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
			p, err := m.Partition()
			if err != nil {
				return nil, err
			}
			if p.Key() == "2026-11-02T05:00-05:00" && !failed {
				failed = true
				return nil, fmt.Errorf("upstream not ready")
			}
			return nil, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	lg := memledger.New(nil)
	b := &backfill.Backfill{DAG: dag, Window: w, Ledger: lg, Worker: "w", OnFailure: tranche.FailContinue}
	res, err := b.Run(ctx)
	if res == nil {
		t.Fatal(err)
	}
	status, err := backfill.StatusOf(ctx, lg, res.Backfill, time.Now())
	if err != nil {
		t.Fatal(err)
	}

	t.Run("a cell per partition", func(t *testing.T) {
		g, err := status.Grid(ctx, 200)
		if err != nil {
			t.Fatal(err)
		}
		if g.Cell != tranche.Hour || g.Row != tranche.Day || len(g.Cells) != 97 {
			t.Fatalf("grid of %v cells in rows of %v, %d cells; want hours in days, 97 cells", g.Cell, g.Row, len(g.Cells))
		}
		rows := g.Rows()
		if len(rows) != 4 || len(rows[1]) != 25 {
			t.Fatalf("%d rows, the second of %d cells; want 4 rows, the second of 25 hours", len(rows), len(rows[1]))
		}
		// The repeated 01:00 is its own cell, in the column after the first.
		if c := rows[1][2]; c.Column != 2 || c.Span.Key() != "2026-11-01T01:00-05:00" {
			t.Errorf("third cell of 2026-11-01: column %d, %s; want column 2, 2026-11-01T01:00-05:00", c.Column, c.Span.Key())
		}
		if c := rows[2][5]; c.State() != ledger.StateFailed || c.Counts[ledger.StateFailed] != 1 {
			t.Errorf("cell %s: %s, counts %v; want failed", c.Span.Key(), c.State(), c.Counts)
		}
	})
	t.Run("a cell per day", func(t *testing.T) {
		g, err := status.Grid(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		want := "2026-10: 30:2026-10-31=succeeded/24\n" +
			"2026-11: 0:2026-11-01=succeeded/25 1:2026-11-02=failed/24 2:2026-11-03=succeeded/24\n"
		if got := gridRows(g); got != want {
			t.Errorf("grid of days:\n%s\nwant\n%s", got, want)
		}
	})
	t.Run("too few cells", func(t *testing.T) {
		if _, err := status.Grid(ctx, 0); err == nil {
			t.Error("Grid(ctx, 0) did not fail")
		}
	})
}

func TestWatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		w, err := tranche.NewTimePartitionWindow(tranche.Day,
			time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC))
		if err != nil {
			t.Fatal(err)
		}
		release := make(chan struct{})
		dag, err := tranche.NewDAG(tranche.Asset{
			Name:         "slow",
			Partitioning: tranche.Partitioning{Granularity: tranche.Day, Location: time.UTC},
			Materialize: func(ctx context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
				select {
				case <-release:
				case <-ctx.Done():
				}
				return nil, nil
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		lg := memledger.New(nil)
		b := &backfill.Backfill{DAG: dag, Window: w, Ledger: lg, Worker: "w", Concurrency: 1}
		id, err := b.ID()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Plan(ctx); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { _, err := b.Run(ctx); done <- err }()
		// Wait for the backfill's record, which Run writes first.
		for {
			if _, err := lg.Backfill(ctx, id); err == nil {
				break
			}
			time.Sleep(time.Millisecond)
		}
		var succeeded []int
		for s, err := range backfill.Watch(ctx, lg, id, 5*time.Millisecond) {
			if err != nil {
				t.Fatal(err)
			}
			n := s.Counts[ledger.StateSucceeded]
			if len(succeeded) > 0 && n < succeeded[len(succeeded)-1] {
				t.Fatalf("succeeded went from %d to %d", succeeded[len(succeeded)-1], n)
			}
			succeeded = append(succeeded, n)
			// A worker may claim a fast partition ahead of its run, so that
			// more than its one slot can show running.
			if s.Counts[ledger.StateRunning] >= 1 {
				release <- struct{}{}
			}
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if got := succeeded[len(succeeded)-1]; got != 5 {
			t.Fatalf("the last status counted %d succeeded; want 5 (statuses: %v)", got, succeeded)
		}
		for _, err := range backfill.Watch(ctx, lg, id, 0) {
			if err == nil {
				t.Error("Watch with a zero interval did not fail")
			}
		}
	})
}
