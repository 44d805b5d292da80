package ledgertest

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/ledger"
)

// limiter returns the ledger as a ledger.Limiter, or nil when it is not
// one: the checks of the limit are then passed.
func (s *ledgerSuite) limiter() ledger.Limiter {
	lim, _ := s.l.(ledger.Limiter)
	return lim
}

// setLimit sets the suite DAG's limit to max, failing the test on error.
func (s *ledgerSuite) setLimit(lim ledger.Limiter, max int) ledger.Limit {
	s.t.Helper()
	got, err := lim.SetLimit(s.ctx, suiteDAG, ledger.Limit{Max: max, By: "ops", Note: fmt.Sprint("limit ", max)})
	if err != nil {
		s.t.Fatalf("SetLimit(%d) = %v", max, err)
	}
	return got
}

// readLimit reads the suite DAG's limit, failing the test on error.
func (s *ledgerSuite) readLimit(lim ledger.Limiter) ledger.Limit {
	s.t.Helper()
	got, err := lim.Limit(s.ctx, suiteDAG)
	if err != nil {
		s.t.Fatalf("Limit = %v", err)
	}
	return got
}

// limited claims r and wants it refused for the DAG's limit, writing
// nothing to its partitions.
func (s *ledgerSuite) limited(r ledger.ClaimRequest, what string) {
	s.t.Helper()
	before := s.snapshot(r.Partitions...)
	lease, err := s.l.Claim(s.ctx, r)
	if !errors.Is(err, ledger.ErrLimited) || !errors.Is(err, ledger.ErrNotClaimable) {
		s.t.Fatalf("%s: %s = %v, %v; want an error matching ErrLimited and ErrNotClaimable", what, describeReq(r), describeLeaseOrNil(lease), err)
	}
	s.unchanged(before, what)
}

func describeLeaseOrNil(l *ledger.Lease) string {
	if l == nil {
		return "no lease"
	}
	return describeLease(l)
}

// slotReq is a scheduler's claim of slot p, as a live slot.
func slotReq(worker string, p tranche.TimePartition) ledger.ClaimRequest {
	return ledger.ClaimRequest{DAG: suiteDAG, Worker: worker, RunID: "slot-" + p.Key(), Partitions: []tranche.TimePartition{p},
		Lease: suiteLease, Policy: ledger.RerunNone, Trigger: ledger.TriggerLive}
}

// fill claims partitions i... with one backfill claim each (runs of
// their own), returning the leases.
func (s *ledgerSuite) fill(is ...int) []*ledger.Lease {
	s.t.Helper()
	var out []*ledger.Lease
	for _, i := range is {
		r := req(fmt.Sprintf("filler-%d", i), part(i))
		out = append(out, s.claim(r))
	}
	return out
}

