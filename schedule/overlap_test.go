package schedule_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/memledger"
	"github.com/tranche-dev/tranche/schedule"
)

// TestOverlap runs an hourly DAG whose first slot takes two hours and a
// half, under each overlap policy: the slots that close meanwhile wait
// and run in order, wait one at most (the others skipped), are skipped,
// run beside it, or stop it (recorded canceled) and run.
func TestOverlap(t *testing.T) {
	for _, tc := range []struct {
		overlap  schedule.Overlap
		maxQueue int
		calls    []string // "KEY at HH:MM"
		skipped  []string
		canceled []string
	}{
		{overlap: "", calls: []string{"00:00 at 01:00", "01:00 at 03:30", "02:00 at 03:40", "03:00 at 04:00", "04:00 at 05:00"}},
		{overlap: schedule.OverlapQueue, calls: []string{"00:00 at 01:00", "01:00 at 03:30", "02:00 at 03:40", "03:00 at 04:00", "04:00 at 05:00"}},
		{overlap: schedule.OverlapSkip, calls: []string{"00:00 at 01:00", "03:00 at 04:00", "04:00 at 05:00"},
			skipped: []string{"2026-01-10T01:00Z live", "2026-01-10T02:00Z live"}},
		{overlap: schedule.OverlapConcurrent, calls: []string{"00:00 at 01:00", "01:00 at 02:00", "02:00 at 03:00", "03:00 at 04:00", "04:00 at 05:00"}},
		{overlap: schedule.OverlapBufferOne, calls: []string{"00:00 at 01:00", "01:00 at 03:30", "03:00 at 04:00", "04:00 at 05:00"},
			skipped: []string{"2026-01-10T02:00Z live"}},
		{overlap: schedule.OverlapQueue, maxQueue: 1, calls: []string{"00:00 at 01:00", "01:00 at 03:30", "03:00 at 04:00", "04:00 at 05:00"},
			skipped: []string{"2026-01-10T02:00Z live"}},
		{overlap: schedule.OverlapQueue, maxQueue: 2, calls: []string{"00:00 at 01:00", "01:00 at 03:30", "02:00 at 03:40", "03:00 at 04:00", "04:00 at 05:00"}},
		{overlap: schedule.OverlapCancelOther, calls: []string{"00:00 at 01:00", "01:00 at 02:00", "02:00 at 03:00", "03:00 at 04:00", "04:00 at 05:00"},
			canceled: []string{"2026-01-10T00:00Z live"}},
	} {
		t.Run(fmt.Sprintf("%s max %d", tc.overlap, tc.maxQueue), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := time.Date(2026, 1, 10, 0, 30, 0, 0, time.UTC)
				clock := offsetClock(base)
				w := newWork(t, tranche.Hour, time.UTC, clock)
				w.take = func(key string) time.Duration {
					if key == "2026-01-10T00:00Z" {
						return 150 * time.Minute
					}
					return 10 * time.Minute
				}
				var ev events
				s := &schedule.Scheduler{DAG: w.dag, Ledger: memledger.New(clock), Overlap: tc.overlap, MaxQueue: tc.maxQueue, Now: clock, OnEvent: ev.hook}
				runFor(t, s, 5*time.Hour) // to 05:30
				var got []string
				for _, c := range w.callList() {
					got = append(got, c.key[11:16]+" at "+c.at.Format("15:04"))
				}
				if diff := cmp.Diff(tc.calls, got); diff != "" {
					t.Errorf("runs (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(tc.skipped, ev.of(schedule.KindSkipped)); diff != "" {
					t.Errorf("skipped (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(tc.canceled, ev.of(schedule.KindCanceled)); diff != "" {
					t.Errorf("canceled (-want +got):\n%s", diff)
				}
				if st := s.Status(); st.Skipped != len(tc.skipped) || st.Canceled != len(tc.canceled) {
					t.Errorf("Status: %d skipped and %d canceled, want %d and %d", st.Skipped, st.Canceled, len(tc.skipped), len(tc.canceled))
				}
				// What the policy did not run or stopped is recorded
				// canceled, saying why, for a backfill to find.
				h := history(t, s.Ledger, w.dag, tranche.Hour, time.UTC, base.Add(-time.Hour), base.Add(6*time.Hour))
				for _, k := range append(slices.Clone(tc.skipped), tc.canceled...) {
					key := strings.Fields(k)[0]
					if h[key] != "[canceled]" {
						t.Errorf("history of slot %s: %s, want one canceled attempt", key, h[key])
					}
					p, _ := tranche.ParsePartitionKey(tranche.Hour, key, time.UTC)
					att, _ := s.Ledger.History(context.Background(), s.Status().DAG, p.Start)
					if len(att) == 0 || !strings.Contains(att[0].Err, "overlap policy "+string(tc.overlap)) {
						t.Errorf("slot %s: %+v; want its error to name the overlap policy", key, att)
					}
				}
				for _, e := range ev.list() {
					if e.Kind == schedule.KindSucceeded && schedule.TriggerOf(e) != ledger.TriggerLive {
						t.Errorf("%s %s: trigger %q, want live: it came due while the scheduler waited", e.Kind, e.Target, schedule.TriggerOf(e))
					}
				}
			})
		})
	}
}

