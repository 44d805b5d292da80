package backfill_test

import (
	"errors"
	"testing"
	"time"

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
				bfNoLeaks(t)
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
					bfCheckReport(t, rep, plan.Counts.Total, plan.Counts.Total, 0, 0, 0, 0, 0)
				}
			})
		}
	}
}
