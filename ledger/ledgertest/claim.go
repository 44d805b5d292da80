package ledgertest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/ledger"
)

func testClaimFresh(s *ledgerSuite) {
	p := part(0)
	now := s.clock.Now()
	r := req(alpha, p)
	r.RunID = "run-fresh"
	lease := s.claim(r)
	if lease.DAG != suiteDAG || lease.Backfill != suiteBackfill || lease.Worker != alpha || lease.RunID != "run-fresh" {
		s.t.Errorf("lease names dag %q, backfill %q, worker %q, run %q; want %q, %q, %q, %q",
			lease.DAG, lease.Backfill, lease.Worker, lease.RunID, suiteDAG, suiteBackfill, alpha, "run-fresh")
	}
	if len(lease.Partitions) != 1 || !lease.Partitions[0].Start.Equal(p.Start) || !lease.Partitions[0].End.Equal(p.End) {
		s.t.Errorf("lease.Partitions = %v; want [%v]", lease.Partitions, p)
	}
	if len(lease.Attempts) != 1 || lease.Attempts[0] != 1 {
		s.t.Errorf("lease.Attempts = %v; want [1]", lease.Attempts)
	}
	if want := now.Add(suiteLease); !lease.Until.Equal(want) {
		s.t.Errorf("lease.Until = %v; want the ledger clock's now + lease = %v", lease.Until, want)
	}

	a := s.only(s.history(p), "History after a fresh claim")
	s.checkAttempt(a, p, 1, ledger.StateRunning, alpha)
	if a.DAG != suiteDAG || a.Backfill != suiteBackfill || a.RunID != "run-fresh" || a.Key != p.Key() {
		s.t.Errorf("attempt %s; want dag %q, backfill %q, run %q, key %q", formatAttempt(a), suiteDAG, suiteBackfill, "run-fresh", p.Key())
	}
	if !a.Started.Equal(now) || !a.Finished.IsZero() || !a.LeaseUntil.Equal(lease.Until) || a.Duration() != 0 {
		s.t.Errorf("attempt %s; want started %v, not finished, lease until %v, duration 0", formatAttempt(a), now, lease.Until)
	}
	if a.Err != "" || a.Rows != 0 {
		s.t.Errorf("attempt %s; want no error and no rows while running", formatAttempt(a))
	}
	if rev := s.revision(); a.Revision != rev {
		s.t.Errorf("attempt revision %d; want the ledger's revision %d", a.Revision, rev)
	}
	if d := diffAttempts([]ledger.Attempt{a}, s.latest(suiteFrom, suiteTo)); d != "" {
		s.t.Errorf("Latest after a fresh claim:\n%s", d)
	}
	if h := s.history(part(1)); len(h) != 0 {
		s.t.Errorf("History of an unclaimed partition:\n%s", formatAttempts(h))
	}
	if got := s.latestOf("tranchetest-unknown-dag", suiteFrom, suiteTo); len(got) != 0 {
		s.t.Errorf("Latest of an unknown DAG:\n%s", formatAttempts(got))
	}
}

func testClaimChunk(s *ledgerSuite) {
	ps := parts(3, 1, 2) // a chunk need not be sorted
	lease := s.claim(req(alpha, ps...))
	if fmt.Sprint(lease.Attempts) != "[1 1 1]" || len(lease.Partitions) != 3 {
		s.t.Fatalf("chunk %s; want attempts [1 1 1] on 3 partitions", describeLease(lease))
	}
	for i, p := range ps {
		if !lease.Partitions[i].Start.Equal(p.Start) {
			s.t.Errorf("lease.Partitions[%d] = %v; want %v (the request's order)", i, lease.Partitions[i], p)
		}
	}
	got := s.latest(suiteFrom, suiteTo)
	if len(got) != 3 {
		s.t.Fatalf("Latest after a chunk claim:\n%s", formatAttempts(got))
	}
	for i, a := range got {
		s.checkAttempt(a, part(i+1), 1, ledger.StateRunning, alpha)
		if !a.LeaseUntil.Equal(lease.Until) {
			s.t.Errorf("attempt %s; want lease until %v", formatAttempt(a), lease.Until)
		}
	}
}

func testHeldUnderLiveLease(s *ledgerSuite) {
	p := part(0)
	lease := s.claim(req(alpha, p))
	s.refuse(req(beta, p), alpha)
	s.refuse(req(alpha, p), alpha) // holding a partition does not let its holder claim it again
	s.clock.Advance(suiteLease - time.Second)
	s.refuse(req(beta, p), alpha)
	r := req(beta, p)
	r.Policy = ledger.RerunAll
	r.Revision = s.revision()
	s.refuse(r, alpha) // no policy overrides a live lease
	if err := s.l.Heartbeat(s.ctx, lease, suiteLease); err != nil {
		s.t.Fatalf("Heartbeat of the live lease = %v", err)
	}
}

