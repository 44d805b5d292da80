package backfill_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/ledgertest"
	"github.com/tranche-dev/tranche/ledger/memledger"
	"github.com/tranche-dev/tranche/tranchetest"
)

// faultyLedger is the in-memory ledger with faults injected into some of
// its calls: the real ledger records everything else.
type faultyLedger struct {
	ledger.Ledger
	// hang, when it holds of a lease, makes its heartbeats block until
	// their context ends, as a call to an unreachable server does.
	hang func(*ledger.Lease) bool
	// claimErr and finishErr, when not nil, fail the calls they return
	// an error for.
	claimErr  func(ledger.ClaimRequest) error
	finishErr func(*ledger.Lease) error
}

func (l *faultyLedger) Heartbeat(ctx context.Context, lease *ledger.Lease, d time.Duration) error {
	if l.hang != nil && l.hang(lease) {
		<-ctx.Done()
		return ctx.Err()
	}
	return l.Ledger.Heartbeat(ctx, lease, d)
}

func (l *faultyLedger) Claim(ctx context.Context, req ledger.ClaimRequest) (*ledger.Lease, error) {
	if l.claimErr != nil {
		if err := l.claimErr(req); err != nil {
			return nil, err
		}
	}
	return l.Ledger.Claim(ctx, req)
}

// ClaimNext fails as a real ledger's call fails, claiming nothing, when
// claimErr fails the first job it would examine; a job that claimErr
// fails later ends the call before it, to fail the next call.
func (l *faultyLedger) ClaimNext(ctx context.Context, req ledger.NextRequest) ([]ledger.Grant, error) {
	if l.claimErr != nil {
		for i, j := range req.Jobs {
			if err := l.claimErr(req.Claim(j)); err != nil {
				if i == 0 {
					return nil, err
				}
				req.Jobs = req.Jobs[:i]
				break
			}
		}
	}
	return l.Ledger.ClaimNext(ctx, req)
}

func (l *faultyLedger) Finish(ctx context.Context, lease *ledger.Lease, outcomes []ledger.Outcome) error {
	if l.finishErr != nil {
		if err := l.finishErr(lease); err != nil {
			return err
		}
	}
	return l.Ledger.Finish(ctx, lease, outcomes)
}

