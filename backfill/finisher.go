package backfill

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	leases "github.com/tranche-dev/tranche/internal/lease"
	"github.com/tranche-dev/tranche/ledger"
)

// A finisher records the successes of a run's jobs in groups, through a
// ledger that is a [ledger.BatchFinisher]: a job that succeeded hands
// its outcomes over and waits, keeping its slot, until they are
// recorded; the finisher records what was handed over while its last
// call was in flight in one call (a group commit), so that the slots,
// and the workers, that finish at once share a commit, while a success
// is never counted, reported or followed by its slot's next job before
// it is durable. Up to maxFinishCalls calls are in flight at a time,
// each taking what waits when it starts: a call that hangs on a
// connection lost holds up only the successes it carries, not those
// after it, whose leases would lapse behind it.
//
// A job's lease is renewed until its outcome is recorded, and checked
// again just before: one lost meanwhile is not recorded a success. The
// answer of each call also says whether the backfill was canceled
// ([ledger.Finish.Canceled]): then the backfill stops before any job
// claimed after those recorded starts, so that a cancellation is seen
// by the call that ends each run, which a worker makes anyway. Failures
// are not handed over: they are recorded at once, through the same
// call, so that a failure under FailStop stops claims before the next
// job starts. A ledger that records a finish with writes a destination
// deferred to it (package sqlledger) says so
// ([ledger.BatchFinisher.FinishesAlone]): such a success is recorded
// alone, its writes in its transaction.
type finisher struct {
	x   *execution
	l   ledger.BatchFinisher
	ctx context.Context // the execution's finishCtx

	mu    sync.Mutex
	queue []*finishing
	loops int // loops running, each in a call or about to take the queue
	ready int // of those, about to take the queue
	stuck int // of those, in a call for longer than finishStuck
	wg    sync.WaitGroup
}

const (
	// maxFinishBatch bounds the finishes of one call.
	maxFinishBatch = 256
	// maxFinishCalls bounds the calls in flight: the SQL ledgers'
	// default pool.
	maxFinishCalls = 4
	// finishStuck is how long a call may be in flight before the
	// successes that wait behind it go in another call: one call at a
	// time groups the most, but one on a connection lost would hold
	// every slot of the worker.
	finishStuck = 250 * time.Millisecond
)

// finishing is a job whose success waits to be recorded.
type finishing struct {
	ctx      context.Context // the run's context, for the job's events
	u        *job
	lease    *ledger.Lease
	kept     *leases.Kept
	outcomes []ledger.Outcome
	done     chan struct{} // closed once the job is settled
}

// newFinisher returns the finisher of x, or nil when its ledger records
// one finish a call.
func newFinisher(x *execution) *finisher {
	bf, ok := x.b.Ledger.(ledger.BatchFinisher)
	if !ok {
		return nil
	}
	return &finisher{x: x, l: bf, ctx: x.finishCtx}
}

// takes reports whether the finisher records the success of lease:
// not when the ledger records it alone, with a destination's writes.
func (f *finisher) takes(lease *ledger.Lease) bool {
	return f != nil && !f.l.FinishesAlone(lease)
}

// finish hands over a job's success, to be recorded with the next
// group, and returns once the job is settled. When no call is in flight
// or about to start, the caller records the group itself: a sequential
// backfill then pays no handoff to another goroutine and back for each
// success, the most of what a partition that does little costs it.
func (f *finisher) finish(fi *finishing) {
	fi.done = make(chan struct{})
	f.mu.Lock()
	f.queue = append(f.queue, fi)
	if f.loops == 0 {
		f.loops++
		f.ready++
		f.mu.Unlock()
		f.loop(fi.done)
		return
	}
	f.spawn()
	f.mu.Unlock()
	<-fi.done
}

// spawn starts a loop to record what waits, unless one is about to take
// it, or one is in a call that is not stuck (it takes it once the call
// returns). Called under mu.
func (f *finisher) spawn() {
	if len(f.queue) == 0 || f.ready > 0 || f.loops-f.stuck > 0 || f.loops >= maxFinishCalls {
		return
	}
	f.loops++
	f.ready++
	f.wg.Go(func() { f.loop(nil) })
}

