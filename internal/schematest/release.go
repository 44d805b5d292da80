package schematest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/ledgertest"
	"github.com/tranche-dev/tranche/ledger/sqlledger"
)

// releaseDay is the partition of CheckRelease's DAG i days after
// 2026-04-01.
func releaseDay(i int) tranche.TimePartition {
	return tranche.PartitionOf(tranche.Day, time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, i))
}

// releaseLedger is the ledger of one case of CheckRelease, on a clock
// of its own.
type releaseLedger struct {
	t     *testing.T
	s     Subject
	l     Ledger
	clock *ledgertest.Clock
	ctx   context.Context
}

const releaseDAG, releaseBackfill = "dag-release", "bf-release"

func (r *releaseLedger) revision() int64 {
	r.t.Helper()
	rev, err := r.l.Revision(r.ctx, releaseDAG)
	if err != nil {
		r.t.Fatalf("Revision = %v", err)
	}
	return rev
}

// next asks ClaimNext for jobs of days (a job of several adjacent days
// for each group) at plan revision rev, wanting them all.
func (r *releaseLedger) next(worker string, rev int64, days ...[]int) []ledger.Grant {
	r.t.Helper()
	var jobs []ledger.Job
	for _, group := range days {
		j := ledger.Job{RunID: fmt.Sprintf("run-%s-%d", worker, group[0])}
		for _, d := range group {
			j.Partitions = append(j.Partitions, releaseDay(d))
		}
		jobs = append(jobs, j)
	}
	grants, err := r.l.ClaimNext(r.ctx, ledger.NextRequest{DAG: releaseDAG, Backfill: releaseBackfill, Worker: worker, Jobs: jobs,
		Want: len(jobs), Lease: time.Minute, Policy: ledger.RerunFailed, Revision: rev})
	if err != nil {
		r.t.Fatalf("ClaimNext of days %v by %s = %v", days, worker, err)
	}
	for i, g := range grants {
		if g.Lease == nil {
			r.t.Fatalf("ClaimNext of days %v by %s: job %d not granted: %v", days, worker, i, g.Err)
		}
	}
	return grants
}

func (r *releaseLedger) history(day int) []ledger.Attempt {
	r.t.Helper()
	h, err := r.l.History(r.ctx, releaseDAG, releaseDay(day).Start)
	if err != nil {
		r.t.Fatalf("History = %v", err)
	}
	return h
}

// states returns the attempts' numbers, workers and states.
func states(h []ledger.Attempt) []string {
	var out []string
	for _, a := range h {
		out = append(out, fmt.Sprintf("%d %s %s", a.Number, a.Worker, a.State))
	}
	return out
}