// testTokensOrderClaims checks the fencing tokens of leases: each
// lease records when the ledger granted it (Claimed, by its clock), its
// tokens hold its attempt numbers, and a later claim of a partition has
// a higher token, a takeover's and another DAG identity's (a deploy)
// alike, whatever their attempt numbers.
func testTokensOrderClaims(s *ledgerSuite) {
	p := part(0)
	t0 := s.clock.Now()
	first := s.claim(req(alpha, p))
	if !first.Claimed.Equal(t0) {
		s.t.Errorf("lease %s claimed at %v; want Claimed %v, the ledger's clock", describeLease(first), first.Claimed, t0)
	}
	tok := func(l *ledger.Lease) int64 { return l.Tokens()[0] }
	if ledger.TokenAttempt(tok(first)) != 1 {
		s.t.Errorf("token %d of attempt 1 reads back attempt %d", tok(first), ledger.TokenAttempt(tok(first)))
	}
	s.clock.Advance(suiteLease)
	takeover := s.claim(req(beta, p))
	if tok(takeover) <= tok(first) || ledger.TokenAttempt(tok(takeover)) != 2 {
		s.t.Errorf("takeover's token %d (attempt %d) after token %d; want a higher token, of attempt 2", tok(takeover), ledger.TokenAttempt(tok(takeover)), tok(first))
	}
	// A changed DAG numbers its attempts from 1, yet its claim comes
	// after the takeover, and so does its token.
	s.clock.Advance(time.Second)
	r := req(gamma, p)
	r.DAG = suiteDAG + "-deployed"
	deployed := s.claim(r)
	if deployed.Attempts[0] != 1 || tok(deployed) <= tok(takeover) {
		s.t.Errorf("the changed DAG's claim: attempt %d, token %d after token %d; want attempt 1, a higher token", deployed.Attempts[0], tok(deployed), tok(takeover))
	}
	// A rerun at the same instant as the failure it reruns: the attempt
	// number orders them.
	s.finish(deployed, ledger.StateFailed)
	rerun := s.claim(r)
	if tok(rerun) <= tok(deployed) {
		s.t.Errorf("a rerun at the failure's instant: token %d after %d; want a higher token", tok(rerun), tok(deployed))
	}
}

func testTakeoverAfterExpiry(s *ledgerSuite) {
	p := part(0)
	t0 := s.clock.Now()
	old := s.claim(req(alpha, p))
	rev0 := s.revision()
	s.clock.Advance(suiteLease) // the lease expires at Until
	t1 := s.clock.Now()
	lease := s.claim(req(beta, p))
	if fmt.Sprint(lease.Attempts) != "[2]" || !lease.Until.Equal(t1.Add(suiteLease)) {
		s.t.Errorf("takeover %s until %v; want attempt 2 until %v", describeLease(lease), lease.Until, t1.Add(suiteLease))
	}
	rev1 := s.revision()
	if rev1 <= rev0 {
		s.t.Errorf("Revision %d after a takeover; want more than %d", rev1, rev0)
	}
	h := s.history(p)
	if len(h) != 2 {
		s.t.Fatalf("History after a takeover: %d attempts; want 2:\n%s", len(h), formatAttempts(h))
	}
	stale, cur := h[0], h[1]
	s.checkAttempt(stale, p, 1, ledger.StateFailed, alpha)
	s.checkAttempt(cur, p, 2, ledger.StateRunning, beta)
	if !strings.Contains(stale.Err, beta) {
		s.t.Errorf("stale attempt's error %q; want a reason naming the new worker %q", stale.Err, beta)
	}
	if !stale.Started.Equal(t0) || stale.Finished.IsZero() || stale.Finished.Before(stale.Started) || stale.Finished.After(t1) {
		s.t.Errorf("stale attempt %s; want started %v and finished in [%v, %v]", formatAttempt(stale), t0, t0, t1)
	}
	if stale.Revision <= rev0 || stale.Revision > rev1 {
		s.t.Errorf("stale attempt revision %d; want in (%d, %d]: the takeover changed it", stale.Revision, rev0, rev1)
	}
	if !cur.Started.Equal(t1) || cur.Revision != rev1 || cur.RunID != "run-"+beta {
		s.t.Errorf("new attempt %s; want started %v, revision %d, run %q", formatAttempt(cur), t1, rev1, "run-"+beta)
	}
	if d := diffAttempts([]ledger.Attempt{cur}, s.latest(suiteFrom, suiteTo)); d != "" {
		s.t.Errorf("Latest after a takeover; want the new attempt:\n%s", d)
	}
	s.fenced(old)

	// A third worker takes over the second attempt in turn.
	s.clock.Advance(suiteLease + time.Second)
	third := s.claim(req(gamma, p))
	if fmt.Sprint(third.Attempts) != "[3]" {
		s.t.Errorf("second takeover %s; want attempt 3", describeLease(third))
	}
	h = s.history(p)
	if len(h) != 3 {
		s.t.Fatalf("History after two takeovers:\n%s", formatAttempts(h))
	}
	s.checkAttempt(h[0], p, 1, ledger.StateFailed, alpha)
	s.checkAttempt(h[1], p, 2, ledger.StateFailed, beta)
	s.checkAttempt(h[2], p, 3, ledger.StateRunning, gamma)
	if !strings.Contains(h[1].Err, gamma) {
		s.t.Errorf("second stale attempt's error %q; want it to name %q", h[1].Err, gamma)
	}
	s.fenced(lease)
	s.finish(third, succeeded)
}