// loop records groups until none is waiting, or, on the goroutine of a
// job whose success it records (own), until that success is settled:
// then what waits goes to a loop of its own, so that the job's slot is
// not held for others'.
func (f *finisher) loop(own chan struct{}) {
	for {
		f.mu.Lock()
		f.ready--
		if own != nil && closed(own) {
			f.loops--
			f.spawn()
			f.mu.Unlock()
			return
		}
		n := min(len(f.queue), maxFinishBatch)
		if n == 0 {
			f.loops--
			f.mu.Unlock()
			return
		}
		batch := f.queue[:n:n]
		f.queue = f.queue[n:]
		f.mu.Unlock()
		stuck, done := false, false
		t := time.AfterFunc(finishStuck, func() {
			f.mu.Lock()
			defer f.mu.Unlock()
			if !done {
				stuck = true
				f.stuck++
				f.spawn()
			}
		})
		f.record(batch)
		t.Stop()
		f.mu.Lock()
		done = true
		if stuck {
			f.stuck--
		}
		f.ready++
		f.mu.Unlock()
	}
}

// closed reports whether c is closed.
func closed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// wait waits until every success handed over has been recorded; none
// may be handed over meanwhile.
func (f *finisher) wait() {
	if f != nil {
		f.wg.Wait()
	}
}

// record records a batch, and then settles each of its jobs.
func (f *finisher) record(batch []*finishing) {
	x := f.x
	defer func() {
		for _, fi := range batch {
			close(fi.done)
		}
	}()
	calls := make([]ledger.Finish, 0, len(batch))
	sent := make([]*finishing, 0, len(batch))
	for _, fi := range batch {
		// As a job that records its own success: only while its lease
		// holds by this worker's clock, and never once a newer attempt
		// took it.
		held, byLedger := fi.kept.State()
		switch {
		case held != nil && byLedger:
			fi.kept.Release()
			x.fail(fi.ctx, fi.u, held)
			continue
		case held != nil:
			for i := range fi.outcomes {
				fi.outcomes[i] = ledger.Outcome{State: ledger.StateFailed, Err: held.Error(), Ran: fi.outcomes[i].Ran}
			}
			x.settle(fi.ctx, fi.u, fi.kept, fi.outcomes, held)
			continue
		}
		calls = append(calls, ledger.Finish{Lease: fi.lease, Outcomes: fi.outcomes})
		sent = append(sent, fi)
	}
	if len(calls) == 0 {
		return
	}
	kept := make([]*leases.Kept, len(sent))
	for i, fi := range sent {
		kept[i] = fi.kept
	}
	errs, left := x.finishCall(calls, kept)
	if left != nil {
		for _, fi := range sent {
			fi.kept.Release()
			x.fail(fi.ctx, fi.u, left)
		}
		return
	}
	x.sawCanceled(calls, errs)
	for i, fi := range sent {
		lapsed, _ := fi.kept.State()
		fi.kept.Release()
		if err := errs[i]; err != nil && lapsed != nil && !errors.Is(err, ledger.ErrFenced) {
			// The call failed (a connection lost, say) while the lease
			// lapsed: what the ledger holds is an attempt another worker
			// takes over, so the job lost its lease, which is what it
			// reports, and the call's error with it.
			x.fail(fi.ctx, fi.u, fmt.Errorf("%w; its success was not recorded: %w", lapsed, err))
			continue
		}
		x.recorded(fi.ctx, fi.u, nil, errs[i])
	}
}

// settle records a job's outcomes alone, its lease kept until then, and
// settles the job: failure is why it failed, nil for a success.
func (x *execution) settle(ctx context.Context, u *job, kept *leases.Kept, outcomes []ledger.Outcome, failure error) {
	calls := []ledger.Finish{{Lease: kept.Lease(), Outcomes: outcomes}}
	errs, left := x.finishCall(calls, []*leases.Kept{kept})
	kept.Release()
	if left != nil {
		x.fail(ctx, u, cmp.Or(failure, left))
		return
	}
	x.sawCanceled(calls, errs)
	x.recorded(ctx, u, failure, errs[0])
}

