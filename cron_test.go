package tranche_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/ledger/memledger"
)

func mustCron(t *testing.T, expr string, excluded ...string) tranche.TimeGranularity {
	t.Helper()
	g, err := tranche.ParseCron(expr, excluded...)
	if err != nil {
		t.Fatalf("ParseCron(%q): %v", expr, err)
	}
	return g
}

// slotKeys returns the keys of g's slots that fire within [from, to).
func slotKeys(t *testing.T, g tranche.TimeGranularity, from, to time.Time) []string {
	t.Helper()
	// The slot holding from-1ns is the first that can fire at from.
	w, err := tranche.NewTimePartitionWindow(g, from.Add(-time.Nanosecond), to.Add(-time.Nanosecond))
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	n := 0
	for p := range w.OldestFirst() {
		n++
		if !p.End.Before(from) && p.End.Before(to) {
			keys = append(keys, p.Key())
		}
	}
	if n != w.Len() {
		t.Fatalf("Len %d, ranged over %d", w.Len(), n)
	}
	return keys
}

func TestCronSlotsAcrossDST(t *testing.T) {
	ny := loadLocation(t, "America/New_York")
	lordHowe := loadLocation(t, "Australia/Lord_Howe")
	day := func(loc *time.Location, y int, m time.Month, d int) (time.Time, time.Time) {
		return time.Date(y, m, d, 0, 0, 0, 0, loc), time.Date(y, m, d+1, 0, 0, 0, 0, loc)
	}
	tests := []struct {
		name   string
		expr   string
		loc    *time.Location
		y      int
		m      time.Month
		d      int
		count  int
		checks map[int]string // slot index → key
	}{
		{"hourly, spring forward", "0 * * * *", ny, 2026, 3, 8, 23, map[int]string{1: "2026-03-08T01:00:00-05:00", 2: "2026-03-08T03:00:00-04:00"}},
		{"hourly, fall back", "0 * * * *", ny, 2026, 11, 1, 25, map[int]string{1: "2026-11-01T01:00:00-04:00", 2: "2026-11-01T01:00:00-05:00"}},
		{"daily 02:30 skipped by spring forward fires after the gap", "30 2 * * *", ny, 2026, 3, 8, 1, map[int]string{0: "2026-03-08T03:00:00-04:00"}},
		{"daily 01:30 repeated by fall back fires once", "30 1 * * *", ny, 2026, 11, 1, 1, map[int]string{0: "2026-11-01T01:30:00-04:00"}},
		{"daily, ordinary day", "0 2 * * *", ny, 2026, 6, 1, 1, map[int]string{0: "2026-06-01T02:00:00-04:00"}},
		{"every 30 minutes, Lord Howe spring forward", "*/30 * * * *", lordHowe, 2024, 10, 6, 47, map[int]string{4: "2024-10-06T02:30:00+11:00"}},
		{"weekday schedule has no Saturday slot", "0 2 * * 1-5", ny, 2026, 6, 6, 0, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := mustCron(t, tc.expr)
			from, to := day(tc.loc, tc.y, tc.m, tc.d)
			keys := slotKeys(t, g, from, to)
			if len(keys) != tc.count {
				t.Fatalf("%d slots fire on %d-%02d-%02d, want %d: %v", len(keys), tc.y, tc.m, tc.d, tc.count, keys)
			}
			for i, want := range tc.checks {
				if keys[i] != want {
					t.Errorf("slot %d = %s, want %s", i, keys[i], want)
				}
			}
		})
	}
}

func TestCronSlotIsTheWindowBeforeItsFire(t *testing.T) {
	ny := loadLocation(t, "America/New_York")
	g := mustCron(t, "0 2 * * *")
	p := tranche.PartitionOf(g, time.Date(2026, 3, 8, 12, 0, 0, 0, ny))
	want := []string{"2026-03-08T03:00:00-04:00", "2026-03-09T02:00:00-04:00", "2026-03-09T02:00:00-04:00"}
	got := []string{p.Start.Format(time.RFC3339), p.End.Format(time.RFC3339), p.Key()}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("slot holding 2026-03-08 12:00 (-want +got):\n%s", diff)
	}
	if p.End.Sub(p.Start) != 23*time.Hour {
		t.Errorf("length %v, want 23h: the day after spring forward's slot starts at 03:00", p.End.Sub(p.Start))
	}
}

