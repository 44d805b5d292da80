package backfill_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"iter"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"pgregory.net/rapid"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/ledgertest"
	"github.com/tranche-dev/tranche/ledger/memledger"
)

// bfT is what the helpers need of a *testing.T or a *rapid.T.
type bfT interface {
	Helper()
	Fatal(args ...any)
}

// bfCron parses a schedule or fails the test.
func bfCron(t bfT, expr string) tranche.TimeGranularity {
	t.Helper()
	g, err := tranche.ParseCron(expr)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// bfCronDAG is one asset partitioned by schedule g in loc.
func bfCronDAG(t bfT, p *bfProbe, g tranche.TimeGranularity, loc *time.Location) *tranche.DAG {
	t.Helper()
	dag, err := tranche.NewDAG(tranche.Asset{Name: "load", Partitioning: tranche.Partitioning{Granularity: g, Location: loc, AllowWindow: true},
		Materialize: p.materialize})
	if err != nil {
		t.Fatal(err)
	}
	return dag
}

// bfFire returns the instant of a fire time written in RFC 3339.
func bfFire(t testing.TB, s string) time.Time {
	t.Helper()
	fire, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return fire
}

// bfSlots returns the window of g's slots from the one fire closes to the
// one last closes.
func bfSlots(t testing.TB, g tranche.TimeGranularity, fire, last time.Time) tranche.TimePartitionWindow {
	t.Helper()
	first, err := tranche.SlotAt(g, fire)
	if err != nil {
		t.Fatal(err)
	}
	newest, err := tranche.SlotAt(g, last)
	if err != nil {
		t.Fatal(err)
	}
	w, err := tranche.NewTimePartitionWindow(g, first.Start, newest.Start)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// bfItems returns the plan's partitions as "key action" strings.
func bfItems(t *testing.T, plan *backfill.Plan) []string {
	t.Helper()
	var out []string
	for item, err := range plan.Items(t.Context()) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, item.Partition.Key()+" "+string(item.Action))
	}
	return out
}

const bfChosenID = "1e3981236faa" // IDOf the DAG of "0 2 * * *" over the slots fired 2026-01-03, 07 and 08 at 02:00 UTC, chunk 1

