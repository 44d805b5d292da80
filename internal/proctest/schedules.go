package proctest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/ledger"
)

// readSchedules are the schedules CheckScheduleReads draws, each with a
// schedule of the same DAG identity it may have moved from ("": none,
// which only a daily or hourly schedule has).
var readSchedules = []struct{ expr, moved string }{
	{"*/5 * * * *", ""},
	{"* * * * *", ""},
	{"0 */2 * * *", ""},
	{"15,45 * * * *", ""},
	{"0 0-23 * * *", ""}, // once per wall hour: 25 on a day the clocks go back, 23 on one they go forward
	{"0 9-17 * * 1-5", ""},
	{"30 2 * * *", "0 5 * * *"},    // daily; 02:30 does not exist on the spring day in New York
	{"0 1 * * *", "30 1 * * *"},    // daily; 01:30 comes twice on the autumn day
	{"0 9 * * 1-5", "0 7 * * 1-5"}, // daily on weekdays: Friday's slot spans the weekend
	{"0 0 1 * *", "0 12 1 * *"},    // daily cadence, monthly days
	{"5 * * * *", "50 * * * *"},    // hourly
	{"CRON_TZ=Europe/Berlin 0 3 * * *", "CRON_TZ=Europe/Berlin 0 22 * * *"},
}

// CheckScheduleReads checks that the status, the grid and the plan of a
// backfill of a cron schedule's slots agree whether l counts them
// (ledger.LatestReader) or they are read from every latest attempt
// (EveryAttempt), over random schedules of every cadence in New York
// around both changes of daylight saving time, excluded dates, windows
// and chosen slots (some straddling the scans' batches of 4,096),
// chunks, rerun policies and histories of claims and finishes in and
// around the backfill, and, for a daily or hourly schedule, claims of
// the schedule it moved from, which plans match by their fire. l's clock
// must read *clock, which the property moves; each case records a DAG
// of its own, so l may be shared by the cases.
func CheckScheduleReads(t *testing.T, l ledger.Ledger, clock *time.Time) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	cases := 0
	rapid.Check(t, func(rt *rapid.T) {
		ctx := context.Background()
		cases++
		*clock = time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
		now := func() time.Time { return *clock }

		sc := rapid.SampledFrom(readSchedules).Draw(rt, "schedule")
		base := rapid.SampledFrom([]time.Time{time.Date(2026, 10, 31, 20, 0, 0, 0, ny), time.Date(2026, 3, 7, 22, 0, 0, 0, ny)}).Draw(rt, "base")
		base = base.Add(time.Duration(rapid.IntRange(-48, 48).Draw(rt, "base hours")) * time.Hour)
		var excluded []string
		for k := range 4 {
			if rapid.IntRange(0, 4).Draw(rt, "exclude") == 0 {
				excluded = append(excluded, base.AddDate(0, 0, k).Format(time.DateOnly))
			}
		}
		g, err := tranche.ParseCron(sc.expr, excluded...)
		if err != nil {
			rt.Fatal(err)
		}
		dag, err := ScheduledDAG(fmt.Sprintf("slots-%d", cases), g, ny)
		if err != nil {
			rt.Fatal(err)
		}
		id := backfill.DAGIdentity(dag, g, ny)

		n := rapid.IntRange(1, 60).Draw(rt, "slots")
		chunk := rapid.IntRange(1, 4).Draw(rt, "chunk")
		wide := sc.moved == "" && sc.expr == "*/5 * * * *" && rapid.IntRange(0, 4).Draw(rt, "wide") == 0
		if wide {
			n = rapid.IntRange(4000, 9000).Draw(rt, "wide slots")
			chunk = rapid.SampledFrom([]int{1, 3, 2049, 4095, 4096, 4097}).Draw(rt, "wide chunk")
		}
		const margin = 20 // slots claimed before and after the window
		slots := make([]tranche.TimePartition, 0, n+2*margin)
		for p := tranche.PartitionOf(g, base); len(slots) < n+2*margin; p = p.Next() {
			slots = append(slots, p)
		}
		var former []tranche.TimePartition // the moved-from schedule's slots over the same span
		if sc.moved != "" && rapid.Bool().Draw(rt, "moved") {
			h, err := tranche.ParseCron(sc.moved, excluded...)
			if err != nil {
				rt.Fatal(err)
			}
			old, err := ScheduledDAG(fmt.Sprintf("slots-%d", cases), h, ny)
			if err != nil {
				rt.Fatal(err)
			}
			if got := backfill.DAGIdentity(old, h, ny); got != id {
				rt.Fatalf("%s and %s have identities %s and %s; want one", sc.expr, sc.moved, got, id)
			}
			for p := tranche.PartitionOf(h, slots[0].Start); p.Start.Before(slots[len(slots)-1].End); p = p.Next() {
				former = append(former, p)
			}
		}

		b := &backfill.Backfill{DAG: dag, Ledger: l, Worker: "planner", Now: now, ChunkSize: chunk, MaxPartitions: n,
			Rerun: rapid.SampledFrom([]ledger.RerunPolicy{ledger.RerunNone, ledger.RerunFailed, ledger.RerunAll}).Draw(rt, "rerun")}
		w, err := tranche.NewTimePartitionWindow(g, slots[margin].Start, slots[margin+n-1].Start)
		if err != nil {
			rt.Fatal(err)
		}
		var starts []time.Time
		if rapid.Bool().Draw(rt, "chosen") {
			for i := range n {
				if i == 0 || rapid.IntRange(0, 2).Draw(rt, "choose") > 0 {
					b.Partitions = append(b.Partitions, slots[margin+i])
					starts = append(starts, slots[margin+i].Start)
				}
			}
		} else {
			b.Window = w
		}
		bid, err := b.ID()
		if err != nil {
			rt.Fatal(err)
		}
		if _, err := l.PutBackfill(ctx, ledger.BackfillRecord{ID: bid, DAG: id, Window: w.String(), Partitions: starts, Chunk: b.ChunkSize}); err != nil {
			rt.Fatal(err)
		}

		scale := 1 // spreads the claims over a wide window
		if wide {
			scale = len(slots) / 100
		}
		var leases []*ledger.Lease
		for range rapid.IntRange(0, 50).Draw(rt, "steps") {
			switch op := rapid.IntRange(0, 4).Draw(rt, "op"); {
			case op <= 1 || op == 2 && former == nil:
				i := rapid.IntRange(0, len(slots)/scale-1).Draw(rt, "slot")*scale + rapid.IntRange(0, scale-1).Draw(rt, "slot within")
				ps := slots[i:min(len(slots), i+1+rapid.IntRange(0, 2).Draw(rt, "more"))]
				lease, err := l.Claim(ctx, ledger.ClaimRequest{DAG: id, Backfill: bid, Worker: rapid.SampledFrom([]string{"a", "b"}).Draw(rt, "worker"),
					Partitions: ps, Lease: time.Minute, Policy: ledger.RerunAll, Revision: 1 << 40})
				if err == nil {
					leases = append(leases, lease)
				} else if !errors.Is(err, ledger.ErrNotClaimable) {
					rt.Fatal(err)
				}
			case op == 2:
				i := rapid.IntRange(0, len(former)-1).Draw(rt, "former slot")
				lease, err := l.Claim(ctx, ledger.ClaimRequest{DAG: id, Worker: "live", Partitions: former[i : i+1], Lease: time.Minute, Policy: ledger.RerunAll, Revision: 1 << 40})
				if err == nil {
					leases = append(leases, lease)
				} else if !errors.Is(err, ledger.ErrNotClaimable) {
					rt.Fatal(err)
				}
			case op == 3:
				if len(leases) == 0 {
					continue
				}
				k := rapid.IntRange(0, len(leases)-1).Draw(rt, "lease")
				out := make([]ledger.Outcome, len(leases[k].Partitions))
				for i := range out {
					out[i] = ledger.Outcome{State: rapid.SampledFrom([]ledger.State{ledger.StateSucceeded, ledger.StateFailed, ledger.StateCanceled}).Draw(rt, "state"),
						Err: fmt.Sprint("boom ", i)}
				}
				if err := l.Finish(ctx, leases[k], out); err != nil && !errors.Is(err, ledger.ErrFenced) {
					rt.Fatal(err)
				}
				leases = slices.Delete(leases, k, k+1)
			default:
				*clock = clock.Add(time.Duration(rapid.IntRange(1, 90).Draw(rt, "seconds")) * time.Second)
			}
		}
		if rapid.IntRange(0, 3).Draw(rt, "canceled") == 0 {
			if err := l.CancelBackfill(ctx, bid, ledger.CancelOptions{}); err != nil {
				rt.Fatal(err)
			}
		}

		at := clock.Add(time.Duration(rapid.IntRange(-60, 60).Draw(rt, "now offset")) * time.Second)
		RequireReadsAgree(rt, ctx, b, bid, at, rapid.IntRange(1, 90).Draw(rt, "cells"))
	})
}

