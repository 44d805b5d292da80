package backfill

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/tranche-dev/tranche/ledger"
)

// A finisher records the successes of a run's jobs in batches, through
// a ledger that is a [ledger.BatchFinisher]: a job that succeeded hands
// its outcomes over and frees its slot, and the finisher records what
// was handed over while its last call was in flight in one call, so that
// short partitions cost a commit a batch, not one each, and a worker of
// Concurrency 1 runs the next partition while the last one's success is
// recorded. Up to maxFinishCalls calls are in flight at a time, each
// taking what waits when it starts: the batch grows with the ledger's
// latency and the rate of successes, and a call that hangs on a
// connection lost holds up only the successes it carries, not those
// after it, whose leases would lapse behind it.
//
// A job's lease is renewed until its outcome is recorded, and checked
// again just before: one lost meanwhile is not recorded a success. The
// job's success is counted and its event sent once recorded, as a job
// that records its own. Failures are not handed over: they are recorded
// at once, so that a failure under FailStop stops claims before the next
// job starts, as without a finisher. A ledger that records a finish with
// writes a destination deferred to it (package sqlledger) says so
// ([ledger.BatchFinisher.FinishesAlone]): such a success is recorded at
// once, through Finish, its writes in its transaction, as without a
// finisher.
type finisher struct {
	x   *execution
	l   ledger.BatchFinisher
	ctx context.Context // the execution's finishCtx

	mu      sync.Mutex
	queue   []*finishing
	running int // calls in flight, or about to be
	idle    int // of those, loops looking for more
	wg      sync.WaitGroup
}

const (
	// maxFinishBatch bounds the finishes of one call.
	maxFinishBatch = 256
	// maxFinishCalls bounds the calls in flight: the SQL ledgers'
	// default pool.
	maxFinishCalls = 4
)

// finishing is a job whose success waits to be recorded.
type finishing struct {
	ctx      context.Context // the run's context, for the job's events
	u        *job
	lease    *ledger.Lease
	kept     *keptLease
	outcomes []ledger.Outcome
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

// add hands over a job's success, to be recorded with the next batch.
func (f *finisher) add(fi *finishing) {
	f.mu.Lock()
	f.queue = append(f.queue, fi)
	if f.running-f.idle >= maxFinishCalls || f.idle > 0 {
		// Taken by a loop about to call, or once one returns.
		f.mu.Unlock()
		return
	}
	f.running++
	f.idle++
	f.wg.Add(1)
	f.mu.Unlock()
	go f.loop()
}

// loop records batches until none is waiting.
func (f *finisher) loop() {
	defer f.wg.Done()
	for {
		f.mu.Lock()
		n := min(len(f.queue), maxFinishBatch)
		batch := f.queue[:n:n]
		f.queue = f.queue[n:]
		f.idle--
		if n == 0 {
			f.running--
			f.mu.Unlock()
			return
		}
		f.mu.Unlock()
		f.record(batch)
		f.mu.Lock()
		f.idle++
		f.mu.Unlock()
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
	calls := make([]ledger.Finish, 0, len(batch))
	sent := make([]*finishing, 0, len(batch))
	for _, fi := range batch {
		// As a job that records its own success: only while its lease
		// holds by this worker's clock, and never once a newer attempt
		// took it.
		held, byLedger := fi.kept.state()
		switch {
		case held != nil && byLedger:
			fi.kept.release()
			x.fail(fi.ctx, fi.u, held)
			continue
		case held != nil:
			for i := range fi.outcomes {
				fi.outcomes[i] = ledger.Outcome{State: ledger.StateFailed, Err: held.Error(), Ran: fi.outcomes[i].Ran}
			}
			fi.kept.release()
			x.settle(fi.ctx, fi.u, fi.lease, fi.outcomes, held)
			continue
		}
		calls = append(calls, ledger.Finish{Lease: fi.lease, Outcomes: fi.outcomes})
		sent = append(sent, fi)
	}
	if len(calls) == 0 {
		return
	}
	errs := ledger.FinishBatch(f.ctx, x.b.Ledger, calls)
	for i, fi := range sent {
		lapsed, _ := fi.kept.state()
		fi.kept.release()
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

// settle records a job's outcomes alone, through Finish, and settles
// the job: failure is why it failed, nil for a success.
func (x *execution) settle(ctx context.Context, u *job, lease *ledger.Lease, outcomes []ledger.Outcome, failure error) {
	x.recorded(ctx, u, failure, x.b.Ledger.Finish(x.finishCtx, lease, outcomes))
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
