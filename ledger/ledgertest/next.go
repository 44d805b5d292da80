package ledgertest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"pgregory.net/rapid"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/ledger"
)

// The checks of ClaimNext and Release. ClaimNext is judged against the
// rules a worker relies on: each grant as Claim would judge its job, the
// cursor passing over what another worker was handed, and nothing else;
// Release against a history that reads as if the lease had never been
// claimed.

// job returns a job of part(i) for each i, oldest first, run by
// "run-job-N" where N is the first i.
func job(is ...int) ledger.Job {
	return ledger.Job{RunID: fmt.Sprintf("run-job-%d", is[0]), Partitions: parts(is...)}
}

// span returns jobs of one partition each, part(lo) to part(hi-1), oldest
// first.
func span(lo, hi int) []ledger.Job {
	var js []ledger.Job
	for i := lo; i < hi; i++ {
		js = append(js, job(i))
	}
	return js
}

// reversed returns the jobs of js newest first.
func reversed(js []ledger.Job) []ledger.Job {
	out := slices.Clone(js)
	slices.Reverse(out)
	return out
}

// nextReq returns a request by worker of the suite's DAG and backfill for
// the first want claimable jobs of js, oldest first, by a plan made at
// revision.
func nextReq(worker string, js []ledger.Job, want int, revision int64) ledger.NextRequest {
	return ledger.NextRequest{
		DAG: suiteDAG, Backfill: suiteBackfill, Worker: worker, Jobs: js, Want: want,
		Lease: suiteLease, Policy: ledger.RerunFailed, Revision: revision,
	}
}

// descending returns r asking for its jobs newest first, which it then
// holds in that order.
func descending(r ledger.NextRequest) ledger.NextRequest {
	r.Descending = true
	return r
}

func describeJob(j ledger.Job) string {
	if len(j.Partitions) == 0 {
		return "[]"
	}
	keys := make([]string, len(j.Partitions))
	for i, p := range j.Partitions {
		keys[i] = p.Key()
	}
	return strings.Join(keys, "+")
}

func describeNext(r ledger.NextRequest) string {
	jobs := make([]string, len(r.Jobs))
	for i, j := range r.Jobs {
		jobs[i] = describeJob(j)
	}
	order := "oldest first"
	if r.Descending {
		order = "newest first"
	}
	return fmt.Sprintf("ClaimNext(dag %q, backfill %q, worker %q, jobs [%s] %s, want %d, lease %v, policy %q, revision %d)",
		r.DAG, r.Backfill, r.Worker, strings.Join(jobs, " "), order, r.Want, r.Lease, r.Policy, r.Revision)
}

// grantCode is what a grant did with its job: L for a lease, P for a job
// passed over (its error names it as handed to another worker), R for a
// job refused by the claim rules.
func grantCode(j ledger.Job, g ledger.Grant) byte {
	switch {
	case g.Lease != nil:
		return 'L'
	case g.Err != nil && strings.Contains(g.Err.Error(), ledger.PassedError(j).Error()):
		return 'P'
	}
	return 'R'
}

// grantCodes returns the codes of grants, one letter per examined job.
func grantCodes(r ledger.NextRequest, grants []ledger.Grant) string {
	var b strings.Builder
	for i, g := range grants {
		if i < len(r.Jobs) {
			b.WriteByte(grantCode(r.Jobs[i], g))
		}
	}
	return b.String()
}

func describeGrants(r ledger.NextRequest, grants []ledger.Grant) string {
	var b strings.Builder
	for i, g := range grants {
		name := "?"
		if i < len(r.Jobs) {
			name = describeJob(r.Jobs[i])
		}
		switch {
		case g.Lease != nil:
			fmt.Fprintf(&b, "\t[%d] %s: %s\n", i, name, describeLease(g.Lease))
		default:
			fmt.Fprintf(&b, "\t[%d] %s: %v\n", i, name, g.Err)
		}
	}
	if len(grants) == 0 {
		b.WriteString("\t(none)\n")
	}
	return b.String()
}

// grantProblems checks what every answer of ClaimNext must be, whatever
// the ledger held: one grant per examined job, a prefix of r.Jobs, each
// a lease of its job or an error matching ErrNotClaimable; no more than
// r.Want leases, and no job examined past the Want-th lease or left
// unexamined before it. now is the ledger's time of the call, by which
// each lease's Until is judged; zero to leave Until alone.
func grantProblems(r ledger.NextRequest, grants []ledger.Grant, now time.Time) error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if len(grants) == 0 || len(grants) > len(r.Jobs) {
		bad("%d grants for %d jobs; want 1 to %d, one for each job examined", len(grants), len(r.Jobs), len(r.Jobs))
	}
	claimed := 0
	for i, g := range grants {
		if i >= len(r.Jobs) {
			break
		}
		j := r.Jobs[i]
		switch {
		case g.Lease == nil && g.Err == nil:
			bad("grant %d (%s) has neither a lease nor an error", i, describeJob(j))
			continue
		case g.Lease != nil && g.Err != nil:
			bad("grant %d (%s) has both %s and error %v", i, describeJob(j), describeLease(g.Lease), g.Err)
		case g.Lease == nil:
			if !errors.Is(g.Err, ledger.ErrNotClaimable) {
				bad("grant %d (%s): %v; want an error matching ErrNotClaimable", i, describeJob(j), g.Err)
			}
			continue
		}
		claimed++
		l := g.Lease
		if l.DAG != r.DAG || l.Backfill != r.Backfill || l.Worker != r.Worker || l.RunID != j.RunID {
			bad("grant %d: %s names dag %q, backfill %q, worker %q, run %q; want %q, %q, %q, %q",
				i, describeLease(l), l.DAG, l.Backfill, l.Worker, l.RunID, r.DAG, r.Backfill, r.Worker, j.RunID)
		}
		if !slices.EqualFunc(l.Partitions, j.Partitions, samePartition) || len(l.Attempts) != len(j.Partitions) {
			bad("grant %d: %s; want the partitions of job %s, an attempt for each", i, describeLease(l), describeJob(j))
		}
		for _, n := range l.Attempts {
			if n < 1 {
				bad("grant %d: %s; want attempt numbers from 1", i, describeLease(l))
				break
			}
		}
		if !now.IsZero() && !l.Until.Equal(now.Add(r.Lease)) {
			bad("grant %d: %s until %v; want the ledger clock's now + lease = %v", i, describeLease(l), l.Until, now.Add(r.Lease))
		}
	}
	switch {
	case claimed > r.Want:
		bad("%d leases; want at most Want = %d", claimed, r.Want)
	case claimed == r.Want && len(grants) > 0 && grants[len(grants)-1].Lease == nil:
		bad("the last grant is not a lease though Want = %d leases came before it: no job is examined past Want", r.Want)
	case claimed < r.Want && len(grants) < len(r.Jobs):
		bad("%d leases of Want = %d, and %d of %d jobs examined: the call stopped early", claimed, r.Want, len(grants), len(r.Jobs))
	}
	return errors.Join(errs...)
}

func samePartition(a, b tranche.TimePartition) bool {
	return a.Start.Equal(b.Start) && a.End.Equal(b.End)
}

// claimNext calls ClaimNext with r and fails the test unless it answers
// with grants that keep grantProblems' rules.
func (s *ledgerSuite) claimNext(r ledger.NextRequest) []ledger.Grant {
	s.t.Helper()
	now := s.clock.Now()
	grants, err := s.l.ClaimNext(s.ctx, r)
	if err != nil {
		s.t.Fatalf("%s = %v; want grants", describeNext(r), err)
	}
	if err := grantProblems(r, grants, now); err != nil {
		s.t.Fatalf("%s:\n%s%v", describeNext(r), describeGrants(r, grants), err)
	}
	return grants
}

