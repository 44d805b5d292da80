package backfill_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/ledger/memledger"
)

// TestGridCronRows: a cron slot is drawn in the row of the period its key
// (its fire) names, not of its start: the daily 02:00 slot firing on
// February 1st runs through January 31st and is the first cell of
// February's row, and the monthly slot firing on January 1st 2027 is the
// first of 2027's.
func TestGridCronRows(t *testing.T) {
	for _, c := range []struct {
		cron      string
		from, to  time.Time // fires, both included
		wantCells []string  // key row column, of some cells
	}{
		{"0 2 * * *", time.Date(2026, 1, 30, 2, 0, 0, 0, time.UTC), time.Date(2026, 2, 2, 2, 0, 0, 0, time.UTC),
			[]string{"2026-01-30T02:00:00Z 2026-01 29", "2026-01-31T02:00:00Z 2026-01 30", "2026-02-01T02:00:00Z 2026-02 0", "2026-02-02T02:00:00Z 2026-02 1"}},
		{"0 0 1 * *", time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), time.Date(2027, 2, 1, 0, 0, 0, 0, time.UTC),
			[]string{"2026-11-01T00:00:00Z 2026 10", "2026-12-01T00:00:00Z 2026 11", "2027-01-01T00:00:00Z 2027 0", "2027-02-01T00:00:00Z 2027 1"}},
	} {
		t.Run(c.cron, func(t *testing.T) {
			g, err := tranche.ParseCron(c.cron)
			if err != nil {
				t.Fatal(err)
			}
			first, err := tranche.SlotAt(g, c.from)
			if err != nil {
				t.Fatal(err)
			}
			last, err := tranche.SlotAt(g, c.to)
			if err != nil {
				t.Fatal(err)
			}
			w, err := tranche.NewTimePartitionWindow(g, first.Start, last.Start)
			if err != nil {
				t.Fatal(err)
			}
			s, err := backfill.WindowStatus(t.Context(), memledger.New(nil), "dag", w)
			if err != nil {
				t.Fatal(err)
			}
			grid, err := s.Grid(t.Context(), 100)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, cell := range grid.Cells {
				got = append(got, fmt.Sprintf("%s %s %d", cell.Span.Key(), cell.Row.Key(), cell.Column))
			}
			if fmt.Sprint(got) != fmt.Sprint(c.wantCells) {
				t.Errorf("cells (key, row, column):\n%v\nwant\n%v", got, c.wantCells)
			}
			for _, row := range grid.Rows() {
				for i := 1; i < len(row); i++ {
					if row[i].Column <= row[i-1].Column {
						t.Errorf("row %s: columns %d then %d", row[0].Row.Key(), row[i-1].Column, row[i].Column)
					}
				}
			}
		})
	}
}