// leaseDAG is one daily asset, "raw", whose work is work(ctx, worker of
// the run, key), writing a row naming the worker to dest.
func leaseDAG(t *testing.T, dest tranche.Destination, work func(ctx context.Context, key string) error) *tranche.DAG {
	t.Helper()
	dag, err := tranche.NewDAG(tranche.Asset{Name: "raw",
		Partitioning: tranche.Partitioning{Granularity: tranche.Day, Location: time.UTC, Column: "day"},
		Destinations: []tranche.Destination{dest},
		Materialize: func(ctx context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
			p, err := m.Partition()
			if err != nil {
				return nil, err
			}
			if err := work(ctx, p.Key()); err != nil {
				return nil, err
			}
			return []tranche.Row{{"day": p.Key()}}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	return dag
}

// execLog records the executions of partitions by workers, to check that
// no partition ever runs on two workers at once.
type execLog struct {
	mu    sync.Mutex
	spans map[string][]execSpan
}

type execSpan struct {
	worker     string
	start, end time.Time
}

func (l *execLog) run(worker, key string, f func() error) error {
	start := time.Now()
	err := f()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.spans == nil {
		l.spans = map[string][]execSpan{}
	}
	l.spans[key] = append(l.spans[key], execSpan{worker, start, time.Now()})
	return err
}

// checkDisjoint fails the test when two executions of a partition
// overlapped.
func (l *execLog) checkDisjoint(t *testing.T) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for key, spans := range l.spans {
		for i, a := range spans {
			for _, b := range spans[i+1:] {
				if a.start.Before(b.end) && b.start.Before(a.end) {
					t.Errorf("partition %s ran on %s and %s at once: [%v, %v) and [%v, %v)", key, a.worker, b.worker,
						a.start.Format(time.StampMilli), a.end.Format(time.StampMilli), b.start.Format(time.StampMilli), b.end.Format(time.StampMilli))
				}
			}
		}
	}
}

// sleepOrDone waits d, or until ctx ends with its error.
func sleepOrDone(ctx context.Context, d time.Duration) error {
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// A heartbeat that hangs holds up no other partition: the others finish
// on time; the partition whose lease cannot be renewed is stopped by its
// worker before its lease expires, reported failed, and its failed
// heartbeats are events; a second worker takes it over, and no partition
// ever runs on two workers at once. (A heartbeat used to hold a lock
// that every finishing partition waited on.)
func TestBackfillHeartbeatHangs(t *testing.T) {
	// In a bubble of its own (testing/synctest): timers fire on time, so
	// that the 100 ms between the worker stopping its partition (lease
	// less the margin) and the lease's end (when the other may take it
	// over) is not eaten by a loaded machine starving the timer's
	// goroutine; the bubble also fails the test on a goroutine left
	// blocked.
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		mem := memledger.New(nil)
		hungKey := bfDay(5).Key()
		hung := &faultyLedger{Ledger: mem, hang: func(l *ledger.Lease) bool { return l.Worker == "a" && l.Partitions[0].Key() == hungKey }}
		dest := new(tranche.MemoryDestination)
		var log execLog
		dagFor := func(worker string, hungWork time.Duration) *tranche.DAG {
			return leaseDAG(t, dest, func(ctx context.Context, key string) error {
				return log.run(worker, key, func() error {
					if key == hungKey {
						return sleepOrDone(ctx, hungWork)
					}
					return sleepOrDone(ctx, 300*time.Millisecond)
				})
			})
		}
		w := bfDays(t, 1, 8)
		var mu sync.Mutex
		var renewFailed []tranche.Event
		took := map[string]time.Duration{} // a's partitions, from start to success
		startedAt := map[string]time.Time{}
		a := &backfill.Backfill{DAG: dagFor("a", 5*time.Second), Window: w, Ledger: hung, Worker: "a", Concurrency: 4,
			Lease: time.Second, Heartbeat: 100 * time.Millisecond, OnFailure: tranche.FailContinue,
			OnEvent: func(_ context.Context, e tranche.Event) {
				mu.Lock()
				defer mu.Unlock()
				switch e.Kind {
				case backfill.KindLeaseRenewFailed:
					renewFailed = append(renewFailed, e)
				case backfill.KindPartitionStarted:
					startedAt[e.Target] = e.Time
				case backfill.KindPartitionSucceeded:
					took[e.Target] = e.Time.Sub(startedAt[e.Target])
				}
			}}
		b := &backfill.Backfill{DAG: dagFor("b", 0), Window: w, Ledger: mem, Worker: "b", Concurrency: 2,
			Lease: time.Second, Heartbeat: 100 * time.Millisecond, WaitForOthers: true}
		var ra, rb *backfill.Report
		var ea, eb error
		var wg sync.WaitGroup
		wg.Go(func() { ra, ea = a.Run(ctx) })
		wg.Go(func() {
			time.Sleep(150 * time.Millisecond) // a holds its first four partitions
			rb, eb = b.Run(ctx)
		})
		wg.Wait()
		if ra == nil || rb == nil {
			t.Fatalf("reports %v, %v: %v, %v", ra, rb, ea, eb)
		}
		t.Logf("a: %s: %v\nb: %s: %v", ra, ea, rb, eb)
		if eb != nil || !rb.Done() {
			t.Errorf("b waited for a, yet: %v (%s)", eb, rb)
		}
		if len(ra.Failures) != 1 || ra.Failures[0].Key != hungKey || !errors.Is(ra.Failures[0].Err, tranche.ErrFenced) ||
			!strings.Contains(ra.Failures[0].Err.Error(), "lease not renewed") {
			t.Errorf("a's failures %v; want %s stopped by a, matching ErrFenced", ra.Failures, hungKey)
		}
		mu.Lock()
		for key, d := range took {
			if d > 2*time.Second {
				t.Errorf("a's partition %s took %v; want its 300ms of work, not held up by %s's heartbeat", key, d, hungKey)
			}
		}
		if len(renewFailed) == 0 {
			t.Errorf("no %s event for the hung heartbeats", backfill.KindLeaseRenewFailed)
		}
		for _, e := range renewFailed {
			if e.Target != hungKey || !errors.Is(e.Err, context.DeadlineExceeded) || !strings.Contains(e.Err.Error(), "heartbeat timed out") {
				t.Errorf("%s event of %s: %v; want %s's heartbeats timed out", e.Kind, e.Target, e.Err, hungKey)
			}
		}
		mu.Unlock()
		log.checkDisjoint(t)
		for p := range w.All() {
			h := bfHistory(t, mem, backfill.DAGIdentity(a.DAG, tranche.Day, time.UTC), p)
			if len(h) == 0 || !strings.HasPrefix(h[len(h)-1], fmt.Sprintf("%d succeeded", len(h))) {
				t.Errorf("partition %s: history %q; want it succeeded, last", p.Key(), h)
			}
		}
		if h := bfHistory(t, mem, backfill.DAGIdentity(a.DAG, tranche.Day, time.UTC), bfDay(5)); !slices.Equal(h, []string{"1 failed a", "2 succeeded b"}) {
			t.Errorf("history of %s: %q; want a's attempt recorded failed by a, then b's success", hungKey, h)
		}
	})
}

// A worker whose lease lapses by its own clock writes nothing, even when
// its asset ignores the cancellation and returns rows, and records the
// partition failed, never succeeded.
func TestBackfillFencesItself(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		mem := memledger.New(nil)
		l := &faultyLedger{Ledger: mem, hang: func(*ledger.Lease) bool { return true }}
		dest := new(tranche.MemoryDestination)
		dag := leaseDAG(t, dest, func(context.Context, string) error {
			time.Sleep(600 * time.Millisecond) // past the lease, deaf to its context
			return nil
		})
		b := &backfill.Backfill{DAG: dag, Window: bfDays(t, 1, 1), Ledger: l, Lease: 300 * time.Millisecond, Heartbeat: 50 * time.Millisecond}
		rep, err := b.Run(ctx)
		if !errors.Is(err, tranche.ErrFenced) || rep.Failed != 1 {
			t.Fatalf("Run: %v (%s); want the partition failed, matching ErrFenced", err, rep)
		}
		if keys := dest.Keys("raw"); len(keys) != 0 {
			t.Errorf("the destination holds %v; want nothing written past the lease", keys)
		}
		h, err := mem.History(ctx, backfill.DAGIdentity(dag, tranche.Day, time.UTC), bfDay(1).Start)
		if err != nil {
			t.Fatal(err)
		}
		if len(h) != 1 || h[0].State != ledger.StateFailed || !strings.Contains(h[0].Err, "lease not renewed") {
			t.Errorf("history %+v; want one attempt, failed: lease not renewed", h)
		}
	})
}

