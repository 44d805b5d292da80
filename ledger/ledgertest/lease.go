package ledgertest

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/ledger"
)

func testFencedAfterTakeover(s *ledgerSuite) {
	p := part(0)
	old := s.claim(req(alpha, p))
	s.clock.Advance(2 * suiteLease)
	cur := s.claim(req(beta, p))
	s.fenced(old)
	s.clock.Advance(time.Second)
	s.finish(cur, ledger.Outcome{State: ledger.StateSucceeded, Rows: 7})
	s.fenced(old) // still fenced after the newer attempt finished
	h := s.history(p)
	if len(h) != 2 || h[1].State != ledger.StateSucceeded || h[1].Rows != 7 || h[1].Worker != beta {
		s.t.Errorf("History; want attempt 2 succeeded by %q with 7 rows:\n%s", beta, formatAttempts(h))
	}
}

func testFencedChunk(s *ledgerSuite) {
	old := s.claim(req(alpha, part(0), part(1)))
	s.clock.Advance(suiteLease)
	s.claim(req(beta, part(1)))
	s.fenced(old) // one partition taken over fences the whole lease
	a := s.only(s.history(part(0)), "the chunk's other partition")
	s.checkAttempt(a, part(0), 1, ledger.StateRunning, alpha)
	// The untouched partition is taken over like any other once its lease
	// has expired.
	lease := s.claim(req(gamma, part(0)))
	if fmt.Sprint(lease.Attempts) != "[2]" {
		s.t.Errorf("takeover %s; want attempt 2", describeLease(lease))
	}
}

func testFencedForeignLease(s *ledgerSuite) {
	p := part(0)
	lease := s.claim(req(alpha, p))
	forge := func(change func(*ledger.Lease)) *ledger.Lease {
		l := *lease
		l.Partitions = append([]tranche.TimePartition(nil), lease.Partitions...)
		l.Attempts = append([]int(nil), lease.Attempts...)
		change(&l)
		return &l
	}
	s.fenced(forge(func(l *ledger.Lease) { l.Worker = beta }))                                      // another worker's name
	s.fenced(forge(func(l *ledger.Lease) { l.Attempts[0] = 2 }))                                    // an attempt that does not exist
	s.fenced(forge(func(l *ledger.Lease) { l.Partitions[0] = part(5) }))                            // a partition never claimed
	s.fenced(forge(func(l *ledger.Lease) { l.DAG = "tranchetest-unknown-dag" }))                    // another DAG
	s.fenced(forge(func(l *ledger.Lease) { l.Partitions = parts(0, 5); l.Attempts = []int{1, 1} })) // one of two
	s.finish(lease, succeeded)                                                                      // the real lease still holds
}

func testFinishTwice(s *ledgerSuite) {
	p := part(0)
	lease := s.claim(req(alpha, p))
	s.finish(lease, succeeded)
	s.fenced(lease)
	s.checkAttempt(s.only(s.history(p), "History"), p, 1, ledger.StateSucceeded, alpha)

	q := part(1)
	lease = s.claim(req(alpha, q))
	s.finish(lease, ledger.StateFailed)
	s.fenced(lease) // a failed attempt is over too
	again := s.claim(req(alpha, q))
	s.fenced(lease) // and the retry by the same worker is a newer attempt
	s.finish(again, succeeded)
}

func testFinishAfterOwnLeaseExpired(s *ledgerSuite) {
	p := part(0)
	lease := s.claim(req(alpha, p))
	s.clock.Advance(10 * suiteLease)
	s.finish(lease, ledger.Outcome{State: ledger.StateSucceeded, Rows: 3})
	a := s.only(s.history(p), "History")
	s.checkAttempt(a, p, 1, ledger.StateSucceeded, alpha)
	if !a.Finished.Equal(s.clock.Now()) || a.Duration() != 10*suiteLease || a.Rows != 3 {
		s.t.Errorf("attempt %s; want finished %v after %v with 3 rows", formatAttempt(a), s.clock.Now(), 10*suiteLease)
	}

	// An expired lease not taken over may also heartbeat back to life.
	q := part(1)
	lease = s.claim(req(alpha, q))
	s.clock.Advance(2 * suiteLease)
	if err := s.l.Heartbeat(s.ctx, lease, suiteLease); err != nil {
		s.t.Fatalf("Heartbeat after the lease expired, not taken over = %v; want nil", err)
	}
	if want := s.clock.Now().Add(suiteLease); !lease.Until.Equal(want) {
		s.t.Errorf("lease.Until = %v after Heartbeat; want %v", lease.Until, want)
	}
	s.refuse(req(beta, q), alpha)
}

