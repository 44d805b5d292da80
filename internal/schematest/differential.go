package schematest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/ledgertest"
	"github.com/tranche-dev/tranche/ledger/memledger"
)

// CheckNextSameAsMemory runs random sequences of ClaimNext, Claim,
// Heartbeat, Finish, Release, plans, cancellations, resumptions and
// clock moves against l, whose clock is clock, and against the in-memory
// ledger on the same clock, each sequence on a DAG and backfills of its
// own, and wants the same answers, error messages included, and the same
// histories. Revision numbers are the ledgers' own (the in-memory ledger
// counts a revision for each job it claims, a SQL ledger one for each
// transaction), so it wants them to move at the same steps, never back,
// and plans are made at the revision each ledger had at the same step;
// RevisionIn must find a change after a plan in one ledger when it does
// in the other.
func CheckNextSameAsMemory(t *testing.T, l ledger.Ledger, clock *ledgertest.Clock) {
	sequence := 0
	rapid.Check(t, func(rt *rapid.T) {
		sequence++
		d := &differ{rt: rt, ctx: context.Background(), ledgers: [2]ledger.Ledger{memledger.New(clock.Now), l}, clock: clock,
			dag: fmt.Sprintf("dag-same-%d", sequence)}
		for _, b := range []string{"a", "b"} {
			d.backfills = append(d.backfills, fmt.Sprintf("bf-same-%d-%s", sequence, b))
		}
		for _, id := range d.backfills {
			d.both("PutBackfill "+id, func(_ int, l ledger.Ledger) error {
				_, err := l.PutBackfill(d.ctx, ledger.BackfillRecord{ID: id, DAG: d.dag, Window: "2026-07"})
				return err
			})
		}
		d.plan()
		rt.Repeat(map[string]func(*rapid.T){
			"next":      d.next,
			"claim":     d.claim,
			"finish":    d.finish,
			"heartbeat": d.heartbeat,
			"release":   d.release,
			"plan":      func(*rapid.T) { d.plan() },
			"cancel":    d.cancel,
			"advance": func(rt *rapid.T) {
				clock.Advance(time.Duration(rapid.IntRange(0, 3).Draw(rt, "half-minutes")) * 30 * time.Second)
			},
			"": d.compare,
		})
	})
}

// differ drives the in-memory ledger (ledgers[0]) and the SQL ledger
// (ledgers[1]) alike.
type differ struct {
	rt        *rapid.T
	ctx       context.Context
	ledgers   [2]ledger.Ledger
	clock     *ledgertest.Clock
	dag       string
	backfills []string
	plans     [][2]int64         // the revisions of each ledger at the same steps
	leases    [][2]*ledger.Lease // granted by both
	log       []string           // the steps so far, for a failure's message
	revisions [2]int64           // each ledger's revision after the last step
}

// diffParts is how many hourly partitions a sequence claims among.
const diffParts = 8

func diffPart(i int) tranche.TimePartition {
	return tranche.PartitionOf(tranche.Hour, time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i)*time.Hour))
}

// both runs f on each ledger and wants the same error, then the
// revisions moved (or not) alike.
func (d *differ) both(what string, f func(k int, l ledger.Ledger) error) [2]error {
	var errs [2]error
	for k, l := range d.ledgers {
		errs[k] = f(k, l)
	}
	d.log = append(d.log, fmt.Sprintf("%s: %v", what, errs[1]))
	if m, s := fmt.Sprint(errs[0]), fmt.Sprint(errs[1]); m != s {
		d.fatalf("%s:\n memory: %s\n sql:    %s", what, m, s)
	}
	d.checkRevisions(what)
	return errs
}

func (d *differ) fatalf(format string, args ...any) {
	d.rt.Fatalf(format+"\nthe steps:\n%s", append(args, strings.Join(d.log[max(0, len(d.log)-25):], "\n"))...)
}

// checkRevisions wants each ledger's revision to have moved after what
// if and only if the other's did, and neither to have fallen.
func (d *differ) checkRevisions(what string) {
	var now [2]int64
	for k, l := range d.ledgers {
		rev, err := l.Revision(d.ctx, d.dag)
		if err != nil {
			d.fatalf("Revision = %v", err)
		}
		if rev < d.revisions[k] {
			d.fatalf("%s: the revision of ledger %d fell from %d to %d", what, k, d.revisions[k], rev)
		}
		now[k] = rev
	}
	if (now[0] > d.revisions[0]) != (now[1] > d.revisions[1]) {
		d.fatalf("%s: the revisions went from %v to %v (memory, sql); want both to move or neither", what, d.revisions, now)
	}
	d.revisions = now
}

// plan records each ledger's revision, as a plan made now reads it.
func (d *differ) plan() {
	d.checkRevisions("plan")
	d.plans = append(d.plans, d.revisions)
	d.log = append(d.log, fmt.Sprintf("plan %d at %v", len(d.plans)-1, d.revisions))
}

// drawPlan draws one of the plans made so far.
func (d *differ) drawPlan(rt *rapid.T) (int, [2]int64) {
	i := rapid.IntRange(0, len(d.plans)-1).Draw(rt, "plan")
	return i, d.plans[i]
}