func TestCronHolidaysAndWeekends(t *testing.T) {
	ny := loadLocation(t, "America/New_York")
	g := mustCron(t, "0 2 * * MON-FRI", "2026-12-25")
	// Thursday 2026-12-24 .. Tuesday 2026-12-29: Friday is a holiday, the
	// weekend has no slots, so Monday's slot covers Thursday 02:00 on.
	w, err := tranche.NewTimePartitionWindow(g, time.Date(2026, 12, 24, 3, 0, 0, 0, ny), time.Date(2026, 12, 28, 3, 0, 0, 0, ny))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for p := range w.OldestFirst() {
		got = append(got, p.Start.Format("Mon 01-02 15:04")+" .. "+p.End.Format("Mon 01-02 15:04"))
	}
	want := []string{"Thu 12-24 02:00 .. Mon 12-28 02:00", "Mon 12-28 02:00 .. Tue 12-29 02:00"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("slots (-want +got):\n%s", diff)
	}
}

func TestCronGranularityValue(t *testing.T) {
	a := mustCron(t, "0 2 * * 1-5", "2026-12-25", "2026-01-01")
	b, err := tranche.ParseGranularity("cron(0 2 * * MON-FRI; except 2026-01-01 2026-12-25)")
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Fatalf("equal schedules are different values: %v and %v", a, b)
	}
	if got, want := a.String(), "cron(0 2 * * 1-5; except 2026-01-01 2026-12-25)"; got != want {
		t.Fatalf("String = %q, want %q", got, want)
	}
	if !a.IsSchedule() || tranche.Day.IsSchedule() {
		t.Fatal("IsSchedule is wrong")
	}
	text, err := a.MarshalText()
	if err != nil {
		t.Fatal(err)
	}
	var back tranche.TimeGranularity
	if err := back.UnmarshalText(text); err != nil || back != a {
		t.Fatalf("text round trip: %v, %v", back, err)
	}
	if mustCron(t, "0 2 * * *") == mustCron(t, "0 3 * * *") {
		t.Fatal("different schedules are equal")
	}
	if mustCron(t, "CRON_TZ=Asia/Tokyo 0 9 * * *") == mustCron(t, "0 9 * * *") {
		t.Fatal("a zoned schedule equals an unzoned one")
	}
}

func TestCronRefusals(t *testing.T) {
	tests := []struct {
		expr     string
		excluded []string
		want     []string // substrings of the error
	}{
		{"0 0 30 2 *", nil, []string{"never fires", "February"}},
		{"0 25 * * *", nil, []string{"hour field", `"25"`}},
		{"61 * * * *", nil, []string{"minute field", "61"}},
		{"0 2 * * FOO", nil, []string{"day-of-week", "FOO"}},
		{"CRON_TZ=Mars/Olympus 0 2 * * *", nil, []string{"Mars/Olympus"}},
		{"0 2 * *", nil, []string{"fields"}},
		{"0 2 * * *", []string{"2026-02-30"}, []string{"2026-02-30", "2006-01-02"}},
	}
	for _, tc := range tests {
		t.Run(tc.expr, func(t *testing.T) {
			_, err := tranche.ParseCron(tc.expr, tc.excluded...)
			if err == nil {
				t.Fatal("no error")
			}
			for _, s := range tc.want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not mention %q", err, s)
				}
			}
		})
	}
	if _, err := tranche.ParseGranularity("cron(0 2 * * *; holidays 2026-12-25)"); err == nil {
		t.Error("ParseGranularity accepted a malformed exclusion list")
	}
	defer func() {
		if recover() == nil {
			t.Error("Every(2, schedule) did not panic")
		}
	}()
	tranche.Every(2, mustCron(t, "0 2 * * *"))
}

