package schedule_test

import (
	"context"
	"fmt"
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

// TestPause: two replicas run an hourly schedule; an operator pauses it
// a second before 02:00 closes, through one of them, and resumes it at
// 08:30. Neither starts a slot while paused, one restarted meanwhile
// included; each reports the pause, by whom and since when. Once
// resumed, the slots that closed while paused are missed by the catch-up
// rules: the newest MaxCatchUp (2) run, the older are recorded missed,
// saying the schedule was paused. Every slot runs once.
func TestPause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := time.Date(2026, 1, 10, 0, 30, 0, 0, time.UTC)
		clock := offsetClock(base)
		l := memledger.New(clock)
		var rs runs
		var evA, evB events
		a := &schedule.Scheduler{DAG: rs.dag(t, "a", tranche.Hour, time.UTC, nil), Ledger: l, Worker: "a", MaxCatchUp: 2, Now: clock, OnEvent: evA.hook}
		b := &schedule.Scheduler{DAG: rs.dag(t, "b", tranche.Hour, time.UTC, nil), Ledger: l, Worker: "b", MaxCatchUp: 2, Now: clock, OnEvent: evB.hook}
		stopA, stopB := start(t, a), start(t, b)
		time.Sleep(2*time.Hour + 29*time.Minute + 59*time.Second) // 02:59:59
		pausedAt := clock()
		p, err := a.Pause(context.Background(), "alice", "source down")
		if err != nil {
			t.Fatal(err)
		}
		if !p.Paused || p.By != "alice" || !p.Since.Equal(pausedAt) {
			t.Errorf("Pause returned %+v", p)
		}
		time.Sleep(90 * time.Minute) // 04:29:59
		for name, s := range map[string]*schedule.Scheduler{"a": a, "b": b} {
			if st := s.Status(); !st.Pause.Paused || st.Pause.By != "alice" || st.Pause.Note != "source down" || !st.Pause.Since.Equal(pausedAt) {
				t.Errorf("replica %s: Status.Pause %+v; want paused by alice since %v", name, st.Pause, pausedAt)
			}
		}
		stopB()
		time.Sleep(time.Hour) // 05:29:59
		var evB2 events
		b.OnEvent = evB2.hook
		stopB = start(t, b)
		time.Sleep(3 * time.Hour) // 08:29:59
		if got := rs.keys(); !cmp.Equal(got, []string{"2026-01-10T00:00Z", "2026-01-10T01:00Z"}) {
			t.Errorf("slots run before the resume: %v; want 00:00 and 01:00", got)
		}
		if _, err := b.Resume(context.Background(), "bob", "source back"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Hour) // 09:29:59
		stopA()
		stopB()

		var want []string
		for h := range 9 {
			if h < 2 || h > 5 {
				want = append(want, fmt.Sprintf("2026-01-10T%02d:00Z", h))
			}
		}
		if diff := cmp.Diff(want, rs.keys()); diff != "" {
			t.Errorf("slots run (-want +got):\n%s", diff)
		}
		for _, k := range rs.keys() {
			if by := rs.of(k); len(by) != 1 {
				t.Errorf("slot %s ran by %v", k, by)
			}
		}
		missed := append(evA.of(schedule.KindMissed), evB2.of(schedule.KindMissed)...)
		if diff := cmp.Diff([]string{"2026-01-10T02:00Z", "2026-01-10T03:00Z", "2026-01-10T04:00Z", "2026-01-10T05:00Z"}, missed); diff != "" {
			t.Errorf("missed (-want +got):\n%s", diff)
		}
		id := backfill.DAGIdentity(a.DAG, tranche.Hour, time.UTC)
		for h := 2; h <= 5; h++ {
			hist, err := l.History(context.Background(), id, time.Date(2026, 1, 10, h, 0, 0, 0, time.UTC))
			if err != nil {
				t.Fatal(err)
			}
			if len(hist) != 1 || hist[0].State != ledger.StateCanceled || !strings.Contains(hist[0].Err, "paused") {
				t.Errorf("history of slot %02d:00: %+v; want one canceled attempt saying the schedule was paused", h, hist)
			}
		}
		for name, ev := range map[string]*events{"a": &evA, "b restarted": &evB2} {
			var kinds []string
			for _, e := range ev.list() {
				if e.Kind == schedule.KindPaused || e.Kind == schedule.KindResumed {
					kinds = append(kinds, string(e.Kind))
				}
			}
			if diff := cmp.Diff([]string{"schedule.paused", "schedule.resumed"}, kinds); diff != "" {
				t.Errorf("replica %s: pause events (-want +got):\n%s", name, diff)
			}
		}
		if st := a.Status(); st.Pause.Paused || st.Pause.By != "bob" || !st.Pause.PausedAt.Equal(pausedAt) {
			t.Errorf("Status.Pause after the resume: %+v", st.Pause)
		}
	})
}