// A failure to record an outcome is never dropped: it joins the run's
// own failure, so that the report says why the partition stays running.
func TestBackfillFinishErrorKept(t *testing.T) {
	errDown := errors.New("ledger unreachable")
	for _, tc := range []struct {
		name    string
		fail    bool
		wantErr []string
	}{
		{"failed run", true, []string{"boom on 2026-01-01", "recording the failure failed", "ledger unreachable"}},
		{"succeeded run", false, []string{"recording", "ledger unreachable"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &faultyLedger{Ledger: memledger.New(nil), finishErr: func(*ledger.Lease) error { return errDown }}
			dag := leaseDAG(t, new(tranche.MemoryDestination), func(_ context.Context, key string) error {
				if tc.fail {
					return fmt.Errorf("boom on %s", key)
				}
				return nil
			})
			rep, err := (&backfill.Backfill{DAG: dag, Window: bfDays(t, 1, 1), Ledger: l}).Run(t.Context())
			if err == nil || len(rep.Failures) != 1 {
				t.Fatalf("Run: %v, %s; want one failure", err, rep)
			}
			f := rep.Failures[0].Err
			for _, want := range tc.wantErr {
				if !strings.Contains(f.Error(), want) {
					t.Errorf("failure %q; want it to say %q", f, want)
				}
			}
			if !errors.Is(f, errDown) {
				t.Errorf("failure %v does not match the ledger's error", f)
			}
		})
	}
}

// A partition whose claim failed because the ledger could not be reached
// was neither run nor recorded: it is counted apart, not as failed.
func TestBackfillUnclaimed(t *testing.T) {
	errDown := errors.New("connection refused")
	l := &faultyLedger{Ledger: memledger.New(nil), claimErr: func(req ledger.ClaimRequest) error {
		if k := req.Partitions[0].Key(); k == bfDay(2).Key() || k == bfDay(4).Key() {
			return errDown
		}
		return nil
	}}
	var runs []string
	var mu sync.Mutex
	rec := new(tranchetest.Recorder)
	dag := leaseDAG(t, new(tranche.MemoryDestination), func(_ context.Context, key string) error {
		mu.Lock()
		runs = append(runs, key)
		mu.Unlock()
		return nil
	})
	b := &backfill.Backfill{DAG: dag, Window: bfDays(t, 1, 5), Ledger: l, OnFailure: tranche.FailContinue, OnEvent: rec.OnEvent}
	rep, err := b.Run(t.Context())
	bfCheckReport(t, rep, backfill.Report{Total: 5, Succeeded: 3, Unclaimed: 2})
	if rep.Unclaimed != 2 || len(rep.ClaimFailures) != 2 || !errors.Is(rep.ClaimFailures[0].Err, errDown) {
		t.Errorf("unclaimed %d, claim failures %v; want the two partitions whose claims failed", rep.Unclaimed, rep.ClaimFailures)
	}
	if !strings.Contains(rep.String(), "2 not claimed (the ledger failed; neither run nor recorded)") {
		t.Errorf("report %s; want it to count the partitions not claimed", rep)
	}
	if !errors.Is(err, errDown) || !strings.Contains(err.Error(), "2 partitions not claimed, neither run nor recorded") {
		t.Errorf("Run: %v; want the claims' failure", err)
	}
	n := 0
	for _, e := range rec.Events() {
		if e.Kind == backfill.KindPartitionUnclaimed {
			n++
		}
		if e.Kind == backfill.KindPartitionFailed {
			t.Errorf("partition %s failed: %v; want none failed", e.Target, e.Err)
		}
	}
	if n != 2 || len(runs) != 3 {
		t.Errorf("%d partition.unclaimed events, runs %v; want 2, and the 3 claimed partitions run", n, runs)
	}
}