// expect calls ClaimNext with r and wants the grants that codes spell
// (see grantCode): L for a lease, P for a job passed over, R for one the
// claim rules refuse. A job passed over or refused keeps its history.
func (s *ledgerSuite) expect(r ledger.NextRequest, codes string) []ledger.Grant {
	s.t.Helper()
	var ps []tranche.TimePartition
	for i, j := range r.Jobs {
		if i < len(codes) && codes[i] != 'L' {
			ps = append(ps, j.Partitions...)
		}
	}
	before := s.snapshot(ps...)
	grants := s.claimNext(r)
	if got := grantCodes(r, grants); got != codes {
		s.t.Fatalf("%s = %s:\n%swant %s (L a lease, P passed over, R refused by the claim rules)",
			describeNext(r), got, describeGrants(r, grants), codes)
	}
	// Only the partitions not leased: the revision and Latest move with
	// the leases.
	after := s.snapshot(ps...)
	for i := range before.histories {
		if d := diffAttempts(before.histories[i], after.histories[i]); d != "" {
			s.t.Errorf("%s changed the history of %s, which it did not lease:\n%s", describeNext(r), before.parts[i].Key(), d)
		}
	}
	return grants
}

// leases returns the leases of grants, in order.
func leases(grants []ledger.Grant) []*ledger.Lease {
	var out []*ledger.Lease
	for _, g := range grants {
		if g.Lease != nil {
			out = append(out, g.Lease)
		}
	}
	return out
}

// wantAttempts fails the test unless the lease holds the attempt numbers
// want.
func (s *ledgerSuite) wantAttempts(lease *ledger.Lease, want ...int) {
	s.t.Helper()
	if !slices.Equal(lease.Attempts, want) {
		s.t.Errorf("%s; want attempts %v", describeLease(lease), want)
	}
}

func testClaimNextFresh(s *ledgerSuite) {
	s.clock.Advance(7 * time.Second) // Until from the ledger's clock, not the suite's start
	now := s.clock.Now()
	rev0 := s.revision()
	r := nextReq(alpha, span(0, 6), 3, rev0)
	grants := s.expect(r, "LLL")
	rev1 := s.revision()
	if rev1 <= rev0 {
		s.t.Errorf("Revision %d after ClaimNext granted 3 jobs; want more than %d", rev1, rev0)
	}
	for i, g := range grants {
		p := part(i)
		s.wantAttempts(g.Lease, 1)
		a := s.only(s.history(p), "History after ClaimNext")
		s.checkAttempt(a, p, 1, ledger.StateRunning, alpha)
		if a.Backfill != suiteBackfill || a.RunID != r.Jobs[i].RunID || !a.Started.Equal(now) ||
			!a.LeaseUntil.Equal(now.Add(suiteLease)) || !a.Finished.IsZero() {
			s.t.Errorf("attempt %s; want backfill %q, run %q, started %v, lease until %v, running",
				formatAttempt(a), suiteBackfill, r.Jobs[i].RunID, now, now.Add(suiteLease))
		}
		if a.Revision <= rev0 || a.Revision > rev1 {
			s.t.Errorf("attempt %s; want a revision in (%d, %d]", formatAttempt(a), rev0, rev1)
		}
	}
	for i := 3; i < 6; i++ {
		if h := s.history(part(i)); len(h) != 0 {
			s.t.Errorf("History of %s, left unexamined (Want was reached):\n%swant none", part(i).Key(), formatAttempts(h))
		}
	}
	if got := s.latest(suiteFrom, suiteTo); len(got) != 3 {
		s.t.Errorf("Latest after ClaimNext of 3 jobs:\n%swant 3 attempts", formatAttempts(got))
	}

	// The jobs left unexamined can be given again, and a worker's plan
	// made now is not passed over the jobs examined before it.
	grants = s.expect(nextReq(beta, span(0, 6), 10, s.revision()), "RRRLLL")
	for i, g := range grants[:3] {
		if !strings.Contains(g.Err.Error(), alpha) {
			s.t.Errorf("grant %d: %v; want the refusal to name the holder %q", i, g.Err, alpha)
		}
	}
	for _, l := range leases(grants) {
		s.wantAttempts(l, 1)
	}
}

// testClaimNextWantMore asks for more jobs than are claimable: every job
// is examined, each granted or refused.
func testClaimNextWantMore(s *ledgerSuite) {
	s.finish(s.claim(req(gamma, part(1))), succeeded)
	s.claim(req(gamma, part(3)))
	grants := s.expect(nextReq(alpha, span(0, 5), 10, s.revision()), "LRLRL")
	if !strings.Contains(grants[3].Err.Error(), gamma) {
		s.t.Errorf("grant 3: %v; want the refusal to name the holder %q", grants[3].Err, gamma)
	}
	// Nothing left to claim: every job examined, none granted.
	s.expect(nextReq(beta, span(0, 5), 1, s.revision()), "RRRRR")
	// One job, wanted many times over.
	s.expect(nextReq(beta, span(5, 6), 100, s.revision()), "L")
}

// testClaimNextPolicies judges each job as Claim judges a partition: for
// each rerun policy and each state of a partition's latest attempt,
// ClaimNext grants it or refuses it as Claim does.
func testClaimNextPolicies(s *ledgerSuite) {
	states := []ledger.State{ledger.StatePending, ledger.StateSucceeded, ledger.StateFailed, ledger.StateCanceled, ledger.StateRunning}
	policies := []ledger.RerunPolicy{ledger.RerunNone, ledger.RerunFailed, "", ledger.RerunAll}
	i := 0
	for _, pol := range policies {
		for _, prior := range states {
			k, p := i, part(i)
			i++
			s.t.run(fmt.Sprintf("%s-after-%s", cmpOr(string(pol), "default"), prior), func(t testingT) {
				s := &ledgerSuite{t: t, ctx: s.ctx, clock: s.clock, l: s.l}
				switch prior {
				case ledger.StatePending:
				case ledger.StateRunning:
					s.claim(req(gamma, p))
				default:
					s.finish(s.claim(req(gamma, p)), prior)
				}
				r := nextReq(alpha, []ledger.Job{job(k)}, 1, s.revision()) // a plan made now
				r.Policy = pol
				c := r.Claim(r.Jobs[0])
				var latest *ledger.Attempt
				if h := s.history(p); len(h) > 0 {
					latest = &h[len(h)-1]
				}
				if c.Judge(latest, s.clock.Now()) != ledger.ActionRun {
					s.expect(r, "R")
					s.refuse(c, "") // Claim agrees
					return
				}
				lease := s.expect(r, "L")[0].Lease
				s.wantAttempts(lease, len(s.history(p)))
			})
		}
	}

	// RerunAll's bound: a partition that succeeded after the plan was
	// made is not run again by it. Each request is of a backfill of its
	// own, whose cursor has not moved, so that the claim rules alone
	// decide.
	p := part(i)
	fresh := 0
	nextOf := func(worker string, policy ledger.RerunPolicy, revision int64, js ...ledger.Job) ledger.NextRequest {
		fresh++
		r := nextReq(worker, js, 1, revision)
		r.Backfill = fmt.Sprintf("%s-bound-%d", suiteBackfill, fresh)
		r.Policy = policy
		return r
	}
	s.finish(s.claim(req(gamma, p)), succeeded)
	plan := s.revision()
	lease := s.expect(nextOf(alpha, ledger.RerunAll, plan, job(i)), "L")[0].Lease
	s.wantAttempts(lease, 2)
	s.finish(lease, succeeded)
	s.expect(nextOf(beta, ledger.RerunAll, plan, job(i)), "R") // succeeded after the plan
	s.expect(nextOf(beta, ledger.RerunAll, 0, job(i)), "R")    // a plan older than either success
	s.wantAttempts(s.expect(nextOf(beta, ledger.RerunAll, s.revision(), job(i)), "L")[0].Lease, 3)

	// A partition running when the plan was made and succeeding right
	// after it is not run again by that plan.
	q := part(i + 1)
	running := s.claim(req(gamma, q))
	plan = s.revision()
	s.finish(running, succeeded)
	s.expect(nextOf(alpha, ledger.RerunAll, plan, job(i+1)), "R")
}

