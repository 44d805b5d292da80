package ledgertest

import (
	"fmt"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/ledger"
)

func testLatest(s *ledgerSuite) {
	const n = 1000
	// Claim in a scattered order, so that no ledger can rely on claims
	// arriving oldest first.
	leases := make([]*ledger.Lease, n)
	for k := range n {
		i := k * 7919 % n
		leases[i] = s.claim(req([]string{alpha, beta, gamma}[k%3], part(i)))
	}
	type want struct {
		number int
		state  ledger.State
	}
	wants := make([]want, n)
	for i, lease := range leases {
		switch i % 4 {
		case 0:
			s.finish(lease, ledger.StateSucceeded)
			wants[i] = want{1, ledger.StateSucceeded}
		case 1:
			s.finish(lease, ledger.StateFailed)
			wants[i] = want{1, ledger.StateFailed}
		case 2:
			wants[i] = want{1, ledger.StateRunning}
		case 3:
			s.finish(lease, ledger.StateCanceled)
			wants[i] = want{1, ledger.StateCanceled}
		}
	}
	s.clock.Advance(2 * suiteLease)
	for i := range n {
		if i%4 == 1 || i%8 == 2 { // retry a failed one, take over an expired one
			s.claim(req(gamma, part(i)))
			wants[i] = want{2, ledger.StateRunning}
		}
	}
	// Another DAG's partitions, interleaved, stay out of this DAG's Latest.
	for i := 0; i < n; i += 10 {
		r := req(alpha, part(i), in(part(i+1), suiteIST))
		r.DAG = "tranchetest-other-dag"
		s.claim(r)
	}

	check := func(from, to time.Time, lo, hi int) {
		s.t.Helper()
		got := s.latest(from, to)
		if len(got) != hi-lo {
			s.t.Errorf("Latest(%v, %v): %d attempts; want %d (partitions %d to %d)", from, to, len(got), hi-lo, lo, hi-1)
		}
		for k, a := range got {
			i := lo + k
			if i >= hi {
				break
			}
			if a.DAG != suiteDAG || !a.Start.Equal(part(i).Start) || a.Number != wants[i].number || a.State != wants[i].state {
				s.t.Fatalf("Latest(%v, %v)[%d] = %s; want partition %d (%s) attempt %d %s, oldest first",
					from, to, k, formatAttempt(a), i, part(i).Key(), wants[i].number, wants[i].state)
			}
		}
	}
	check(suiteFrom, suiteTo, 0, n)
	check(part(0).Start, part(n-1).End, 0, n)
	check(part(0).Start, part(n-1).Start, 0, n-1) // to is excluded
	check(part(100).Start.In(suiteEST), part(900).Start.In(suiteIST), 100, 900)
	check(part(10).Start.Add(30*time.Minute), part(20).Start, 11, 20) // by start: 10 begins before from
	check(part(500).Start, part(500).Start, 500, 500)
	check(part(600).Start, part(500).Start, 500, 500) // inverted: nothing
	check(part(n).Start, suiteTo, 0, 0)
	check(suiteFrom, part(0).Start, 0, 0)

	// Stopping the loop early stops the sequence, at and around any batch
	// size a ledger might use.
	for _, stop := range []int{1, 100, 255, 256, 257, 500, 511, 512, 513, 999} {
		seen := 0
		for _, err := range s.l.Latest(s.ctx, suiteDAG, suiteFrom, suiteTo) {
			if err != nil {
				s.t.Fatalf("Latest yielded %v", err)
			}
			seen++
			if seen == stop {
				break
			}
		}
		if seen != stop {
			s.t.Errorf("Latest stopped at %d; want %d", seen, stop)
		}
	}
	if got := s.latestOf("tranchetest-other-dag", suiteFrom, suiteTo); len(got) != n/5 {
		s.t.Errorf("Latest of the other DAG: %d attempts; want %d", len(got), n/5)
	}
}

