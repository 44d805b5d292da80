package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/ledgertest"
	"github.com/tranche-dev/tranche/ledger/memledger"
	"github.com/tranche-dev/tranche/ledger/sqlite"
)

// TestSameAsMemoryLedger runs random sequences of claims, heartbeats,
// finishes, cancellations and clock moves against the SQLite ledger and
// tranche's in-memory ledger on one clock, and wants the same answers,
// error messages included, and the same histories: sqlledger keeps its own
// copy of the claim and fencing rules, and this holds it to the original.
func TestSameAsMemoryLedger(t *testing.T) {
	r := rng(t)
	for run := range 6 {
		t.Run(fmt.Sprint(run), func(t *testing.T) {
			sameAsMemory(t, rand.New(rand.NewPCG(r.Uint64(), 0)), 250)
		})
	}
}

func sameAsMemory(t *testing.T, r *rand.Rand, steps int) {
	ctx := context.Background()
	clock := ledgertest.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	sql := openTemp(t, &sqlite.Options{Now: clock.Now})
	mem := memledger.New(clock.Now)
	ledgers := []ledger.Ledger{mem, sql}
	const dag, parts = "dag-differential", 10
	first := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	part := func(i int) tranche.TimePartition {
		return tranche.PartitionOf(tranche.Hour, first.Add(time.Duration(i)*time.Hour))
	}
	workers := []string{"w-a", "w-b", "w-c"}
	backfills := []string{"", "bf-1", "bf-2"}
	type held struct{ leases [2]*ledger.Lease }
	var leases []held
	var log []string

	same := func(what string, errs [2]error) {
		t.Helper()
		log = append(log, fmt.Sprintf("%s: %v", what, errs[1]))
		m, s := fmt.Sprint(errs[0]), fmt.Sprint(errs[1])
		if m != s {
			t.Fatalf("%s:\n memory: %s\n sqlite: %s\nthe last steps:\n%s", what, m, s, strings.Join(log[max(0, len(log)-20):], "\n"))
		}
	}
	for range steps {
		switch op := r.IntN(10); {
		case op < 4: // claim
			n := 1 + r.IntN(3)
			var ps []tranche.TimePartition
			for _, i := range r.Perm(parts)[:n] {
				ps = append(ps, part(i))
			}
			req := ledger.ClaimRequest{DAG: dag, Backfill: backfills[r.IntN(3)], Worker: workers[r.IntN(3)], RunID: "run",
				Partitions: ps, Lease: time.Duration(1+r.IntN(3)) * time.Minute,
				Policy: []ledger.RerunPolicy{"", ledger.RerunNone, ledger.RerunFailed, ledger.RerunAll}[r.IntN(4)]}
			if r.IntN(2) == 0 {
				rev, err := mem.Revision(ctx, dag)
				if err != nil {
					t.Fatal(err)
				}
				req.Revision = rev - int64(r.IntN(3))
			}
			var h held
			var errs [2]error
			for k, l := range ledgers {
				h.leases[k], errs[k] = l.Claim(ctx, req)
			}
			same(fmt.Sprintf("Claim(%s by %s, %s, policy %q, revision %d)", keys(ps), req.Worker, req.Backfill, req.Policy, req.Revision), errs)
			if errs[0] == nil {
				if fmt.Sprint(h.leases[0].Attempts, h.leases[0].Until) != fmt.Sprint(h.leases[1].Attempts, h.leases[1].Until) {
					t.Fatalf("leases differ: memory %v until %v, sqlite %v until %v", h.leases[0].Attempts, h.leases[0].Until, h.leases[1].Attempts, h.leases[1].Until)
				}
				leases = append(leases, h)
			}
		case op < 5 && len(leases) > 0: // heartbeat
			h := leases[r.IntN(len(leases))]
			d := time.Duration(1+r.IntN(3)) * time.Minute
			var errs [2]error
			for k, l := range ledgers {
				errs[k] = l.Heartbeat(ctx, h.leases[k], d)
			}
			same(fmt.Sprintf("Heartbeat(%s of %s)", keys(h.leases[0].Partitions), h.leases[0].Worker), errs)
		case op < 7 && len(leases) > 0: // finish
			i := r.IntN(len(leases))
			h := leases[i]
			outcomes := make([]ledger.Outcome, len(h.leases[0].Partitions))
			for j := range outcomes {
				outcomes[j] = ledger.Outcome{State: []ledger.State{ledger.StateSucceeded, ledger.StateFailed, ledger.StateCanceled}[r.IntN(3)],
					Rows: int64(r.IntN(100)), Err: []string{"", "boom"}[r.IntN(2)]}
			}
			var errs [2]error
			for k, l := range ledgers {
				errs[k] = l.Finish(ctx, h.leases[k], outcomes)
			}
			same(fmt.Sprintf("Finish(%s of %s)", keys(h.leases[0].Partitions), h.leases[0].Worker), errs)
			if r.IntN(3) > 0 {
				leases = append(leases[:i], leases[i+1:]...)
			}
		case op < 8: // backfill records
			id, cancel := backfills[1+r.IntN(2)], r.IntN(4) == 0
			var errs [2]error
			for k, l := range ledgers {
				if cancel {
					errs[k] = l.CancelBackfill(ctx, id, ledger.CancelOptions{})
				} else {
					_, errs[k] = l.PutBackfill(ctx, ledger.BackfillRecord{ID: id, DAG: dag, Window: "2026-02"})
				}
			}
			same(fmt.Sprintf("CancelBackfill %v or PutBackfill(%s)", cancel, id), errs)
		default:
			clock.Advance(time.Duration(r.IntN(4)) * 30 * time.Second)
		}
		compareLedgers(t, ctx, mem, sql, dag, part(0).Start, part(parts).Start, log)
	}
}

func keys(ps []tranche.TimePartition) string {
	var ks []string
	for _, p := range ps {
		ks = append(ks, p.Key())
	}
	return strings.Join(ks, " ")
}

// compareLedgers wants the same revision, latest attempts and histories.
func compareLedgers(t *testing.T, ctx context.Context, mem, sql ledger.Ledger, dag string, from, to time.Time, log []string) {
	t.Helper()
	dump := func(l ledger.Ledger) string {
		var b strings.Builder
		rev, err := l.Revision(ctx, dag)
		fmt.Fprintf(&b, "revision %d %v\n", rev, err)
		for a, err := range l.Latest(ctx, dag, from, to) {
			if err != nil {
				t.Fatal(err)
			}
			h, err := l.History(ctx, dag, a.Start)
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range h {
				fmt.Fprintf(&b, "%s #%d %s %s %q started %s finished %s until %s rows %d rev %d backfill %q\n", a.Key, a.Number, a.Worker, a.State, a.Err,
					a.Started.UTC().Format(time.RFC3339), a.Finished.UTC().Format(time.RFC3339), a.LeaseUntil.UTC().Format(time.RFC3339), a.Rows, a.Revision, a.Backfill)
			}
		}
		bs, err := l.Backfills(ctx)
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Fatal(err)
		}
		for _, r := range bs {
			fmt.Fprintf(&b, "backfill %s canceled %v\n", r.ID, r.Canceled)
		}
		return b.String()
	}
	if m, s := dump(mem), dump(sql); m != s {
		t.Fatalf("ledgers differ after:\n%s\nmemory:\n%s\nsqlite:\n%s", strings.Join(log[max(0, len(log)-20):], "\n"), m, s)
	}
}