// testClaimNextTakeover takes over an expired lease through ClaimNext, as
// Claim does: the stale attempt failed with the takeover's reason, the
// new one numbered after it.
func testClaimNextTakeover(s *ledgerSuite) {
	p := part(0)
	t0 := s.clock.Now()
	old := s.claim(req(alpha, p))
	s.clock.Advance(suiteLease) // the lease expires at Until
	t1 := s.clock.Now()
	rev0 := s.revision()
	grants := s.expect(nextReq(beta, span(0, 2), 2, rev0), "LL")
	s.wantAttempts(grants[0].Lease, 2)
	s.wantAttempts(grants[1].Lease, 1)
	h := s.history(p)
	if len(h) != 2 {
		s.t.Fatalf("History after a takeover through ClaimNext:\n%swant 2 attempts", formatAttempts(h))
	}
	s.checkAttempt(h[0], p, 1, ledger.StateFailed, alpha)
	s.checkAttempt(h[1], p, 2, ledger.StateRunning, beta)
	if want := ledger.TakeoverReason(old.Until, beta); h[0].Err != want {
		s.t.Errorf("stale attempt's error %q; want %q", h[0].Err, want)
	}
	if h[0].Finished.Before(t0) || h[0].Finished.After(t1) || h[0].Revision <= rev0 {
		s.t.Errorf("stale attempt %s; want finished in [%v, %v], at a revision above %d", formatAttempt(h[0]), t0, t1, rev0)
	}
	if !h[1].Started.Equal(t1) || !h[1].LeaseUntil.Equal(t1.Add(suiteLease)) {
		s.t.Errorf("new attempt %s; want started %v, lease until %v", formatAttempt(h[1]), t1, t1.Add(suiteLease))
	}
	s.fenced(old)
	s.finish(grants[0].Lease, succeeded)
}

// testClaimNextCursor checks the cursor in each order: a worker whose
// plan is older than the cursor's last move is passed over the jobs at or
// before it, a worker whose plan is newer is not.
func testClaimNextCursor(s *ledgerSuite) {
	for _, desc := range []bool{false, true} {
		name, order := "oldest-first", func(r ledger.NextRequest) ledger.NextRequest { return r }
		at := func(i int) int { return i } // the i-th partition in the order
		if desc {
			name, order = "newest-first", descending
			at = func(i int) int { return 99 - i }
		}
		s.t.run(name, func(t testingT) {
			s := &ledgerSuite{t: t, ctx: s.ctx, clock: s.clock, l: s.l}
			var all []ledger.Job // ten jobs in the order, starting at part(0) or part(99)
			for i := range 10 {
				all = append(all, job(at(i)))
			}
			backfill := suiteBackfill + "-" + name
			ask := func(worker string, js []ledger.Job, want int, revision int64) ledger.NextRequest {
				r := order(nextReq(worker, js, want, revision))
				r.Backfill = backfill
				return r
			}
			plan := s.revision()
			s.expect(ask(alpha, all, 3, plan), "LLL")
			// beta planned with alpha, before alpha's call: the jobs up to
			// the cursor, at all[2], are passed over, the one at the
			// cursor too.
			grants := s.expect(ask(beta, all, 3, plan), "PPPLLL")
			for i := range 3 {
				s.checkAttempt(s.only(s.history(part(at(i))), "History of a job passed over"), part(at(i)), 1, ledger.StateRunning, alpha)
			}
			for _, l := range leases(grants) {
				s.wantAttempts(l, 1)
			}
			// A plan made after the cursor's last move is not passed
			// over: the claim rules judge every job again.
			s.expect(ask(gamma, all, 2, s.revision()), "RRRRRRLL")
			// Jobs that fall between those examined are passed over by
			// their place in the order, not by being named before: the
			// cursor is at all[7].
			s.expect(ask(alpha, []ledger.Job{job(at(5)), job(at(6)), job(at(8)), job(at(9))}, 1, plan), "PPL")
			s.expect(ask(beta, []ledger.Job{job(at(7)), job(at(8)), job(at(9))}, 1, plan), "PPL") // the cursor at all[8]
		})
	}
}

// testClaimNextCursorAfterRefusals moves the cursor over jobs refused by
// the claim rules: they were examined for a worker, so a worker of an
// older plan is passed over them, and a plan made after the call is not.
func testClaimNextCursorAfterRefusals(s *ledgerSuite) {
	s.claim(req(gamma, part(0), part(1)))
	plan := s.revision()
	s.expect(nextReq(alpha, span(0, 2), 1, plan), "RR")
	s.expect(nextReq(beta, span(0, 3), 1, plan), "PPL")
	s.expect(nextReq(alpha, span(0, 4), 1, s.revision()), "RRRL")
}

// testClaimNextCursors keeps a cursor for each DAG, backfill and order:
// one moving leaves the others where they were.
func testClaimNextCursors(s *ledgerSuite) {
	plan := s.revision()
	all := span(0, 10)
	s.expect(nextReq(alpha, all, 3, plan), "LLL")                      // oldest first: the cursor at part(2)
	s.expect(descending(nextReq(beta, reversed(all), 3, plan)), "LLL") // newest first: part(9), 8, 7
	s.expect(nextReq(gamma, all, 2, plan), "PPPLL")                    // oldest first: the cursor at part(4)
	s.expect(descending(nextReq(gamma, reversed(all), 1, plan)), "PPPL")

	// Another backfill of the DAG: its cursor never moved, so the claim
	// rules refuse the jobs held, rather than passing them over.
	other := nextReq(alpha, span(0, 5), 1, plan)
	other.Backfill = suiteBackfill + "-other"
	s.expect(other, "RRRRR")
	// Another DAG: its partitions and cursor are its own.
	other = nextReq(alpha, span(0, 3), 3, 0)
	other.DAG = "tranchetest-other-dag"
	s.expect(other, "LLL")
	s.expect(nextReq(beta, span(0, 7), 1, plan), "PPPPPL") // this DAG's cursor stayed at part(4)
}

// testClaimNextRerunAfterPass runs a backfill again after its first pass
// ended: a plan made after the cursor's last move starts from the first
// job, and the workers of that plan share it through the cursor as those
// of the first did.
func testClaimNextRerunAfterPass(s *ledgerSuite) {
	plan := s.revision()
	grants := s.expect(nextReq(alpha, span(0, 4), 10, plan), "LLLL")
	for _, l := range leases(grants) {
		s.finish(l, ledger.StateFailed)
	}
	s.expect(nextReq(beta, span(0, 4), 10, plan), "PPPP") // the first pass is over

	rerun := s.revision()
	for _, l := range leases(s.expect(nextReq(beta, span(0, 4), 2, rerun), "LL")) {
		s.wantAttempts(l, 2)
	}
	for _, l := range leases(s.expect(nextReq(gamma, span(0, 4), 2, rerun), "PPLL")) {
		s.wantAttempts(l, 2)
	}
}