// Slots that are not adjacent make one backfill (Dagu's repeated --slot):
// one id, deterministic in the set, one plan of exactly those slots, each
// checked to be a fire time.
func TestBackfillChosenSlots(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := bfCron(t, "0 2 * * *")
		fires := []time.Time{bfFire(t, "2026-01-08T02:00:00Z"), bfFire(t, "2026-01-03T02:00:00Z"), bfFire(t, "2026-01-07T02:00:00Z"),
			bfFire(t, "2026-01-03T02:00:00Z")}
		slots := fires2slots(t, g, fires)
		var keys []string
		for _, p := range slots {
			keys = append(keys, p.Key())
		}
		if want := []string{"2026-01-03T02:00:00Z", "2026-01-07T02:00:00Z", "2026-01-08T02:00:00Z"}; !slices.Equal(keys, want) {
			t.Fatalf("slots = %v; want %v, oldest first, each once", keys, want)
		}

		// A time that is not a fire time is refused with the nearest ones.
		for fire, want := range map[string]string{
			"2026-01-05T03:00:00Z": "2026-01-05T03:00:00Z is not a fire time of cron(0 2 * * *); the nearest are 2026-01-05T02:00:00Z and 2026-01-06T02:00:00Z",
			"2026-01-09T01:59:00Z": "2026-01-09T01:59:00Z is not a fire time of cron(0 2 * * *); the nearest are 2026-01-08T02:00:00Z and 2026-01-09T02:00:00Z",
		} {
			if _, err := tranche.SlotAt(g, bfFire(t, fire)); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("SlotAt of a time that is not a fire time = %v; want it to say %q", err, want)
			}
		}

		clock := ledgertest.NewClock(bfT0)
		l := memledger.New(clock.Now)
		p := new(bfProbe)
		dag := bfCronDAG(t, p, g, time.UTC)
		dagID := backfill.DAGIdentity(dag, g, time.UTC)
		b := &backfill.Backfill{DAG: dag, Partitions: slots, Ledger: l, Worker: "w1", Now: clock.Now}

		// The id: the set's, whatever the order and repetitions, and never the
		// whole window's.
		id, err := b.ID()
		if err != nil {
			t.Fatal(err)
		}
		reordered := &backfill.Backfill{DAG: dag, Partitions: []tranche.TimePartition{slots[2], slots[0], slots[1], slots[0]}, Ledger: l}
		span := bfSlots(t, g, fires[1], fires[0])
		whole := &backfill.Backfill{DAG: dag, Window: span, Ledger: l}
		within := &backfill.Backfill{DAG: dag, Window: span, Partitions: slots, Ledger: l}
		two := &backfill.Backfill{DAG: dag, Partitions: slots[:2], Ledger: l}
		everySlot := &backfill.Backfill{DAG: dag, Partitions: slices.Collect(span.OldestFirst()), Ledger: l}
		ids := map[string]string{}
		for name, bf := range map[string]*backfill.Backfill{"reordered": reordered, "whole window": whole, "within the window": within,
			"two of them": two, "every slot of the window": everySlot} {
			if ids[name], err = bf.ID(); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
		switch {
		case id != bfChosenID:
			t.Errorf("ID of the chosen slots = %s; want %s", id, bfChosenID)
		case backfill.IDOf(dagID, fires2slots(t, g, fires), 1) != id:
			t.Errorf("IDOf the slots = %s; want Backfill.ID's %s", backfill.IDOf(dagID, slots, 1), id)
		case ids["reordered"] != id || ids["within the window"] != id:
			t.Errorf("ids of the same slots: %s and %s; want %s", ids["reordered"], ids["within the window"], id)
		case ids["whole window"] != backfill.ID(dagID, span, 1) || ids["whole window"] == id || ids["every slot of the window"] == ids["whole window"]:
			t.Errorf("ids of the whole window %s and of its every slot %s; want ID, apart from %s", ids["whole window"], ids["every slot of the window"], id)
		case ids["two of them"] == id:
			t.Errorf("id of two of the slots = %s, the id of three", id)
		case backfill.IDOf(dagID, slots, 3) == id:
			t.Errorf("chunk size 3 gives the same id %s", id)
		}

		plan, err := b.Plan(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if !plan.Chosen || plan.Counts.Total != 3 || plan.Counts.Run != 3 || plan.Counts.Runs != 3 || !plan.Window.Equal(span) {
			t.Errorf("plan %s, chosen %v, window %s; want 3 chosen slots to run in %s", plan, plan.Chosen, plan.Window, span)
		}
		want := []string{"2026-01-08T02:00:00Z run", "2026-01-07T02:00:00Z run", "2026-01-03T02:00:00Z run"}
		if got := bfItems(t, plan); !slices.Equal(got, want) {
			t.Errorf("plan items %v; want %v", got, want)
		}
		rep, err := b.Execute(t.Context(), plan)
		if err != nil {
			t.Fatal(err)
		}
		bfCheckReport(t, rep, backfill.Report{Total: 3, Succeeded: 3})
		if got, want := p.Calls(), []string{"2026-01-08T02:00:00Z", "2026-01-07T02:00:00Z", "2026-01-03T02:00:00Z"}; !slices.Equal(got, want) {
			t.Errorf("ran %v; want %v", got, want)
		}
		if got := bfLatest(t, l, dagID, span); len(got) != 3 {
			t.Errorf("ledger holds %v; want the three slots alone", got)
		}
		record, err := l.Backfill(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if starts := []time.Time{slots[0].Start, slots[1].Start, slots[2].Start}; record.Window != span.String() ||
			!slices.EqualFunc(record.Partitions, starts, time.Time.Equal) {
			t.Errorf("record %+v; want window %s and the slots' starts %v", record, span, starts)
		}
		st, err := backfill.StatusOf(t.Context(), l, id, clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		if !st.Done() || st.Counts[ledger.StateSucceeded] != 3 || st.Counts[ledger.StatePending] != 0 {
			t.Errorf("status %s; want 3 succeeded, done", st)
		}

		// In chunks, a run covers adjacent chosen slots only.
		chunked := &backfill.Backfill{DAG: dag, Partitions: slots, Ledger: memledger.New(clock.Now), ChunkSize: 2, Now: clock.Now}
		if plan, err := chunked.Plan(t.Context()); err != nil || plan.Counts.Runs != 2 {
			t.Errorf("plan in chunks of 2: %v, %v; want 2 runs (07 and 08, then 03)", plan, err)
		}

		// Refused: a partition outside the window given, of another
		// schedule, or not a partition at all.
		other := bfCron(t, "0 3 * * *")
		otherSlot, err := tranche.SlotAt(other, bfFire(t, "2026-01-04T03:00:00Z"))
		if err != nil {
			t.Fatal(err)
		}
		fake := tranche.TimePartition{Start: slots[0].Start.Add(time.Hour), End: slots[0].End, Granularity: g}
		narrow := bfSlots(t, g, fires[1], fires[2])
		for _, c := range []struct {
			name string
			b    backfill.Backfill
			want string
		}{
			{"outside the window", backfill.Backfill{Window: narrow, Partitions: slots}, "Partitions[2], 2026-01-08T02:00:00Z, lies outside window"},
			{"another schedule", backfill.Backfill{Partitions: []tranche.TimePartition{slots[0], otherSlot}}, "Partitions[1], 2026-01-04T03:00:00Z, is a partition of cron(0 3 * * *) in UTC; want one of cron(0 2 * * *) in UTC"},
			{"not a partition", backfill.Backfill{Partitions: []tranche.TimePartition{fake}}, "is not a partition of cron(0 2 * * *)"},
		} {
			bf := c.b
			bf.DAG, bf.Ledger = dag, l
			if _, err := bf.ID(); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: %v; want an error saying %q", c.name, err, c.want)
			}
		}
	})
}

// fires2slots returns the slots of g that fires close, oldest first,
// each once, or fails the test.
func fires2slots(t *testing.T, g tranche.TimeGranularity, fires []time.Time) []tranche.TimePartition {
	t.Helper()
	var slots []tranche.TimePartition
	for _, fire := range fires {
		p, err := tranche.SlotAt(g, fire)
		if err != nil {
			t.Fatal(err)
		}
		slots = append(slots, p)
	}
	slices.SortFunc(slots, tranche.TimePartition.Compare)
	return slices.CompactFunc(slots, tranche.TimePartition.Equal)
}

