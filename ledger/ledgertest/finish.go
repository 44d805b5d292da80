package ledgertest

import (
	"errors"
	"fmt"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/ledger"
)

// The checks of ledger.FinishBatch: through the ledger's
// ledger.BatchFinisher where it has one, and otherwise through Finish a
// lease at a time, each finish of a batch recorded or fenced as Finish
// alone would record or fence it.

// finishBatch calls ledger.FinishBatch and checks that it returns an
// error for each finish.
func (s *ledgerSuite) finishBatch(batch []ledger.Finish) []error {
	s.t.Helper()
	errs := ledger.FinishBatch(s.ctx, s.l, batch)
	if len(errs) != len(batch) {
		s.t.Fatalf("FinishBatch of %d finishes returned %d errors; want one a finish", len(batch), len(errs))
	}
	return errs
}

// fin is the finish of lease with outcomes, each a State or an Outcome.
func fin(lease *ledger.Lease, outcomes ...any) ledger.Finish {
	return ledger.Finish{Lease: lease, Outcomes: outcomesOf(outcomes...)}
}

// testFinishBatch records live leases of one partition and of several,
// of two workers and two DAGs, in one batch, with the outcomes, rows,
// errors and durations of each.
func testFinishBatch(s *ledgerSuite) {
	if errs := s.finishBatch(nil); len(errs) != 0 {
		s.t.Errorf("FinishBatch(nil) = %v; want no errors", errs)
	}
	claimed := s.clock.Now()
	a := s.claim(req(alpha, part(0)))
	b := s.claim(req(alpha, part(1)))
	chunk := s.claim(req(alpha, part(2), part(3)))
	g := s.claim(req(gamma, part(4)))
	other := req(alpha, part(0))
	other.DAG = "tranchetest-other-dag"
	o := s.claim(other)
	if bf, ok := s.l.(ledger.BatchFinisher); ok && bf.FinishesAlone(a) {
		s.t.Errorf("FinishesAlone(%s) = true for a lease no write was handed for; want false", describeLease(a))
	}
	rev := s.revision()
	s.clock.Advance(time.Minute)
	finished := s.clock.Now()
	errs := s.finishBatch([]ledger.Finish{
		fin(a, ledger.Outcome{State: ledger.StateSucceeded, Rows: 3, Ran: 20 * time.Second}),
		fin(b, ledger.Outcome{State: ledger.StateFailed, Err: "boom"}),
		fin(chunk, ledger.Outcome{State: ledger.StateSucceeded, Rows: 1}, ledger.Outcome{State: ledger.StateCanceled, Err: "stopped"}),
		fin(g, succeeded),
		fin(o, succeeded),
	})
	for i, err := range errs {
		if err != nil {
			s.t.Errorf("FinishBatch: finish %d = %v; want nil", i, err)
		}
	}
	want := []struct {
		state   ledger.State
		worker  string
		rows    int64
		err     string
		started time.Time
	}{
		{ledger.StateSucceeded, alpha, 3, "", finished.Add(-20 * time.Second)},
		{ledger.StateFailed, alpha, 0, "boom", claimed},
		{ledger.StateSucceeded, alpha, 1, "", claimed},
		{ledger.StateCanceled, alpha, 0, "stopped", claimed},
		{ledger.StateSucceeded, gamma, 1, "", claimed},
	}
	for i, w := range want {
		at := s.only(s.history(part(i)), "History")
		s.checkAttempt(at, part(i), 1, w.state, w.worker)
		if at.Rows != w.rows || at.Err != w.err || !at.Started.Equal(w.started) || !at.Finished.Equal(finished) || at.Revision <= rev {
			s.t.Errorf("attempt %s; want rows %d, error %q, started %v, finished %v, a revision above %d",
				formatAttempt(at), w.rows, w.err, w.started, finished, rev)
		}
	}
	s.checkAttempt(s.only(s.historyOf(other.DAG, part(0)), "History of the other DAG"), part(0), 1, ledger.StateSucceeded, alpha)
	if r := s.revision(); r <= rev {
		s.t.Errorf("Revision after FinishBatch = %d; want above %d", r, rev)
	}
	// Each lease is over: fenced alone, and in a batch again.
	for _, lease := range []*ledger.Lease{a, chunk, g} {
		s.fenced(lease)
	}
	before := s.snapshot(parts(0, 1, 2, 3, 4)...)
	for i, err := range s.finishBatch([]ledger.Finish{fin(a, succeeded), fin(chunk, succeeded, succeeded), fin(g, succeeded)}) {
		if !errors.Is(err, tranche.ErrFenced) {
			s.t.Errorf("FinishBatch of finished leases: finish %d = %v; want an error matching ErrFenced", i, err)
		}
	}
	s.unchanged(before, "FinishBatch of finished leases")
}