// testClaimNextChunks claims each job all or none: a chunk with one
// partition held or succeeded is refused, and none of its partitions
// gains an attempt.
func testClaimNextChunks(s *ledgerSuite) {
	s.claim(req(gamma, part(1)))
	grants := s.expect(nextReq(alpha, []ledger.Job{job(0, 1, 2), job(3, 4), job(5)}, 2, s.revision()), "RLL")
	if !strings.Contains(grants[0].Err.Error(), gamma) {
		s.t.Errorf("grant 0: %v; want the refusal to name the holder %q", grants[0].Err, gamma)
	}
	for _, i := range []int{0, 2} {
		if h := s.history(part(i)); len(h) != 0 {
			s.t.Errorf("History of %s, in a refused chunk:\n%swant none", part(i).Key(), formatAttempts(h))
		}
	}
	s.wantAttempts(grants[1].Lease, 1, 1)
	s.wantAttempts(grants[2].Lease, 1)

	s.finish(s.claim(req(gamma, part(7))), succeeded)
	s.finish(s.claim(req(gamma, part(9))), ledger.StateFailed)
	grants = s.expect(nextReq(alpha, []ledger.Job{job(6, 7, 8), job(9, 10)}, 2, s.revision()), "RL")
	s.wantAttempts(grants[1].Lease, 2, 1)
	if h := s.history(part(8)); len(h) != 0 {
		s.t.Errorf("History of %s, in a chunk refused for its succeeded neighbour:\n%swant none", part(8).Key(), formatAttempts(h))
	}

	// Newest first, the cursor is at the start of a chunk, its oldest
	// partition: a worker of the same plan is passed over the partitions
	// of the chunks examined, whatever the chunks it asks for.
	plan := s.revision()
	s.expect(descending(nextReq(alpha, []ledger.Job{job(15, 16), job(13, 14)}, 2, plan)), "LL")
	s.expect(descending(nextReq(beta, []ledger.Job{job(14), job(13), job(12)}, 1, plan)), "PPL")
}

// testClaimNextCanceledBackfill fails the whole call of a canceled
// backfill, claiming nothing and leaving the cursor alone, until it is
// resumed.
func testClaimNextCanceledBackfill(s *ledgerSuite) {
	if _, err := s.l.PutBackfill(s.ctx, ledger.BackfillRecord{ID: suiteBackfill, DAG: suiteDAG}); err != nil {
		s.t.Fatal(err)
	}
	plan := s.revision()
	s.expect(nextReq(alpha, span(0, 4), 1, plan), "L")
	if err := s.l.CancelBackfill(s.ctx, suiteBackfill, ledger.CancelOptions{}); err != nil {
		s.t.Fatal(err)
	}
	for _, r := range []ledger.NextRequest{
		nextReq(beta, span(0, 4), 2, plan),
		nextReq(beta, span(1, 4), 2, s.revision()),
		descending(nextReq(beta, reversed(span(0, 4)), 2, s.revision())),
	} {
		before := s.snapshot(parts(0, 1, 2, 3)...)
		grants, err := s.l.ClaimNext(s.ctx, r)
		if !errors.Is(err, ledger.ErrBackfillCanceled) || !errors.Is(err, ledger.ErrNotClaimable) {
			s.t.Errorf("%s of a canceled backfill = %v; want an error matching ErrBackfillCanceled and ErrNotClaimable", describeNext(r), err)
		}
		if grants != nil {
			s.t.Errorf("%s of a canceled backfill granted:\n%swant no grants", describeNext(r), describeGrants(r, grants))
		}
		s.unchanged(before, describeNext(r)+" of a canceled backfill")
	}
	// Other backfills go on.
	other := nextReq(beta, span(4, 5), 1, s.revision())
	other.Backfill = suiteBackfill + "-other"
	s.expect(other, "L")

	if err := s.l.ResumeBackfill(s.ctx, suiteBackfill); err != nil {
		s.t.Fatal(err)
	}
	// The refused calls did not move the cursor: it is still at part(0),
	// where alpha's call left it.
	s.expect(nextReq(beta, span(0, 4), 2, plan), "PLL")
}

// testBadClaimNext refuses malformed requests without writing anything or
// moving the cursor, with errors matching neither ErrNotClaimable nor
// ErrFenced.
func testBadClaimNext(s *ledgerSuite) {
	s.claim(req(gamma, part(9))) // something to leave alone
	cases := []struct {
		name   string
		change func(*ledger.NextRequest)
	}{
		{"no backfill", func(r *ledger.NextRequest) { r.Backfill = "" }},
		{"no DAG", func(r *ledger.NextRequest) { r.DAG = "" }},
		{"no worker", func(r *ledger.NextRequest) { r.Worker = "" }},
		{"want 0", func(r *ledger.NextRequest) { r.Want = 0 }},
		{"want -1", func(r *ledger.NextRequest) { r.Want = -1 }},
		{"nil jobs", func(r *ledger.NextRequest) { r.Jobs = nil }},
		{"empty jobs", func(r *ledger.NextRequest) { r.Jobs = []ledger.Job{} }},
		{"a job of no partitions", func(r *ledger.NextRequest) { r.Jobs = []ledger.Job{job(0), {RunID: "run-empty"}} }},
		{"a zero partition", func(r *ledger.NextRequest) {
			r.Jobs = []ledger.Job{job(0), {RunID: "run-zero", Partitions: []tranche.TimePartition{{}}}}
		}},
		{"an empty partition", func(r *ledger.NextRequest) {
			r.Jobs = []ledger.Job{{RunID: "run-empty", Partitions: []tranche.TimePartition{{Start: part(0).Start, End: part(0).Start, Granularity: tranche.Hour}}}}
		}},
		{"zero lease", func(r *ledger.NextRequest) { r.Lease = 0 }},
		{"unknown policy", func(r *ledger.NextRequest) { r.Policy = "sometimes" }},
		{"oldest first out of order", func(r *ledger.NextRequest) { r.Jobs = []ledger.Job{job(0), job(2), job(1)} }},
		{"newest first out of order", func(r *ledger.NextRequest) {
			r.Descending = true
			r.Jobs = []ledger.Job{job(2), job(0), job(1)}
		}},
		{"oldest first given newest first", func(r *ledger.NextRequest) { r.Jobs = reversed(span(0, 3)) }},
		{"newest first given oldest first", func(r *ledger.NextRequest) { r.Descending = true; r.Jobs = span(0, 3) }},
		{"one job twice", func(r *ledger.NextRequest) { r.Jobs = []ledger.Job{job(0), job(1), job(1)} }},
		{"one job twice newest first", func(r *ledger.NextRequest) { r.Descending = true; r.Jobs = []ledger.Job{job(1), job(1), job(0)} }},
		{"one partition twice in a chunk", func(r *ledger.NextRequest) { r.Jobs = []ledger.Job{job(0, 1, 0)} }},
		{"one partition as two jobs in two locations", func(r *ledger.NextRequest) {
			r.Jobs = []ledger.Job{job(0), {RunID: "run-est", Partitions: []tranche.TimePartition{in(part(0), suiteEST)}}}
		}},
		{"a bad job after Want is reached", func(r *ledger.NextRequest) { r.Want = 1; r.Jobs = []ledger.Job{job(0), {RunID: "run-empty"}} }},
	}
	for _, c := range cases {
		s.t.run(strings.ReplaceAll(c.name, " ", "-"), func(t testingT) {
			s := &ledgerSuite{t: t, ctx: s.ctx, clock: s.clock, l: s.l}
			r := nextReq(alpha, span(0, 3), 2, s.revision())
			c.change(&r)
			before := s.snapshot(parts(0, 1, 2, 9)...)
			grants, err := s.l.ClaimNext(s.ctx, r)
			switch {
			case err == nil:
				s.t.Errorf("ClaimNext with %s granted:\n%swant an error", c.name, describeGrants(r, grants))
			case errors.Is(err, ledger.ErrNotClaimable) || errors.Is(err, ledger.ErrFenced):
				s.t.Errorf("ClaimNext with %s = %v; want an error matching neither ErrNotClaimable nor ErrFenced (the request is wrong, not the partitions)", c.name, err)
			}
			s.unchanged(before, "ClaimNext with "+c.name)
		})
	}
	// The refusals moved no cursor: a worker of the first plan claims
	// from the first job.
	s.expect(nextReq(alpha, span(0, 3), 1, 0), "L")

	// Overlapping chunks name a partition twice across jobs, which a
	// request must not. A ledger may refuse the request; if it does not,
	// the partition they share still gains one attempt only.
	r := nextReq(beta, []ledger.Job{job(3, 4), job(4, 5)}, 2, s.revision())
	before := s.snapshot(parts(3, 4, 5)...)
	grants, err := s.l.ClaimNext(s.ctx, r)
	switch {
	case err != nil:
		if errors.Is(err, ledger.ErrNotClaimable) {
			s.t.Errorf("%s = %v; want a refusal of the request, not of the partitions", describeNext(r), err)
		}
		s.unchanged(before, describeNext(r)+" (refused)")
	default:
		if err := grantProblems(r, grants, s.clock.Now()); err != nil {
			s.t.Fatalf("%s:\n%s%v", describeNext(r), describeGrants(r, grants), err)
		}
		if h := s.history(part(4)); len(h) > 1 {
			s.t.Errorf("%s:\n%sHistory of %s, in both chunks:\n%swant one attempt at most", describeNext(r), describeGrants(r, grants), part(4).Key(), formatAttempts(h))
		}
		if got := grantCodes(r, grants); got == "LL" {
			s.t.Errorf("%s granted both overlapping chunks:\n%s", describeNext(r), describeGrants(r, grants))
		}
	}
}