// A canceled backfill is resumed: it plans again the partitions that
// have not succeeded, and its record keeps when it was canceled and
// resumed.
func TestBackfillResumeCanceled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clock := ledgertest.NewClock(bfT0)
		l := memledger.New(clock.Now)
		var b *backfill.Backfill
		var canceledAt time.Time
		p := &bfProbe{hook: func(ctx context.Context, target string) error {
			time.Sleep(bfSlowerThanLookahead) // no partition is claimed ahead of its run
			if target == "2026-01-04" && canceledAt.IsZero() {
				id, _ := b.ID()
				canceledAt = clock.Now()
				return l.CancelBackfill(ctx, id, ledger.CancelOptions{})
			}
			return nil
		}}
		b = &backfill.Backfill{DAG: bfDAG(t, p, false), Window: bfDays(t, 1, 5), Ledger: l, Worker: "w1", Now: clock.Now}
		id, _ := b.ID()
		if _, err := b.Run(t.Context()); !errors.Is(err, backfill.ErrBackfillCanceled) {
			t.Fatalf("Run canceled midway: %v; want ErrBackfillCanceled", err)
		}
		if _, err := b.Run(t.Context()); !errors.Is(err, backfill.ErrBackfillCanceled) {
			t.Fatalf("Run of the canceled backfill: %v; want ErrBackfillCanceled", err)
		}
		clock.Advance(time.Hour)
		rep, err := b.Resume(t.Context())
		if err != nil {
			t.Fatalf("Resume = %v", err)
		}
		bfCheckReport(t, rep, backfill.Report{Total: 5, Succeeded: 3, Skipped: 2})
		if got, want := p.Calls(), bfKeys(5, 4, 3, 2, 1); !slices.Equal(got, want) {
			t.Errorf("ran %v; want %v: each day once", got, want)
		}
		record, err := l.Backfill(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if record.Canceled || !record.CanceledAt.Equal(canceledAt) || !record.ResumedAt.Equal(clock.Now()) {
			t.Errorf("record %+v; want not canceled, canceled at %v, resumed at %v", record, canceledAt, clock.Now())
		}
		if st, err := backfill.StatusOf(t.Context(), l, id, clock.Now()); err != nil || !st.Done() {
			t.Errorf("status %v, %v; want done", st, err)
		}

		// Resuming a backfill that was not canceled runs it: after a failure,
		// the failed and the unreached partitions.
		l2 := memledger.New(clock.Now)
		p2 := &bfProbe{hook: bfFailOn(true, "2026-01-04")}
		b2 := &backfill.Backfill{DAG: bfDAG(t, p2, false), Window: bfDays(t, 1, 5), Ledger: l2, Now: clock.Now}
		if rep, err := b2.Run(t.Context()); err == nil || rep.Failed != 1 {
			t.Fatalf("Run with a failure: %v, %v", rep, err)
		}
		rep, err = b2.Resume(t.Context())
		if err != nil {
			t.Fatalf("Resume of a failed backfill = %v", err)
		}
		bfCheckReport(t, rep, backfill.Report{Total: 5, Succeeded: 4, Skipped: 1})
		if r, _ := l2.Backfill(t.Context(), id); r.Canceled || !r.ResumedAt.IsZero() {
			t.Errorf("record of a backfill never canceled %+v; want no resume time", r)
		}
	})
}

// A backfill with nothing to run is not recorded; its plan says so.
func TestBackfillNothingToRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clock := ledgertest.NewClock(bfT0)
		l := memledger.New(clock.Now)
		for d := 1; d <= 3; d++ {
			bfSeed(t, l, clock, bfDAGID, bfDay(d), "daily", ledger.StateSucceeded, time.Second, time.Minute)
		}
		bfSeed(t, l, clock, bfDAGID, bfDay(4), "elsewhere", ledger.StateRunning, 0, time.Hour)
		p := new(bfProbe)
		b := &backfill.Backfill{DAG: bfDAG(t, p, false), Window: bfDays(t, 1, 4), Ledger: l, Now: clock.Now}
		plan, err := b.Plan(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		const warning = "nothing to run: the backfill is not recorded in the ledger"
		if plan.Counts.Run != 0 || !slices.Contains(plan.Warnings, warning) {
			t.Errorf("plan %s, warnings %q; want nothing to run and the warning %q", plan, plan.Warnings, warning)
		}
		var text bytes.Buffer
		if err := plan.WriteText(t.Context(), &text); err != nil || !strings.Contains(text.String(), "warning     "+warning) {
			t.Errorf("plan text %v:\n%s\nwant the warning", err, text.String())
		}
		// The partition another worker holds is not done: the run says so.
		rep, err := b.Execute(t.Context(), plan)
		if err != nil || rep.Done() {
			t.Fatalf("Execute: %v, done %v; want no error (overlap is not one), not done", err, rep.Done())
		}
		bfCheckReport(t, rep, backfill.Report{Total: 4, Skipped: 3, Held: 1})
		if bs, err := l.Backfills(t.Context()); err != nil || len(bs) != 0 {
			t.Errorf("Backfills = %+v, %v; want none recorded", bs, err)
		}
		if _, err := backfill.StatusOf(t.Context(), l, rep.Backfill, clock.Now()); !errors.Is(err, ledger.ErrUnknownBackfill) {
			t.Errorf("StatusOf a backfill never recorded = %v; want ErrUnknownBackfill", err)
		}
		if len(p.Calls()) != 0 {
			t.Errorf("ran %v; want nothing", p.Calls())
		}

		// Once the lease elsewhere expired, the backfill has a partition to
		// run, and is recorded.
		clock.Advance(time.Hour)
		if rep, err := b.Run(t.Context()); err != nil || rep.Succeeded != 1 {
			t.Fatalf("Run after the lease expired: %v, %v", rep, err)
		}
		if bs, err := l.Backfills(t.Context()); err != nil || len(bs) != 1 {
			t.Errorf("Backfills = %+v, %v; want the backfill recorded", bs, err)
		}
	})
}