func TestCronLookbackAndKeys(t *testing.T) {
	ny := loadLocation(t, "America/New_York")
	g := mustCron(t, "0 2 * * *")
	now := time.Date(2026, 8, 18, 9, 0, 0, 0, ny)
	w, err := tranche.Lookback(now, 1, 1, g)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := w.Newest().Key(), "2026-08-18T02:00:00-04:00"; got != want {
		t.Fatalf("last succeeded slot at %v = %s, want %s", now, got, want)
	}
	current, _ := tranche.Lookback(now, 1, 0, g)
	if got, want := current.Newest().Key(), "2026-08-19T02:00:00-04:00"; got != want {
		t.Fatalf("current slot = %s, want %s", got, want)
	}
	_, err = tranche.ParsePartitionKey(g, "2026-08-18T03:00:00-04:00", ny)
	if err == nil || !strings.Contains(err.Error(), "2026-08-18T02:00:00-04:00") || !strings.Contains(err.Error(), "2026-08-19T02:00:00-04:00") {
		t.Fatalf("a key that is not a fire time: %v; want the nearest fire times named", err)
	}
	_, err = tranche.ParsePartitionKey(g, "2026-08-18T06:00:00Z", ny)
	if err == nil || !strings.Contains(err.Error(), "2026-08-18T02:00:00-04:00") {
		t.Fatalf("a fire time written in another offset: %v; want the key named", err)
	}
	text := w.String()
	back, err := tranche.ParseTimePartitionWindow(text)
	if err != nil || !back.Equal(w) {
		t.Fatalf("ParseTimePartitionWindow(%q) = %v, %v", text, back, err)
	}
}

func TestSlotAt(t *testing.T) {
	ny := loadLocation(t, "America/New_York")
	g := mustCron(t, "0 2 * * 1-5")
	p, err := tranche.SlotAt(g, time.Date(2026, 1, 5, 2, 0, 0, 0, ny)) // a Monday
	if err != nil {
		t.Fatal(err)
	}
	if got, want := p.Start.Format(time.RFC3339), "2026-01-02T02:00:00-05:00"; got != want {
		t.Fatalf("Monday's slot starts %s, want Friday's fire %s", got, want)
	}
	_, err = tranche.SlotAt(g, time.Date(2026, 1, 3, 2, 0, 0, 0, ny)) // a Saturday
	if err == nil || !strings.Contains(err.Error(), "2026-01-02T02:00:00-05:00") || !strings.Contains(err.Error(), "2026-01-05T02:00:00-05:00") {
		t.Fatalf("SlotAt(Saturday) = %v; want the nearest fire times", err)
	}
	if _, err := tranche.SlotAt(tranche.Day, time.Now()); err == nil {
		t.Fatal("SlotAt(Day) did not fail")
	}
}