func testRerunPolicies(s *ledgerSuite) {
	states := []ledger.State{ledger.StatePending, ledger.StateSucceeded, ledger.StateFailed, ledger.StateCanceled}
	policies := []struct {
		policy    ledger.RerunPolicy
		claimable map[ledger.State]bool
	}{
		{ledger.RerunNone, map[ledger.State]bool{ledger.StatePending: true}},
		{ledger.RerunFailed, map[ledger.State]bool{ledger.StatePending: true, ledger.StateFailed: true, ledger.StateCanceled: true}},
		{"", map[ledger.State]bool{ledger.StatePending: true, ledger.StateFailed: true, ledger.StateCanceled: true}},
		{ledger.RerunAll, map[ledger.State]bool{ledger.StatePending: true, ledger.StateSucceeded: true, ledger.StateFailed: true, ledger.StateCanceled: true}},
	}
	i := 0
	for _, pol := range policies {
		for _, prior := range states {
			p := part(i)
			i++
			s.t.run(fmt.Sprintf("%s-after-%s", cmpOr(string(pol.policy), "default"), prior), func(t testingT) {
				s := &ledgerSuite{t: t, ctx: s.ctx, clock: s.clock, l: s.l}
				prev := 0
				if prior != ledger.StatePending {
					s.finish(s.claim(req(gamma, p)), prior)
					prev = 1
				}
				r := req(alpha, p)
				r.Policy = pol.policy
				r.Revision = s.revision() // a plan made now
				if !pol.claimable[prior] {
					s.refuse(r, "")
					return
				}
				lease := s.claim(r)
				if fmt.Sprint(lease.Attempts) != fmt.Sprintf("[%d]", prev+1) {
					s.t.Errorf("%s; want attempt %d", describeLease(lease), prev+1)
				}
			})
		}
	}
}

func testRerunAllRevisionBound(s *ledgerSuite) {
	p := part(0)
	s.finish(s.claim(req(gamma, p)), succeeded)
	plan := s.revision()

	r := req(alpha, p)
	r.Policy, r.Revision = ledger.RerunAll, plan
	lease := s.claim(r)
	if fmt.Sprint(lease.Attempts) != "[2]" {
		s.t.Errorf("RerunAll %s; want attempt 2", describeLease(lease))
	}
	s.finish(lease, succeeded)

	// Another worker of the same plan: the partition succeeded after the
	// plan was made, so the plan does not run it again.
	r2 := req(beta, p)
	r2.Policy, r2.Revision = ledger.RerunAll, plan
	s.refuse(r2, "")

	// A plan made before the first success does not rerun it either.
	r3 := req(beta, p)
	r3.Policy, r3.Revision = ledger.RerunAll, 0
	s.refuse(r3, "")

	// A new plan does.
	r4 := req(beta, p)
	r4.Policy, r4.Revision = ledger.RerunAll, s.revision()
	if lease := s.claim(r4); fmt.Sprint(lease.Attempts) != "[3]" {
		s.t.Errorf("RerunAll with a new plan %s; want attempt 3", describeLease(lease))
	}

	// A partition running when the plan was made and succeeding right
	// after it is not run again by that plan.
	q := part(1)
	running := s.claim(req(gamma, q))
	plan = s.revision()
	s.finish(running, succeeded)
	r5 := req(alpha, q)
	r5.Policy, r5.Revision = ledger.RerunAll, plan
	s.refuse(r5, "")
}

func testChunkAllOrNothing(s *ledgerSuite) {
	held := s.claim(req(alpha, part(1)))
	s.refuse(req(beta, parts(0, 1, 2)...), alpha) // held by another
	s.finish(s.claim(req(gamma, part(3))), succeeded)
	s.refuse(req(beta, parts(2, 3, 4)...), "") // succeeded under RerunFailed
	r := req(beta, parts(0, 4)...)
	r.Policy = ledger.RerunNone
	s.finish(s.claim(req(gamma, part(4))), ledger.StateFailed)
	s.refuse(r, "") // failed under RerunNone
	for _, i := range []int{0, 2, 4} {
		if i != 4 && len(s.history(part(i))) != 0 {
			s.t.Errorf("partition %d has attempts after refused chunk claims:\n%s", i, formatAttempts(s.history(part(i))))
		}
	}

	lease := s.claim(req(beta, parts(0, 2, 4)...))
	if fmt.Sprint(lease.Attempts) != "[1 1 2]" {
		s.t.Errorf("chunk %s; want attempts [1 1 2]", describeLease(lease))
	}
	s.clock.Advance(suiteLease)
	takeover := s.claim(req(gamma, parts(1, 5)...))
	if fmt.Sprint(takeover.Attempts) != "[2 1]" {
		s.t.Errorf("chunk takeover %s; want attempts [2 1]", describeLease(takeover))
	}
	s.fenced(held)
}