// Identities of daily and hourly schedules follow their cadence and days,
// not their minute and hour; every other identity is as it was.
func TestBackfillIdentityOfMovedSchedules(t *testing.T) {
	p := new(bfProbe)
	id := func(expr string, excluded ...string) string {
		g, err := tranche.ParseCron(expr, excluded...)
		if err != nil {
			t.Fatal(err)
		}
		return backfill.DAGIdentity(bfCronDAG(t, p, g, time.UTC), g, time.UTC)
	}
	same := [][2]string{
		{"0 2 * * *", "0 1 * * *"},
		{"0 2 * * *", "59 23 * * *"},
		{"30 2 * * 1-5", "0 6 * * MON-FRI"},
		{"CRON_TZ=Europe/Berlin 0 2 * * *", "CRON_TZ=Europe/Berlin 15 3 * * *"},
		{"5 * * * *", "50 * * * *"},
		{"@hourly", "30 * * * *"},
		{"@daily", "0 7 * * *"},
	}
	for _, c := range same {
		if a, b := id(c[0]), id(c[1]); a != b {
			t.Errorf("DAGIdentity of %q = %s, of %q = %s; want one identity", c[0], a, c[1], b)
		}
	}
	apart := [][2]string{
		{"0 2 * * *", "0 2 * * 1-5"},                                 // other days
		{"0 2 * * *", "0 2,14 * * *"},                                // twice a day
		{"0 2 * * *", "CRON_TZ=Europe/Berlin 0 2 * * *"},             // another zone
		{"5 * * * *", "5 0-23 * * *"},                                // every wall hour, not every real one
		{"5 * * * *", "0 2 * * *"},                                   // hourly, daily
		{"*/15 * * * *", "*/20 * * * *"},                             // irregular: by text
		{"CRON_TZ=Europe/Berlin 0 2 * * *", "CRON_TZ=UTC 0 2 * * *"}, // zones
	}
	for _, c := range apart {
		if a, b := id(c[0]), id(c[1]); a == b {
			t.Errorf("DAGIdentity of %q and of %q = %s; want two identities", c[0], c[1], a)
		}
	}
	if a, b := id("0 2 * * *"), id("0 1 * * *", "2026-12-25"); a == b {
		t.Errorf("DAGIdentity with an excluded date = %s, the same", a)
	}
	if a, b := id("0 2 * * *", "2026-12-25"), id("0 1 * * *", "2026-12-25"); a != b {
		t.Errorf("DAGIdentity of daily schedules with the same excluded date: %s and %s; want one", a, b)
	}
	// Pinned: the identities of these granularities are those of the
	// releases before the rule, which ledgers hold.
	hourly, err := tranche.NewDAG(tranche.Asset{Name: "h", Partitioning: tranche.Partitioning{Granularity: tranche.Hour}, Materialize: p.materialize})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ what, got, want string }{
		{"cron 0 2,14 * * *", id("0 2,14 * * *"), "03d47c434125c6c6"},
		{"cron */15 * * * *", id("*/15 * * * *"), "1cebb5ba478e25e4"},
		{"cron 5 0-23 * * *", id("5 0-23 * * *"), "bfec1b803307bb30"},
		{"hour", backfill.DAGIdentity(hourly, tranche.Hour, time.UTC), "90ca7e2e4187895c"},
		{"cron 0 2 * * *", id("0 2 * * *"), "21469026e05c8d0f"},
	} {
		if c.got != c.want {
			t.Errorf("DAGIdentity of %s = %s; want %s", c.what, c.got, c.want)
		}
	}
}