// TestOverlapSkipAfterDowntime: under OverlapSkip, of the slots a
// catch-up would run, only the newest runs.
func TestOverlapSkipAfterDowntime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := time.Date(2026, 1, 10, 0, 30, 0, 0, time.UTC)
		clock := offsetClock(base)
		w := newWork(t, tranche.Hour, time.UTC, clock)
		var ev events
		s := &schedule.Scheduler{DAG: w.dag, Ledger: memledger.New(clock), Overlap: schedule.OverlapSkip, Now: clock, OnEvent: ev.hook}
		runFor(t, s, time.Hour) // 00:00 runs at 01:00
		time.Sleep(4 * time.Hour)
		runFor(t, s, 10*time.Minute) // at 05:30: 01:00 to 04:00 closed meanwhile
		want := []string{"2026-01-10T00:00Z live", "2026-01-10T04:00Z catch-up"}
		if diff := cmp.Diff(want, ev.of(schedule.KindSucceeded)); diff != "" {
			t.Errorf("succeeded (-want +got):\n%s", diff)
		}
		skipped := []string{"2026-01-10T01:00Z catch-up", "2026-01-10T02:00Z catch-up", "2026-01-10T03:00Z catch-up"}
		if diff := cmp.Diff(skipped, ev.of(schedule.KindSkipped)); diff != "" {
			t.Errorf("skipped (-want +got):\n%s", diff)
		}
	})
}