func testSameInstantOtherLocation(s *ledgerSuite) {
	p := part(0)
	q := tranche.PartitionOf(tranche.Hour, p.Start.In(suiteEST)) // the same hour, in New York's winter offset
	if !q.Start.Equal(p.Start) || !q.End.Equal(p.End) {
		s.t.Fatalf("test bug: %v and %v are not the same instants", p, q)
	}
	lease := s.claim(req(alpha, p))
	s.refuse(req(beta, q), alpha)
	s.refuse(req(beta, in(p, suiteIST)), alpha)
	hp, hq := s.history(p), s.historyOf(suiteDAG, q)
	if d := diffAttempts(hp, hq); d != "" || len(hp) != 1 {
		s.t.Errorf("History by the same instant in two locations differs:\n%s", d)
	}
	if got := s.latest(p.Start.In(suiteEST), p.End.In(suiteIST)); len(got) != 1 {
		s.t.Errorf("Latest with bounds in other locations:\n%s", formatAttempts(got))
	}
	s.finish(lease, succeeded)
	s.refuse(req(beta, q), "")

	// A chunk naming one partition in two locations is malformed.
	before := s.snapshot(part(1))
	if _, err := s.l.Claim(s.ctx, req(beta, part(1), in(part(1), suiteEST))); err == nil {
		s.t.Errorf("Claim of one partition twice, in two locations, succeeded")
	}
	s.unchanged(before, "a claim of one partition twice")
}

func testDAGsAreSeparate(s *ledgerSuite) {
	p := part(0)
	s.claim(req(alpha, p))
	rev := s.revision()
	r := req(beta, p)
	r.DAG = "tranchetest-other-dag"
	other := s.claim(r)
	if fmt.Sprint(other.Attempts) != "[1]" {
		s.t.Errorf("claim in another DAG %s; want attempt 1", describeLease(other))
	}
	if got := s.revision(); got != rev {
		s.t.Errorf("a claim in another DAG changed this DAG's Revision from %d to %d", rev, got)
	}
	s.finish(other, succeeded)
	if got := s.revision(); got != rev {
		s.t.Errorf("a Finish in another DAG changed this DAG's Revision from %d to %d", rev, got)
	}
	s.checkAttempt(s.only(s.history(p), "History"), p, 1, ledger.StateRunning, alpha)
	a := s.only(s.historyOf("tranchetest-other-dag", p), "History of the other DAG")
	s.checkAttempt(a, p, 1, ledger.StateSucceeded, beta)
	if a.DAG != "tranchetest-other-dag" {
		s.t.Errorf("attempt %s; want dag %q", formatAttempt(a), "tranchetest-other-dag")
	}
}

func testConcurrentClaimers(s *ledgerSuite) {
	const workers, n = 8, 64
	var mu sync.Mutex
	claims := make([]int, n)
	contend(workers, func(w int) {
		worker := fmt.Sprintf("worker-%d", w)
		for k := range n {
			i := (k + w*n/workers) % n // each starts elsewhere and meets the others
			if w%2 == 1 {
				i = n - 1 - i
			}
			lease, err := s.l.Claim(s.ctx, req(worker, part(i)))
			if errors.Is(err, ledger.ErrNotClaimable) {
				continue
			}
			if err != nil {
				s.t.Errorf("%s: Claim(%s) = %v", worker, part(i).Key(), err)
				return
			}
			mu.Lock()
			claims[i]++
			mu.Unlock()
			if err := s.l.Heartbeat(s.ctx, lease, suiteLease); err != nil {
				s.t.Errorf("%s: Heartbeat = %v", worker, err)
			}
			if err := s.l.Finish(s.ctx, lease, []ledger.Outcome{succeeded}); err != nil {
				s.t.Errorf("%s: Finish = %v", worker, err)
			}
		}
	})
	for i, c := range claims {
		if c != 1 {
			s.t.Errorf("partition %s claimed %d times by concurrent claimers; want once", part(i).Key(), c)
		}
		if h := s.history(part(i)); len(h) != 1 || h[0].State != ledger.StateSucceeded {
			s.t.Errorf("History of %s; want one success:\n%s", part(i).Key(), formatAttempts(h))
		}
	}
}

func testConcurrentChunkClaimers(s *ledgerSuite) {
	const workers, n, chunk = 8, 64, 3
	var mu sync.Mutex
	claims := make([]int, n)
	contend(workers, func(w int) {
		worker := fmt.Sprintf("worker-%d", w)
		for k := range n {
			i := (k*5 + w*7) % (n - chunk + 1) // overlapping chunks, in different orders
			ps := make([]tranche.TimePartition, chunk)
			for j := range ps {
				ps[j] = part(i + j)
			}
			lease, err := s.l.Claim(s.ctx, req(worker, ps...))
			if errors.Is(err, ledger.ErrNotClaimable) {
				continue
			}
			if err != nil {
				s.t.Errorf("%s: %s = %v", worker, describeReq(req(worker, ps...)), err)
				return
			}
			mu.Lock()
			for j := range ps {
				claims[i+j]++
			}
			mu.Unlock()
			if err := s.l.Finish(s.ctx, lease, []ledger.Outcome{succeeded, succeeded, succeeded}); err != nil {
				s.t.Errorf("%s: Finish = %v", worker, err)
			}
		}
	})
	for i, c := range claims {
		h := s.history(part(i))
		switch {
		case c > 1:
			s.t.Errorf("partition %s claimed %d times by concurrent chunk claimers; want at most once", part(i).Key(), c)
		case len(h) != c:
			s.t.Errorf("partition %s claimed %d times; History:\n%s", part(i).Key(), c, formatAttempts(h))
		case c == 0:
			// No chunk could take it: its neighbours went in other chunks.
			// It is still claimable alone.
			s.finish(s.claim(req(alpha, part(i))), succeeded)
		}
	}
}