func testLimit(s *ledgerSuite) {
	lim := s.limiter()
	if lim == nil {
		return
	}
	if got := s.readLimit(lim); got != (ledger.Limit{}) {
		s.t.Errorf("Limit of a DAG never limited = %+v; want the zero value", got)
	}
	if _, err := lim.SetLimit(s.ctx, suiteDAG, ledger.Limit{Max: -1}); err == nil {
		s.t.Errorf("SetLimit(-1) = nil; want an error")
	}
	set := s.clock.Now()
	got := s.setLimit(lim, 2)
	if got.Max != 2 || got.By != "ops" || got.Note != "limit 2" || got.Since.UnixMilli() != set.UnixMilli() {
		s.t.Errorf("SetLimit(2) = %+v; want Max 2 by ops, since %v", got, set)
	}
	if other, err := lim.Limit(s.ctx, "tranchetest-other-dag"); err != nil || other.Max != 0 {
		s.t.Errorf("Limit of another DAG = %+v, %v; want none", other, err)
	}

	// Two runs hold the limit: a third run of any kind waits, writing
	// nothing; a claim that only records passes.
	held := s.fill(0, 1)
	if got := s.readLimit(lim); got.Running != 2 || got.Waiting != 0 {
		s.t.Errorf("Limit with 2 runs = %+v; want Running 2, Waiting 0", got)
	}
	s.limited(req(gamma, part(2)), "a backfill's claim at the limit")
	manual := ledger.ClaimRequest{DAG: suiteDAG, Worker: gamma, RunID: "manual", Partitions: parts(3), Lease: suiteLease, Policy: ledger.RerunAll}
	s.limited(manual, "a run by hand at the limit")
	s.limited(slotReq(alpha, part(4)), "a live slot at the limit")
	if got := s.readLimit(lim); got.Waiting != 1 {
		s.t.Errorf("Limit after a live slot was refused = %+v; want Waiting 1 (its demand)", got)
	}
	rec := slotReq(beta, part(5))
	rec.Record = true
	s.finish(s.claim(rec), ledger.Outcome{State: ledger.StateCanceled, Err: "skipped"})

	// A run ends: the slot waiting goes first, and no backfill claim,
	// nor ClaimNext, starts meanwhile; a run by hand needs only room.
	s.finish(held[0], succeeded)
	s.limited(req(gamma, part(2)), "a backfill's claim while a slot waits")
	r := nextReq(gamma, span(10, 14), 2, s.revision())
	before := s.snapshot(parts(10, 11, 12, 13)...)
	grants, err := s.l.ClaimNext(s.ctx, r)
	if err != nil || len(grants) != 1 || grants[0].Lease != nil || !errors.Is(grants[0].Err, ledger.ErrLimited) {
		s.t.Fatalf("ClaimNext while a slot waits = %v, %v; want one grant refused with ErrLimited", grants, err)
	}
	s.unchanged(before, "ClaimNext while a slot waits")
	slot := s.claim(slotReq(alpha, part(4)))
	if got := s.readLimit(lim); got.Running != 2 || got.Waiting != 0 {
		s.t.Errorf("Limit once the slot is claimed = %+v; want Running 2, Waiting 0", got)
	}
	s.finish(slot, succeeded)
	s.finish(s.claim(manual), succeeded)

	// With no slot waiting, ClaimNext claims what the limit leaves.
	r = nextReq(gamma, span(10, 14), 4, s.revision())
	if grants, err = s.l.ClaimNext(s.ctx, r); err != nil {
		s.t.Fatalf("%s = %v", describeNext(r), err)
	}
	if n := len(leases(grants)); n != 1 || len(grants) != 1 {
		s.t.Errorf("ClaimNext of 4 with 1 of 2 running granted %d leases; want 1:\n%s", n, describeGrants(r, grants))
	}
	for _, l := range leases(grants) {
		s.finish(l, succeeded)
	}
	s.finish(held[1], succeeded)

	// A chunk claimed as one is one run.
	chunk := req(alpha, parts(20, 21, 22)...)
	chunk.RunID = "chunk"
	s.claim(chunk)
	s.fill(23)
	if got := s.readLimit(lim); got.Running != 2 {
		s.t.Errorf("Limit with a chunk of 3 and a partition running = %+v; want Running 2", got)
	}
	s.limited(req(gamma, part(24)), "a claim with a chunk and a partition running")

	// An expired lease holds no room; a demand lasts its lease only.
	s.clock.Advance(suiteLease + time.Second)
	if got := s.readLimit(lim); got.Running != 0 {
		s.t.Errorf("Limit once every lease expired = %+v; want Running 0", got)
	}
	s.setLimit(lim, 1)
	long := req(alpha, part(30))
	long.Lease = time.Hour
	hold := s.claim(long)
	s.limited(slotReq(beta, part(31)), "a live slot at the limit")
	s.clock.Advance(suiteLease + time.Second)
	if got := s.readLimit(lim); got.Running != 1 || got.Waiting != 0 {
		s.t.Errorf("Limit once the slot's demand lapsed = %+v; want Running 1, Waiting 0", got)
	}
	s.finish(hold, succeeded)
	s.finish(s.claim(req(gamma, part(32))), succeeded)

	// No limit: nothing waits.
	s.setLimit(lim, 0)
	s.fill(40, 41, 42, 43)
	if got := s.readLimit(lim); got.Max != 0 {
		s.t.Errorf("Limit after SetLimit(0) = %+v; want Max 0", got)
	}
}