// TestOverlapWithAnotherWorker: the earlier slot may run elsewhere. Under
// another scheduler's lease (a replica's), it is the earlier live run: a
// queued slot waits for it, a skipped one is not run, a concurrent one
// runs beside it. Under a backfill's lease it is not: the later slot runs
// when it is due, whatever the policy, and the held slot is left to the
// backfill.
func TestOverlapWithAnotherWorker(t *testing.T) {
	for _, tc := range []struct {
		holder  string // who runs 00:00 from 00:50 to 02:55: "replica" or "backfill"
		overlap schedule.Overlap
		calls   []string // the scheduler's runs
		skipped []string
	}{
		{"replica", schedule.OverlapQueue, []string{"01:00 at 02:55", "02:00 at 03:00"}, nil},
		{"replica", schedule.OverlapSkip, []string{"02:00 at 03:00"}, []string{"2026-01-10T01:00Z live"}},
		{"replica", schedule.OverlapConcurrent, []string{"01:00 at 02:00", "02:00 at 03:00"}, nil},
		{"backfill", schedule.OverlapQueue, []string{"01:00 at 02:00", "02:00 at 03:00"}, nil},
		{"backfill", schedule.OverlapSkip, []string{"01:00 at 02:00", "02:00 at 03:00"}, nil},
		{"backfill", schedule.OverlapConcurrent, []string{"01:00 at 02:00", "02:00 at 03:00"}, nil},
	} {
		t.Run(tc.holder+"/"+string(tc.overlap), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := time.Date(2026, 1, 10, 0, 30, 0, 0, time.UTC)
				clock := offsetClock(base)
				l := memledger.New(clock)
				w := newWork(t, tranche.Hour, time.UTC, clock)
				first := tranche.PartitionOf(tranche.Hour, base)
				w.take = func(key string) time.Duration {
					if key == first.Key() {
						return 125 * time.Minute
					}
					return time.Minute
				}
				var ev events
				s := &schedule.Scheduler{DAG: w.dag, Ledger: l, Overlap: tc.overlap, Now: clock, OnEvent: ev.hook}
				stop := start(t, s)
				time.Sleep(20 * time.Minute) // to 00:50
				done := make(chan error, 1)
				switch tc.holder {
				case "backfill":
					bf := &backfill.Backfill{DAG: w.dag, Ledger: l, Partitions: []tranche.TimePartition{first}}
					go func() { _, err := bf.Run(context.Background()); done <- err }()
				default:
					id := backfill.DAGIdentity(w.dag, tranche.Hour, time.UTC)
					lease, err := l.Claim(t.Context(), ledger.ClaimRequest{DAG: id, Worker: "replica", RunID: backfill.RunID(id, first.Start, first.End),
						Partitions: []tranche.TimePartition{first}, Lease: 3 * time.Hour, Policy: ledger.RerunNone})
					if err != nil {
						t.Fatal(err)
					}
					go func() {
						time.Sleep(125 * time.Minute)
						done <- l.Finish(context.Background(), lease, []ledger.Outcome{{State: ledger.StateSucceeded}})
					}()
				}
				time.Sleep(160 * time.Minute) // to 03:30
				stop()
				if err := <-done; err != nil {
					t.Fatalf("%s: %v", tc.holder, err)
				}
				var got []string
				for _, c := range w.callList() {
					if c.key != first.Key() {
						got = append(got, c.key[11:16]+" at "+c.at.Format("15:04"))
					}
				}
				if diff := cmp.Diff(tc.calls, got); diff != "" {
					t.Errorf("runs (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(tc.skipped, ev.of(schedule.KindSkipped)); diff != "" {
					t.Errorf("skipped (-want +got):\n%s", diff)
				}
				for _, k := range []tranche.Kind{schedule.KindHeld, schedule.KindElsewhere} {
					if diff := cmp.Diff([]string{"2026-01-10T00:00Z live"}, ev.of(k)); diff != "" {
						t.Errorf("%s (-want +got):\n%s", k, diff)
					}
				}
				if st := s.Status(); st.Last.Key() != "2026-01-10T02:00Z" {
					t.Errorf("Status.Last = %s; want 2026-01-10T02:00Z, the scheduler's own newest run", st.Last.Key())
				}
			})
		})
	}
}

var errBoom = errors.New("boom")

// TestFailedSlotStaysFailed: a slot whose run fails is recorded failed
// and not run again by any scheduler; the next slots run on.
func TestFailedSlotStaysFailed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := time.Date(2026, 1, 10, 0, 30, 0, 0, time.UTC)
		clock := offsetClock(base)
		l := memledger.New(clock)
		w := newWork(t, tranche.Hour, time.UTC, clock)
		w.fail = func(key string) error {
			if key == "2026-01-10T01:00Z" {
				return errBoom
			}
			return nil
		}
		var ev events
		s := &schedule.Scheduler{DAG: w.dag, Ledger: l, Now: clock, OnEvent: ev.hook}
		runFor(t, s, 3*time.Hour)
		runFor(t, s, time.Hour) // a restart: the failed slot is in the catch-up window
		if diff := cmp.Diff([]string{"2026-01-10T01:00Z live"}, ev.of(schedule.KindFailed)); diff != "" {
			t.Errorf("failed (-want +got):\n%s", diff)
		}
		if got := strings.Join(w.keys(), " "); got != "2026-01-10T00:00Z 2026-01-10T01:00Z 2026-01-10T02:00Z 2026-01-10T03:00Z" {
			t.Errorf("runs %s", got)
		}
		h := history(t, l, w.dag, tranche.Hour, time.UTC, base.Add(-time.Hour), base.Add(5*time.Hour))
		if h["2026-01-10T01:00Z"] != "[failed]" {
			t.Errorf("history of 01:00: %s, want one failed attempt", h["2026-01-10T01:00Z"])
		}
		if st := s.Status(); st.LastState != ledger.StateSucceeded || st.Last.Key() != "2026-01-10T03:00Z" || st.Failed != 0 {
			t.Errorf("Status after the restart: last %s %s, %d failed; want 2026-01-10T03:00Z succeeded, none failed", st.Last.Key(), st.LastState, st.Failed)
		}
	})
}