// testCodeVersions checks that an attempt keeps the code version of its
// claim, through Claim (one partition, and a chunk) and ClaimNext, in
// History, Latest and RecentSuccesses; and that RerunStale claims a
// success of another code version, and refuses one of the same.
func testCodeVersions(s *ledgerSuite) {
	r := req(alpha, part(0))
	r.CodeVersion = "events=v1"
	s.finish(s.claim(r), succeeded)
	chunk := req(alpha, part(1), part(2))
	chunk.RunID, chunk.CodeVersion = "run-chunk", "events=v1"
	s.finish(s.claim(chunk), succeeded, succeeded)
	plain := req(alpha, part(3))
	plain.RunID = "run-plain"
	s.finish(s.claim(plain), succeeded)
	next := ledger.NextRequest{DAG: suiteDAG, Backfill: suiteBackfill, Worker: beta, Want: 1, Lease: suiteLease, Policy: ledger.RerunFailed,
		Jobs: []ledger.Job{{RunID: "run-next", Partitions: parts(4)}}, CodeVersion: "events=v1"}
	grants, err := s.l.ClaimNext(s.ctx, next)
	if err != nil || len(grants) != 1 || grants[0].Lease == nil {
		s.t.Fatalf("ClaimNext = %v, %v; want a lease", grants, err)
	}
	s.finish(grants[0].Lease, succeeded)
	for i, want := range []string{"events=v1", "events=v1", "events=v1", "", "events=v1"} {
		if h := s.history(part(i)); len(h) != 1 || h[0].CodeVersion != want {
			s.t.Errorf("History of %s = %s; want one attempt of code version %q", part(i).Key(), formatAttempts(h), want)
		}
	}
	for _, a := range s.latest(part(0).Start, part(5).Start) {
		if want := map[bool]string{true: "", false: "events=v1"}[a.Key == part(3).Key()]; a.CodeVersion != want {
			s.t.Errorf("Latest: %s has code version %q; want %q", a.Key, a.CodeVersion, want)
		}
	}
	recent, err := s.l.RecentSuccesses(s.ctx, suiteDAG, 10)
	if err != nil || len(recent) != 5 {
		s.t.Fatalf("RecentSuccesses = %d, %v; want 5", len(recent), err)
	}

	stale := req(beta, part(0))
	stale.Policy, stale.CodeVersion, stale.RunID = ledger.RerunStale, "events=v1", "run-stale-same"
	s.refuse(stale, "")
	stale.CodeVersion, stale.RunID = "events=v2", "run-stale-new"
	lease := s.claim(stale)
	s.finish(lease, succeeded)
	if h := s.history(part(0)); len(h) != 2 || h[1].CodeVersion != "events=v2" {
		s.t.Errorf("History after the stale rerun = %s; want a second attempt of events=v2", formatAttempts(h))
	}
	stale.Partitions, stale.RunID = parts(3), "run-stale-plain"
	s.finish(s.claim(stale), succeeded) // "" is another version than events=v2
}