// Partitions other workers hold are waited for under WaitForOthers (taken
// over when their leases expire, counted done elsewhere when they
// succeed there), and reported held, not done, otherwise; a lease that
// expires before the run ends is taken over by it either way.
func TestBackfillHeldElsewhere(t *testing.T) {
	for _, tc := range []struct {
		name     string
		wait     bool
		lease    time.Duration // of the other worker's claim of day 2
		finishes bool          // the other worker finishes day 2, succeeded, after 100ms
		expire   bool          // the clock passes the other's lease during the run
		// the report's succeeded, done elsewhere and held counts
		succeeded, elsewhere, held int
		kind                       tranche.Kind
	}{
		{name: "wait, lease expires", wait: true, lease: 200 * time.Millisecond, succeeded: 3, kind: backfill.KindSucceeded},
		{name: "wait, holder succeeds", wait: true, lease: time.Minute, finishes: true, succeeded: 2, elsewhere: 1, kind: backfill.KindSucceeded},
		{name: "no wait, held", lease: time.Minute, succeeded: 2, held: 1, kind: backfill.KindUnfinished},
		{name: "no wait, lease expires during the run", lease: time.Minute, expire: true, succeeded: 3, kind: backfill.KindSucceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				clock := ledgertest.NewClock(time.Now())
				now := time.Now
				if tc.expire {
					now = clock.Now
				}
				l := memledger.New(now)
				dag := leaseDAG(t, new(tranche.MemoryDestination), func(_ context.Context, key string) error {
					if tc.expire && key == bfDay(3).Key() {
						clock.Advance(2 * tc.lease)
					}
					return nil
				})
				w := bfDays(t, 1, 3)
				var buf bytes.Buffer
				rec := new(tranchetest.Recorder)
				b := &backfill.Backfill{DAG: dag, Window: w, Ledger: l, Worker: "here", WaitForOthers: tc.wait, Now: now,
					Lease: time.Second, Heartbeat: 50 * time.Millisecond, OnEvent: tranche.Hooks(rec.OnEvent, backfill.NewProgressReporter(&buf))}
				id, err := b.ID()
				if err != nil {
					t.Fatal(err)
				}
				dagID := backfill.DAGIdentity(dag, tranche.Day, time.UTC)
				p := bfDay(2)
				lease, err := l.Claim(t.Context(), ledger.ClaimRequest{DAG: dagID, Backfill: id, Worker: "other", RunID: backfill.RunID(dagID, p.Start, p.End),
					Partitions: []tranche.TimePartition{p}, Lease: tc.lease, Policy: ledger.RerunFailed})
				if err != nil {
					t.Fatal(err)
				}
				var wg sync.WaitGroup
				if tc.finishes {
					wg.Go(func() {
						time.Sleep(100 * time.Millisecond)
						if err := l.Finish(t.Context(), lease, []ledger.Outcome{{State: ledger.StateSucceeded}}); err != nil {
							t.Error(err)
						}
					})
				}
				rep, err := b.Run(t.Context())
				wg.Wait()
				bfCheckReport(t, rep, backfill.Report{Total: 3, Succeeded: tc.succeeded, Elsewhere: tc.elsewhere, Held: tc.held})
				if err != nil || rep.Done() != (tc.held == 0) {
					t.Errorf("Run: %v, done %v; want no error, done exactly when no partition is held", err, rep.Done())
				}
				events := rec.Events()
				if last := events[len(events)-1]; last.Kind != tc.kind || last.Progress.Held != tc.held {
					t.Errorf("last event %s, progress %+v; want %s, %d held", last.Kind, *last.Progress, tc.kind, tc.held)
				}
				if tc.held > 0 && !strings.Contains(buf.String(), "unfinished: 2/3 done, 0 failed, 0 skipped, 1 held elsewhere") {
					t.Errorf("progress lines:\n%s\nwant the backfill unfinished, 1 held elsewhere", buf.String())
				}
				if tc.held == 0 && strings.Contains(buf.String(), "held elsewhere") && !strings.Contains(buf.String(), "succeeded") {
					t.Errorf("progress lines:\n%s", buf.String())
				}
			})
		})
	}
}