func testLimitConcurrent(s *ledgerSuite) {
	lim := s.limiter()
	if lim == nil {
		return
	}
	s.setLimit(lim, 3)
	const workers = 12
	var granted atomic.Int32
	contend(workers, func(w int) {
		var err error
		if w%2 == 0 {
			_, err = s.l.Claim(s.ctx, req(fmt.Sprintf("worker-%d", w), part(w)))
			if err == nil {
				granted.Add(1)
			}
		} else {
			r := nextReq(fmt.Sprintf("worker-%d", w), span(100+10*w, 110+10*w), 2, 0)
			r.Backfill = fmt.Sprintf("backfill-%d", w) // a cursor of its own
			var grants []ledger.Grant
			grants, err = s.l.ClaimNext(s.ctx, r)
			granted.Add(int32(len(leases(grants))))
		}
		if err != nil && !errors.Is(err, ledger.ErrLimited) {
			s.t.Errorf("worker %d: %v; want a lease or ErrLimited", w, err)
		}
	})
	if n := granted.Load(); n != 3 {
		s.t.Errorf("%d concurrent claimers under a limit of 3 were granted %d runs; want 3", workers, n)
	}
	if got := s.readLimit(lim); got.Running != 3 {
		s.t.Errorf("Limit after the claimers = %+v; want Running 3", got)
	}

	// Claims and ClaimNext of the same fresh partitions, under another
	// DAG's limit of 2: at most 2 runs, each partition once.
	const dag = "tranchetest-limited-dag"
	if _, err := lim.SetLimit(s.ctx, dag, ledger.Limit{Max: 2, By: "ops"}); err != nil {
		s.t.Fatal(err)
	}
	var mu sync.Mutex
	held := map[string]int{}
	contend(workers, func(w int) {
		worker := fmt.Sprintf("worker-%d", w)
		var got []*ledger.Lease
		if w%2 == 0 {
			r := req(worker, part(300+w%4))
			r.DAG = dag
			if l, err := s.l.Claim(s.ctx, r); err == nil {
				got = append(got, l)
			} else if !errors.Is(err, ledger.ErrNotClaimable) {
				s.t.Errorf("%s: Claim = %v", worker, err)
			}
		} else {
			r := nextReq(worker, span(300, 304), 2, 0)
			r.DAG = dag
			grants, err := s.l.ClaimNext(s.ctx, r)
			if err != nil {
				s.t.Errorf("%s: ClaimNext = %v", worker, err)
			}
			got = leases(grants)
		}
		mu.Lock()
		defer mu.Unlock()
		for _, l := range got {
			for _, p := range l.Partitions {
				held[p.Key()]++
			}
		}
	})
	n := 0
	for key, c := range held {
		n += c
		if c != 1 {
			s.t.Errorf("partition %s granted %d times; want once", key, c)
		}
	}
	if n < 1 || n > 2 {
		s.t.Errorf("claims of one DAG's fresh partitions under a limit of 2 granted %d runs; want 1 or 2", n)
	}
}

// The DAGs of a limit group: the assets of a DAG of several
// granularities, each recorded under an identity of its own, and one
// outside the group.
const (
	groupHours = "tranchetest-group-hours"
	groupDays  = "tranchetest-group-days"
	groupAlone = "tranchetest-group-alone"
	groupName  = "tranchetest-platform"
)

// groupReq is req of the DAG dag.
func groupReq(dag, worker string, p tranche.TimePartition) ledger.ClaimRequest {
	r := req(worker, p)
	r.DAG, r.RunID = dag, dag+"-"+worker+"-"+p.Key()
	return r
}