// After a daily schedule moves from 02:00 to 01:00, the days a run of the
// old schedule covered are not planned again: the plan matches slots by
// their fire's date.
func TestBackfillMovedDailySchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clock := ledgertest.NewClock(bfT0)
		l := memledger.New(clock.Now)
		old, moved := bfCron(t, "0 2 * * *"), bfCron(t, "0 1 * * *")
		p := new(bfProbe)
		oldDAG, newDAG := bfCronDAG(t, p, old, time.UTC), bfCronDAG(t, p, moved, time.UTC)
		dagID := backfill.DAGIdentity(newDAG, moved, time.UTC)
		if oldID := backfill.DAGIdentity(oldDAG, old, time.UTC); oldID != dagID {
			t.Fatalf("DAGIdentity of the old schedule %s, of the new %s; want one", oldID, dagID)
		}
		// The old schedule ran the slots fired on 01-02 to 01-06; 01-04
		// failed.
		for slot := range bfSlots(t, old, bfFire(t, "2026-01-02T02:00:00Z"), bfFire(t, "2026-01-06T02:00:00Z")).OldestFirst() {
			state := ledger.StateSucceeded
			if strings.HasPrefix(slot.Key(), "2026-01-04") {
				state = ledger.StateFailed
			}
			bfSeed(t, l, clock, dagID, slot, "daily", state, time.Minute, time.Hour)
		}
		w := bfSlots(t, moved, bfFire(t, "2026-01-02T01:00:00Z"), bfFire(t, "2026-01-08T01:00:00Z"))
		b := &backfill.Backfill{DAG: newDAG, Window: w, Ledger: l, Now: clock.Now}
		plan, err := b.Plan(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		want := []string{
			"2026-01-08T01:00:00Z run", "2026-01-07T01:00:00Z run",
			"2026-01-06T01:00:00Z skip: succeeded", "2026-01-05T01:00:00Z skip: succeeded",
			"2026-01-04T01:00:00Z run", "2026-01-03T01:00:00Z skip: succeeded", "2026-01-02T01:00:00Z skip: succeeded",
		}
		if got := bfItems(t, plan); !slices.Equal(got, want) {
			t.Errorf("plan items\n%v\nwant\n%v", got, want)
		}
		var text bytes.Buffer
		if err := plan.WriteText(t.Context(), &text); err != nil {
			t.Fatal(err)
		}
		if line := "2026-01-05T01:00:00Z  skip: succeeded  (latest: attempt 1 succeeded by daily, at slot 2026-01-05T02:00:00Z of a former schedule)"; !strings.Contains(text.String(), line) {
			t.Errorf("plan text:\n%s\nwant the line %q", text.String(), line)
		}
		rep, err := b.Execute(t.Context(), plan)
		if err != nil {
			t.Fatal(err)
		}
		bfCheckReport(t, rep, backfill.Report{Total: 7, Succeeded: 3, Skipped: 4})
		if got, want := p.Calls(), []string{"2026-01-08T01:00:00Z", "2026-01-07T01:00:00Z", "2026-01-04T01:00:00Z"}; !slices.Equal(got, want) {
			t.Errorf("ran %v; want %v", got, want)
		}
		st, err := backfill.StatusOf(t.Context(), l, rep.Backfill, clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		if !st.Done() {
			t.Errorf("status %s; want every slot succeeded, the old schedule's included", st)
		}

		// Moving back finds both schedules' slots.
		back := &backfill.Backfill{DAG: oldDAG, Window: bfSlots(t, old, bfFire(t, "2026-01-02T02:00:00Z"), bfFire(t, "2026-01-08T02:00:00Z")), Ledger: l, Now: clock.Now}
		if plan, err := back.Plan(t.Context()); err != nil || plan.Counts.Run != 0 || plan.Counts.SkipSucceeded != 7 {
			t.Errorf("plan of the old schedule after the new one ran: %v, %v; want every slot succeeded", plan, err)
		}
	})
}

