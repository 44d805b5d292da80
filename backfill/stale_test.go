package backfill_test

import (
	"context"
	"errors"
	"fmt"
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

// plainLedger hides the ledger.LatestReader of the ledger it holds, so
// that a backfill reads it through ledger.Ledger alone.
type plainLedger struct{ ledger.Ledger }

// A plan of a cron schedule's slots goes stale only when the history of
// its own slots changed. The plan's reads match a moved schedule's
// attempts by the day (or hour) of their fire, and so look two days (or
// three hours) beyond the window; the live job running today's slot, just
// after a window that ends yesterday, lies there and must not make the
// plan stale. An attempt that the rule matches to a slot of the plan, a
// moved schedule's among them, still does. Each case runs on a
// ledger.LatestReader and on a ledger without one.
func TestBackfillStaleOwnSlots(t *testing.T) {
	daily, moved, hourly := bfCron(t, "0 2 * * *"), bfCron(t, "0 1 * * *"), bfCron(t, "5 * * * *")
	slot := func(t *testing.T, g tranche.TimeGranularity, fire string) tranche.TimePartition {
		t.Helper()
		p, err := tranche.SlotAt(g, bfFire(t, fire))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	type change struct {
		g     tranche.TimeGranularity
		fire  string
		state ledger.State // claimed and finished so; StateRunning: claimed only
		live  bool         // by backfill.RunRecorded, as the live job records, rather than a claim
	}
	cases := []struct {
		name    string
		g       tranche.TimeGranularity
		from    string // the fire of the plan's first slot
		to      string // ... and of its last
		chosen  []string
		changes []change
		stale   bool
	}{
		// The window ends yesterday, at 2026-02-28 02:00; today's slot
		// fires 03-01 at 02:00.
		{name: "today's live run", g: daily, from: "2026-02-20T02:00:00Z", to: "2026-02-28T02:00:00Z",
			changes: []change{{g: daily, fire: "2026-03-01T02:00:00Z", live: true}}},
		{name: "today's slot claimed, still running", g: daily, from: "2026-02-20T02:00:00Z", to: "2026-02-28T02:00:00Z",
			changes: []change{{g: daily, fire: "2026-03-01T02:00:00Z", state: ledger.StateRunning}}},
		{name: "the two days after", g: daily, from: "2026-02-20T02:00:00Z", to: "2026-02-28T02:00:00Z",
			changes: []change{{g: daily, fire: "2026-03-01T02:00:00Z", live: true}, {g: daily, fire: "2026-03-02T02:00:00Z", state: ledger.StateFailed}}},
		{name: "the two days before", g: daily, from: "2026-02-20T02:00:00Z", to: "2026-02-28T02:00:00Z",
			changes: []change{{g: daily, fire: "2026-02-18T02:00:00Z", live: true}, {g: daily, fire: "2026-02-19T02:00:00Z", live: true}}},
		{name: "today's slot of the moved schedule", g: daily, from: "2026-02-20T02:00:00Z", to: "2026-02-28T02:00:00Z",
			// [02-28 01:00, 03-01 01:00) starts inside the plan's last
			// slot, and fires on 03-01, a day the plan has no slot of.
			changes: []change{{g: moved, fire: "2026-03-01T01:00:00Z", live: true}}},
		{name: "the hour after", g: hourly, from: "2026-02-28T10:05:00Z", to: "2026-02-28T20:05:00Z",
			changes: []change{{g: hourly, fire: "2026-02-28T21:05:00Z", live: true}, {g: hourly, fire: "2026-02-28T22:05:00Z", live: true}}},
		{name: "between chosen slots", g: daily, chosen: []string{"2026-02-20T02:00:00Z", "2026-02-24T02:00:00Z", "2026-02-25T02:00:00Z"},
			changes: []change{{g: daily, fire: "2026-02-22T02:00:00Z", live: true}, {g: daily, fire: "2026-02-26T02:00:00Z", live: true}}},

		{name: "a slot inside", g: daily, from: "2026-02-20T02:00:00Z", to: "2026-02-28T02:00:00Z",
			changes: []change{{g: daily, fire: "2026-02-24T02:00:00Z", live: true}}, stale: true},
		{name: "the last slot", g: daily, from: "2026-02-20T02:00:00Z", to: "2026-02-28T02:00:00Z",
			changes: []change{{g: daily, fire: "2026-03-01T02:00:00Z", live: true}, {g: daily, fire: "2026-02-28T02:00:00Z", state: ledger.StateFailed}}, stale: true},
		{name: "the first slot, claimed", g: daily, from: "2026-02-20T02:00:00Z", to: "2026-02-28T02:00:00Z",
			changes: []change{{g: daily, fire: "2026-02-20T02:00:00Z", state: ledger.StateRunning}}, stale: true},
		{name: "the moved schedule's slot of the first day", g: daily, from: "2026-02-20T02:00:00Z", to: "2026-02-28T02:00:00Z",
			// [02-19 01:00, 02-20 01:00) starts before the window, and
			// fires on 02-20, the day of its first slot.
			changes: []change{{g: moved, fire: "2026-02-20T01:00:00Z", live: true}}, stale: true},
		{name: "the moved schedule's slot of the last day", g: daily, from: "2026-02-20T02:00:00Z", to: "2026-02-28T02:00:00Z",
			changes: []change{{g: moved, fire: "2026-02-28T01:00:00Z", state: ledger.StateSucceeded}}, stale: true},
		{name: "the moved schedule's slot of a middle day", g: daily, from: "2026-02-20T02:00:00Z", to: "2026-02-28T02:00:00Z",
			changes: []change{{g: moved, fire: "2026-02-24T01:00:00Z", state: ledger.StateSucceeded}}, stale: true},
		{name: "the hour's last slot", g: hourly, from: "2026-02-28T10:05:00Z", to: "2026-02-28T20:05:00Z",
			changes: []change{{g: hourly, fire: "2026-02-28T21:05:00Z", live: true}, {g: hourly, fire: "2026-02-28T20:05:00Z", live: true}}, stale: true},
		{name: "a chosen slot", g: daily, chosen: []string{"2026-02-20T02:00:00Z", "2026-02-24T02:00:00Z", "2026-02-25T02:00:00Z"},
			changes: []change{{g: daily, fire: "2026-02-22T02:00:00Z", live: true}, {g: daily, fire: "2026-02-25T02:00:00Z", live: true}}, stale: true},
		{name: "the moved schedule's slot of a chosen day", g: daily, chosen: []string{"2026-02-20T02:00:00Z", "2026-02-24T02:00:00Z"},
			changes: []change{{g: moved, fire: "2026-02-24T01:00:00Z", live: true}}, stale: true},
	}
	for _, plain := range []bool{false, true} {
		for _, c := range cases {
			name := c.name
			if plain {
				name = "without LatestReader/" + name
			}
			t.Run(name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					clock := ledgertest.NewClock(bfT0.Add(3 * time.Hour))
					mem := memledger.New(clock.Now)
					var l ledger.Ledger = mem
					if plain {
						l = plainLedger{mem}
					}
					p := new(bfProbe)
					dag := bfCronDAG(t, p, c.g, time.UTC)
					b := &backfill.Backfill{DAG: dag, Ledger: l, Now: clock.Now}
					if c.chosen != nil {
						for _, fire := range c.chosen {
							b.Partitions = append(b.Partitions, slot(t, c.g, fire))
						}
					} else {
						b.Window = bfSlots(t, c.g, bfFire(t, c.from), bfFire(t, c.to))
					}
					plan, err := b.Plan(t.Context())
					if err != nil {
						t.Fatal(err)
					}
					id := backfill.DAGIdentity(dag, c.g, time.UTC)
					for _, ch := range c.changes {
						s := slot(t, ch.g, ch.fire)
						if ch.live {
							if _, err := backfill.RunRecorded(t.Context(), l, nil, bfCronDAG(t, new(bfProbe), ch.g, time.UTC), s, "live"); err != nil {
								t.Fatal(err)
							}
							continue
						}
						bfSeed(t, l, clock, id, s, "live", ch.state, time.Second, time.Hour)
					}
					rep, err := b.Execute(t.Context(), plan)
					var stale *backfill.StalePlanError
					switch {
					case c.stale && !errors.As(err, &stale):
						t.Fatalf("Execute = %v, %v; want a *StalePlanError", rep, err)
					case c.stale:
						if len(p.Calls()) != 0 {
							t.Errorf("ran %v of a stale plan", p.Calls())
						}
					case err != nil:
						t.Fatalf("Execute = %v; want the plan run", err)
					default:
						bfCheckReport(t, rep, backfill.Report{Total: plan.Counts.Total, Succeeded: plan.Counts.Total})
					}
				})
			})
		}
	}
}