var (
	diffWorkers  = []string{"w-a", "w-b", "w-c"}
	diffPolicies = []ledger.RerunPolicy{"", ledger.RerunNone, ledger.RerunFailed, ledger.RerunAll}
)

// sameLease wants the two ledgers' answers to one claim to agree.
func (d *differ) sameLease(what string, m, s *ledger.Lease) {
	if (m == nil) != (s == nil) {
		d.fatalf("%s: memory lease %v, sql lease %v", what, m, s)
	}
	if m == nil {
		return
	}
	if !slices.Equal(m.Attempts, s.Attempts) || !m.Until.Equal(s.Until) || !slices.Equal(m.Partitions, s.Partitions) || m.RunID != s.RunID {
		d.fatalf("%s: leases differ: memory %v until %v, sql %v until %v", what, m.Attempts, m.Until, s.Attempts, s.Until)
	}
	d.leases = append(d.leases, [2]*ledger.Lease{m, s})
}

func (d *differ) next(rt *rapid.T) {
	picked := rapid.SliceOfNDistinct(rapid.IntRange(0, diffParts-1), 1, diffParts, rapid.ID[int]).Draw(rt, "partitions")
	slices.Sort(picked)
	var jobs []ledger.Job
	for i, p := range picked {
		if i > 0 && picked[i-1] == p-1 && rapid.Bool().Draw(rt, "chunk") {
			last := &jobs[len(jobs)-1]
			last.Partitions = append(last.Partitions, diffPart(p))
			continue
		}
		jobs = append(jobs, ledger.Job{RunID: fmt.Sprint("run-", p), Partitions: []tranche.TimePartition{diffPart(p)}})
	}
	descending := rapid.Bool().Draw(rt, "descending")
	if descending {
		slices.Reverse(jobs)
	}
	plan, revs := d.drawPlan(rt)
	req := ledger.NextRequest{DAG: d.dag, Backfill: rapid.SampledFrom(d.backfills).Draw(rt, "backfill"),
		Worker: rapid.SampledFrom(diffWorkers).Draw(rt, "worker"), Jobs: jobs, Descending: descending,
		Want: rapid.IntRange(1, 4).Draw(rt, "want"), Lease: time.Duration(rapid.IntRange(1, 3).Draw(rt, "minutes")) * time.Minute,
		Policy: rapid.SampledFrom(diffPolicies).Draw(rt, "policy")}
	var grants [2][]ledger.Grant
	what := fmt.Sprintf("ClaimNext(%s by %s, %s, descending %v, want %d, policy %q, plan %d)", describeJobs(jobs), req.Worker,
		req.Backfill, descending, req.Want, req.Policy, plan)
	d.both(what, func(k int, l ledger.Ledger) error {
		r := req
		r.Revision = revs[k]
		var err error
		grants[k], err = l.ClaimNext(d.ctx, r)
		return err
	})
	if len(grants[0]) != len(grants[1]) {
		d.fatalf("%s: %d grants in memory, %d in sql", what, len(grants[0]), len(grants[1]))
	}
	for i := range grants[0] {
		m, s := grants[0][i], grants[1][i]
		if fmt.Sprint(m.Err) != fmt.Sprint(s.Err) {
			d.fatalf("%s: grant %d:\n memory: %v\n sql:    %v", what, i, m.Err, s.Err)
		}
		d.sameLease(fmt.Sprintf("%s: grant %d", what, i), m.Lease, s.Lease)
	}
}

func describeJobs(jobs []ledger.Job) string {
	var s []string
	for _, j := range jobs {
		var ks []string
		for _, p := range j.Partitions {
			ks = append(ks, p.Start.Format("15h"))
		}
		s = append(s, strings.Join(ks, "+"))
	}
	return strings.Join(s, " ")
}

func (d *differ) claim(rt *rapid.T) {
	i := rapid.IntRange(0, diffParts-1).Draw(rt, "partition")
	ps := []tranche.TimePartition{diffPart(i)}
	if i+1 < diffParts && rapid.Bool().Draw(rt, "chunk") {
		ps = append(ps, diffPart(i+1))
	}
	plan, revs := d.drawPlan(rt)
	req := ledger.ClaimRequest{DAG: d.dag, Backfill: rapid.SampledFrom(d.backfills).Draw(rt, "backfill"),
		Worker: rapid.SampledFrom(diffWorkers).Draw(rt, "worker"), RunID: "run-claim", Partitions: ps,
		Lease: time.Duration(rapid.IntRange(1, 3).Draw(rt, "minutes")) * time.Minute, Policy: rapid.SampledFrom(diffPolicies).Draw(rt, "policy")}
	if bound := rapid.IntRange(-1, 2).Draw(rt, "not-before"); bound >= 0 { // none, or half a minute before now, now, after
		req.NotBefore = d.clock.Now().Add(time.Duration(bound-1) * 30 * time.Second)
	}
	var leases [2]*ledger.Lease
	what := fmt.Sprintf("Claim(%s by %s, %s, policy %q, plan %d, not before %v)", describeJobs([]ledger.Job{{Partitions: ps}}), req.Worker, req.Backfill, req.Policy, plan,
		req.NotBefore)
	d.both(what, func(k int, l ledger.Ledger) error {
		r := req
		r.Revision = revs[k]
		var err error
		leases[k], err = l.Claim(d.ctx, r)
		return err
	})
	d.sameLease(what, leases[0], leases[1])
}