// testDeployVersions checks the rule of deploys
// (ledger.ClaimRequest.JudgeVersion): the old DAG's backfill, created
// before the new DAG (another identity, one name) landed partitions, does
// not claim them, in Claim or ClaimNext, unless under RerunAll; a backfill
// created after them (a rollback started afresh) does, and so do a
// backfill of no name and a partition of other bounds.
func testDeployVersions(s *ledgerSuite) {
	const (
		oldDAG, newDAG = suiteDAG + "-v1", suiteDAG + "-v2"
		name           = "deploy-events"
	)
	put := func(id, dag, name string) {
		s.t.Helper()
		if _, err := s.l.PutBackfill(s.ctx, ledger.BackfillRecord{ID: id, DAG: dag, DAGName: name, Window: "2024-03", Chunk: 1}); err != nil {
			s.t.Fatalf("PutBackfill(%s) = %v", id, err)
		}
	}
	claim := func(dag, backfill, worker string, policy ledger.RerunPolicy, ps ...tranche.TimePartition) ledger.ClaimRequest {
		r := req(worker, ps...)
		r.DAG, r.Backfill, r.Policy, r.RunID = dag, backfill, policy, "run-"+backfill+"-"+ps[0].Key()
		return r
	}
	day := tranche.PartitionOf(tranche.Day, part(48).Start) // starts with part(48), ends later
	// The new DAG lands part(9) before the old DAG's backfill exists.
	put("bf-new", newDAG, name)
	s.finish(s.claim(claim(newDAG, "bf-new", beta, "", part(9))), succeeded)
	s.clock.Advance(time.Second)
	put("bf-old", oldDAG, name)
	put("bf-unnamed", oldDAG, "")
	put("bf-other-name", oldDAG, "other")
	s.clock.Advance(time.Second)
	// The deploy: the new DAG lands 0, 1, 2, 15 and the day, and holds 3.
	for _, p := range []tranche.TimePartition{part(0), part(1), part(2), part(15), day} {
		s.finish(s.claim(claim(newDAG, "bf-new", beta, "", p)), succeeded)
	}
	running := s.claim(claim(newDAG, "bf-new", beta, "", part(3)))
	s.clock.Advance(time.Second)

	// The old DAG's backfill skips what the new DAG landed since it was
	// created, and waits for what it holds.
	for _, ps := range [][]tranche.TimePartition{parts(0), parts(1), parts(4, 5, 2)} {
		r := claim(oldDAG, "bf-old", alpha, ledger.RerunFailed, ps...)
		s.refuse(r, beta)
		if _, err := s.l.Claim(s.ctx, r); !errors.Is(err, ledger.ErrSuperseded) {
			s.t.Errorf("%s = %v; want an error matching ErrSuperseded", describeReq(r), err)
		}
	}
	s.refuse(claim(oldDAG, "bf-old", alpha, ledger.RerunStale, part(3)), beta)
	if _, err := s.l.Claim(s.ctx, claim(oldDAG, "bf-old", alpha, "", part(3))); errors.Is(err, ledger.ErrSuperseded) {
		s.t.Errorf("a claim of a partition the new DAG is running = %v; want it held, not superseded", err)
	}
	next := ledger.NextRequest{DAG: oldDAG, Backfill: "bf-old", Worker: alpha, Want: 3, Lease: suiteLease, Policy: ledger.RerunFailed,
		Jobs: []ledger.Job{{RunID: "next-0", Partitions: parts(0)}, {RunID: "next-1", Partitions: parts(1)}, {RunID: "next-3", Partitions: parts(3)},
			{RunID: "next-4", Partitions: parts(4)}, {RunID: "next-5", Partitions: parts(5, 6)}, {RunID: "next-7", Partitions: parts(7, 8, 9)}}}
	grants := s.expect(next, "RRRLLL")
	for i, want := range []bool{true, true, false} {
		if got := errors.Is(grants[i].Err, ledger.ErrSuperseded); got != want {
			s.t.Errorf("ClaimNext: job %d refused with %v; want ErrSuperseded %v", i, grants[i].Err, want)
		}
	}
	finishAll := func(ls []*ledger.Lease) {
		s.t.Helper()
		for _, l := range ls {
			outcomes := make([]any, len(l.Partitions))
			for i := range outcomes {
				outcomes[i] = succeeded
			}
			s.finish(l, outcomes...)
		}
	}
	finishAll(leases(grants))
	// The next ClaimNext, descending, refuses the new DAG's partitions
	// again and claims what is left.
	desc := ledger.NextRequest{DAG: oldDAG, Backfill: "bf-old", Worker: alpha, Want: 2, Lease: suiteLease, Policy: ledger.RerunFailed, Descending: true,
		Jobs: []ledger.Job{{RunID: "desc-11", Partitions: parts(11)}, {RunID: "desc-2", Partitions: parts(2)}, {RunID: "desc-1", Partitions: parts(1)}, {RunID: "desc-0", Partitions: parts(0)}}}
	finishAll(leases(s.expect(desc, "LRRR")))

	// What the new DAG landed before the backfill was created, a
	// partition of other bounds, and RerunAll are not bound; nor are
	// backfills of no name or another name.
	for _, r := range []ledger.ClaimRequest{
		claim(oldDAG, "bf-old", alpha, ledger.RerunFailed, part(48)),
		claim(oldDAG, "bf-old", alpha, ledger.RerunAll, part(0)),
		claim(oldDAG, "bf-unnamed", gamma, ledger.RerunFailed, part(1)),
		claim(oldDAG, "bf-other-name", gamma, ledger.RerunFailed, part(2)),
	} {
		s.finish(s.claim(r), succeeded)
	}
	// A rollback started afresh (a backfill created after the deploy)
	// replaces what the new DAG landed before it, not after.
	s.clock.Advance(time.Second)
	put("bf-rollback", oldDAG, name)
	s.clock.Advance(time.Second)
	s.finish(running, succeeded) // part(3), after the rollback's creation
	s.finish(s.claim(claim(newDAG, "bf-new", beta, "", part(12))), succeeded)
	s.clock.Advance(time.Second)
	rollback := ledger.NextRequest{DAG: oldDAG, Backfill: "bf-rollback", Worker: gamma, Want: 4, Lease: suiteLease, Policy: ledger.RerunFailed,
		Jobs: []ledger.Job{{RunID: "rb-3", Partitions: parts(3)}, {RunID: "rb-12", Partitions: parts(12)},
			{RunID: "rb-13", Partitions: parts(13)}, {RunID: "rb-15", Partitions: parts(15)}}}
	grants = s.expect(rollback, "RRLL")
	for _, i := range []int{0, 1} {
		if !errors.Is(grants[i].Err, ledger.ErrSuperseded) {
			s.t.Errorf("the rollback's job %d = %v; want ErrSuperseded: the new DAG landed it after the rollback was created", i, grants[i].Err)
		}
	}
}

