package schedule_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/ledger/memledger"
	"github.com/tranche-dev/tranche/schedule"
)

// TestDST runs hourly and daily DAGs across daylight saving time in New
// York and at Lord Howe (a 30-minute shift): every slot runs once, at
// its own close (plus the delay), as the calendar vectors of
// ../shared/CALENDAR.md give them, never 24 hours after the previous.
func TestDST(t *testing.T) {
	for _, tc := range []struct {
		name  string
		g     tranche.TimeGranularity
		zone  string
		from  string        // when the scheduler starts
		run   time.Duration // how long it runs
		delay time.Duration
		day   string            // the date whose slots are counted
		count int               // how many slots of day ran
		want  map[string]string // slot key → the instant it ran
	}{
		{name: "New York spring day", g: tranche.Day, zone: "America/New_York", from: "2024-03-08T12:00:00-05:00", run: 96 * time.Hour,
			want: map[string]string{
				"2024-03-09": "2024-03-10T00:00:00-05:00",
				"2024-03-10": "2024-03-11T00:00:00-04:00", // 23 hours after the previous close
				"2024-03-11": "2024-03-12T00:00:00-04:00",
			}},
		{name: "New York fall day", g: tranche.Day, zone: "America/New_York", from: "2024-11-02T12:00:00-04:00", run: 72 * time.Hour,
			want: map[string]string{
				"2024-11-02": "2024-11-03T00:00:00-04:00",
				"2024-11-03": "2024-11-04T00:00:00-05:00", // 25 hours after
				"2024-11-04": "2024-11-05T00:00:00-05:00",
			}},
		{name: "New York spring day, two hours after it ends", g: tranche.Day, zone: "America/New_York", from: "2024-03-09T12:00:00-05:00",
			run: 48 * time.Hour, delay: 2 * time.Hour,
			want: map[string]string{
				"2024-03-09": "2024-03-10T03:00:00-04:00", // two hours of elapsed time: 02:00 is skipped
				"2024-03-10": "2024-03-11T02:00:00-04:00",
			}},
		{name: "New York spring hours", g: tranche.Hour, zone: "America/New_York", from: "2024-03-09T23:30:00-05:00", run: 24 * time.Hour,
			day: "2024-03-10", count: 23,
			want: map[string]string{
				"2024-03-10T00:00-05:00": "2024-03-10T01:00:00-05:00",
				"2024-03-10T01:00-05:00": "2024-03-10T03:00:00-04:00", // no 02:00
				"2024-03-10T03:00-04:00": "2024-03-10T04:00:00-04:00",
			}},
		{name: "New York fall hours", g: tranche.Hour, zone: "America/New_York", from: "2024-11-02T23:30:00-04:00", run: 26 * time.Hour,
			day: "2024-11-03", count: 25,
			want: map[string]string{
				"2024-11-03T00:00-04:00": "2024-11-03T01:00:00-04:00",
				"2024-11-03T01:00-04:00": "2024-11-03T01:00:00-05:00", // 01:00 twice
				"2024-11-03T01:00-05:00": "2024-11-03T02:00:00-05:00",
			}},
		{name: "Lord Howe fall hours", g: tranche.Hour, zone: "Australia/Lord_Howe", from: "2024-04-06T23:30:00+11:00", run: 26*time.Hour + 15*time.Minute,
			day: "2024-04-07", count: 24,
			want: map[string]string{
				"2024-04-07T00:00+11:00": "2024-04-07T01:00:00+11:00",
				"2024-04-07T01:00+11:00": "2024-04-07T02:00:00+10:30", // 90 minutes
				"2024-04-07T02:00+10:30": "2024-04-07T03:00:00+10:30",
			}},
		{name: "Lord Howe spring hours", g: tranche.Hour, zone: "Australia/Lord_Howe", from: "2024-10-05T23:30:00+10:30", run: 25*time.Hour + 15*time.Minute,
			day: "2024-10-06", count: 24,
			want: map[string]string{
				"2024-10-06T01:00+10:30": "2024-10-06T02:30:00+11:00", // the clock skips 02:00 to 02:30
				"2024-10-06T02:30+11:00": "2024-10-06T03:00:00+11:00", // 30 minutes
			}},
		{name: "Lord Howe fall day", g: tranche.Day, zone: "Australia/Lord_Howe", from: "2024-04-06T12:00:00+11:00", run: 48 * time.Hour,
			want: map[string]string{
				"2024-04-06": "2024-04-07T00:00:00+11:00",
				"2024-04-07": "2024-04-08T00:00:00+10:30", // 24 hours 30 minutes
			}},
		{name: "Lord Howe spring day", g: tranche.Day, zone: "Australia/Lord_Howe", from: "2024-10-05T12:00:00+10:30", run: 48 * time.Hour,
			want: map[string]string{
				"2024-10-05": "2024-10-06T00:00:00+10:30",
				"2024-10-06": "2024-10-07T00:00:00+11:00", // 23 hours 30 minutes
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				loc := mustLoad(t, tc.zone)
				clock := offsetClock(mustTime(t, tc.from).In(loc))
				w := newWork(t, tc.g, loc, clock)
				s := &schedule.Scheduler{DAG: w.dag, Ledger: memledger.New(clock), Delay: tc.delay, Now: clock}
				runFor(t, s, tc.run)
				ran := map[string]string{}
				day := 0
				for _, c := range w.callList() {
					if _, twice := ran[c.key]; twice {
						t.Errorf("slot %s ran twice", c.key)
					}
					ran[c.key] = c.at.Format(time.RFC3339)
					if tc.day != "" && strings.HasPrefix(c.key, tc.day) {
						day++
					}
				}
				for key, at := range tc.want {
					if ran[key] != at {
						t.Errorf("slot %s ran at %q, want %s", key, ran[key], at)
					}
				}
				if day != tc.count {
					t.Errorf("%d slots of %s ran, want %d", day, tc.day, tc.count)
				}
			})
		})
	}
}