func testLatestLoopBody(s *ledgerSuite) {
	for i := range 600 {
		s.claim(req(alpha, part(i)))
	}
	done := make(chan struct{})
	var seen int
	go func() {
		defer close(done)
		for a, err := range s.l.Latest(s.ctx, suiteDAG, suiteFrom, suiteTo) {
			if err != nil {
				s.t.Errorf("Latest yielded %v", err)
				return
			}
			// Reads and writes from the loop body must not deadlock.
			if _, err := s.l.History(s.ctx, suiteDAG, a.Start); err != nil {
				s.t.Errorf("History inside the Latest loop = %v", err)
				return
			}
			if seen%100 == 0 {
				if _, err := s.l.Claim(s.ctx, req(beta, part(1000+seen))); err != nil {
					s.t.Errorf("Claim inside the Latest loop = %v", err)
					return
				}
			}
			seen++
			if seen > 10000 {
				s.t.Errorf("Latest yielded more than 10,000 attempts")
				return
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		s.t.Fatal("a ledger call inside the loop over Latest deadlocked: Latest must not hold a lock or connection the loop body needs")
	}
	if seen < 600 {
		s.t.Errorf("Latest yielded %d attempts; want at least 600", seen)
	}
}

func testOrdinaryRunsCount(s *ledgerSuite) {
	p, q := part(0), part(1)
	ordinary := func(pt tranche.TimePartition) ledger.ClaimRequest {
		r := req(gamma, pt)
		r.Backfill = ""
		return r
	}
	s.finish(s.claim(ordinary(p)), succeeded)
	s.finish(s.claim(ordinary(q)), ledger.StateFailed)
	if a := s.only(s.history(p), "History"); a.Backfill != "" {
		s.t.Errorf("ordinary run %s; want no backfill", formatAttempt(a))
	}
	s.refuse(req(alpha, p), "") // the daily job's success counts for the backfill
	lease := s.claim(req(alpha, q))
	if fmt.Sprint(lease.Attempts) != "[2]" {
		s.t.Errorf("backfill retry of a failed ordinary run %s; want attempt 2", describeLease(lease))
	}
	h := s.history(q)
	if len(h) != 2 || h[0].Backfill != "" || h[1].Backfill != suiteBackfill {
		s.t.Errorf("History; want the ordinary run then the backfill's attempt:\n%s", formatAttempts(h))
	}
}

// testTriggers checks that every way of starting an attempt records the
// claim's trigger, or TriggerOf's default, on the lease and the attempt,
// as History, Latest and RecentSuccesses read it: a fresh partition, a
// chunk, a takeover, and ClaimNext's fresh and recorded jobs.
func testTriggers(s *ledgerSuite) {
	check := func(what string, lease *ledger.Lease, want ledger.Trigger) {
		s.t.Helper()
		if lease.Trigger != want {
			s.t.Errorf("%s: lease's trigger %q; want %q", what, lease.Trigger, want)
		}
		for _, p := range lease.Partitions {
			h := s.history(p)
			if a := h[len(h)-1]; a.Trigger != want {
				s.t.Errorf("%s: attempt %s of trigger %q; want %q", what, formatAttempt(a), a.Trigger, want)
			}
		}
	}
	with := func(r ledger.ClaimRequest, backfill string, t ledger.Trigger) ledger.ClaimRequest {
		r.Backfill, r.Trigger = backfill, t
		return r
	}
	live := s.claim(with(req(alpha, part(0)), "", ledger.TriggerLive))
	check("a live slot", live, ledger.TriggerLive)
	s.finish(live, succeeded)
	check("a live slot, finished", live, ledger.TriggerLive)
	check("an ordinary run without a trigger", s.claim(with(req(alpha, part(1)), "", "")), ledger.TriggerManual)
	check("a backfill's chunk without a trigger", s.claim(with(req(alpha, part(2), part(3)), suiteBackfill, "")), ledger.TriggerBackfill)
	check("a backfill's claim with one", s.claim(with(req(alpha, part(4)), suiteBackfill, ledger.TriggerManual)), ledger.TriggerManual)

	// The ordinary run of part(1) is taken over after its lease by a
	// catch-up: the new attempt is the catch-up's, the old one stays
	// manual.
	s.clock.Advance(2 * suiteLease)
	takeover := s.claim(with(req(beta, part(1)), "", ledger.TriggerCatchUp))
	check("a takeover", takeover, ledger.TriggerCatchUp)
	if h := s.history(part(1)); len(h) != 2 || h[0].Trigger != ledger.TriggerManual {
		s.t.Errorf("History after a takeover:\n%swant the manual attempt, then the catch-up's", formatAttempts(h))
	}

	// ClaimNext: fresh jobs, and a recorded one (part(0) under RerunAll).
	r := nextReq(gamma, []ledger.Job{job(0), job(5), job(6)}, 3, s.revision())
	r.Policy, r.Trigger = ledger.RerunAll, ""
	for _, g := range s.expect(r, "LLL") {
		check("ClaimNext without a trigger", g.Lease, ledger.TriggerBackfill)
	}
	r = nextReq(gamma, []ledger.Job{job(7)}, 1, s.revision())
	r.Trigger = ledger.TriggerLive
	check("ClaimNext with a trigger", s.expect(r, "L")[0].Lease, ledger.TriggerLive)

	for _, a := range s.latest(suiteFrom, suiteTo) {
		if a.Trigger == "" {
			s.t.Errorf("Latest: attempt %s without a trigger", formatAttempt(a))
		}
	}
	recent, err := s.l.RecentSuccesses(s.ctx, suiteDAG, 10)
	if err != nil || len(recent) != 1 || recent[0].Trigger != ledger.TriggerLive {
		s.t.Errorf("RecentSuccesses = %v, %v; want the live slot's success, of trigger %q", recent, err, ledger.TriggerLive)
	}
}

func testRevision(s *ledgerSuite) {
	var last int64
	step := func(what string, changes bool) {
		s.t.Helper()
		r := s.revision()
		switch {
		case changes && r <= last:
			s.t.Errorf("after %s Revision = %d; want more than %d", what, r, last)
		case !changes && r != last:
			s.t.Errorf("after %s Revision = %d; want %d, unchanged", what, r, last)
		}
		last = r
	}
	last = s.revision()
	step("Revision", false)
	lease := s.claim(req(alpha, part(0)))
	step("a claim", true)
	if a := s.only(s.history(part(0)), "History"); a.Revision != last {
		s.t.Errorf("attempt revision %d; want %d", a.Revision, last)
	}
	s.history(part(0))
	s.latest(suiteFrom, suiteTo)
	if _, err := s.l.Backfills(s.ctx); err != nil {
		s.t.Fatal(err)
	}
	step("reads", false)
	if err := s.l.Heartbeat(s.ctx, lease, suiteLease); err != nil {
		s.t.Fatal(err)
	}
	step("a heartbeat", false)
	if _, err := s.l.Claim(s.ctx, req(beta, part(0))); err == nil {
		s.t.Fatal("claim of a held partition succeeded")
	}
	step("a refused claim", false)
	s.finish(lease, succeeded)
	step("a Finish", true)
	if a := s.only(s.history(part(0)), "History"); a.Revision != last {
		s.t.Errorf("attempt revision %d after Finish; want %d", a.Revision, last)
	}
	s.fenced(lease)
	step("a fenced Finish", false)
	old := s.claim(req(alpha, part(1), part(2)))
	step("a chunk claim", true)
	s.clock.Advance(suiteLease)
	s.claim(req(beta, part(1)))
	step("a takeover", true)
	s.fenced(old)
	step("a fenced chunk", false)
	s.clock.Advance(suiteLease)
	s.finish(s.claim(req(gamma, part(2))), ledger.StateFailed)
	step("a takeover and a failure", true)
	r := req(beta, part(3))
	r.DAG = "tranchetest-other-dag"
	s.finish(s.claim(r), succeeded)
	step("another DAG's claim and Finish", false)
}

func testHistoryIsACopy(s *ledgerSuite) {
	p := part(0)
	s.finish(s.claim(req(alpha, p)), succeeded)
	h := s.history(p)
	h[0].State, h[0].Worker, h[0].Number = ledger.StateFailed, "worker-mallory", 9
	s.checkAttempt(s.only(s.history(p), "History"), p, 1, ledger.StateSucceeded, alpha)
	s.refuse(req(beta, p), "")
}

// testRevisionIn reads the highest revision of the attempts in a range of
// partitions above a revision: the changes there, not elsewhere.
func testRevisionIn(s *ledgerSuite) {
	in := func(from, to time.Time, after int64) int64 {
		s.t.Helper()
		r, err := s.l.RevisionIn(s.ctx, suiteDAG, from, to, after)
		if err != nil {
			s.t.Fatalf("RevisionIn(%s, %s, after %d) = %v", from.Format(time.RFC3339), to.Format(time.RFC3339), after, err)
		}
		return r
	}
	want := func(what string, got, want int64) {
		s.t.Helper()
		if got != want {
			s.t.Errorf("RevisionIn %s = %d; want %d", what, got, want)
		}
	}
	p0, p5 := part(0), part(5)
	want("of an empty ledger", in(suiteFrom, suiteTo, 0), 0)

	lease0 := s.claim(req(alpha, p0))
	r1 := s.revision()
	want("of everything after a claim", in(suiteFrom, suiteTo, 0), r1)
	want("of the claimed partition", in(p0.Start, p0.End, 0), r1)
	want("of the claimed partition, in another location", in(p0.Start.In(suiteIST), p0.End.In(suiteEST), 0), r1)
	want("of the partitions after it", in(p0.End, suiteTo, 0), 0)
	want("up to its start, excluded", in(suiteFrom, p0.Start, 0), 0)
	want("after the claim's revision", in(suiteFrom, suiteTo, r1), 0)

	lease5 := s.claim(req(alpha, p5))
	r2 := s.revision()
	want("of the first partition after a claim of another", in(p0.Start, p0.End, r1), 0)
	want("of everything after a claim of another", in(suiteFrom, suiteTo, r1), r2)
	s.finish(lease0, succeeded)
	r3 := s.revision()
	want("of the first partition after its finish", in(p0.Start, p0.End, r1), r3)
	want("of the first partition from before the other's claim", in(p0.Start, p0.End, r1-1), r3)
	want("of the other partition after the finish of the first", in(p5.Start, p5.End, r2), 0)
	want("of the other partition from before its claim", in(p5.Start, p5.End, r1), r2)
	want("of everything after the finish", in(suiteFrom, suiteTo, r3), 0)

	// Another DAG's changes are its own.
	other := req(beta, p0)
	other.DAG = "tranchetest-other-dag"
	s.claim(other)
	want("after another DAG's claim", in(suiteFrom, suiteTo, r3), 0)
	if r, err := s.l.RevisionIn(s.ctx, "tranchetest-unknown-dag", suiteFrom, suiteTo, 0); err != nil || r != 0 {
		s.t.Errorf("RevisionIn of an unknown DAG = %d, %v; want 0", r, err)
	}

	// A takeover changes both attempts of the partition.
	s.clock.Advance(suiteLease)
	s.claim(req(gamma, p5))
	r4 := s.revision()
	want("of a partition taken over", in(p5.Start, p5.End, r3), r4)
	s.fenced(lease5)
	want("after a fenced heartbeat and finish", in(suiteFrom, suiteTo, r4), 0)
}

// testRecentSuccesses reads the latest successes of a DAG, the last to
// finish first, chunks by partition, latest first.
func testRecentSuccesses(s *ledgerSuite) {
	recent := func(n int) []ledger.Attempt {
		s.t.Helper()
		as, err := s.l.RecentSuccesses(s.ctx, suiteDAG, n)
		if err != nil {
			s.t.Fatalf("RecentSuccesses(%d) = %v", n, err)
		}
		return as
	}
	if as := recent(20); len(as) != 0 {
		s.t.Errorf("RecentSuccesses of an empty ledger:\n%swant none", formatAttempts(as))
	}
	s.finish(s.claim(req(alpha, part(0))), succeeded)
	s.clock.Advance(time.Second)
	s.finish(s.claim(req(alpha, part(1))), ledger.StateFailed)
	s.clock.Advance(time.Second)
	s.finish(s.claim(req(beta, part(2), part(3))), succeeded, succeeded)
	s.clock.Advance(time.Second)
	s.finish(s.claim(req(alpha, part(4))), ledger.StateCanceled)
	s.clock.Advance(time.Second)
	s.finish(s.claim(req(gamma, part(5))), succeeded)
	s.clock.Advance(time.Second)
	again := req(alpha, part(0))
	again.Policy, again.Revision = ledger.RerunAll, s.revision()
	s.finish(s.claim(again), succeeded)
	s.claim(req(beta, part(6))) // running: not a success
	other := req(alpha, part(7))
	other.DAG = "tranchetest-other-dag"
	s.finish(s.claim(other), succeeded)

	attempt := func(p tranche.TimePartition, number int) ledger.Attempt {
		s.t.Helper()
		h := s.history(p)
		if len(h) < number {
			s.t.Fatalf("History of %s:\n%swant attempt %d", p.Key(), formatAttempts(h), number)
		}
		return h[number-1]
	}
	all := []ledger.Attempt{attempt(part(0), 2), attempt(part(5), 1), attempt(part(3), 1), attempt(part(2), 1), attempt(part(0), 1)}
	for _, n := range []int{20, 5, 3, 1} {
		if d := diffAttempts(all[:min(n, len(all))], recent(n)); d != "" {
			s.t.Errorf("RecentSuccesses(%d):\n%s", n, d)
		}
	}
	for _, n := range []int{0, -1} {
		if as := recent(n); len(as) != 0 {
			s.t.Errorf("RecentSuccesses(%d):\n%swant none", n, formatAttempts(as))
		}
	}
	if as, err := s.l.RecentSuccesses(s.ctx, "tranchetest-unknown-dag", 20); err != nil || len(as) != 0 {
		s.t.Errorf("RecentSuccesses of an unknown DAG = %v:\n%swant none", err, formatAttempts(as))
	}
}