// testNextCanceledContext fails ClaimNext and Release with a canceled
// context, writing nothing.
func testNextCanceledContext(s *ledgerSuite) {
	ctx, cancel := context.WithCancel(s.ctx)
	cancel()
	lease := s.claim(req(alpha, part(0)))
	before := s.snapshot(parts(0, 1, 2)...)
	r := nextReq(beta, span(1, 3), 2, s.revision())
	if _, err := s.l.ClaimNext(ctx, r); !errors.Is(err, context.Canceled) {
		s.t.Errorf("%s with a canceled context = %v; want an error matching context.Canceled", describeNext(r), err)
	}
	if err := s.l.Release(ctx, lease); !errors.Is(err, context.Canceled) {
		s.t.Errorf("Release(%s) with a canceled context = %v; want an error matching context.Canceled", describeLease(lease), err)
	}
	s.unchanged(before, "ClaimNext and Release with a canceled context")
	s.expect(nextReq(beta, span(1, 3), 2, 0), "LL") // the cursor did not move
	s.finish(lease, succeeded)                      // nor was the lease released
}

// release releases lease and fails the test unless the ledger does.
func (s *ledgerSuite) release(lease *ledger.Lease) {
	s.t.Helper()
	if err := s.l.Release(s.ctx, lease); err != nil {
		s.t.Fatalf("Release(%s) = %v", describeLease(lease), err)
	}
}

// releaseFenced wants Release of lease to fail with ErrFenced, withdrawing
// nothing.
func (s *ledgerSuite) releaseFenced(lease *ledger.Lease) {
	s.t.Helper()
	before := s.snapshot(lease.Partitions...)
	if err := s.l.Release(s.ctx, lease); !errors.Is(err, tranche.ErrFenced) {
		s.t.Errorf("Release(%s) = %v; want an error matching ErrFenced", describeLease(lease), err)
	}
	s.unchanged(before, "fenced Release of "+describeLease(lease))
}

// restored fails the test unless the histories and Latest are those of
// before, taken before the released leases were claimed, and Revision
// has moved past rev, read after they were.
func (s *ledgerSuite) restored(before ledgerState, rev int64, what string) {
	s.t.Helper()
	after := s.snapshot(before.parts...)
	if after.revision <= rev {
		s.t.Errorf("%s: Revision %d; want more than %d, before it: Release moves the revision", what, after.revision, rev)
	}
	if d := diffAttempts(before.latest, after.latest); d != "" {
		s.t.Errorf("%s: Latest; want it as before the claim:\n%s", what, d)
	}
	for i := range before.histories {
		if d := diffAttempts(before.histories[i], after.histories[i]); d != "" {
			s.t.Errorf("%s: History of %s; want it as before the claim:\n%s", what, before.parts[i].Key(), d)
		}
	}
}

// testRelease withdraws leases claimed ahead, of a fresh partition, of a
// partition with an earlier failed attempt and of a chunk: the history
// reads as if they had never been claimed, and the next claims take the
// same attempt numbers.
func testRelease(s *ledgerSuite) {
	s.finish(s.claim(req(gamma, part(0))), ledger.StateFailed)
	s.claim(req(gamma, part(5))) // another partition, running throughout
	before := s.snapshot(parts(0, 1, 2, 3, 5)...)
	s.clock.Advance(time.Second)
	grants := s.expect(nextReq(alpha, []ledger.Job{job(0), job(1), job(2, 3)}, 3, s.revision()), "LLL")
	s.wantAttempts(grants[0].Lease, 2)
	s.wantAttempts(grants[1].Lease, 1)
	s.wantAttempts(grants[2].Lease, 1, 1)
	rev := s.revision()
	s.clock.Advance(time.Second)
	for _, l := range leases(grants) {
		s.release(l)
	}
	s.restored(before, rev, "after Release of the leases of ClaimNext")
	for _, l := range leases(grants) {
		s.fenced(l) // a released lease holds nothing
		s.releaseFenced(l)
	}

	// The next claims take the released numbers again: RerunNone claims
	// a partition whose only attempt was released.
	s.wantAttempts(s.claim(req(beta, part(0))), 2)
	none := req(beta, part(1))
	none.Policy = ledger.RerunNone
	s.wantAttempts(s.claim(none), 1)
	r := nextReq(beta, []ledger.Job{job(2, 3)}, 1, s.revision())
	r.Policy = ledger.RerunNone
	s.wantAttempts(s.expect(r, "L")[0].Lease, 1, 1)
}

// testReleaseRevision checks that Release never takes the revision back:
// it moves it, and the next change is numbered above every revision
// before, so that a plan made while the released attempt ran still bounds
// RerunAll.
func testReleaseRevision(s *ledgerSuite) {
	p := part(0)
	lease := s.claim(req(alpha, p))
	s.claim(req(alpha, part(1))) // the DAG's other partitions stay as they were
	plan := s.revision()
	s.release(lease)
	r1 := s.revision()
	if r1 <= plan {
		s.t.Errorf("Revision %d after Release; want more than %d", r1, plan)
	}
	again := s.claim(req(beta, p))
	r2 := s.revision()
	if r2 <= r1 {
		s.t.Errorf("Revision %d after a claim following Release; want more than %d", r2, r1)
	}
	if a := s.only(s.history(p), "History after Release and a claim"); a.Revision != r2 || a.Number != 1 {
		s.t.Errorf("attempt %s; want attempt 1 at revision %d", formatAttempt(a), r2)
	}
	s.finish(again, succeeded)
	if r3 := s.revision(); r3 <= r2 {
		s.t.Errorf("Revision %d after a Finish; want more than %d", r3, r2)
	}
	r := req(gamma, p)
	r.Policy, r.Revision = ledger.RerunAll, plan
	s.refuse(r, "") // succeeded after the plan was made
	r.Revision = s.revision()
	s.wantAttempts(s.claim(r), 2)
}