// testDeployVersionsHeld checks the order of the claim rules where both
// bind: a partition that the backfill's own DAG holds under a live lease
// and that another version of the DAG landed since the backfill was
// created is refused as held by its own DAG's worker, in Claim and
// ClaimNext, as a backfill's plan judges it (its own history first,
// ledger.ClaimRequest.Judge, then ledger.ClaimRequest.JudgeVersion);
// not as superseded.
func testDeployVersionsHeld(s *ledgerSuite) {
	const (
		oldDAG, newDAG = suiteDAG + "-v1", suiteDAG + "-v2"
		name           = "deploy-held"
	)
	put := func(id, dag string) {
		s.t.Helper()
		if _, err := s.l.PutBackfill(s.ctx, ledger.BackfillRecord{ID: id, DAG: dag, DAGName: name, Window: "2024-03", Chunk: 1}); err != nil {
			s.t.Fatalf("PutBackfill(%s) = %v", id, err)
		}
	}
	claim := func(dag, backfill, worker string, ps ...tranche.TimePartition) ledger.ClaimRequest {
		r := req(worker, ps...)
		r.DAG, r.Backfill, r.RunID = dag, backfill, "run-"+dag+"-"+worker+"-"+ps[0].Key()
		return r
	}
	// The old DAG's backfill holds 0 and 2; the deploy's backfill,
	// created after those claims (which therefore do not bind it),
	// lands 0, 1 and 2.
	put("bf-old", oldDAG)
	s.clock.Advance(time.Second)
	s.claim(claim(oldDAG, "bf-old", alpha, part(0)))
	s.claim(claim(oldDAG, "bf-old", alpha, part(2)))
	s.clock.Advance(time.Second)
	put("bf-new", newDAG)
	s.clock.Advance(time.Second)
	for _, p := range parts(0, 1, 2) {
		s.finish(s.claim(claim(newDAG, "bf-new", beta, p)), succeeded)
	}
	s.clock.Advance(time.Second)
	for _, r := range []ledger.ClaimRequest{
		claim(oldDAG, "bf-old", gamma, part(0)),
		claim(oldDAG, "bf-old", gamma, part(2), part(1)), // part(2) first: held, before part(1)'s superseded
	} {
		s.refuse(r, alpha)
		if _, err := s.l.Claim(s.ctx, r); errors.Is(err, ledger.ErrSuperseded) {
			s.t.Errorf("%s = %v; want it held by the backfill's own DAG, judged first, not superseded", describeReq(r), err)
		}
	}
	next := ledger.NextRequest{DAG: oldDAG, Backfill: "bf-old", Worker: gamma, Want: 1, Lease: suiteLease, Policy: ledger.RerunFailed,
		Jobs: []ledger.Job{{RunID: "next-0", Partitions: parts(0)}, {RunID: "next-1", Partitions: parts(1)}, {RunID: "next-3", Partitions: parts(3)}}}
	grants := s.expect(next, "RRL")
	if err := grants[0].Err; errors.Is(err, ledger.ErrSuperseded) || !strings.Contains(err.Error(), alpha) {
		s.t.Errorf("ClaimNext: job 0 refused with %v; want it held by %s, not superseded", err, alpha)
	}
	if err := grants[1].Err; !errors.Is(err, ledger.ErrSuperseded) {
		s.t.Errorf("ClaimNext: job 1 refused with %v; want ErrSuperseded", err)
	}
}

