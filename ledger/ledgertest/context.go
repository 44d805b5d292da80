package ledgertest

import (
	"context"
	"errors"
	"time"

	"github.com/tranche-dev/tranche/ledger"
)

func testCanceledContext(s *ledgerSuite) {
	ctx, cancel := context.WithCancel(s.ctx)
	cancel()
	if _, err := s.l.PutBackfill(s.ctx, ledger.BackfillRecord{ID: suiteBackfill, DAG: suiteDAG}); err != nil {
		s.t.Fatal(err)
	}
	lease := s.claim(req(alpha, part(0)))
	before := s.snapshot(part(0), part(1))
	wantCanceled := func(what string, err error) {
		s.t.Helper()
		if !errors.Is(err, context.Canceled) {
			s.t.Errorf("%s with a canceled context = %v; want an error matching context.Canceled", what, err)
		}
	}
	_, err := s.l.Claim(ctx, req(beta, part(1)))
	wantCanceled("Claim", err)
	until := lease.Until
	s.clock.Advance(time.Second)
	wantCanceled("Heartbeat", s.l.Heartbeat(ctx, lease, suiteLease))
	if !lease.Until.Equal(until) {
		s.t.Errorf("Heartbeat with a canceled context moved lease.Until")
	}
	wantCanceled("Finish", s.l.Finish(ctx, lease, []ledger.Outcome{succeeded}))
	_, err = s.l.History(ctx, suiteDAG, part(0).Start)
	wantCanceled("History", err)
	_, err = s.l.Revision(ctx, suiteDAG)
	wantCanceled("Revision", err)
	n := 0
	for a, err := range s.l.Latest(ctx, suiteDAG, suiteFrom, suiteTo) {
		n++
		if err == nil {
			s.t.Errorf("Latest with a canceled context yielded %s; want an error first", formatAttempt(a))
		} else {
			wantCanceled("Latest", err)
		}
		break
	}
	if n == 0 {
		s.t.Errorf("Latest with a canceled context yielded nothing; want an error")
	}
	_, err = s.l.PutBackfill(ctx, ledger.BackfillRecord{ID: "bf-canceled", DAG: suiteDAG})
	wantCanceled("PutBackfill", err)
	_, err = s.l.Backfill(ctx, suiteBackfill)
	wantCanceled("Backfill", err)
	_, err = s.l.Backfills(ctx)
	wantCanceled("Backfills", err)
	wantCanceled("CancelBackfill", s.l.CancelBackfill(ctx, suiteBackfill, ledger.CancelOptions{StopRunning: true}))
	wantCanceled("ResumeBackfill", s.l.ResumeBackfill(ctx, suiteBackfill))
	_, err = s.l.RevisionIn(ctx, suiteDAG, suiteFrom, suiteTo, 0)
	wantCanceled("RevisionIn", err)
	_, err = s.l.RecentSuccesses(ctx, suiteDAG, 20)
	wantCanceled("RecentSuccesses", err)

	s.unchanged(before, "calls with a canceled context")
	if _, err := s.l.Backfill(s.ctx, "bf-canceled"); !errors.Is(err, ledger.ErrUnknownBackfill) {
		s.t.Errorf("PutBackfill with a canceled context stored the backfill: Backfill = %v", err)
	}
	if b, err := s.l.Backfill(s.ctx, suiteBackfill); err != nil || b.Canceled {
		s.t.Errorf("CancelBackfill with a canceled context canceled the backfill: %+v, %v", b, err)
	}
	s.finish(lease, succeeded)
}