// Execute refuses a plan exactly when a new plan of the same backfill
// finds, at one of its partitions, a latest attempt changed since: for
// daily and hourly schedules moved to other times of their days (or
// minutes of their hours), in zones with DST and half-hour shifts, over
// windows and chosen slots, with attempts of either schedule before and
// after the plan, on ledgers with a LatestReader and without.
func TestBackfillStaleProperty(t *testing.T) {
	var zones []*time.Location
	for _, name := range []string{"UTC", "America/New_York", "Europe/Berlin", "Australia/Lord_Howe"} {
		loc, err := time.LoadLocation(name)
		if err != nil {
			t.Fatal(err)
		}
		zones = append(zones, loc)
	}
	rapid.Check(t, func(t *rapid.T) {
		loc := rapid.SampledFrom(zones).Draw(t, "zone")
		hourly := rapid.Bool().Draw(t, "hourly")
		at := func() tranche.TimeGranularity {
			minute := rapid.IntRange(0, 59).Draw(t, "minute")
			if hourly {
				return bfCron(t, fmt.Sprintf("%d * * * *", minute))
			}
			return bfCron(t, fmt.Sprintf("%d %d * * *", minute, rapid.IntRange(0, 23).Draw(t, "hour")))
		}
		g := at()
		others := []tranche.TimeGranularity{g, at(), at()}
		unit := 24 * time.Hour
		if hourly {
			unit = time.Hour
		}
		// Around the DST changes of 2026 in the zones above.
		first := time.Date(2026, rapid.SampledFrom([]time.Month{time.March, time.April, time.October}).Draw(t, "month"),
			rapid.IntRange(1, 28).Draw(t, "day"), rapid.IntRange(0, 23).Draw(t, "clock hour"), 0, 0, 0, loc)
		n := rapid.IntRange(1, 8).Draw(t, "slots")
		slotNear := func(sched tranche.TimeGranularity, name string) tranche.TimePartition {
			off := rapid.IntRange(-4*4, (n+4)*4).Draw(t, name)
			return tranche.PartitionOf(sched, first.Add(time.Duration(off)*unit/4))
		}
		w, err := tranche.NewTimePartitionWindow(g, first, first.Add(time.Duration(n-1)*unit))
		if err != nil {
			t.Fatal(err)
		}
		clock := ledgertest.NewClock(time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC))
		mem := memledger.New(clock.Now)
		var l ledger.Ledger = mem
		if rapid.Bool().Draw(t, "plain") {
			l = plainLedger{mem}
		}
		dag := bfCronDAG(t, new(bfProbe), g, loc)
		id := backfill.DAGIdentity(dag, g, loc)
		record := func(name string) {
			s := slotNear(rapid.SampledFrom(others).Draw(t, name+" schedule"), name+" slot")
			rev, err := l.Revision(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			le, err := l.Claim(context.Background(), ledger.ClaimRequest{DAG: id, Worker: "w", Partitions: []tranche.TimePartition{s},
				Lease: time.Hour, Policy: ledger.RerunAll, Revision: rev})
			if errors.Is(err, ledger.ErrNotClaimable) {
				return // held by an attempt drawn before
			}
			if err != nil {
				t.Fatal(err)
			}
			if rapid.Bool().Draw(t, name+" finished") {
				if err := l.Finish(context.Background(), le, []ledger.Outcome{{State: ledger.StateSucceeded}}); err != nil {
					t.Fatal(err)
				}
			}
		}
		for range rapid.IntRange(0, 4).Draw(t, "before") {
			record("before")
		}
		b := &backfill.Backfill{DAG: dag, Window: w, Ledger: l, Now: clock.Now}
		if rapid.Bool().Draw(t, "chosen") {
			var ps []tranche.TimePartition
			for p := range w.OldestFirst() {
				if rapid.Bool().Draw(t, "choose") {
					ps = append(ps, p)
				}
			}
			if len(ps) > 0 {
				b.Partitions = ps
			}
		}
		plan, err := b.Plan(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for range rapid.IntRange(0, 3).Draw(t, "after") {
			record("after")
		}
		fresh, err := b.Plan(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var changed []string
		for item, err := range fresh.Items(context.Background()) {
			if err != nil {
				t.Fatal(err)
			}
			if item.Latest != nil && item.Latest.Revision > plan.Revision {
				changed = append(changed, item.Partition.Key())
			}
		}
		_, err = b.Execute(context.Background(), plan)
		var stale *backfill.StalePlanError
		if got := errors.As(err, &stale); got != (len(changed) > 0) {
			t.Fatalf("Execute: %v; the new plan's partitions changed since: %v", err, changed)
		}
		if err != nil && stale == nil {
			t.Fatal(err)
		}
	})
}
