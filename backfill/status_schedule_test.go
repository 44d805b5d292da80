package backfill_test

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/internal/proctest"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/memledger"
)

// The status, grid and plan of a backfill of a cron schedule's slots
// agree whether the in-memory ledger counts them or they are read from
// every latest attempt (the SQLite ledger's tests check the same of it).
func TestScheduleReadsAgree(t *testing.T) {
	var clock time.Time
	proctest.CheckScheduleReads(t, memledger.New(func() time.Time { return clock }), &clock)
}

// slotsOf returns n slots of g from the one holding from.
func slotsOf(g tranche.TimeGranularity, from time.Time, n int) []tranche.TimePartition {
	var out []tranche.TimePartition
	for p := tranche.PartitionOf(g, from); len(out) < n; p = p.Next() {
		out = append(out, p)
	}
	return out
}

// record claims each of ps for dag on l and finishes it in state.
func record(t *testing.T, l ledger.Ledger, dag string, state ledger.State, ps ...tranche.TimePartition) {
	t.Helper()
	ctx := context.Background()
	for _, p := range ps {
		lease, err := l.Claim(ctx, ledger.ClaimRequest{DAG: dag, Worker: "w", Partitions: []tranche.TimePartition{p}, Lease: time.Minute, Policy: ledger.RerunAll, Revision: 1 << 40})
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Finish(ctx, lease, []ledger.Outcome{{State: state, Err: "boom"}}); err != nil {
			t.Fatal(err)
		}
	}
}