// testNotBefore checks ClaimRequest.NotBefore, a scheduler's bound: a
// claim made before it by the ledger's clock is refused with an
// *EarlyError carrying that clock, writing nothing, whatever the
// history of its partitions; at it, or after, it is granted.
func testNotBefore(s *ledgerSuite) {
	slot := func(i int) ledger.ClaimRequest { // a scheduler's claim of a slot
		r := req(alpha, part(i))
		r.Backfill, r.Policy, r.Trigger = "", ledger.RerunNone, ledger.TriggerLive
		return r
	}
	early := func(r ledger.ClaimRequest, wait time.Duration, what string) {
		s.t.Helper()
		r.NotBefore = s.clock.Now().Add(wait)
		before := s.snapshot(r.Partitions...)
		lease, err := s.l.Claim(s.ctx, r)
		var e *ledger.EarlyError
		switch {
		case err == nil:
			s.t.Fatalf("%s, %v before its NotBefore, granted %s; want an *ledger.EarlyError", what, wait, describeLease(lease))
		case !errors.Is(err, ledger.ErrNotClaimable) || !errors.As(err, &e):
			s.t.Fatalf("%s, %v before its NotBefore = %v; want an *ledger.EarlyError matching ErrNotClaimable", what, wait, err)
		case !e.NotBefore.Equal(r.NotBefore) || !e.Now.Equal(s.clock.Now()) || e.Wait() != wait:
			s.t.Errorf("%s: %#v waits %v; want NotBefore %v, Now the ledger's clock %v, Wait %v", what, e, e.Wait(), r.NotBefore, s.clock.Now(), wait)
		}
		s.unchanged(before, what+" (refused as early)")
	}
	early(slot(0), time.Minute, "the first claim of a DAG")
	if got := s.latest(suiteFrom, suiteTo); len(got) != 0 {
		s.t.Fatalf("Latest after an early claim:\n%s", formatAttempts(got))
	}
	s.finish(s.claim(slot(1)), succeeded) // a zero NotBefore bounds nothing
	early(slot(0), time.Minute, "a claim of a fresh partition")
	early(slot(0), time.Second, "a claim a second early")
	failed := req(beta, part(2))
	s.finish(s.claim(failed), ledger.StateFailed)
	early(req(alpha, part(2)), time.Hour, "a rerun of a failed partition")
	early(req(alpha, parts(3, 4)...), time.Minute, "a chunk claim")

	r := slot(0)
	r.NotBefore = s.clock.Now().Add(time.Minute)
	s.clock.Advance(time.Minute)
	lease := s.claim(r) // at NotBefore
	if !lease.Claimed.Equal(r.NotBefore) {
		s.t.Errorf("lease claimed at %v; want at its NotBefore, %v", lease.Claimed, r.NotBefore)
	}
	a := s.only(s.history(part(0)), "History after a claim at its NotBefore")
	s.checkAttempt(a, part(0), 1, ledger.StateRunning, alpha)
	if !a.Started.Equal(r.NotBefore) {
		s.t.Errorf("attempt %s; want started at its NotBefore, %v", formatAttempt(a), r.NotBefore)
	}
	r = req(alpha, parts(3, 4)...)
	r.NotBefore = s.clock.Now().Add(-time.Hour)
	s.claim(r) // after NotBefore
	r = req(alpha, part(2))
	r.NotBefore = s.clock.Now().Add(-time.Second)
	if lease := s.claim(r); lease.Attempts[0] != 2 {
		s.t.Errorf("rerun of a failed partition after its NotBefore: %s; want attempt 2", describeLease(lease))
	}

	// A canceled backfill's claim is refused as canceled, early or not.
	if _, err := s.l.PutBackfill(s.ctx, ledger.BackfillRecord{ID: suiteBackfill, DAG: suiteDAG}); err != nil {
		s.t.Fatal(err)
	}
	if err := s.l.CancelBackfill(s.ctx, suiteBackfill, ledger.CancelOptions{}); err != nil {
		s.t.Fatal(err)
	}
	for _, ps := range [][]tranche.TimePartition{parts(6), parts(2), parts(7, 8)} {
		r := req(beta, ps...)
		r.NotBefore = s.clock.Now().Add(time.Minute)
		if _, err := s.l.Claim(s.ctx, r); !errors.Is(err, ledger.ErrBackfillCanceled) {
			s.t.Errorf("%s of a canceled backfill, a minute early = %v; want an error matching ErrBackfillCanceled", describeReq(r), err)
		}
	}
}

func testBadClaims(s *ledgerSuite) {
	s.claim(req(gamma, part(9))) // something to leave alone
	cases := []struct {
		name   string
		change func(*ledger.ClaimRequest)
	}{
		{"no DAG", func(r *ledger.ClaimRequest) { r.DAG = "" }},
		{"no worker", func(r *ledger.ClaimRequest) { r.Worker = "" }},
		{"nil partitions", func(r *ledger.ClaimRequest) { r.Partitions = nil }},
		{"empty partitions", func(r *ledger.ClaimRequest) { r.Partitions = []tranche.TimePartition{} }},
		{"zero partition", func(r *ledger.ClaimRequest) { r.Partitions = []tranche.TimePartition{{}} }},
		{"zero partition in a chunk", func(r *ledger.ClaimRequest) { r.Partitions = append(parts(0, 1), tranche.TimePartition{}) }},
		{"empty partition", func(r *ledger.ClaimRequest) {
			r.Partitions = []tranche.TimePartition{{Start: part(0).Start, End: part(0).Start, Granularity: tranche.Hour}}
		}},
		{"inverted partition", func(r *ledger.ClaimRequest) {
			r.Partitions = []tranche.TimePartition{{Start: part(0).End, End: part(0).Start, Granularity: tranche.Hour}}
		}},
		{"one partition twice", func(r *ledger.ClaimRequest) { r.Partitions = parts(0, 1, 0) }},
		{"zero lease", func(r *ledger.ClaimRequest) { r.Lease = 0 }},
		{"negative lease", func(r *ledger.ClaimRequest) { r.Lease = -time.Minute }},
		{"unknown policy", func(r *ledger.ClaimRequest) { r.Policy = "sometimes" }},
		{"policy in capitals", func(r *ledger.ClaimRequest) { r.Policy = "ALL" }},
	}
	for _, c := range cases {
		s.t.run(strings.ReplaceAll(c.name, " ", "-"), func(t testingT) {
			s := &ledgerSuite{t: t, ctx: s.ctx, clock: s.clock, l: s.l}
			r := req(alpha, parts(0, 1)...)
			c.change(&r)
			var ps []tranche.TimePartition
			for _, p := range r.Partitions {
				if p.Granularity.IsValid() && !p.Start.IsZero() {
					ps = append(ps, p)
				}
			}
			before := s.snapshot(append(ps, part(9))...)
			lease, err := s.l.Claim(s.ctx, r)
			switch {
			case err == nil:
				s.t.Errorf("Claim with %s granted %s; want an error", c.name, describeLease(lease))
			case errors.Is(err, ledger.ErrNotClaimable):
				s.t.Errorf("Claim with %s = %v; want an error not matching ErrNotClaimable (the request is wrong, not the partition)", c.name, err)
			}
			s.unchanged(before, "Claim with "+c.name)
		})
	}
}