func testLimitGroup(s *ledgerSuite) {
	lim := s.limiter()
	if lim == nil {
		return
	}
	for _, dag := range []string{groupHours, groupDays} {
		got, err := lim.SetLimit(s.ctx, dag, ledger.Limit{Max: 2, By: "ops", Group: groupName})
		if err != nil || got.Max != 2 || got.Group != groupName {
			s.t.Fatalf("SetLimit(%s, 2 in group %s) = %+v, %v", dag, groupName, got, err)
		}
	}
	// One run of each DAG of the group: the group's limit of 2 is
	// reached for both, and for neither DAG alone.
	hours := s.claim(groupReq(groupHours, alpha, part(0)))
	days := s.claim(groupReq(groupDays, beta, part(0)))
	for _, dag := range []string{groupHours, groupDays} {
		got, err := lim.Limit(s.ctx, dag)
		if err != nil || got.Running != 2 || got.Group != groupName {
			s.t.Errorf("Limit(%s) with a run of each DAG of its group = %+v, %v; want Running 2, Group %s", dag, got, err, groupName)
		}
	}
	s.limited(groupReq(groupHours, gamma, part(1)), "a claim of one DAG of a group whose runs of its other DAGs fill the limit")
	s.limited(groupReq(groupDays, gamma, part(1)), "a claim of another DAG of the group at its limit")
	r := nextReq(gamma, span(10, 14), 2, 0)
	r.DAG = groupDays
	grants, err := s.l.ClaimNext(s.ctx, r)
	if err != nil || len(leases(grants)) != 0 {
		s.t.Errorf("ClaimNext of a DAG of a group at its limit = %v, %v; want nothing granted", grants, err)
	}
	// A DAG outside the group, without a limit, claims as ever.
	s.finish(s.claim(groupReq(groupAlone, gamma, part(1))), succeeded)

	// A slot of one DAG refused for the limit waits before the
	// backfills of every DAG of the group.
	slot := slotReq(alpha, part(5))
	slot.DAG, slot.RunID = groupDays, "group-slot"
	s.limited(slot, "a live slot of a DAG of a group at its limit")
	if got, err := lim.Limit(s.ctx, groupHours); err != nil || got.Waiting != 1 {
		s.t.Errorf("Limit(%s) while a slot of %s waits = %+v, %v; want Waiting 1", groupHours, groupDays, got, err)
	}
	s.finish(hours, succeeded)
	s.limited(groupReq(groupHours, gamma, part(2)), "a backfill's claim of one DAG of a group while a slot of another waits")
	s.finish(s.claim(slot), succeeded)
	next := s.claim(groupReq(groupHours, gamma, part(2)))
	s.limited(groupReq(groupDays, gamma, part(3)), "a claim of a group at its limit again")
	s.finish(next, succeeded)
	s.finish(days, succeeded)

	// Out of the group (Group ""), a DAG's limit counts its own runs.
	if _, err := lim.SetLimit(s.ctx, groupDays, ledger.Limit{Max: 1, By: "ops"}); err != nil {
		s.t.Fatal(err)
	}
	h := s.claim(groupReq(groupHours, alpha, part(6)))
	d := s.claim(groupReq(groupDays, beta, part(6)))
	if got, err := lim.Limit(s.ctx, groupDays); err != nil || got.Running != 1 || got.Group != "" {
		s.t.Errorf("Limit(%s) out of the group = %+v, %v; want Running 1 (its own), no Group", groupDays, got, err)
	}
	if got, err := lim.Limit(s.ctx, groupHours); err != nil || got.Running != 1 {
		s.t.Errorf("Limit(%s), alone in its group = %+v, %v; want Running 1", groupHours, got, err)
	}
	s.finish(h, succeeded)
	s.finish(d, succeeded)
}

func testLimitGroupConcurrent(s *ledgerSuite) {
	lim := s.limiter()
	if lim == nil {
		return
	}
	dags := []string{groupHours, groupDays, groupAlone}
	for _, dag := range dags {
		if _, err := lim.SetLimit(s.ctx, dag, ledger.Limit{Max: 3, By: "ops", Group: groupName}); err != nil {
			s.t.Fatal(err)
		}
	}
	const workers = 12
	var granted atomic.Int32
	contend(workers, func(w int) {
		dag := dags[w%len(dags)]
		var err error
		if w%2 == 0 {
			_, err = s.l.Claim(s.ctx, groupReq(dag, fmt.Sprintf("worker-%d", w), part(w)))
			if err == nil {
				granted.Add(1)
			}
		} else {
			r := nextReq(fmt.Sprintf("worker-%d", w), span(100+10*w, 110+10*w), 2, 0)
			r.DAG, r.Backfill = dag, fmt.Sprintf("backfill-%d", w)
			var grants []ledger.Grant
			grants, err = s.l.ClaimNext(s.ctx, r)
			granted.Add(int32(len(leases(grants))))
		}
		if err != nil && !errors.Is(err, ledger.ErrLimited) {
			s.t.Errorf("worker %d: %v; want a lease or ErrLimited", w, err)
		}
	})
	if n := granted.Load(); n != 3 {
		s.t.Errorf("%d concurrent claimers of the 3 DAGs of a group limited to 3 were granted %d runs; want 3", workers, n)
	}
}