func testHeartbeat(s *ledgerSuite) {
	p := part(0)
	t0 := s.clock.Now()
	lease := s.claim(req(alpha, p, part(1)))
	rev := s.revision()
	s.clock.Advance(45 * time.Second)
	if err := s.l.Heartbeat(s.ctx, lease, 2*suiteLease); err != nil {
		s.t.Fatalf("Heartbeat = %v", err)
	}
	until := t0.Add(45*time.Second + 2*suiteLease)
	if !lease.Until.Equal(until) {
		s.t.Errorf("lease.Until = %v after Heartbeat; want now + d = %v", lease.Until, until)
	}
	for _, q := range parts(0, 1) {
		if a := s.only(s.history(q), "History"); !a.LeaseUntil.Equal(until) || a.State != ledger.StateRunning {
			s.t.Errorf("attempt %s after Heartbeat; want running, lease until %v", formatAttempt(a), until)
		}
	}
	if r := s.revision(); r != rev {
		s.t.Errorf("Heartbeat changed Revision from %d to %d; a heartbeat is neither a claim nor a state change", rev, r)
	}
	s.clock.Advance(suiteLease) // past the lease's first Until, within the extended one
	s.refuse(req(beta, p), alpha)
	s.clock.Advance(until.Sub(s.clock.Now())) // now at the extended Until
	lease2 := s.claim(req(beta, p))
	if fmt.Sprint(lease2.Attempts) != "[2]" {
		s.t.Errorf("takeover %s; want attempt 2", describeLease(lease2))
	}
}

// testOutcomeRan: an outcome's Ran moves the attempt's start to its
// finish less Ran, never before the claim; no Ran keeps the claim's
// instant. A Finish of several partitions, and of one (a statement of
// its own in the SQL ledgers), are checked.
func testOutcomeRan(s *ledgerSuite) {
	ps := parts(10, 11, 12)
	claimed := s.clock.Now()
	lease := s.claim(req(alpha, ps...))
	s.clock.Advance(time.Minute)
	finished := s.clock.Now()
	s.finish(lease,
		ledger.Outcome{State: ledger.StateSucceeded, Ran: 20 * time.Second}, // claimed ahead of its run
		ledger.Outcome{State: ledger.StateFailed, Err: "boom"},              // no Ran: from its claim
		ledger.Outcome{State: ledger.StateSucceeded, Ran: time.Hour})        // longer than held: from its claim
	want := []time.Time{finished.Add(-20 * time.Second), claimed, claimed}
	for i, p := range ps {
		a := s.only(s.history(p), "History")
		if !a.Started.Equal(want[i]) || !a.Finished.Equal(finished) {
			s.t.Errorf("attempt %s; want started %v, finished %v", formatAttempt(a), want[i], finished)
		}
	}
	one := parts(13)
	lease = s.claim(req(alpha, one...))
	s.clock.Advance(time.Minute)
	s.finish(lease, ledger.Outcome{State: ledger.StateSucceeded, Ran: 5 * time.Second})
	if a := s.only(s.history(one[0]), "History"); a.Duration() != 5*time.Second {
		s.t.Errorf("attempt %s; want a duration of 5s, its Ran", formatAttempt(a))
	}
}