// testReleaseRevisionIn checks that RevisionIn, and ChangedIn of a
// LatestReader, do not report a partition whose only change after a
// revision was an attempt since released.
func testReleaseRevisionIn(s *ledgerSuite) {
	s.finish(s.claim(req(gamma, part(0))), ledger.StateFailed)
	after := s.revision()
	l0 := s.claim(req(alpha, part(0)))
	l1 := s.claim(req(alpha, part(1), part(2)))
	s.release(l0)
	s.release(l1)
	lr, _ := s.l.(ledger.LatestReader)
	check := func(what string, from, to time.Time, after, want int64, changed ...int) {
		s.t.Helper()
		got, err := s.l.RevisionIn(s.ctx, suiteDAG, from, to, after)
		if err != nil {
			s.t.Fatalf("RevisionIn = %v", err)
		}
		if got != want {
			s.t.Errorf("RevisionIn %s = %d; want %d", what, got, want)
		}
		if lr == nil {
			return
		}
		starts, err := lr.ChangedIn(s.ctx, suiteDAG, from, to, after)
		if err != nil {
			s.t.Fatalf("ChangedIn = %v", err)
		}
		var wantStarts []time.Time
		for _, i := range changed {
			wantStarts = append(wantStarts, part(i).Start)
		}
		if !slices.EqualFunc(starts, wantStarts, time.Time.Equal) {
			s.t.Errorf("ChangedIn %s = %v; want %v", what, starts, wantStarts)
		}
	}
	check("of released attempts", suiteFrom, suiteTo, after, 0)
	check("of a released partition", part(0).Start, part(0).End, after, 0)
	failed := s.history(part(0))[0].Revision
	check("from before the failure", suiteFrom, suiteTo, failed-1, failed, 0)

	// A change after the release is reported as ever.
	s.claim(req(beta, part(2)))
	rev := s.revision()
	check("of a claim after the release", suiteFrom, suiteTo, after, rev, 2)
	check("of the released partitions alone", part(0).Start, part(2).Start, after, 0)
}

// testReleaseFenced refuses to release a lease that no longer holds every
// partition: taken over, finished, released already, or never the
// worker's.
func testReleaseFenced(s *ledgerSuite) {
	old := s.claim(req(alpha, part(0)))
	s.clock.Advance(suiteLease)
	cur := s.claim(req(beta, part(0)))
	s.releaseFenced(old) // taken over
	twice := *cur
	twice.Partitions, twice.Attempts = parts(0, 0), []int{2, 2}
	s.releaseFenced(&twice) // one partition twice: the lease holds no second attempt there

	done := s.claim(req(alpha, part(1)))
	s.finish(done, ledger.StateFailed)
	s.releaseFenced(done) // finished

	lease := s.claim(req(alpha, part(2)))
	forge := func(change func(*ledger.Lease)) *ledger.Lease {
		l := *lease
		l.Partitions = slices.Clone(lease.Partitions)
		l.Attempts = slices.Clone(lease.Attempts)
		change(&l)
		return &l
	}
	s.releaseFenced(forge(func(l *ledger.Lease) { l.Worker = gamma }))                                     // another worker's name
	s.releaseFenced(forge(func(l *ledger.Lease) { l.Attempts[0] = 2 }))                                    // an attempt that does not exist
	s.releaseFenced(forge(func(l *ledger.Lease) { l.Partitions[0] = part(7) }))                            // a partition never claimed
	s.releaseFenced(forge(func(l *ledger.Lease) { l.DAG = "tranchetest-unknown-dag" }))                    // another DAG
	s.releaseFenced(forge(func(l *ledger.Lease) { l.Partitions = parts(2, 0); l.Attempts = []int{1, 2} })) // one of two is beta's
	s.releaseFenced(forge(func(l *ledger.Lease) { l.Partitions = parts(2, 2); l.Attempts = []int{1, 1} })) // one partition twice
	s.release(lease)                                                                                       // the real lease still holds
	s.releaseFenced(lease)                                                                                 // released already

	s.finish(cur, succeeded) // the takeover's lease was left alone
	s.releaseFenced(cur)
}

// testReleaseChunk releases a lease of several partitions all or none.
func testReleaseChunk(s *ledgerSuite) {
	chunk := s.claim(req(alpha, parts(0, 1, 2)...))
	s.clock.Advance(suiteLease)
	s.claim(req(beta, part(1))) // one partition taken over
	s.releaseFenced(chunk)
	for _, i := range []int{0, 2} {
		s.checkAttempt(s.only(s.history(part(i)), "History of a partition of a chunk refused Release"), part(i), 1, ledger.StateRunning, alpha)
	}

	before := s.snapshot(parts(3, 4, 5)...)
	whole := s.claim(req(alpha, parts(5, 3, 4)...))
	rev := s.revision()
	s.release(whole)
	s.restored(before, rev, "after Release of a chunk")
	s.wantAttempts(s.claim(req(beta, parts(3, 4, 5)...)), 1, 1, 1)
}

// testReleaseTakeover releases a lease that took a partition over: the
// released attempt is withdrawn and the next claim takes its number. The
// attempt it took over stays as the takeover left it (failed) or as it
// was before (running, its lease expired); either reads as a history
// where the released lease was never claimed, and either is taken over
// by the next claim.
func testReleaseTakeover(s *ledgerSuite) {
	p := part(0)
	s.claim(req(alpha, p))
	s.clock.Advance(suiteLease)
	beforeTakeover := s.history(p)
	cur := s.claim(req(beta, p))
	afterTakeover := s.history(p)
	s.release(cur)
	h := s.history(p)
	if len(h) != 1 || (!sameAttempt(h[0], beforeTakeover[0]) && !sameAttempt(h[0], afterTakeover[0])) {
		s.t.Errorf("History after Release of a takeover:\n%swant the attempt taken over, as before the takeover:\n%sor as after it:\n%s",
			formatAttempts(h), formatAttempts(beforeTakeover), formatAttempts(afterTakeover[:1]))
	}
	s.wantAttempts(s.claim(req(gamma, p)), 2)
}

// nextCall is one ClaimNext call of workers sharing jobs: when it
// started and returned, on a count the workers share, and the positions
// in the request's jobs of those it was granted.
type nextCall struct {
	worker     string
	start, end int64
	granted    []int
}

// shareJobs has one goroutine for each of wants call ClaimNext with the
// jobs and plan revision of base, wanting wants[w] jobs at a time and
// finishing those granted, until a call grants none. It returns every
// call and what broke the rules of grantProblems.
func (s *ledgerSuite) shareJobs(base ledger.NextRequest, wants []int) ([]nextCall, []error) {
	var (
		mu    sync.Mutex
		calls []nextCall
		errs  []error
		count atomic.Int64
	)
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		errs = append(errs, err)
	}
	contend(len(wants), func(w int) {
		r := base
		r.Worker, r.Want = fmt.Sprintf("worker-%d", w), wants[w]
		for range len(r.Jobs) + 1 { // a call that grants nothing ends the loop
			now := s.clock.Now()
			start := count.Add(1)
			grants, err := s.l.ClaimNext(s.ctx, r)
			end := count.Add(1)
			if err != nil {
				fail(fmt.Errorf("%s = %v", describeNext(r), err))
				return
			}
			if err := grantProblems(r, grants, now); err != nil {
				fail(fmt.Errorf("%s:\n%s%w", describeNext(r), describeGrants(r, grants), err))
				return
			}
			c := nextCall{worker: r.Worker, start: start, end: end}
			for i, g := range grants {
				if g.Lease == nil {
					continue
				}
				c.granted = append(c.granted, i)
				outcomes := make([]ledger.Outcome, len(g.Lease.Partitions))
				for k := range outcomes {
					outcomes[k] = succeeded
				}
				if err := s.l.Finish(s.ctx, g.Lease, outcomes); err != nil {
					fail(fmt.Errorf("Finish(%s) = %v", describeLease(g.Lease), err))
				}
			}
			mu.Lock()
			calls = append(calls, c)
			mu.Unlock()
			if len(c.granted) == 0 {
				return
			}
		}
		fail(fmt.Errorf("%s: more calls than jobs, each granting some", r.Worker))
	})
	return calls, errs
}