// testFinishBatchCanceled records finishes of a backfill's leases, of
// one partition and of several, before and after the backfill is
// canceled, beside a lease of no backfill: each recorded finish tells
// whether its backfill was canceled as it was recorded
// (ledger.Finish.Canceled), so that a worker learns of a cancellation
// from the call that ends a run.
func testFinishBatchCanceled(s *ledgerSuite) {
	if _, err := s.l.PutBackfill(s.ctx, ledger.BackfillRecord{ID: suiteBackfill, DAG: suiteDAG, Window: "2024-03-01/2024-03-31", Chunk: 1}); err != nil {
		s.t.Fatalf("PutBackfill = %v", err)
	}
	before := s.claim(req(alpha, part(0)))
	one := s.claim(req(alpha, part(1)))
	chunk := s.claim(req(alpha, part(2), part(3)))
	plain := req(alpha, part(4))
	plain.Backfill = ""
	none := s.claim(plain)
	batch := []ledger.Finish{fin(before, succeeded)}
	if errs := s.finishBatch(batch); errs[0] != nil || batch[0].Canceled {
		s.t.Errorf("FinishBatch before the cancel: %v, Canceled %v; want nil, false", errs[0], batch[0].Canceled)
	}
	if err := s.l.CancelBackfill(s.ctx, suiteBackfill, ledger.CancelOptions{}); err != nil {
		s.t.Fatalf("CancelBackfill = %v", err)
	}
	batch = []ledger.Finish{fin(one, succeeded), fin(chunk, succeeded, ledger.StateFailed), fin(none, succeeded)}
	for i, err := range s.finishBatch(batch) {
		if want := i < 2; err != nil || batch[i].Canceled != want {
			s.t.Errorf("FinishBatch after the cancel: finish %d (%s) = %v, Canceled %v; want nil, %v", i, describeLease(batch[i].Lease), err, batch[i].Canceled, want)
		}
	}
	alone := []ledger.Finish{fin(s.claimAfterResume(), succeeded)}
	if errs := s.finishBatch(alone); errs[0] != nil || alone[0].Canceled {
		s.t.Errorf("FinishBatch after the resume: %v, Canceled %v; want nil, false", errs[0], alone[0].Canceled)
	}
}

// claimAfterResume resumes the suite's backfill and claims a partition
// of it.
func (s *ledgerSuite) claimAfterResume() *ledger.Lease {
	s.t.Helper()
	if err := s.l.ResumeBackfill(s.ctx, suiteBackfill); err != nil {
		s.t.Fatalf("ResumeBackfill = %v", err)
	}
	return s.claim(req(alpha, part(5)))
}