// drawLease draws a lease both ledgers granted, and forgets it with
// forget.
func (d *differ) drawLease(rt *rapid.T, forget bool) ([2]*ledger.Lease, bool) {
	if len(d.leases) == 0 {
		return [2]*ledger.Lease{}, false
	}
	i := rapid.IntRange(0, len(d.leases)-1).Draw(rt, "lease")
	h := d.leases[i]
	if forget {
		d.leases = slices.Delete(d.leases, i, i+1)
	}
	return h, true
}

func (d *differ) finish(rt *rapid.T) {
	h, ok := d.drawLease(rt, rapid.Bool().Draw(rt, "forget"))
	if !ok {
		rt.Skip("no lease")
	}
	outcomes := make([]ledger.Outcome, len(h[0].Partitions))
	for i := range outcomes {
		outcomes[i] = ledger.Outcome{State: rapid.SampledFrom([]ledger.State{ledger.StateSucceeded, ledger.StateFailed, ledger.StateCanceled}).Draw(rt, "state"),
			Rows: int64(rapid.IntRange(0, 9).Draw(rt, "rows")), Err: rapid.SampledFrom([]string{"", "boom"}).Draw(rt, "error")}
	}
	d.both(fmt.Sprintf("Finish(%s of %s, %v)", describeJobs([]ledger.Job{{Partitions: h[0].Partitions}}), h[0].Worker, outcomes), func(k int, l ledger.Ledger) error {
		return l.Finish(d.ctx, h[k], outcomes)
	})
}

func (d *differ) heartbeat(rt *rapid.T) {
	h, ok := d.drawLease(rt, false)
	if !ok {
		rt.Skip("no lease")
	}
	extend := time.Duration(rapid.IntRange(1, 3).Draw(rt, "minutes")) * time.Minute
	d.both(fmt.Sprintf("Heartbeat(%s of %s, %v)", describeJobs([]ledger.Job{{Partitions: h[0].Partitions}}), h[0].Worker, extend), func(k int, l ledger.Ledger) error {
		return l.Heartbeat(d.ctx, h[k], extend)
	})
}

func (d *differ) release(rt *rapid.T) {
	h, ok := d.drawLease(rt, rapid.Bool().Draw(rt, "forget"))
	if !ok {
		rt.Skip("no lease")
	}
	d.both(fmt.Sprintf("Release(%s of %s)", describeJobs([]ledger.Job{{Partitions: h[0].Partitions}}), h[0].Worker), func(k int, l ledger.Ledger) error {
		return l.Release(d.ctx, h[k])
	})
}

func (d *differ) cancel(rt *rapid.T) {
	id := rapid.SampledFrom(d.backfills).Draw(rt, "backfill")
	resume := rapid.Bool().Draw(rt, "resume")
	d.both(fmt.Sprintf("cancel %s (resume %v)", id, resume), func(_ int, l ledger.Ledger) error {
		if resume {
			return l.ResumeBackfill(d.ctx, id)
		}
		return l.CancelBackfill(d.ctx, id, ledger.CancelOptions{})
	})
}

// compare wants the same histories of every partition, revisions left
// out, and RevisionIn to find a change after each plan in one ledger
// when it does in the other.
func (d *differ) compare(rt *rapid.T) {
	dump := func(l ledger.Ledger) string {
		var b strings.Builder
		for i := range diffParts {
			h, err := l.History(d.ctx, d.dag, diffPart(i).Start)
			if err != nil {
				d.fatalf("History = %v", err)
			}
			for _, a := range h {
				fmt.Fprintf(&b, "%s #%d %s %s %q started %s finished %s until %s rows %d backfill %q run %s\n", a.Key, a.Number, a.Worker, a.State,
					a.Err, a.Started.UTC().Format(time.RFC3339), a.Finished.UTC().Format(time.RFC3339), a.LeaseUntil.UTC().Format(time.RFC3339),
					a.Rows, a.Backfill, a.RunID)
			}
		}
		return b.String()
	}
	if m, s := dump(d.ledgers[0]), dump(d.ledgers[1]); m != s {
		d.fatalf("histories differ:\nmemory:\n%s\nsql:\n%s", m, s)
	}
	for i, revs := range d.plans {
		var found [2]bool
		for k, l := range d.ledgers {
			rev, err := l.RevisionIn(d.ctx, d.dag, diffPart(0).Start, diffPart(diffParts).Start, revs[k])
			if err != nil {
				d.fatalf("RevisionIn = %v", err)
			}
			found[k] = rev != 0
		}
		if found[0] != found[1] {
			d.fatalf("RevisionIn after plan %d: a change in memory %v, in sql %v", i, found[0], found[1])
		}
	}
}