// shareProblems checks what workers sharing jobs must find once they are
// done: every job granted exactly once, its partitions holding the one
// attempt of the worker it was granted to, and no gap in the order. A gap
// is a job left unclaimed before a claimed one once some calls had
// returned; concurrency allows one only while the call that claims it is
// still running, not when it started after those returned.
func (s *ledgerSuite) shareProblems(base ledger.NextRequest, calls []nextCall) []error {
	var errs []error
	owner := make([]int, len(base.Jobs))
	for i := range owner {
		owner[i] = -1
	}
	for c, call := range calls {
		for _, i := range call.granted {
			if owner[i] >= 0 {
				errs = append(errs, fmt.Errorf("job %s granted to %s and to %s; want once", describeJob(base.Jobs[i]), calls[owner[i]].worker, call.worker))
				continue
			}
			owner[i] = c
		}
	}
	for i, j := range base.Jobs {
		if owner[i] < 0 {
			errs = append(errs, fmt.Errorf("job %s never granted, though every worker was done", describeJob(j)))
			continue
		}
		for _, p := range j.Partitions {
			h, err := s.l.History(s.ctx, base.DAG, p.Start)
			if err != nil {
				return append(errs, fmt.Errorf("History(%s) = %v", p.Key(), err))
			}
			if len(h) != 1 || h[0].Number != 1 || h[0].State != ledger.StateSucceeded || h[0].Worker != calls[owner[i]].worker {
				errs = append(errs, fmt.Errorf("partition %s: History\n%swant one success, by %s", p.Key(), formatAttempts(h), calls[owner[i]].worker))
			}
		}
	}
	byEnd := make([]int, len(calls))
	for c := range byEnd {
		byEnd[c] = c
	}
	slices.SortFunc(byEnd, func(a, b int) int { return int(calls[a].end - calls[b].end) })
	granted := make([]bool, len(base.Jobs))
	last := -1 // the position of the last job granted by the calls returned
	for k, c := range byEnd {
		for _, i := range calls[c].granted {
			granted[i] = true
			last = max(last, i)
		}
		for i := range last {
			if d := owner[i]; !granted[i] && d >= 0 && calls[d].start > calls[c].end {
				errs = append(errs, fmt.Errorf("once %d calls had returned, the last %s's, job %s was granted and job %s not: "+
					"it was granted to %s by a call that started after them, a gap in the order",
					k+1, calls[c].worker, describeJob(base.Jobs[last]), describeJob(base.Jobs[i]), calls[d].worker))
				return errs
			}
		}
	}
	return errs
}

// testClaimNextConcurrent has eight workers share one backfill's jobs,
// asking with the same jobs and plan until none is left.
func testClaimNextConcurrent(s *ledgerSuite) {
	base := nextReq("worker-N", span(0, 64), 1, s.revision())
	calls, errs := s.shareJobs(base, []int{1, 2, 3, 1, 2, 3, 1, 4})
	errs = append(errs, s.shareProblems(base, calls)...)
	for _, err := range errs {
		s.t.Errorf("workers sharing 64 jobs: %v", err)
	}
}

// testClaimNextShared is the property of testClaimNextConcurrent over
// random jobs (chunks, gaps between them, either order), workers and
// Want, each run in a DAG of its own.
func testClaimNextShared(s *ledgerSuite) {
	round := 0
	check := func(rt *rapid.T) {
		round++
		n := rapid.IntRange(1, 20).Draw(rt, "partitions")
		var js []ledger.Job
		for i := 0; i < n; {
			if rapid.IntRange(0, 3).Draw(rt, "gap") == 0 {
				i++
				continue
			}
			size := rapid.IntRange(1, min(3, n-i)).Draw(rt, "chunk")
			is := make([]int, size)
			for k := range is {
				is[k] = i + k
			}
			js = append(js, job(is...))
			i += size
		}
		if len(js) == 0 {
			js = span(0, 1)
		}
		base := nextReq("worker-N", js, 1, 0)
		base.DAG = fmt.Sprintf("%s-shared-%d", suiteDAG, round)
		if rapid.Bool().Draw(rt, "newest first") {
			base = descending(base)
			base.Jobs = reversed(js)
		}
		wants := rapid.SliceOfN(rapid.IntRange(1, 4), 2, 6).Draw(rt, "wants")
		calls, errs := s.shareJobs(base, wants)
		errs = append(errs, s.shareProblems(base, calls)...)
		if len(errs) > 0 {
			rt.Fatalf("workers wanting %v at a time sharing %s:\n%v", wants, describeNext(base), errors.Join(errs...))
		}
	}
	if t, ok := s.t.(testT); ok {
		rapid.Check(t.T, check)
	} else {
		rapid.Check(rapidTB{s.t, "ClaimNextShared"}, check)
	}
}

// modelLease is a lease of testClaimNextModel with what the ledger held
// before and right after its claim, so that its Release can be judged.
type modelLease struct {
	lease     *ledger.Lease
	before    [][]ledger.Attempt // History of each partition before the claim
	after     [][]ledger.Attempt // and right after it
	revision  int64              // Revision before the claim
	takeovers bool               // the claim took a partition over
}