// CheckRelease checks Release on a ledger of s opened over a fresh
// database on a manual clock, in subtests: a released lease's attempts
// are gone from History, Latest, RevisionIn and ChangedIn, its deferred
// work refused, and a claim after gets attempt 1 again; the release of
// the attempt that held the DAG's highest revision moves the revision
// on, never back, and the changes after it go on above it; a lease
// finished, taken over (a chunk of which one partition was) or of
// another worker is fenced, nothing withdrawn; the release of a lease
// that took a partition over leaves the attempt it failed as the
// latest; and a ClaimNext refused for a canceled backfill moves no
// cursor.
func CheckRelease(t *testing.T, s Subject) {
	setup := func(t *testing.T) *releaseLedger {
		clock := ledgertest.NewClock(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
		r := &releaseLedger{t: t, s: s, clock: clock, ctx: t.Context()}
		r.l = open(t, s.New(t), Options{Now: clock.Now})
		if _, err := r.l.PutBackfill(r.ctx, ledger.BackfillRecord{ID: releaseBackfill, DAG: releaseDAG, Window: "2026-04"}); err != nil {
			t.Fatalf("PutBackfill = %v", err)
		}
		return r
	}

	t.Run("withdrawn", func(t *testing.T) {
		r := setup(t)
		before := r.revision()
		grants := r.next("w1", before, []int{0}, []int{1, 2}, []int{3})
		claimed := r.revision()
		for _, g := range grants[1:] {
			if err := r.l.Release(r.ctx, g.Lease); err != nil {
				t.Fatalf("Release of %v = %v", g.Lease.Partitions, err)
			}
		}
		released := r.revision()
		r.s.revisionAfter(t, "the second Release", released, claimed+1) // one revision each
		for d := 1; d <= 3; d++ {
			if h := r.history(d); len(h) != 0 {
				t.Errorf("History of released day %d = %v; want none", d, states(h))
			}
		}
		if got := states(r.history(0)); !slices.Equal(got, []string{"1 w1 running"}) {
			t.Errorf("History of day 0, not released = %v; want [1 w1 running]", got)
		}
		var starts []time.Time
		for a, err := range r.l.Latest(r.ctx, releaseDAG, releaseDay(0).Start, releaseDay(5).Start) {
			if err != nil {
				t.Fatalf("Latest = %v", err)
			}
			starts = append(starts, a.Start)
		}
		if !slices.Equal(starts, []time.Time{releaseDay(0).Start}) {
			t.Errorf("Latest yields partitions %v; want day 0 alone", starts)
		}
		if rev, err := r.l.RevisionIn(r.ctx, releaseDAG, releaseDay(1).Start, releaseDay(4).Start, before); err != nil || rev != 0 {
			t.Errorf("RevisionIn of the released days = %d, %v; want 0", rev, err)
		}
		if lr, ok := r.l.(ledger.LatestReader); ok {
			if got, err := lr.ChangedIn(r.ctx, releaseDAG, releaseDay(0).Start, releaseDay(5).Start, before); err != nil ||
				!slices.Equal(got, []time.Time{releaseDay(0).Start}) {
				t.Errorf("ChangedIn = %v, %v; want day 0 alone", got, err)
			}
		}
		if d, ok := r.l.(interface {
			Defer(string, []sqlledger.Deferred) error
		}); ok {
			lease := grants[2].Lease
			err := d.Defer("key", []sqlledger.Deferred{{RunID: lease.RunID, Start: lease.Partitions[0].Start, Token: lease.Tokens()[0],
				Work: func(context.Context, *sql.Conn, *sql.Tx) error { return nil }}})
			if !errors.Is(err, sqlledger.ErrNotLeased) {
				t.Errorf("Defer under a released lease = %v; want ErrNotLeased", err)
			}
		}
		again := r.next("w2", released, []int{1, 2}, []int{3})
		if a, b := again[0].Lease.Attempts, again[1].Lease.Attempts; !slices.Equal(a, []int{1, 1}) || !slices.Equal(b, []int{1}) {
			t.Errorf("ClaimNext after the release took attempts %v and %v; want [1 1] and [1]", a, b)
		}
		if h := r.history(1); len(h) != 1 || h[0].Worker != "w2" || h[0].Revision <= released {
			t.Errorf("History of day 1 claimed again = %+v; want one attempt of w2 above revision %d", h, released)
		}
	})

	t.Run("highest revision", func(t *testing.T) {
		r := setup(t)
		r.next("w1", r.revision(), []int{0})
		lease := r.next("w1", r.revision(), []int{1})[0].Lease
		claimed := r.revision()
		if h := r.history(1); len(h) != 1 || h[0].Revision != claimed {
			t.Fatalf("History of day 1 = %+v; want its attempt at the DAG's revision %d", h, claimed)
		}
		if err := r.l.Release(r.ctx, lease); err != nil {
			t.Fatalf("Release = %v", err)
		}
		released := r.revision()
		r.s.revisionAfter(t, "Release of the attempt at the DAG's highest revision", released, claimed)
		r.next("w1", released, []int{2})
		next := r.revision()
		r.s.revisionAfter(t, "ClaimNext after the release", next, released)
		if h := r.history(2); len(h) != 1 || h[0].Revision != next {
			t.Errorf("History of day 2 = %+v; want its attempt at revision %d", h, next)
		}
	})

	t.Run("fenced", func(t *testing.T) {
		r := setup(t)
		grants := r.next("w1", r.revision(), []int{0}, []int{1, 2}, []int{3})
		if err := r.l.Finish(r.ctx, grants[0].Lease, []ledger.Outcome{{State: ledger.StateSucceeded, Rows: 1}}); err != nil {
			t.Fatalf("Finish = %v", err)
		}
		r.clock.Advance(2 * time.Minute) // past every lease
		taken := r.next("w2", r.revision(), []int{2})[0].Lease
		stranger := *grants[2].Lease
		stranger.Worker = "w9"
		rev := r.revision()
		for _, c := range []struct {
			what  string
			lease *ledger.Lease
		}{{"finished", grants[0].Lease}, {"with a partition taken over", grants[1].Lease}, {"of another worker", &stranger}} {
			if err := r.l.Release(r.ctx, c.lease); !errors.Is(err, ledger.ErrFenced) {
				t.Errorf("Release of a lease %s = %v; want ErrFenced", c.what, err)
			}
		}
		if now := r.revision(); now != rev {
			t.Errorf("Revision after fenced releases = %d; want %d, unchanged", now, rev)
		}
		for d, want := range map[int][]string{0: {"1 w1 succeeded"}, 1: {"1 w1 running"}, 2: {"1 w1 failed", "2 w2 running"}, 3: {"1 w1 running"}} {
			if got := states(r.history(d)); !slices.Equal(got, want) {
				t.Errorf("History of day %d after fenced releases = %v; want %v", d, got, want)
			}
		}

		// The lease that took day 2 over is withdrawn: the attempt it
		// failed is the latest again, and the next claim is attempt 2
		// once more.
		if err := r.l.Release(r.ctx, taken); err != nil {
			t.Fatalf("Release of the lease that took day 2 over = %v", err)
		}
		if got := states(r.history(2)); !slices.Equal(got, []string{"1 w1 failed"}) {
			t.Errorf("History of day 2 after its takeover was released = %v; want [1 w1 failed]", got)
		}
		if again := r.next("w3", r.revision(), []int{2})[0].Lease; !slices.Equal(again.Attempts, []int{2}) {
			t.Errorf("the claim after the release took attempt %v; want [2]", again.Attempts)
		}
	})

	t.Run("canceled", func(t *testing.T) {
		r := setup(t)
		r.next("w1", r.revision(), []int{0})
		plan := r.revision()
		if err := r.l.CancelBackfill(r.ctx, releaseBackfill, ledger.CancelOptions{}); err != nil {
			t.Fatalf("CancelBackfill = %v", err)
		}
		grants, err := r.l.ClaimNext(r.ctx, ledger.NextRequest{DAG: releaseDAG, Backfill: releaseBackfill, Worker: "w2",
			Jobs: []ledger.Job{{RunID: "run", Partitions: []tranche.TimePartition{releaseDay(1)}}}, Want: 1, Lease: time.Minute, Revision: plan})
		if grants != nil || !errors.Is(err, ledger.ErrBackfillCanceled) || !errors.Is(err, ledger.ErrNotClaimable) ||
			fmt.Sprint(err) != ledger.CanceledError(releaseBackfill).Error() {
			t.Errorf("ClaimNext of a canceled backfill = %v, %v; want no grant and %v", grants, err, ledger.CanceledError(releaseBackfill))
		}
		if h := r.history(1); len(h) != 0 {
			t.Errorf("History after the refused ClaimNext = %v; want none", states(h))
		}
		if err := r.l.ResumeBackfill(r.ctx, releaseBackfill); err != nil {
			t.Fatalf("ResumeBackfill = %v", err)
		}
		// A plan made before the refused call is not passed over day 1:
		// the call moved no cursor.
		r.next("w3", plan, []int{1}, []int{2})
	})
}