// testFinishBatchFenced records a batch that mixes live leases with
// leases taken over, finished, forged and taken over in part: the live
// ones are recorded, the others fail with ErrFenced and write nothing,
// the newer attempts they lost to left running.
func testFinishBatchFenced(s *ledgerSuite) {
	live := s.claim(req(alpha, part(0)))
	old := s.claim(req(alpha, part(1)))
	done := s.claim(req(alpha, part(2)))
	s.finish(done, succeeded)
	chunk := s.claim(req(alpha, part(3), part(4)))
	liveChunk := s.claim(req(alpha, part(5), part(6)))
	late := s.claim(req(alpha, part(7))) // expired, never taken over: it still holds
	s.clock.Advance(suiteLease)
	// Renewed, these two hold; the others' leases have expired.
	for _, l := range []*ledger.Lease{live, liveChunk} {
		if err := s.l.Heartbeat(s.ctx, l, suiteLease); err != nil {
			s.t.Fatalf("Heartbeat(%s) = %v", describeLease(l), err)
		}
	}
	cur := s.claim(req(beta, part(1)))
	curPart := s.claim(req(beta, part(4)))
	forged := *live
	forged.Worker = gamma
	before := s.snapshot(parts(1, 2, 3, 4)...)
	errs := s.finishBatch([]ledger.Finish{
		fin(old, succeeded),
		fin(live, succeeded),
		fin(done, ledger.StateFailed),
		fin(chunk, succeeded, succeeded),
		fin(&forged, succeeded),
		fin(liveChunk, succeeded, ledger.StateFailed),
		fin(late, succeeded),
	})
	for i, wantFenced := range []bool{true, false, true, true, true, false, false} {
		switch err := errs[i]; {
		case wantFenced && !errors.Is(err, tranche.ErrFenced):
			s.t.Errorf("FinishBatch: finish %d = %v; want an error matching ErrFenced", i, err)
		case !wantFenced && err != nil:
			s.t.Errorf("FinishBatch: finish %d = %v; want nil", i, err)
		}
	}
	s.checkAttempt(s.only(s.history(part(0)), "History"), part(0), 1, ledger.StateSucceeded, alpha)
	s.checkAttempt(s.history(part(5))[0], part(5), 1, ledger.StateSucceeded, alpha)
	s.checkAttempt(s.history(part(6))[0], part(6), 1, ledger.StateFailed, alpha)
	s.checkAttempt(s.only(s.history(part(7)), "History"), part(7), 1, ledger.StateSucceeded, alpha)
	// What the fenced finishes named is as it was, but for the
	// revisions and latest attempts of the partitions finished beside
	// them.
	after := s.snapshot(before.parts...)
	for i := range before.histories {
		if d := diffAttempts(before.histories[i], after.histories[i]); d != "" {
			s.t.Errorf("a fenced finish in a batch changed the history of %s; want nothing written:\n%s", before.parts[i].Key(), d)
		}
	}
	// The chunk taken over in part kept its other partition running,
	// under its lease: nothing of it was recorded.
	s.checkAttempt(s.only(s.history(part(3)), "History"), part(3), 1, ledger.StateRunning, alpha)
	// The newer attempts hold, and finish in a batch of their own.
	for i, err := range s.finishBatch([]ledger.Finish{fin(cur, succeeded), fin(curPart, ledger.StateFailed)}) {
		if err != nil {
			s.t.Errorf("FinishBatch of the newer attempts: finish %d = %v; want nil", i, err)
		}
	}
	s.checkAttempt(s.history(part(1))[1], part(1), 2, ledger.StateSucceeded, beta)
	s.checkAttempt(s.history(part(4))[1], part(4), 2, ledger.StateFailed, beta)

	// A lease given twice is recorded once; the other finish is fenced.
	twice := s.claim(req(alpha, part(8)))
	errs = s.finishBatch([]ledger.Finish{fin(twice, succeeded), fin(twice, ledger.StateFailed)})
	if n := countNil(errs); n != 1 || !errors.Is(errs[0], tranche.ErrFenced) && !errors.Is(errs[1], tranche.ErrFenced) {
		s.t.Errorf("FinishBatch of one lease twice = %v; want one nil, one matching ErrFenced", errs)
	}
	if a := s.only(s.history(part(8)), "History"); !a.State.Terminal() {
		s.t.Errorf("attempt %s; want it finished", formatAttempt(a))
	}

	// A finish the ledger refuses (its outcomes do not match its
	// partitions) fails alone.
	bad := s.claim(req(alpha, part(9), part(10)))
	good := s.claim(req(alpha, part(11)))
	errs = s.finishBatch([]ledger.Finish{fin(bad, succeeded), fin(good, succeeded)})
	if errs[0] == nil || errs[1] != nil {
		s.t.Errorf("FinishBatch of a finish with too few outcomes and a good one = %v; want an error, then nil", errs)
	}
	s.checkAttempt(s.only(s.history(part(9)), "History"), part(9), 1, ledger.StateRunning, alpha)
	s.checkAttempt(s.only(s.history(part(11)), "History"), part(11), 1, ledger.StateSucceeded, alpha)
}