// finishCall records calls, whose leases are kept, and returns what the
// ledger answered; or, when the call hangs, a nil answer and why it was
// left behind. The leases are renewed while the call is in flight for a
// heartbeat interval, then no more, so that other workers may take the
// partitions over once they expire; the answer is waited for until a
// lease after they have lapsed by this worker's clock (a ledger slow
// for a moment, a lock held by a stopped worker, still answers, and a
// call that lands after a takeover is refused as fenced), and then the
// call is left behind: a ledger call that hangs (a connection cut, a
// server that stopped) does not hold the run for longer than about two
// leases, and should it land after that, the ledger's fence refuses it.
func (x *execution) finishCall(calls []ledger.Finish, kept []*leases.Kept) ([]error, error) {
	for _, k := range kept {
		k.Finishing()
	}
	answer := make(chan []error, 1)
	sent := time.Now()
	x.callers.run(func() { answer <- ledger.FinishBatch(x.finishCtx, x.b.Ledger, calls) })
	hung := time.NewTimer(x.cfg.heartbeat)
	defer hung.Stop()
	select {
	case errs := <-answer:
		return errs, nil
	case <-hung.C:
	case <-x.watch.ctx.Done():
	}
	var until time.Duration
	for _, k := range kept {
		until = max(until, k.StopRenewing())
	}
	hung.Reset(max(until+x.cfg.lease-x.keeper.Now(), 0))
	select {
	case errs := <-answer:
		return errs, nil
	case <-hung.C:
	case <-x.watch.ctx.Done():
	}
	what := fmt.Sprintf("the finish of %s (attempt %d of worker %s)", leases.Describe(calls[0].Lease), calls[0].Lease.Attempts[0], calls[0].Lease.Worker)
	x.awaitProbe()
	x.suspect(what, nil)
	left := leases.LeftBehind(what, time.Since(sent), true)
	if lost := x.lostLedger(); lost != nil {
		return nil, fmt.Errorf("%w: %w", left, lost)
	}
	return nil, left
}

// sawCanceled stops the backfill before every job not started yet when
// a finish just recorded says that it was canceled. A finish that failed
// says nothing, so that the backfill's record is read then: the next
// job of the slot starts only once a call that ended after the run has
// said whether the backfill was canceled.
func (x *execution) sawCanceled(calls []ledger.Finish, errs []error) {
	canceled, unknown := false, false
	for i, c := range calls {
		canceled = canceled || c.Canceled
		unknown = unknown || errs[i] != nil && !errors.Is(errs[i], ledger.ErrFenced)
	}
	if !canceled && unknown {
		_ = x.call(x.finishCtx, "a read of the backfill's record", func(ctx context.Context) error {
			record, err := x.b.Ledger.Backfill(ctx, x.cfg.id)
			canceled = err == nil && record.Canceled
			return err
		})
	}
	if canceled {
		x.halt(fmt.Errorf("%w: %s", ErrBackfillCanceled, x.cfg.id), -1)
	}
}

// recorded settles a job once its outcome was recorded, or failed to be
// (err): failure is why the job failed, nil for a success.
func (x *execution) recorded(ctx context.Context, u *job, failure, err error) {
	switch {
	case err == nil:
	case errors.Is(err, ledger.ErrFenced) && failure != nil:
		// Taken over: the newer attempt records it.
	case failure == nil:
		failure = fmt.Errorf("tranche: recording %s: %w", u.window, err)
	default:
		failure = fmt.Errorf("%w; and recording the failure failed, so the partition stays running until its lease expires: %w", failure, err)
	}
	if failure != nil {
		x.fail(ctx, u, failure)
		return
	}
	x.count(func(r *Report) { r.Succeeded += len(u.partitions) })
	x.emitJob(ctx, KindPartitionSucceeded, u, nil)
}

// callers runs the finish calls of an execution on goroutines that it
// keeps between calls: a call runs apart from the job that waits for
// it, so that one that hangs can be left behind (finishCall), but a
// goroutine made for each call, and its stack grown to the depth of a
// database driver's, cost a worker that runs no-work partitions an
// eighth of its CPU. A caller left in a hung call is replaced by a new one for
// the next call; it ends once its call returns after the execution.
type callers struct {
	calls chan func() // unbuffered: a send succeeds only to an idle caller
	done  chan struct{}
}

func newCallers() *callers {
	return &callers{calls: make(chan func()), done: make(chan struct{})}
}

// run runs f on an idle caller, or on a new one when none is idle.
func (c *callers) run(f func()) {
	select {
	case c.calls <- f:
	default:
		go c.serve(f)
	}
}

// serve runs f, then the calls handed to it, until the execution ends.
func (c *callers) serve(f func()) {
	for {
		f()
		select {
		case f = <-c.calls:
		case <-c.done:
			return
		}
	}
}

// close ends the idle callers, and the others once their calls return.
func (c *callers) close() { close(c.done) }