// TestCronZone runs a schedule with a CRON_TZ of its own, on a DAG whose
// assets name no zone: the slots follow the schedule's zone, fire at
// each local fire time (a skipped one at the first instant after the
// gap, a repeated one once), and the DAG's identity is the one a backfill
// of the schedule's slots gives.
func TestCronZone(t *testing.T) {
	for _, tc := range []struct {
		expr string
		from string
		want []string // fire times, which are the slots' keys, and when each ran
	}{
		{"CRON_TZ=America/New_York 30 2 * * *", "2024-03-08T12:00:00Z", []string{
			"2024-03-09T02:30:00-05:00 at 2024-03-09T07:30:00Z",
			"2024-03-10T03:00:00-04:00 at 2024-03-10T07:00:00Z", // 02:30 does not exist that day
			"2024-03-11T02:30:00-04:00 at 2024-03-11T06:30:00Z",
		}},
		{"CRON_TZ=America/New_York 30 1 * * *", "2024-11-02T12:00:00Z", []string{
			"2024-11-03T01:30:00-04:00 at 2024-11-03T05:30:00Z", // the first 01:30 only
			"2024-11-04T01:30:00-05:00 at 2024-11-04T06:30:00Z",
			"2024-11-05T01:30:00-05:00 at 2024-11-05T06:30:00Z",
		}},
		{"CRON_TZ=Australia/Lord_Howe 15 2 * * *", "2024-10-04T12:00:00Z", []string{
			"2024-10-05T02:15:00+10:30 at 2024-10-04T15:45:00Z",
			"2024-10-06T02:30:00+11:00 at 2024-10-05T15:30:00Z", // 02:15 is in the half-hour gap
			"2024-10-07T02:15:00+11:00 at 2024-10-06T15:15:00Z",
		}},
	} {
		t.Run(tc.expr, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g := mustCron(t, tc.expr)
				clock := offsetClock(mustTime(t, tc.from))
				w := newWork(t, g, nil, clock)
				l := memledger.New(clock)
				var ev events
				s := &schedule.Scheduler{DAG: w.dag, Ledger: l, Now: clock, OnEvent: ev.hook}
				runFor(t, s, 70*time.Hour)
				var got []string
				for _, c := range w.callList() {
					got = append(got, c.key+" at "+c.at.UTC().Format(time.RFC3339))
				}
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("runs (-want +got):\n%s", diff)
				}
				// The slots are in the schedule's zone, and the ledger
				// knows the DAG by the identity a backfill computes.
				zone := mustLoad(t, strings.Fields(strings.TrimPrefix(tc.expr, "CRON_TZ="))[0])
				first := tranche.PartitionOf(g, mustTime(t, tc.from).In(zone))
				h := history(t, l, w.dag, g, zone, first.Start.Add(-48*time.Hour), first.Start.Add(96*time.Hour))
				if len(h) != len(tc.want) {
					t.Errorf("the ledger holds %d slots under the DAG's identity in %v, want %d: %v", len(h), zone, len(tc.want), h)
				}
				if st := s.Status(); st.DAG == "" || !strings.HasPrefix(ev.of(schedule.KindSucceeded)[0], strings.Fields(tc.want[0])[0]) {
					t.Errorf("status %+v, succeeded %v", st, ev.of(schedule.KindSucceeded))
				}
			})
		})
	}
}

// TestBusinessCalendar: a holiday excluded from the schedule has no
// slot; the next slot covers it and runs at its own fire.
func TestBusinessCalendar(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := mustCron(t, "0 6 * * 1-5", "2025-12-25", "2026-01-01")
		loc := mustLoad(t, "Europe/Berlin")
		clock := offsetClock(time.Date(2025, 12, 23, 12, 0, 0, 0, loc))
		w := newWork(t, g, loc, clock)
		s := &schedule.Scheduler{DAG: w.dag, Ledger: memledger.New(clock), Now: clock}
		runFor(t, s, 11*24*time.Hour)
		var got []string
		for _, c := range w.callList() {
			p, err := tranche.SlotAt(g, c.at)
			if err != nil {
				t.Fatalf("slot %s ran at %v, not a fire time: %v", c.key, c.at, err)
			}
			got = append(got, fmt.Sprintf("%s from %s", c.key[:10], p.Start.Format("01-02")))
		}
		want := []string{
			"2025-12-24 from 12-23",
			"2025-12-26 from 12-24", // covers the 25th
			"2025-12-29 from 12-26",
			"2025-12-30 from 12-29",
			"2025-12-31 from 12-30",
			"2026-01-02 from 12-31", // covers the 1st
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("slots (-want +got):\n%s", diff)
		}
		if slices.ContainsFunc(got, func(s string) bool { return strings.HasPrefix(s, "2025-12-25") }) {
			t.Error("the holiday fired")
		}
	})
}