// The status, grid and plan of a cron schedule's backfill are counted by
// the ledger (no call of Reader.Latest), and agree with those read from
// every latest attempt, in the cases where a schedule differs from a
// fixed granularity: chosen slots far apart, excluded dates (the slot
// before one spans it), slots of unequal lengths (weekdays, months,
// daylight saving time), a zone of the schedule's own, a daily schedule
// whose wall time the spring change skips. Only a daily or hourly
// schedule that moved, whose former slots hold attempts around the
// backfill's, reads every latest attempt, and its former slots then count
// (matched by their fire), as plans match them.
func TestScheduleReadsCounted(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		expr     string
		excluded []string
		from     time.Time
		n        int
		chosen   []int // indexes of the chosen slots; nil: the window of n
		ok, bad  []int // slots succeeded and failed
		moved    string
		formerOK []int // slots of moved, from the one holding from, succeeded
		want     map[ledger.State]int
		read     bool // reads every latest attempt
	}{
		{name: "every five minutes", expr: "*/5 * * * *", from: time.Date(2026, 11, 1, 0, 0, 0, 0, ny), n: 400,
			ok: []int{0, 1, 2, 399}, bad: []int{200},
			want: map[ledger.State]int{ledger.StateSucceeded: 4, ledger.StateFailed: 1, ledger.StatePending: 395}},
		{name: "chosen slots far apart", expr: "*/5 * * * *", from: time.Date(2026, 11, 1, 0, 0, 0, 0, ny), n: 5000,
			chosen: []int{0, 1, 2, 1000, 2500, 2501, 4999}, ok: []int{0, 1, 1000, 3000}, bad: []int{4999, 4998},
			want: map[ledger.State]int{ledger.StateSucceeded: 3, ledger.StateFailed: 1, ledger.StatePending: 3}},
		{name: "a wall hour repeated", expr: "0 0-23 * * *", from: time.Date(2026, 10, 31, 0, 0, 0, 0, ny), n: 72,
			ok: []int{0, 25, 26, 27, 71}, bad: []int{30},
			want: map[ledger.State]int{ledger.StateSucceeded: 5, ledger.StateFailed: 1, ledger.StatePending: 66}},
		{name: "excluded dates", expr: "0 */6 * * *", excluded: []string{"2026-12-25", "2026-12-26"}, from: time.Date(2026, 12, 23, 0, 0, 0, 0, ny), n: 30,
			ok: []int{7, 8}, bad: []int{9},
			want: map[ledger.State]int{ledger.StateSucceeded: 2, ledger.StateFailed: 1, ledger.StatePending: 27}},
		{name: "weekdays in a zone of the schedule's own", expr: "CRON_TZ=Asia/Kathmandu 15 9 * * 1-5", from: time.Date(2026, 3, 1, 0, 0, 0, 0, ny), n: 300,
			ok: []int{0, 4, 5, 299}, bad: []int{100},
			want: map[ledger.State]int{ledger.StateSucceeded: 4, ledger.StateFailed: 1, ledger.StatePending: 295}},
		{name: "a daily wall time skipped in spring", expr: "30 2 * * *", from: time.Date(2026, 3, 1, 0, 0, 0, 0, ny), n: 40,
			ok: []int{6, 7, 8}, bad: []int{39},
			want: map[ledger.State]int{ledger.StateSucceeded: 3, ledger.StateFailed: 1, ledger.StatePending: 36}},
		{name: "monthly, chosen", expr: "0 0 1 * *", from: time.Date(2020, 1, 1, 0, 0, 0, 0, ny), n: 80,
			chosen: []int{0, 12, 13, 79}, ok: []int{12, 13, 14},
			want: map[ledger.State]int{ledger.StateSucceeded: 2, ledger.StatePending: 2}},
		{name: "hourly", expr: "5 * * * *", from: time.Date(2026, 11, 1, 0, 0, 0, 0, ny), n: 100,
			ok: []int{1, 2}, bad: []int{3},
			want: map[ledger.State]int{ledger.StateSucceeded: 2, ledger.StateFailed: 1, ledger.StatePending: 97}},
		{name: "a daily schedule that moved", expr: "0 1 * * *", from: time.Date(2026, 10, 20, 0, 0, 0, 0, ny), n: 30,
			ok: []int{20}, bad: []int{21}, moved: "0 3 * * *", formerOK: []int{1, 2, 3, 21},
			// Former slots 1 to 3 fire on the days of slots 1 to 3;
			// former slot 21, succeeded after slot 21 failed, replaces it.
			want: map[ledger.State]int{ledger.StateSucceeded: 5, ledger.StatePending: 25}, read: true},
		{name: "an hourly schedule that moved, chosen", expr: "5 * * * *", from: time.Date(2026, 11, 1, 0, 0, 0, 0, ny), n: 50,
			chosen: []int{10, 11, 40}, moved: "45 * * * *", formerOK: []int{11},
			want: map[ledger.State]int{ledger.StateSucceeded: 1, ledger.StatePending: 2}, read: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			g, err := tranche.ParseCron(tc.expr, tc.excluded...)
			if err != nil {
				t.Fatal(err)
			}
			dag, err := proctest.ScheduledDAG("slots", g, ny)
			if err != nil {
				t.Fatal(err)
			}
			id := backfill.DAGIdentity(dag, g, ny)
			mem := memledger.New(nil)
			slots := slotsOf(g, tc.from, tc.n)
			for _, i := range tc.ok {
				record(t, mem, id, ledger.StateSucceeded, slots[i])
			}
			for _, i := range tc.bad {
				record(t, mem, id, ledger.StateFailed, slots[i])
			}
			if tc.moved != "" {
				h, err := tranche.ParseCron(tc.moved, tc.excluded...)
				if err != nil {
					t.Fatal(err)
				}
				former := slotsOf(h, tc.from, tc.n)
				for _, i := range tc.formerOK {
					record(t, mem, id, ledger.StateSucceeded, former[i])
				}
			}
			l := newCounting(mem)
			w, err := tranche.NewTimePartitionWindow(g, slots[0].Start, slots[tc.n-1].Start)
			if err != nil {
				t.Fatal(err)
			}
			b := &backfill.Backfill{DAG: dag, Ledger: l, MaxPartitions: tc.n}
			if tc.chosen == nil {
				b.Window = w
			}
			var starts []time.Time
			for _, i := range tc.chosen {
				b.Partitions = append(b.Partitions, slots[i])
				starts = append(starts, slots[i].Start)
			}
			bid, err := b.ID()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := mem.PutBackfill(ctx, ledger.BackfillRecord{ID: bid, DAG: id, Window: w.String(), Partitions: starts, Chunk: 1}); err != nil {
				t.Fatal(err)
			}

			s, err := backfill.StatusOf(ctx, l, bid, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			grid, err := s.Grid(ctx, 3)
			if err != nil {
				t.Fatal(err)
			}
			cells, err := s.Grid(ctx, tc.n) // a cell per partition
			if err != nil {
				t.Fatal(err)
			}
			plan, err := b.Plan(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if calls, _ := l.take(); (calls["Latest"] > 0) != tc.read {
				t.Errorf("StatusOf, two grids and Plan called %v; want Latest called: %v", calls, tc.read)
			}
			if !maps.Equal(s.Counts, tc.want) {
				t.Errorf("StatusOf counts %v; want %v", s.Counts, tc.want)
			}
			slow, err := backfill.StatusOf(ctx, hidden{mem}, bid, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			sgrid, err := slow.Grid(ctx, 3)
			if err != nil {
				t.Fatal(err)
			}
			if grid.Cell != sgrid.Cell || !slices.EqualFunc(grid.Cells, sgrid.Cells, proctest.SameCell) {
				t.Errorf("Grid(3) counted:\n%+v\nread from every attempt:\n%+v", grid.Cells, sgrid.Cells)
			}
			scells, err := slow.Grid(ctx, tc.n)
			if err != nil {
				t.Fatal(err)
			}
			if cells.Cell != g || !slices.EqualFunc(cells.Cells, scells.Cells, proctest.SameCell) {
				t.Errorf("Grid(%d) found:\n%+v\nread from every attempt:\n%+v", tc.n, cells.Cells, scells.Cells)
			}
			hb := *b
			hb.Ledger = hidden{mem}
			splan, err := hb.Plan(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if plan.Counts != splan.Counts || plan.Counts.SkipSucceeded != tc.want[ledger.StateSucceeded] {
				t.Errorf("Plan counted %+v; read from every attempt %+v, with %d succeeded", plan.Counts, splan.Counts, tc.want[ledger.StateSucceeded])
			}
		})
	}
}

// Watch counts a daily schedule's backfill through the ledger, reading
// only what changed, until a former schedule's attempt lands among its
// slots: from then on it reads every latest attempt, as StatusOf does,
// and counts the former slot where its fire falls.
func TestWatchScheduleMoved(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	g, err := tranche.ParseCron("0 1 * * *")
	if err != nil {
		t.Fatal(err)
	}
	moved, err := tranche.ParseCron("0 3 * * *")
	if err != nil {
		t.Fatal(err)
	}
	dag, err := proctest.ScheduledDAG("slots", g, ny)
	if err != nil {
		t.Fatal(err)
	}
	id := backfill.DAGIdentity(dag, g, ny)
	from := time.Date(2026, 10, 20, 0, 0, 0, 0, ny)
	slots, former := slotsOf(g, from, 30), slotsOf(moved, from, 30)
	w, err := tranche.NewTimePartitionWindow(g, slots[0].Start, slots[29].Start)
	if err != nil {
		t.Fatal(err)
	}
	mem := memledger.New(nil)
	record(t, mem, id, ledger.StateSucceeded, slots[0])
	bid := backfill.ID(id, w, 1)
	if _, err := mem.PutBackfill(t.Context(), ledger.BackfillRecord{ID: bid, DAG: id, Window: w.String(), Chunk: 1}); err != nil {
		t.Fatal(err)
	}
	l := newCounting(mem)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	statuses := make(chan *backfill.Status)
	go func() {
		defer close(statuses)
		for s, err := range backfill.Watch(ctx, l, bid, 2*time.Millisecond) {
			if err != nil {
				return
			}
			statuses <- s
		}
	}()
	succeeded := func(n int) *backfill.Status {
		t.Helper()
		for s := range statuses {
			if s.Counts[ledger.StateSucceeded] == n {
				return s
			}
		}
		t.Fatalf("the watch ended before %d succeeded", n)
		return nil
	}
	succeeded(1)
	record(t, mem, id, ledger.StateSucceeded, slots[5])
	succeeded(2)
	if calls, _ := l.take(); calls["Latest"] != 0 || calls["CountLatest"] == 0 || calls["ChangedIn"] == 0 {
		t.Errorf("watching the schedule's own slots: calls %v; want counts and changes, no Latest", calls)
	}
	record(t, mem, id, ledger.StateSucceeded, former[10])
	s := succeeded(3)
	if calls, _ := l.take(); calls["Latest"] == 0 {
		t.Errorf("after a former schedule's attempt: calls %v; want Latest", calls)
	}
	slow, err := backfill.StatusOf(t.Context(), hidden{mem}, bid, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(s.Counts, slow.Counts) {
		t.Errorf("watched %v; read from every attempt %v", s.Counts, slow.Counts)
	}
	cancel()
	for range statuses {
	}
}