// deafLedger's heartbeats of the leases hang selects block for hang
// whatever their context says, as a driver stuck on a dead connection
// does.
type deafLedger struct {
	ledger.Ledger
	hang  func(*ledger.Lease) bool
	sleep time.Duration
}

func (l *deafLedger) Heartbeat(ctx context.Context, lease *ledger.Lease, d time.Duration) error {
	if l.hang(lease) {
		time.Sleep(l.sleep)
		return ctx.Err()
	}
	return l.Ledger.Heartbeat(ctx, lease, d)
}

// A heartbeat that ignores its context does not hold up Run: Run returns
// within a bound of the lease after its last partition ended, and
// reports the call it left behind as a failed renewal matching
// ErrLeftBehind that names the call. (close used to wait for every
// call: Run returned only when the hung heartbeat did, 30 s later.)
func TestRunReturnsPastHungHeartbeat(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const hang = 30 * time.Second
		mem := memledger.New(nil)
		hungKey := bfDay(3).Key()
		deaf := &deafLedger{Ledger: mem, sleep: hang, hang: func(l *ledger.Lease) bool { return l.Partitions[0].Key() == hungKey }}
		dest := new(tranche.MemoryDestination)
		dag := leaseDAG(t, dest, func(ctx context.Context, key string) error {
			if key == hungKey {
				return sleepOrDone(ctx, 5*time.Second) // ends when the worker stops it
			}
			return sleepOrDone(ctx, 300*time.Millisecond)
		})
		var mu sync.Mutex
		var leftBehind []tranche.Event
		var lastEnd time.Time
		const lease = time.Second
		b := &backfill.Backfill{DAG: dag, Window: bfDays(t, 1, 6), Ledger: deaf, Worker: "a", Concurrency: 6,
			Lease: lease, Heartbeat: 100 * time.Millisecond, OnFailure: tranche.FailContinue,
			OnEvent: func(_ context.Context, e tranche.Event) {
				mu.Lock()
				defer mu.Unlock()
				switch {
				case e.Kind == backfill.KindLeaseRenewFailed && errors.Is(e.Err, backfill.ErrLeftBehind):
					leftBehind = append(leftBehind, e)
				case e.Kind == backfill.KindPartitionSucceeded || e.Kind == backfill.KindPartitionFailed:
					lastEnd = e.Time
				}
			}}
		start := time.Now()
		res, err := b.Run(t.Context())
		returned := time.Now()
		t.Logf("Run returned after %v (%s, %v); last partition ended %v after the start",
			returned.Sub(start), res, err, lastEnd.Sub(start))
		mu.Lock()
		defer mu.Unlock()
		if res == nil || len(res.Failures) != 1 || res.Failures[0].Key != hungKey || !errors.Is(res.Failures[0].Err, tranche.ErrFenced) {
			t.Errorf("Run = %v, %v; want %s alone failed, fenced by the worker's clock", res, err, hungKey)
		}
		if after := returned.Sub(lastEnd); lastEnd.IsZero() || after > lease {
			t.Errorf("Run returned %v after its last partition ended; want within the lease, %v, not the hung call's %v", after, lease, hang)
		}
		if len(leftBehind) != 1 || leftBehind[0].Target != hungKey ||
			!strings.Contains(leftBehind[0].Err.Error(), "Heartbeat of "+hungKey) {
			t.Errorf("events of calls left behind: %v; want one naming the Heartbeat of %s", leftBehind, hungKey)
		} else {
			t.Logf("%s: %v", leftBehind[0].Kind, leftBehind[0].Err)
		}
		// The call returns later and reports nothing more: the bubble
		// waits for it.
		time.Sleep(hang)
		if len(leftBehind) != 1 {
			t.Errorf("%d events of calls left behind after the call returned; want the one", len(leftBehind))
		}
	})
}