// TestSlotAtInTheSchedulesZone: a fire time of a CRON_TZ schedule names
// the schedule's slot in the schedule's zone, whatever offset spelled the
// instant, so that a backfill of that slot and a backfill of a range
// holding it (SlotWindow) record one DAG identity.
func TestSlotAtInTheSchedulesZone(t *testing.T) {
	g := mustCron(t, "CRON_TZ=Asia/Tokyo 0 2 * * *")
	dag, err := tranche.NewDAG(tranche.Asset{
		Name:         "loads",
		Partitioning: tranche.Partitioning{Granularity: g},
		Materialize:  func(context.Context, *tranche.Materialization) ([]tranche.Row, error) { return nil, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 10, 10, 0, 0, 0, 0, time.UTC)
	w, err := tranche.SlotWindow(g, "2026-10-03", "2026-10-03", now)
	if err != nil {
		t.Fatal(err)
	}
	if w.Len() != 1 {
		t.Fatalf("SlotWindow of 2026-10-03 = %v; want one slot", w)
	}
	want := w.Newest()
	wantDAG := backfill.DAGIdentity(dag, g, w.Location())
	for _, fire := range []string{"2026-10-03T02:00:00+09:00", "2026-10-02T17:00:00Z", "2026-10-02T12:00:00-05:00"} {
		t.Run(fire, func(t *testing.T) {
			at, err := time.Parse(time.RFC3339, fire)
			if err != nil {
				t.Fatal(err)
			}
			p, err := tranche.SlotAt(g, at)
			if err != nil {
				t.Fatal(err)
			}
			if !p.Equal(want) || p.Key() != want.Key() || p.Start.Location().String() != "Asia/Tokyo" {
				t.Errorf("SlotAt = %v (key %s, in %v); want SlotWindow's %v (key %s, in %v)",
					p, p.Key(), p.Start.Location(), want, want.Key(), want.Start.Location())
			}
			if got := backfill.DAGIdentity(dag, g, p.Start.Location()); got != wantDAG {
				t.Errorf("DAG identity at the slot's zone %v = %s; SlotWindow's (%v) = %s", p.Start.Location(), got, w.Location(), wantDAG)
			}
		})
	}
}

func TestSlotWindow(t *testing.T) {
	ny := loadLocation(t, "America/New_York")
	g := mustCron(t, "0 2 * * *")
	now := time.Date(2026, 1, 20, 9, 0, 0, 0, ny)
	keys := func(w tranche.TimePartitionWindow) []string {
		var out []string
		for p := range w.OldestFirst() {
			out = append(out, p.Key())
		}
		return out
	}
	tests := []struct {
		name, from, to string
		want           []string
		err            string
	}{
		{"dates cover whole days", "2026-01-05", "2026-01-07", []string{"2026-01-05T02:00:00-05:00", "2026-01-06T02:00:00-05:00", "2026-01-07T02:00:00-05:00"}, ""},
		{"wall times read in the zone", "2026-01-05T03:00", "2026-01-07T02:00", []string{"2026-01-06T02:00:00-05:00", "2026-01-07T02:00:00-05:00"}, ""},
		{"RFC 3339 as is", "2026-01-05T07:00:00Z", "2026-01-05T07:00:00Z", []string{"2026-01-05T02:00:00-05:00"}, ""},
		{"to defaults to now", "2026-01-19", "", []string{"2026-01-19T02:00:00-05:00", "2026-01-20T02:00:00-05:00"}, ""},
		{"to clamped to now", "2026-01-19", "2026-02-01", []string{"2026-01-19T02:00:00-05:00", "2026-01-20T02:00:00-05:00"}, ""},
		{"from after now", "2026-01-21", "", nil, "later than now"},
		{"from after to", "2026-01-10", "2026-01-05", nil, "later than to"},
		{"nothing fires", "2026-01-05T03:00", "2026-01-06T01:00", nil, "fires nowhere"},
		{"no zone needed for RFC 3339, bad text refused", "yesterday", "", nil, `"yesterday"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w, err := tranche.SlotWindow(g, tc.from, tc.to, now)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, keys(w)); diff != "" {
				t.Fatalf("slots (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCronBackfill(t *testing.T) {
	ny := loadLocation(t, "America/New_York")
	g := mustCron(t, "0 2 * * 1-5")
	var ran []string
	asset := tranche.Asset{
		Name:         "loads",
		Partitioning: tranche.Partitioning{Granularity: g},
		Materialize: func(ctx context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
			p, err := m.Partition()
			if err != nil {
				return nil, err
			}
			ran = append(ran, p.Key())
			return nil, nil
		},
	}
	dag, err := tranche.NewDAG(asset)
	if err != nil {
		t.Fatal(err)
	}
	w, err := tranche.SlotWindow(g, "2026-01-01", "2026-01-09", time.Date(2026, 1, 20, 0, 0, 0, 0, ny))
	if err != nil {
		t.Fatal(err)
	}
	b := &backfill.Backfill{DAG: dag, Window: w, Ledger: memledger.New(nil), Order: backfill.OldestFirst}
	if _, err := b.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := []string{"2026-01-01T02:00:00-05:00", "2026-01-02T02:00:00-05:00", "2026-01-05T02:00:00-05:00",
		"2026-01-06T02:00:00-05:00", "2026-01-07T02:00:00-05:00", "2026-01-08T02:00:00-05:00", "2026-01-09T02:00:00-05:00"}
	if diff := cmp.Diff(want, ran); diff != "" {
		t.Fatalf("slots run (-want +got):\n%s", diff)
	}
}

// TestSlotWindowDateEnds: a date as the end of a slot range means through
// the end of that day, so a schedule firing at local midnight gets the
// day's own fire and not the next midnight's; an hourly schedule gets the
// day's hours, 23 or 25 on DST days.
func TestSlotWindowDateEnds(t *testing.T) {
	tests := []struct {
		name, expr, zone, from, to string
		n                          int
		first, last                string // the keys (fire times) of the oldest and newest slots
	}{
		{"midnight, one date", "0 0 * * *", "UTC", "2026-10-02", "2026-10-02", 1, "2026-10-02T00:00:00Z", "2026-10-02T00:00:00Z"},
		{"@daily, one date", "@daily", "Europe/Berlin", "2026-10-02", "2026-10-02", 1, "2026-10-02T00:00:00+02:00", "2026-10-02T00:00:00+02:00"},
		{"midnight, three dates", "0 0 * * *", "America/New_York", "2026-10-01", "2026-10-03", 3, "2026-10-01T00:00:00-04:00", "2026-10-03T00:00:00-04:00"},
		{"02:00, one date", "0 2 * * *", "America/New_York", "2026-10-02", "2026-10-02", 1, "2026-10-02T02:00:00-04:00", "2026-10-02T02:00:00-04:00"},
		{"hourly, one date", "0 * * * *", "UTC", "2026-10-02", "2026-10-02", 24, "2026-10-02T00:00:00Z", "2026-10-02T23:00:00Z"},
		{"hourly, New York spring forward", "0 * * * *", "America/New_York", "2026-03-08", "2026-03-08", 23, "2026-03-08T00:00:00-05:00", "2026-03-08T23:00:00-04:00"},
		{"hourly, New York fall back", "0 * * * *", "America/New_York", "2026-11-01", "2026-11-01", 25, "2026-11-01T00:00:00-04:00", "2026-11-01T23:00:00-05:00"},
		{"hourly, Berlin fall back", "0 * * * *", "Europe/Berlin", "2026-10-25", "2026-10-25", 25, "2026-10-25T00:00:00+02:00", "2026-10-25T23:00:00+01:00"},
		{"half-hourly, Lord Howe spring forward", "*/30 * * * *", "Australia/Lord_Howe", "2026-10-04", "2026-10-04", 47, "2026-10-04T00:00:00+10:30", "2026-10-04T23:30:00+11:00"},
		{"midnight skipped (Sao Paulo)", "0 0 * * *", "America/Sao_Paulo", "2018-11-04", "2018-11-04", 1, "2018-11-04T01:00:00-02:00", "2018-11-04T01:00:00-02:00"},
		{"CRON_TZ zone, hourly over its date", "CRON_TZ=Asia/Kathmandu 0 * * * *", "UTC", "2026-10-02", "2026-10-02", 24, "2026-10-02T00:00:00+05:45", "2026-10-02T23:00:00+05:45"},
		{"a time as the end is included", "0 0 * * *", "UTC", "2026-10-01", "2026-10-03T00:00", 3, "2026-10-01T00:00:00Z", "2026-10-03T00:00:00Z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := mustCron(t, tt.expr)
			now := time.Date(2027, 1, 1, 0, 0, 0, 0, loadLocation(t, tt.zone))
			w, err := tranche.SlotWindow(g, tt.from, tt.to, now)
			if err != nil {
				t.Fatal(err)
			}
			if w.Len() != tt.n || w.Oldest().Key() != tt.first || w.Newest().Key() != tt.last {
				t.Errorf("SlotWindow(%s, %s, %s) = %v: %d slots from %s to %s; want %d from %s to %s",
					tt.expr, tt.from, tt.to, w, w.Len(), w.Oldest().Key(), w.Newest().Key(), tt.n, tt.first, tt.last)
			}
			n := 0
			for range w.All() {
				n++
			}
			if n != tt.n {
				t.Errorf("the window yields %d slots, want %d", n, tt.n)
			}
		})
	}
}

// TestSlotWindowLeavesNowsMinuteLive: the fires of now's minute belong to
// the live schedule, never to a backfill ending at now.
func TestSlotWindowLeavesNowsMinuteLive(t *testing.T) {
	ny := loadLocation(t, "America/New_York")
	tests := []struct {
		name, expr, from, to string
		now                  time.Time
		last                 string // the newest slot's key
		err                  string
	}{
		{"02:00:30: the 02:00 fire is live", "0 2 * * *", "2026-01-18", "", time.Date(2026, 1, 20, 2, 0, 30, 0, ny), "2026-01-19T02:00:00-05:00", ""},
		{"exactly 02:00", "0 2 * * *", "2026-01-18", "", time.Date(2026, 1, 20, 2, 0, 0, 0, ny), "2026-01-19T02:00:00-05:00", ""},
		{"02:00:59.9", "0 2 * * *", "2026-01-18", "", time.Date(2026, 1, 20, 2, 0, 59, 900_000_000, ny), "2026-01-19T02:00:00-05:00", ""},
		{"02:01: the 02:00 fire is past", "0 2 * * *", "2026-01-18", "", time.Date(2026, 1, 20, 2, 1, 0, 0, ny), "2026-01-20T02:00:00-05:00", ""},
		{"a later to is clamped the same way", "0 2 * * *", "2026-01-18", "2026-02-01", time.Date(2026, 1, 20, 2, 0, 30, 0, ny), "2026-01-19T02:00:00-05:00", ""},
		{"today's date as to", "0 2 * * *", "2026-01-18", "2026-01-20", time.Date(2026, 1, 20, 2, 0, 30, 0, ny), "2026-01-19T02:00:00-05:00", ""},
		{"to at the live fire", "0 2 * * *", "2026-01-18", "2026-01-20T02:00", time.Date(2026, 1, 20, 2, 0, 30, 0, ny), "2026-01-19T02:00:00-05:00", ""},
		{"every minute", "* * * * *", "2026-01-20T01:55", "", time.Date(2026, 1, 20, 2, 0, 30, 0, ny), "2026-01-20T01:59:00-05:00", ""},
		{"only the live fire", "0 2 * * *", "2026-01-20", "", time.Date(2026, 1, 20, 2, 0, 30, 0, ny), "", "belong to the live schedule"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := tranche.SlotWindow(mustCron(t, tt.expr), tt.from, tt.to, tt.now)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("SlotWindow = %v, %v; want an error containing %q", w, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := w.Newest().Key(); got != tt.last {
				t.Errorf("the newest slot is %s, want %s (window %v)", got, tt.last, w)
			}
		})
	}
}

// TestCronInUnnamedFixedZones: a schedule evaluated in two fixed offsets
// without names, as time.Parse returns them, fires at 02:00 of each.
func TestCronInUnnamedFixedZones(t *testing.T) {
	g := mustCron(t, "0 2 * * *")
	for _, off := range []int{3600, 7200, -5 * 3600} {
		loc := time.FixedZone("", off)
		p := tranche.PartitionOf(g, time.Date(2026, 1, 5, 12, 0, 0, 0, loc))
		if got := p.End.In(loc).Format("15:04"); got != "02:00" || p.End.In(loc).Day() != 6 {
			t.Errorf("in the offset %+d s the slot holding 2026-01-05 12:00 ends at %v, want 2026-01-06 02:00 local", off, p.End.In(loc))
		}
	}
}