// RequireReadsAgree fails t unless the status of the backfill bid at
// at, its grid in at most cells cells and b's plan are the same counted
// through b.Ledger's [ledger.LatestReader] as read from every attempt
// (EveryAttempt): the property that every counted path of package
// backfill must keep.
func RequireReadsAgree(t interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}, ctx context.Context, b *backfill.Backfill, bid string, at time.Time, cells int) {
	t.Helper()
	fast, err := backfill.StatusOf(ctx, b.Ledger, bid, at)
	if err != nil {
		t.Fatal(err)
	}
	slow, err := backfill.StatusOf(ctx, EveryAttempt{b.Ledger}, bid, at)
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(fast.Counts, slow.Counts) || !slices.Equal(fast.Blocked, slow.Blocked) {
		t.Fatalf("StatusOf counted: %v %q\nread from every attempt: %v %q", fast.Counts, fast.Blocked, slow.Counts, slow.Blocked)
	}
	fg, err := fast.Grid(ctx, cells)
	if err != nil {
		t.Fatal(err)
	}
	sg, err := slow.Grid(ctx, cells)
	if err != nil {
		t.Fatal(err)
	}
	if fg.Cell != sg.Cell || !slices.EqualFunc(fg.Cells, sg.Cells, SameCell) {
		t.Fatalf("Grid(%d) counted:\n%+v\nread from every attempt:\n%+v", cells, fg.Cells, sg.Cells)
	}
	fp, err := b.Plan(ctx)
	if err != nil {
		t.Fatal(err)
	}
	hb := *b
	hb.Ledger = EveryAttempt{b.Ledger}
	sp, err := hb.Plan(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if fp.Counts != sp.Counts || fp.Revision != sp.Revision {
		t.Fatalf("Plan counted: %+v; read from every attempt: %+v", fp.Counts, sp.Counts)
	}
}

// SameCell reports whether two cells of grids are the same.
func SameCell(a, b backfill.Cell) bool {
	return a.Span.Equal(b.Span) && a.Row.Equal(b.Row) && a.Column == b.Column && a.Partitions == b.Partitions && maps.Equal(a.Counts, b.Counts)
}
