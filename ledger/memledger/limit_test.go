package memledger_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/ledgertest"
	"github.com/tranche-dev/tranche/ledger/memledger"
	"pgregory.net/rapid"
)

// TestLimitProperty interleaves at random the claims of every kind a DAG
// under a limit sees (a backfill's Claim and ClaimNext, a scheduler's
// live slot, a run by hand, a record of a skipped slot), finishes, lapses
// of leases and changes of the limit, and checks after each step, from
// the attempts alone, that no claim that runs was granted while the
// limit's runs held live leases, nor a backfill's while a refused slot's
// demand lasted, and that Limit counts the runs as Latest shows them.
func TestLimitProperty(t *testing.T) {
	const dag, bf = "dag", "backfill"
	first := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	part := func(i int) tranche.TimePartition {
		return tranche.PartitionOf(tranche.Hour, first.Add(time.Duration(i)*time.Hour))
	}
	rapid.Check(t, func(t *rapid.T) {
		clock := ledgertest.NewClock(time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC))
		l := memledger.New(clock.Now)
		ctx := t.Context()
		limit := rapid.IntRange(1, 4).Draw(t, "limit")
		if _, err := l.SetLimit(ctx, dag, ledger.Limit{Max: limit}); err != nil {
			t.Fatal(err)
		}
		const lease = time.Minute
		var held []*ledger.Lease
		demands := map[int64]time.Time{} // refused slots: until when their demand lasts
		next := 0                        // the next fresh partition
		// running counts the runs holding live leases, from Latest.
		running := func() int {
			runs := map[string]bool{}
			for a, err := range l.Latest(ctx, dag, first, first.Add(10000*time.Hour)) {
				if err != nil {
					t.Fatal(err)
				}
				if a.State == ledger.StateRunning && clock.Now().Before(a.LeaseUntil) {
					runs[a.Worker+" "+a.RunID] = true
				}
			}
			return len(runs)
		}
		waiting := func() bool {
			for _, until := range demands {
				if clock.Now().Before(until) {
					return true
				}
			}
			return false
		}
		claim := func(req ledger.ClaimRequest) {
			before, demand := running(), waiting()
			got, err := l.Claim(ctx, req)
			switch {
			case err == nil:
				held = append(held, got)
				delete(demands, req.Partitions[0].Start.Unix())
				if req.Record {
					return
				}
				if before >= limit {
					t.Fatalf("%s claim granted with %d runs at a limit of %d", req.Trigger, before, limit)
				}
				if demand && req.Backfill != "" {
					t.Fatalf("backfill claim granted while a slot's demand lasted")
				}
			case errors.Is(err, ledger.ErrLimited):
				if before < limit && !(demand && req.Backfill != "") {
					t.Fatalf("%s claim refused for the limit with %d runs at a limit of %d (demand %v): %v", req.Trigger, before, limit, demand, err)
				}
				if req.Demands() {
					demands[req.Partitions[0].Start.Unix()] = clock.Now().Add(req.Lease)
				}
			default:
				t.Fatalf("Claim: %v", err)
			}
		}
		fresh := func() tranche.TimePartition { next++; return part(next - 1) }
		t.Repeat(map[string]func(*rapid.T){
			"backfill": func(t *rapid.T) {
				claim(ledger.ClaimRequest{DAG: dag, Backfill: bf, Worker: "w", RunID: fmt.Sprint("b", next), Partitions: []tranche.TimePartition{fresh()}, Lease: lease, Policy: ledger.RerunFailed})
			},
			"slot": func(t *rapid.T) {
				claim(ledger.ClaimRequest{DAG: dag, Worker: "s", RunID: fmt.Sprint("s", next), Partitions: []tranche.TimePartition{fresh()}, Lease: lease, Policy: ledger.RerunNone,
					Trigger: rapid.SampledFrom([]ledger.Trigger{ledger.TriggerLive, ledger.TriggerCatchUp}).Draw(t, "trigger")})
			},
			"manual": func(t *rapid.T) {
				claim(ledger.ClaimRequest{DAG: dag, Worker: "m", RunID: fmt.Sprint("m", next), Partitions: []tranche.TimePartition{fresh()}, Lease: lease, Policy: ledger.RerunAll})
			},
			"record": func(t *rapid.T) {
				claim(ledger.ClaimRequest{DAG: dag, Worker: "s", RunID: fmt.Sprint("r", next), Partitions: []tranche.TimePartition{fresh()}, Lease: lease, Policy: ledger.RerunNone,
					Trigger: ledger.TriggerLive, Record: true})
			},
			"next": func(t *rapid.T) {
				want := rapid.IntRange(1, 5).Draw(t, "want")
				var jobs []ledger.Job
				for range rapid.IntRange(1, 6).Draw(t, "jobs") {
					p := fresh()
					jobs = append(jobs, ledger.Job{RunID: "n" + p.Key(), Partitions: []tranche.TimePartition{p}})
				}
				before, demand := running(), waiting()
				rev, _ := l.Revision(ctx, dag)
				grants, err := l.ClaimNext(ctx, ledger.NextRequest{DAG: dag, Backfill: bf, Worker: "n", Jobs: jobs, Want: want, Lease: lease, Policy: ledger.RerunFailed, Revision: rev})
				if err != nil {
					t.Fatal(err)
				}
				n := 0
				for _, g := range grants {
					if g.Lease != nil {
						n++
						held = append(held, g.Lease)
					}
				}
				allowed := min(want, max(limit-before, 0))
				if demand {
					allowed = 0
				}
				if n != min(allowed, len(jobs)) {
					t.Fatalf("ClaimNext of %d (want %d) granted %d with %d runs at a limit of %d (demand %v); want %d", len(jobs), want, n, before, limit, demand, min(allowed, len(jobs)))
				}
				if n == 0 && (len(grants) != 1 || !errors.Is(grants[0].Err, ledger.ErrLimited)) {
					t.Fatalf("ClaimNext granting nothing for the limit = %v; want the first job refused with ErrLimited", grants)
				}
			},
			"finish": func(t *rapid.T) {
				if len(held) == 0 {
					t.Skip("nothing held")
				}
				i := rapid.IntRange(0, len(held)-1).Draw(t, "lease")
				lz := held[i]
				held = append(held[:i], held[i+1:]...)
				outs := make([]ledger.Outcome, len(lz.Partitions))
				for k := range outs {
					outs[k] = ledger.Outcome{State: ledger.StateSucceeded}
				}
				_ = l.Finish(ctx, lz, outs) // fenced once taken over: nothing to check here
			},
			"advance": func(t *rapid.T) {
				clock.Advance(time.Duration(rapid.IntRange(1, 90).Draw(t, "seconds")) * time.Second)
			},
			"setLimit": func(t *rapid.T) {
				limit = rapid.IntRange(1, 4).Draw(t, "limit")
				if _, err := l.SetLimit(ctx, dag, ledger.Limit{Max: limit}); err != nil {
					t.Fatal(err)
				}
			},
			"": func(t *rapid.T) {
				got, err := l.Limit(ctx, dag)
				if err != nil {
					t.Fatal(err)
				}
				if want := running(); got.Running != want || got.Max != limit {
					t.Fatalf("Limit = %+v; want Max %d, Running %d (from Latest)", got, limit, want)
				}
			},
		})
	})
}