func testOutcomes(s *ledgerSuite) {
	ps := parts(0, 1, 2)
	t0 := s.clock.Now()
	lease := s.claim(req(alpha, ps...))
	rev := s.revision()
	s.clock.Advance(30 * time.Second)
	want := []ledger.Outcome{
		{State: ledger.StateSucceeded, Rows: 42},
		{State: ledger.StateFailed, Err: "boom", Rows: 5},
		{State: ledger.StateCanceled, Err: "context canceled"},
	}
	s.finish(lease, want[0], want[1], want[2])
	rev2 := s.revision()
	if rev2 <= rev {
		s.t.Errorf("Revision %d after Finish; want more than %d", rev2, rev)
	}
	for i, p := range ps {
		a := s.only(s.history(p), "History")
		s.checkAttempt(a, p, 1, want[i].State, alpha)
		if a.Err != want[i].Err || a.Rows != want[i].Rows {
			s.t.Errorf("attempt %s; want err %q, rows %d", formatAttempt(a), want[i].Err, want[i].Rows)
		}
		if !a.Started.Equal(t0) || !a.Finished.Equal(t0.Add(30*time.Second)) || a.Duration() != 30*time.Second {
			s.t.Errorf("attempt %s; want started %v, finished 30s later", formatAttempt(a), t0)
		}
		if a.Revision != rev2 {
			s.t.Errorf("attempt %s; want revision %d, its Finish", formatAttempt(a), rev2)
		}
	}
}

// testFinishRacesTakeover finishes attempts whose lease has just expired
// while another worker takes them over, at once: either the finish lands
// and the claim is refused, or the takeover lands and the finish is
// fenced, never both.
func testFinishRacesTakeover(s *ledgerSuite) {
	const rounds = 48
	for i := range rounds {
		p := part(i)
		lease := s.claim(req(alpha, p))
		s.clock.Advance(suiteLease)
		var finishErr, claimErr error
		contend(2, func(w int) {
			if w == 0 {
				finishErr = s.l.Finish(s.ctx, lease, []ledger.Outcome{succeeded})
			} else {
				_, claimErr = s.l.Claim(s.ctx, req(beta, p))
			}
		})
		h := s.history(p)
		switch {
		case finishErr == nil && errors.Is(claimErr, ledger.ErrNotClaimable):
			if len(h) != 1 || h[0].State != ledger.StateSucceeded {
				s.t.Errorf("%s: the finish won; History:\n%swant one success", p.Key(), formatAttempts(h))
			}
		case claimErr == nil && errors.Is(finishErr, tranche.ErrFenced):
			if len(h) != 2 || h[0].State != ledger.StateFailed || h[1].State != ledger.StateRunning {
				s.t.Errorf("%s: the takeover won; History:\n%swant attempt 1 failed, attempt 2 running", p.Key(), formatAttempts(h))
			}
		default:
			s.t.Errorf("%s: Finish = %v and a takeover's Claim = %v at once; want one to win, the other refused or fenced\n%s",
				p.Key(), finishErr, claimErr, formatAttempts(h))
		}
	}
}

func testBadFinish(s *ledgerSuite) {
	ps := parts(0, 1)
	lease := s.claim(req(alpha, ps...))
	ok := ledger.Outcome{State: ledger.StateSucceeded}
	cases := []struct {
		name     string
		outcomes []ledger.Outcome
	}{
		{"no outcomes", nil},
		{"too few outcomes", []ledger.Outcome{ok}},
		{"too many outcomes", []ledger.Outcome{ok, ok, ok}},
		{"state running", []ledger.Outcome{ok, {State: ledger.StateRunning}}},
		{"state pending", []ledger.Outcome{{State: ledger.StatePending}, ok}},
		{"no state", []ledger.Outcome{ok, {}}},
		{"unknown state", []ledger.Outcome{ok, {State: "done"}}},
	}
	for _, c := range cases {
		s.t.run(strings.ReplaceAll(c.name, " ", "-"), func(t testingT) {
			s := &ledgerSuite{t: t, ctx: s.ctx, clock: s.clock, l: s.l}
			before := s.snapshot(ps...)
			err := s.l.Finish(s.ctx, lease, c.outcomes)
			switch {
			case err == nil:
				s.t.Errorf("Finish with %s succeeded; want an error", c.name)
			case errors.Is(err, tranche.ErrFenced):
				s.t.Errorf("Finish with %s = %v; want an error not matching ErrFenced (the lease still holds)", c.name, err)
			}
			s.unchanged(before, "Finish with "+c.name)
		})
	}
	s.finish(lease, succeeded, ledger.StateFailed) // the lease survived the refusals
}