// An hourly schedule moved within its hours keeps its history too, across
// a day of 25 hours.
func TestBackfillMovedHourlySchedule(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	clock := ledgertest.NewClock(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	l := memledger.New(clock.Now)
	old, moved := bfCron(t, "5 * * * *"), bfCron(t, "35 * * * *")
	p := new(bfProbe)
	newDAG := bfCronDAG(t, p, moved, ny)
	dagID := backfill.DAGIdentity(newDAG, moved, ny)
	// The old schedule ran every slot that fired on 2026-11-01 in New
	// York, a day of 25 hours, but the one of the second 01:05 (-05:00).
	day := bfSlots(t, old, time.Date(2026, 11, 1, 0, 5, 0, 0, ny), time.Date(2026, 11, 1, 23, 5, 0, 0, ny))
	if day.Len() != 25 {
		t.Fatalf("%s holds %d slots; want 25", day, day.Len())
	}
	for slot := range day.OldestFirst() {
		if slot.Key() != "2026-11-01T01:05:00-05:00" {
			bfSeed(t, l, clock, dagID, slot, "hourly", ledger.StateSucceeded, time.Second, time.Hour)
		}
	}
	w := bfSlots(t, moved, time.Date(2026, 11, 1, 0, 35, 0, 0, ny), time.Date(2026, 11, 1, 23, 35, 0, 0, ny))
	b := &backfill.Backfill{DAG: newDAG, Window: w, Ledger: l, Now: clock.Now}
	rep, err := b.Run(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	bfCheckReport(t, rep, backfill.Report{Total: 25, Succeeded: 1, Skipped: 24})
	if got, want := p.Calls(), []string{"2026-11-01T01:35:00-05:00"}; !slices.Equal(got, want) {
		t.Errorf("ran %v; want %v, the hour the old schedule missed", got, want)
	}
}

// The estimate takes the DAG's recent successes wherever they lie, so
// that backfilling the past of a live DAG gets one.
func TestBackfillPlanEstimateFromRecentRuns(t *testing.T) {
	clock := ledgertest.NewClock(bfT0)
	l := memledger.New(clock.Now)
	// The live job ran days 20 to 30 of January: 30 hours first, then
	// ten of 10s, 20s, ... 100s.
	for d := 20; d <= 30; d++ {
		took := time.Duration(d-20) * 10 * time.Second
		if d == 20 {
			took = 30 * time.Hour
		}
		bfSeed(t, l, clock, bfDAGID, bfDay(d), "daily", ledger.StateSucceeded, took, 40*time.Hour)
	}
	bfSeed(t, l, clock, bfDAGID, bfDay(19), "daily", ledger.StateFailed, time.Hour, 2*time.Hour)
	b := &backfill.Backfill{DAG: bfDAG(t, new(bfProbe), false), Window: bfDays(t, 1, 5), Ledger: l, Concurrency: 2, Now: clock.Now}
	plan, err := b.Plan(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// The median of 10s, 20s, ..., 100s and 30h is 60s; 5 runs, 2 at a
	// time: 3 rounds.
	if want := 60 * time.Second * 3; plan.Estimate != want {
		t.Errorf("estimate %v; want %v", plan.Estimate, want)
	}
	// Only the 20 most recent count: twelve of 5s, and eight of 30s to
	// 100s.
	for d := 6; d <= 17; d++ {
		bfSeed(t, l, clock, bfDAGID, bfDay(d), "daily", ledger.StateSucceeded, 5*time.Second, time.Hour)
	}
	if plan, err = b.Plan(t.Context()); err != nil {
		t.Fatal(err)
	}
	if want := 5 * time.Second * 3; plan.Estimate != want {
		t.Errorf("estimate after twelve runs of 5s %v; want %v", plan.Estimate, want)
	}
	// Without a success, no estimate.
	l2 := memledger.New(clock.Now)
	bfSeed(t, l2, clock, bfDAGID, bfDay(20), "daily", ledger.StateFailed, time.Hour, 2*time.Hour)
	b.Ledger = l2
	if plan, err = b.Plan(t.Context()); err != nil {
		t.Fatal(err)
	}
	if plan.Estimate != 0 || !slices.Contains(plan.Warnings, "no successful run of this DAG recorded: no estimate") {
		t.Errorf("plan without a success: estimate %v, warnings %q", plan.Estimate, plan.Warnings)
	}
}

// countingLedger counts the calls of Latest and RevisionIn.
type countingLedger struct {
	ledger.Ledger
	latest, revisionIn atomic.Int64
}

func (c *countingLedger) Latest(ctx context.Context, dag string, from, to time.Time) iter.Seq2[ledger.Attempt, error] {
	c.latest.Add(1)
	return c.Ledger.Latest(ctx, dag, from, to)
}

func (c *countingLedger) RevisionIn(ctx context.Context, dag string, from, to time.Time, after int64) (int64, error) {
	c.revisionIn.Add(1)
	return c.Ledger.RevisionIn(ctx, dag, from, to, after)
}

// A plan goes stale only when the history of its own partitions changed:
// the live job running a day outside the window leaves it alone.
func TestBackfillStaleOnlyInside(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clock := ledgertest.NewClock(bfT0)
		l := memledger.New(clock.Now)
		p := new(bfProbe)
		dag := bfDAG(t, p, false)
		b := &backfill.Backfill{DAG: dag, Window: bfDays(t, 1, 5), Ledger: l, Now: clock.Now}
		plan, err := b.Plan(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range []int{6, 20, 31} { // the live job, outside the window
			if _, err := backfill.RunRecorded(t.Context(), l, nil, dag, bfDay(d), "daily"); err != nil {
				t.Fatal(err)
			}
		}
		rep, err := b.Execute(t.Context(), plan)
		if err != nil {
			t.Fatalf("Execute after runs outside the window = %v; want it to run", err)
		}
		bfCheckReport(t, rep, backfill.Report{Total: 5, Succeeded: 5})

		// A change inside makes it stale.
		b2 := &backfill.Backfill{DAG: dag, Window: bfDays(t, 7, 10), Ledger: l, Now: clock.Now}
		plan, err = b2.Plan(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := backfill.RunRecorded(t.Context(), l, nil, dag, bfDay(10), "daily"); err != nil {
			t.Fatal(err)
		}
		var stale *backfill.StalePlanError
		if _, err := b2.Execute(t.Context(), plan); !errors.As(err, &stale) || stale.Plan.Counts.Run != 3 {
			t.Errorf("Execute after a run inside the window = %v; want a *StalePlanError whose new plan runs 3", err)
		}

		// RerunAll keeps its bound: the plan's revision. Days 1 to 5
		// succeeded before the plan; runs outside it since do not stop them
		// running again, each once.
		calls := len(p.Calls())
		again := &backfill.Backfill{DAG: dag, Window: bfDays(t, 1, 5), Ledger: l, Rerun: ledger.RerunAll, Now: clock.Now}
		plan, err = again.Plan(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := backfill.RunRecorded(t.Context(), l, nil, dag, bfDay(25), "daily"); err != nil {
			t.Fatal(err)
		}
		if rep, err = again.Execute(t.Context(), plan); err != nil {
			t.Fatal(err)
		}
		bfCheckReport(t, rep, backfill.Report{Total: 5, Succeeded: 5})
		if got := len(p.Calls()) - calls; got != 6 { // RunRecorded's day 25, and days 1 to 5
			t.Errorf("%d runs; want 6", got)
		}
		if _, err := again.Execute(t.Context(), plan); !errors.As(err, &stale) {
			t.Errorf("Execute of the RerunAll plan again = %v; want a *StalePlanError: its partitions ran since", err)
		}

		// Chosen days: a run between them is outside too.
		chosen := &backfill.Backfill{DAG: dag, Partitions: []tranche.TimePartition{bfDay(12), bfDay(15)}, Ledger: l, Now: clock.Now}
		if plan, err = chosen.Plan(t.Context()); err != nil {
			t.Fatal(err)
		}
		if _, err := backfill.RunRecorded(t.Context(), l, nil, dag, bfDay(13), "daily"); err != nil {
			t.Fatal(err)
		}
		if rep, err = chosen.Execute(t.Context(), plan); err != nil {
			t.Fatalf("Execute of chosen days after a run between them = %v; want it to run", err)
		}
		bfCheckReport(t, rep, backfill.Report{Total: 2, Succeeded: 2})
	})
}

// Execute checks a plan of 100,000 partitions with one query, and reads
// the window once, as its plan did.
func TestBackfillExecuteReadsOnce(t *testing.T) {
	const n = 100_000
	clock := ledgertest.NewClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	l := &countingLedger{Ledger: memledger.New(clock.Now)}
	dag := bfMinuteDAG(t)
	b := &backfill.Backfill{DAG: dag, Window: bfMinutes(t, n), Ledger: l, Now: clock.Now, Rerun: ledger.RerunNone}
	dagID := backfill.DAGIdentity(dag, tranche.Minute, time.UTC)
	// Every partition has a recorded run, so that the plan has nothing to
	// run and Execute only reads.
	i := 0
	for chunk := range b.Window.Chunks(1000) {
		i++
		lease, err := l.Claim(t.Context(), ledger.ClaimRequest{DAG: dagID, Worker: "seed", Partitions: slices.Collect(chunk.OldestFirst()),
			Lease: time.Hour, Policy: ledger.RerunAll})
		if err != nil {
			t.Fatal(err)
		}
		outcomes := slices.Repeat([]ledger.Outcome{{State: ledger.StateFailed}}, chunk.Len())
		if err := l.Finish(t.Context(), lease, outcomes); err != nil {
			t.Fatal(err)
		}
	}
	plan, err := b.Plan(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	planned := l.latest.Load()
	if _, err := b.Execute(t.Context(), plan); err != nil {
		t.Fatal(err)
	}
	if got := l.latest.Load() - planned; got != planned {
		t.Errorf("Execute called Latest %d times; want %d, the plan's", got, planned)
	}
	if got := l.revisionIn.Load(); got != 1 {
		t.Errorf("Execute called RevisionIn %d times; want 1", got)
	}
}

// A backfill of chosen partitions plans exactly them, in order, in runs
// of adjacent ones cut into chunks; its id depends on the set alone.
func TestBackfillChosenProperty(t *testing.T) {
	dag := bfDAG(t, new(bfProbe), true)
	l := memledger.New(nil)
	rapid.Check(t, func(t *rapid.T) {
		days := rapid.SliceOfNDistinct(rapid.IntRange(0, 59), 1, 20, rapid.ID).Draw(t, "days")
		chunk := rapid.IntRange(1, 4).Draw(t, "chunk")
		order := backfill.Order(rapid.IntRange(0, 1).Draw(t, "order"))
		ps := make([]tranche.TimePartition, len(days))
		for i, d := range days {
			ps[i] = tranche.PartitionOf(tranche.Day, time.Date(2026, 1, 1+d, 0, 0, 0, 0, time.UTC))
		}
		b := &backfill.Backfill{DAG: dag, Partitions: ps, Ledger: l, ChunkSize: chunk, Order: order}
		plan, err := b.Plan(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		sorted := slices.Clone(days)
		slices.Sort(sorted)
		var want []string
		runs := 0
		for i := 0; i < len(sorted); {
			j := i + 1
			for j < len(sorted) && sorted[j] == sorted[j-1]+1 {
				j++
			}
			runs += (j - i + chunk - 1) / chunk
			i = j
		}
		for _, d := range sorted {
			want = append(want, time.Date(2026, 1, 1+d, 0, 0, 0, 0, time.UTC).Format(time.DateOnly))
		}
		if order == backfill.NewestFirst {
			slices.Reverse(want)
		}
		var got []string
		for item, err := range plan.Items(context.Background()) {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, item.Partition.Key())
		}
		if !slices.Equal(got, want) {
			t.Fatalf("plan items %v; want %v", got, want)
		}
		if plan.Counts.Total != len(days) || plan.Counts.Runs != runs || !plan.Chosen {
			t.Fatalf("plan %s; want %d partitions in %d runs", plan, len(days), runs)
		}
		// The id: the same for the set shuffled and repeated.
		shuffled := slices.Clone(ps)
		for i := range shuffled {
			j := rapid.IntRange(0, i).Draw(t, "swap")
			shuffled[i], shuffled[j] = shuffled[j], shuffled[i]
		}
		shuffled = append(shuffled, ps[rapid.IntRange(0, len(ps)-1).Draw(t, "repeat")])
		again := &backfill.Backfill{DAG: dag, Partitions: shuffled, Ledger: l, ChunkSize: chunk}
		if a, b := plan.Backfill, mustID(t, again); a != b {
			t.Fatalf("ids %s and %s of one set", a, b)
		}
	})
}

func mustID(t *rapid.T, b *backfill.Backfill) string {
	id, err := b.ID()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// After a daily schedule moves to any other time of its days, or an
// hourly one to any other minute, in any zone and across daylight saving
// time, a plan runs exactly the days (or hours) the old schedule did not
// land.
func TestBackfillMovedScheduleProperty(t *testing.T) {
	var zones []*time.Location
	for _, name := range []string{"UTC", "America/New_York", "Europe/Berlin", "Asia/Kathmandu", "Australia/Lord_Howe"} {
		loc, err := time.LoadLocation(name)
		if err != nil {
			t.Fatal(err)
		}
		zones = append(zones, loc)
	}
	rapid.Check(t, func(t *rapid.T) {
		loc := rapid.SampledFrom(zones).Draw(t, "zone")
		hourly := rapid.Bool().Draw(t, "hourly")
		// Fires after the hour (and, daily, after midnight), so that the
		// slot holding an hour's (or a day's) start fires in that hour (or
		// on that day) for both schedules.
		at := func(name string) string {
			minute := rapid.IntRange(1, 59).Draw(t, name+" minute")
			if hourly {
				return fmt.Sprintf("%d * * * *", minute)
			}
			return fmt.Sprintf("%d %d * * *", minute, rapid.IntRange(1, 23).Draw(t, name+" hour"))
		}
		old, moved := bfCron(t, at("old")), bfCron(t, at("new"))
		first := time.Date(2026, rapid.SampledFrom([]time.Month{time.March, time.April, time.October}).Draw(t, "month"),
			rapid.IntRange(1, 28).Draw(t, "day"), 0, 0, 0, 0, loc)
		n := rapid.IntRange(1, 12).Draw(t, "days")
		key := func(fire time.Time) string { return fire.In(loc).Format(time.DateOnly) }
		window := func(g tranche.TimeGranularity) tranche.TimePartitionWindow {
			last := first.AddDate(0, 0, n-1)
			if hourly {
				last = first.Add(time.Duration(24*n-1) * time.Hour)
			}
			w, err := tranche.NewTimePartitionWindow(g, first, last)
			if err != nil {
				t.Fatal(err)
			}
			return w
		}
		if hourly {
			key = func(fire time.Time) string { return fire.In(loc).Format("2006-01-02T15Z07:00") }
		}
		clock := ledgertest.NewClock(time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC))
		l := memledger.New(clock.Now)
		dag := bfCronDAG(t, new(bfProbe), moved, loc)
		dagID := backfill.DAGIdentity(dag, moved, loc)
		landed := map[string]bool{}
		for slot := range window(old).OldestFirst() {
			state := rapid.SampledFrom([]ledger.State{ledger.StateSucceeded, ledger.StateFailed, ledger.StatePending}).Draw(t, "state")
			if state == ledger.StatePending {
				continue
			}
			le, err := l.Claim(context.Background(), ledger.ClaimRequest{DAG: dagID, Worker: "old", Partitions: []tranche.TimePartition{slot},
				Lease: time.Hour, Policy: ledger.RerunAll})
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Finish(context.Background(), le, []ledger.Outcome{{State: state}}); err != nil {
				t.Fatal(err)
			}
			landed[key(slot.End)] = state == ledger.StateSucceeded
		}
		b := &backfill.Backfill{DAG: dag, Window: window(moved), Ledger: l, Now: clock.Now}
		plan, err := b.Plan(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		// Daily schedules fire on the same days; hourly ones in the same
		// hours but where a zone moves its clock by half an hour (Lord
		// Howe), skipping or repeating the minutes of one and not the
		// other's: a slot of the new schedule that no slot of the old one
		// shares an hour with runs.
		if want := window(old).Len(); plan.Counts.Total != want && !hourly {
			t.Fatalf("the new schedule has %d slots; want %d, the old one's", plan.Counts.Total, want)
		}
		for item, err := range plan.Items(context.Background()) {
			if err != nil {
				t.Fatal(err)
			}
			day := key(item.Partition.End)
			want := ledger.ActionRun
			if landed[day] {
				want = ledger.ActionSkipSucceeded
			}
			if item.Action != want {
				t.Fatalf("slot %s (fired %s): %s; want %s (the old schedule's days: %v)", item.Partition.Key(), day, item.Action, want, landed)
			}
		}
	})
}

// Where a zone moves its clock by half an hour (Lord Howe sets 02:00 to
// 02:30 on 2026-10-04), an hourly schedule at :30 fires at 02:30, in an
// hour in which one at :01 never fires (02:01 does not exist): after a
// move from :01 to :30, that slot alone runs.
func TestBackfillMovedHourlyHalfHourShift(t *testing.T) {
	lh, err := time.LoadLocation("Australia/Lord_Howe")
	if err != nil {
		t.Fatal(err)
	}
	clock := ledgertest.NewClock(time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC))
	l := memledger.New(clock.Now)
	old, moved := bfCron(t, "1 * * * *"), bfCron(t, "30 * * * *")
	p := new(bfProbe)
	dag := bfCronDAG(t, p, moved, lh)
	dagID := backfill.DAGIdentity(dag, moved, lh)
	day := time.Date(2026, 10, 4, 0, 0, 0, 0, lh)
	window := func(g tranche.TimeGranularity) tranche.TimePartitionWindow {
		w, err := tranche.NewTimePartitionWindow(g, day, day.Add(22*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	for slot := range window(old).OldestFirst() {
		bfSeed(t, l, clock, dagID, slot, "hourly", ledger.StateSucceeded, time.Second, time.Hour)
	}
	b := &backfill.Backfill{DAG: dag, Window: window(moved), Ledger: l, Now: clock.Now}
	rep, err := b.Run(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := p.Calls(), []string{"2026-10-04T02:30:00+11:00"}; !slices.Equal(got, want) || rep.Skipped != window(moved).Len()-1 {
		t.Errorf("ran %v (%s); want %v, the slot whose hour the old schedule skipped", got, rep, want)
	}
}

// TestBackfillRefusesHostZone checks that a backfill refuses a window in
// a zone no other host can load by name (time.Local on a host with DST
// and no TZ), since its ledger records the window's text form.
func TestBackfillRefusesHostZone(t *testing.T) {
	data, err := os.ReadFile("/usr/share/zoneinfo/America/New_York")
	if err != nil {
		t.Skipf("no zone database to build a DST zone named Local from: %v", err)
	}
	local, err := time.LoadLocationFromTZData("Local", data)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 3, 1, 0, 0, 0, 0, local)
	w, err := tranche.NewTimePartitionWindow(tranche.Day, start, start.AddDate(0, 0, 2))
	if err != nil {
		t.Fatal(err)
	}
	b := &backfill.Backfill{DAG: bfDAG(t, new(bfProbe), false), Window: w, Ledger: memledger.New(nil)}
	if _, err := b.ID(); err == nil || !strings.Contains(err.Error(), "host's zone") {
		t.Errorf("ID of a backfill in a zone named Local = %v; want it refused", err)
	}
}