// testClaimNextModel drives a DAG through random claims, ClaimNext calls
// in both orders, finishes, releases and clock steps, and predicts every
// answer: ClaimNext's grants from a model of the two cursors and the
// claim rules applied to History (ClaimRequest.Judge), Finish and
// Release from whether the lease still holds its attempts
// (Lease.CheckHeld), and the history a Release leaves.
func testClaimNextModel(s *ledgerSuite) {
	round := 0
	check := func(rt *rapid.T) {
		round++
		dag := fmt.Sprintf("%s-model-%d", suiteDAG, round)
		const n = 8 // partitions part(0) to part(7)
		histories := func(ps []tranche.TimePartition) [][]ledger.Attempt {
			out := make([][]ledger.Attempt, len(ps))
			for i, p := range ps {
				h, err := s.l.History(s.ctx, dag, p.Start)
				if err != nil {
					rt.Fatalf("History(%s) = %v", p.Key(), err)
				}
				out[i] = h
			}
			return out
		}
		latestOf := func(h []ledger.Attempt) *ledger.Attempt {
			if len(h) == 0 {
				return nil
			}
			return &h[len(h)-1]
		}
		revision := func() int64 {
			r, err := s.l.Revision(s.ctx, dag)
			if err != nil {
				rt.Fatalf("Revision = %v", err)
			}
			return r
		}
		holds := func(l *ledger.Lease) bool {
			for i, h := range histories(l.Partitions) {
				if l.CheckHeld(i, latestOf(h)) != nil {
					return false
				}
			}
			return true
		}
		type cursor struct {
			moved    bool
			start    time.Time
			revision int64
		}
		cursors := map[bool]*cursor{false: {}, true: {}} // by Descending
		var held []modelLease
		plans := []int64{0}
		claimed := func(l *ledger.Lease, before [][]ledger.Attempt, rev int64) {
			ml := modelLease{lease: l, before: before, after: histories(l.Partitions), revision: rev}
			for _, h := range before {
				ml.takeovers = ml.takeovers || (len(h) > 0 && h[len(h)-1].State == ledger.StateRunning)
			}
			held = append(held, ml)
		}
		workers := []string{alpha, beta, gamma}
		policies := []ledger.RerunPolicy{ledger.RerunNone, ledger.RerunFailed, ledger.RerunAll}

		for range rapid.IntRange(1, 30).Draw(rt, "steps") {
			switch rapid.IntRange(0, 6).Draw(rt, "op") {
			case 0, 1, 2: // ClaimNext
				var js []ledger.Job
				for i := 0; i < n; {
					if rapid.Bool().Draw(rt, "skip") {
						i++
						continue
					}
					size := rapid.IntRange(1, min(2, n-i)).Draw(rt, "chunk")
					is := []int{i}
					if size == 2 {
						is = append(is, i+1)
					}
					js = append(js, job(is...))
					i += size
				}
				if len(js) == 0 {
					js = []ledger.Job{job(rapid.IntRange(0, n-1).Draw(rt, "only job"))}
				}
				r := nextReq(rapid.SampledFrom(workers).Draw(rt, "worker"), js, rapid.IntRange(1, 3).Draw(rt, "want"),
					rapid.SampledFrom(plans).Draw(rt, "plan"))
				r.DAG = dag
				r.Policy = rapid.SampledFrom(policies).Draw(rt, "policy")
				if rapid.Bool().Draw(rt, "newest first") {
					r = descending(r)
					r.Jobs = reversed(js)
				}
				now, rev := s.clock.Now(), revision()
				cur := *cursors[r.Descending]
				passing := cur.moved && cur.revision > r.Revision
				var want []byte
				var befores [][][]ledger.Attempt
				leased := 0
				for _, j := range r.Jobs {
					if leased == r.Want {
						break
					}
					hs := histories(j.Partitions)
					befores = append(befores, hs)
					code := byte('L')
					if passing && !r.Before(cur.start, j.Start()) {
						code = 'P'
					} else {
						c := r.Claim(j)
						for _, h := range hs {
							if c.Judge(latestOf(h), now) != ledger.ActionRun {
								code = 'R'
							}
						}
					}
					if code == 'L' {
						leased++
					}
					want = append(want, code)
				}
				grants, err := s.l.ClaimNext(s.ctx, r)
				if err != nil {
					rt.Fatalf("%s = %v", describeNext(r), err)
				}
				if err := grantProblems(r, grants, now); err != nil {
					rt.Fatalf("%s:\n%s%v", describeNext(r), describeGrants(r, grants), err)
				}
				if got := grantCodes(r, grants); got != string(want) {
					rt.Fatalf("%s = %s:\n%swant %s (L a lease, P passed over, R refused by the claim rules), the cursor %+v",
						describeNext(r), got, describeGrants(r, grants), want, cur)
				}
				for i, g := range grants {
					if g.Lease == nil {
						if d := diffAttempts(slices.Concat(befores[i]...), slices.Concat(histories(r.Jobs[i].Partitions)...)); d != "" {
							rt.Fatalf("%s changed job %s, which it did not grant:\n%s", describeNext(r), describeJob(r.Jobs[i]), d)
						}
						continue
					}
					for k, h := range befores[i] {
						if w := len(h) + 1; g.Lease.Attempts[k] != w {
							rt.Fatalf("%s: %s; want attempt %d at %s", describeNext(r), describeLease(g.Lease), w, g.Lease.Partitions[k].Key())
						}
					}
					claimed(g.Lease, befores[i], rev)
				}
				after := revision()
				if leased > 0 && after <= rev {
					rt.Fatalf("%s granted %d jobs and Revision went from %d to %d; want it to grow", describeNext(r), leased, rev, after)
				}
				if !passing || want[len(want)-1] != 'P' {
					// A call that passed over every job leaves the cursor.
					*cursors[r.Descending] = cursor{moved: true, start: r.Jobs[len(grants)-1].Start(), revision: after}
				}
			case 3: // Claim of one or two partitions, as an ordinary run or another worker might
				i := rapid.IntRange(0, n-1).Draw(rt, "partition")
				ps := parts(i)
				if i+1 < n && rapid.Bool().Draw(rt, "chunk") {
					ps = parts(i, i+1)
				}
				r := req(rapid.SampledFrom(workers).Draw(rt, "worker"), ps...)
				r.DAG = dag
				r.Policy = rapid.SampledFrom(policies).Draw(rt, "policy")
				r.Revision = revision()
				before, rev := histories(ps), r.Revision
				lease, err := s.l.Claim(s.ctx, r)
				switch {
				case err == nil:
					claimed(lease, before, rev)
				case !errors.Is(err, ledger.ErrNotClaimable):
					rt.Fatalf("%s = %v", describeReq(r), err)
				}
			case 4: // Finish
				if len(held) == 0 {
					continue
				}
				k := rapid.IntRange(0, len(held)-1).Draw(rt, "lease")
				l := held[k].lease
				held = slices.Delete(held, k, k+1)
				outcomes := make([]ledger.Outcome, len(l.Partitions))
				for i := range outcomes {
					outcomes[i] = ledger.Outcome{State: rapid.SampledFrom([]ledger.State{ledger.StateSucceeded, ledger.StateFailed, ledger.StateCanceled}).Draw(rt, "outcome")}
				}
				holding := holds(l)
				switch err := s.l.Finish(s.ctx, l, outcomes); {
				case holding && err != nil:
					rt.Fatalf("Finish(%s) = %v; want nil, the lease holds", describeLease(l), err)
				case !holding && !errors.Is(err, ledger.ErrFenced):
					rt.Fatalf("Finish(%s) = %v; want an error matching ErrFenced", describeLease(l), err)
				}
			case 5: // Release
				if len(held) == 0 {
					continue
				}
				k := rapid.IntRange(0, len(held)-1).Draw(rt, "lease")
				ml := held[k]
				held = slices.Delete(held, k, k+1)
				holding, before, rev := holds(ml.lease), histories(ml.lease.Partitions), revision()
				err := s.l.Release(s.ctx, ml.lease)
				now := histories(ml.lease.Partitions)
				switch {
				case !holding:
					if !errors.Is(err, ledger.ErrFenced) {
						rt.Fatalf("Release(%s) = %v; want an error matching ErrFenced", describeLease(ml.lease), err)
					}
					if d := diffAttempts(slices.Concat(before...), slices.Concat(now...)); d != "" {
						rt.Fatalf("fenced Release(%s) changed the history:\n%s", describeLease(ml.lease), d)
					}
					continue
				case err != nil:
					rt.Fatalf("Release(%s) = %v; want nil, the lease holds", describeLease(ml.lease), err)
				}
				for i, h := range now {
					pre, post := ml.before[i], ml.after[i]
					ok := len(h) == len(pre) && slices.EqualFunc(h, pre, sameAttempt)
					if !ok && ml.takeovers && len(h) == len(pre) && len(h) > 0 {
						// The attempt taken over may stay as the takeover
						// left it.
						last := len(h) - 1
						ok = slices.EqualFunc(h[:last], pre[:last], sameAttempt) && sameAttempt(h[last], post[last])
					}
					if !ok {
						rt.Fatalf("History of %s after Release(%s):\n%swant it as before the claim:\n%s",
							ml.lease.Partitions[i].Key(), describeLease(ml.lease), formatAttempts(h), formatAttempts(pre))
					}
				}
				if after := revision(); after <= rev {
					rt.Fatalf("Revision %d after Release(%s); want more than %d", after, describeLease(ml.lease), rev)
				}
				if !ml.takeovers {
					for _, p := range ml.lease.Partitions {
						if got, err := s.l.RevisionIn(s.ctx, dag, p.Start, p.End, ml.revision); err != nil || got != 0 {
							rt.Fatalf("RevisionIn(%s, after %d) = %d, %v after Release(%s); want 0: nothing changed it but the released claim",
								p.Key(), ml.revision, got, err, describeLease(ml.lease))
						}
					}
				}
			case 6: // time passes: leases expire
				s.clock.Advance(time.Duration(rapid.IntRange(0, 90).Draw(rt, "seconds")) * time.Second)
			}
			plans = append(plans, revision())
		}
	}
	if t, ok := s.t.(testT); ok {
		rapid.Check(t.T, check)
	} else {
		rapid.Check(rapidTB{s.t, "ClaimNextModel"}, check)
	}
}