// TestOverlapText: every policy's text form reads back as itself, ""
// being queue, and an unknown one is refused with the accepted ones.
func TestOverlapText(t *testing.T) {
	for _, tc := range []struct {
		o    schedule.Overlap
		text string
	}{
		{"", "queue"},
		{schedule.OverlapQueue, "queue"},
		{schedule.OverlapSkip, "skip"},
		{schedule.OverlapConcurrent, "concurrent"},
		{schedule.OverlapBufferOne, "buffer-one"},
		{schedule.OverlapCancelOther, "cancel-other"},
	} {
		text, err := tc.o.MarshalText()
		if err != nil || string(text) != tc.text {
			t.Errorf("Overlap(%q).MarshalText() = %q, %v; want %q", tc.o, text, err, tc.text)
		}
		var back schedule.Overlap
		if err := back.UnmarshalText(text); err != nil || string(back) != tc.text {
			t.Errorf("UnmarshalText(%q) = %q, %v; want %q", text, back, err, tc.text)
		}
	}
	var o schedule.Overlap
	if err := o.UnmarshalText([]byte("sometimes")); err == nil || !strings.Contains(err.Error(), "accepted: queue, buffer-one, skip, concurrent, cancel-other") {
		t.Errorf("UnmarshalText(sometimes): %v; want the accepted policies", err)
	}
}

// TestCancelOtherReplicas: two replicas under OverlapCancelOther; the
// slot of 00:00 takes 150 minutes, on whichever replica claims it. When
// 01:00 comes due, that replica stops it, recorded canceled, and 01:00
// runs once; after downtime, of the slots due at once only the newest
// runs, the others recorded skipped.
func TestCancelOtherReplicas(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := time.Date(2026, 1, 10, 0, 30, 0, 0, time.UTC)
		clock := offsetClock(base)
		l := memledger.New(clock)
		var rs runs
		body := func(ctx context.Context, key string) error {
			d := 10 * time.Minute
			if key == "2026-01-10T00:00Z" {
				d = 150 * time.Minute
			}
			select {
			case <-time.After(d):
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		var evs [2]events
		var ss [2]*schedule.Scheduler
		var stops [2]func()
		for i := range ss {
			worker := fmt.Sprintf("r%d", i)
			ss[i] = &schedule.Scheduler{DAG: rs.dag(t, worker, tranche.Hour, time.UTC, body), Ledger: l, Worker: worker,
				Overlap: schedule.OverlapCancelOther, Now: clock, OnEvent: evs[i].hook}
			stops[i] = start(t, ss[i])
		}
		time.Sleep(3 * time.Hour) // 03:30
		for _, stop := range stops {
			stop()
		}
		time.Sleep(3 * time.Hour) // 06:30: 03:00, 04:00 and 05:00 due at once
		stops[0] = start(t, ss[0])
		time.Sleep(20 * time.Minute)
		stops[0]()

		id := ss[0].Status().DAG
		want := map[string]string{"00:00": "[canceled]", "01:00": "[succeeded]", "02:00": "[succeeded]",
			"03:00": "[canceled]", "04:00": "[canceled]", "05:00": "[succeeded]"}
		for hh, states := range want {
			p := tranche.PartitionOf(tranche.Hour, mustTime(t, "2026-01-10T"+hh+":00Z"))
			hist, err := l.History(context.Background(), id, p.Start)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, a := range hist {
				got = append(got, string(a.State))
			}
			if fmt.Sprint(got) != states {
				t.Errorf("slot %s: %v; want %s", hh, got, states)
			}
			if len(rs.of(p.Key())) > 1 {
				t.Errorf("slot %s ran by %v", hh, rs.of(p.Key()))
			}
		}
		canceled := append(evs[0].of(schedule.KindCanceled), evs[1].of(schedule.KindCanceled)...)
		if diff := cmp.Diff([]string{"2026-01-10T00:00Z live"}, canceled); diff != "" {
			t.Errorf("canceled (-want +got):\n%s", diff)
		}
	})
}