func countNil(errs []error) int {
	n := 0
	for _, err := range errs {
		if err == nil {
			n++
		}
	}
	return n
}

// testFinishBatchRacesTakeover finishes batches of expired leases, of
// one partition and of two, while other workers take their partitions
// over: each lease is recorded whole or fenced, never in part, and a
// partition's takeover and its finish never both win.
func testFinishBatchRacesTakeover(s *ledgerSuite) {
	const rounds, leases = 12, 6
	for r := range rounds {
		base := r * leases * 2
		batch := make([]ledger.Finish, leases)
		for i := range leases {
			ps := []tranche.TimePartition{part(base + 2*i)}
			if i%2 == 1 {
				ps = append(ps, part(base+2*i+1))
			}
			lease := s.claim(req(alpha, ps...))
			outcomes := make([]any, len(ps))
			for k := range outcomes {
				outcomes[k] = succeeded
			}
			batch[i] = fin(lease, outcomes...)
		}
		s.clock.Advance(suiteLease)
		var errs []error
		claimErrs := make([]error, leases)
		contend(leases+1, func(w int) {
			if w == leases {
				errs = ledger.FinishBatch(s.ctx, s.l, batch)
				return
			}
			// Each taker claims the last partition of one lease.
			ps := batch[w].Lease.Partitions
			_, claimErrs[w] = s.l.Claim(s.ctx, req(fmt.Sprintf("taker-%d", w), ps[len(ps)-1]))
		})
		if len(errs) != leases {
			s.t.Fatalf("FinishBatch of %d finishes returned %d errors", leases, len(errs))
		}
		for i, f := range batch {
			ps := f.Lease.Partitions
			last := s.history(ps[len(ps)-1])
			first := s.history(ps[0])
			switch {
			case errs[i] == nil && errors.Is(claimErrs[i], ledger.ErrNotClaimable):
				if len(last) != 1 || last[0].State != ledger.StateSucceeded || first[len(first)-1].State != ledger.StateSucceeded {
					s.t.Errorf("%s: the finish won; History:\n%s%swant every partition succeeded once", describeLease(f.Lease), formatAttempts(first), formatAttempts(last))
				}
			case claimErrs[i] == nil && errors.Is(errs[i], tranche.ErrFenced):
				if len(last) != 2 || last[0].State != ledger.StateFailed || last[1].State != ledger.StateRunning {
					s.t.Errorf("%s: the takeover won; History:\n%swant attempt 1 failed, attempt 2 running", describeLease(f.Lease), formatAttempts(last))
				}
				if len(ps) > 1 && (len(first) != 1 || first[0].State != ledger.StateRunning) {
					s.t.Errorf("%s: fenced by a takeover of its last partition, but its first was recorded:\n%s", describeLease(f.Lease), formatAttempts(first))
				}
			default:
				s.t.Errorf("%s: FinishBatch's finish = %v and a takeover's Claim = %v at once; want one to win, the other refused or fenced\n%s",
					describeLease(f.Lease), errs[i], claimErrs[i], formatAttempts(last))
			}
		}
	}
}
