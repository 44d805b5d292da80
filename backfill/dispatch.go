package backfill

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/tranche-dev/tranche"
	leases "github.com/tranche-dev/tranche/internal/lease"
	"github.com/tranche-dev/tranche/ledger"
)

// A dispatcher hands the jobs that a scan calls to run to the pool, in
// the backfill's order, claimed in batches through [ledger.Leaser.ClaimNext]:
// the ledger's cursor gives each job to one of the workers sharing the
// backfill, so that workers never race for a partition, and a batch
// costs one transaction however many jobs it claims.
//
// Claims run ahead of the pool by a lookahead that covers about
// claimAhead of work, so that a fast partition does not wait for its
// claim; the leases of jobs claimed ahead are kept alive while they
// wait. Each claimed job takes the next number in the order of claims
// (job.seq): a job starts only if no job before it in that order
// stopped the backfill, and a job claimed ahead that will not run is
// released, so that a failure under FailStop stops only the jobs after
// it, and a run that stops leaves no partition claimed that never ran.
type dispatcher struct {
	x    *execution
	ctx  context.Context
	pool *pool

	queue []*job       // jobs to run that no claim has examined yet, in order
	jobs  []ledger.Job // what ClaimNext is given of each of queue, made once

	// nextHeld is when to look again at the partitions held elsewhere
	// while jobs are still queued (see takeOverDue).
	nextHeld time.Time

	mu  sync.Mutex
	seq int // the next claimed job's number
	// avg is the moving average of how long a job runs, which sizes
	// the lookahead; zero until one has run.
	avg time.Duration
	// claimTook is the moving average of how long a claim takes, which
	// may widen it (see want).
	claimTook time.Duration
}

// nextSeq numbers a claimed job.
func (d *dispatcher) nextSeq() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.seq++
	return d.seq - 1
}

// Bounds of a dispatcher's batches.
const (
	// claimAhead is how much work, by the average job, a worker claims
	// beyond its free slots: enough that a batch of fast partitions
	// costs one claim, and that the workers sharing a backfill, who take
	// turns on its cursor, do not queue for it (16 workers of
	// Concurrency 1 running 10 ms partitions claimed 6 a call at 50 ms
	// and were bound by the cursor: 1,200/s against 1,300/s at 200 ms),
	// little enough that a partition claimed ahead waits no longer than
	// a moment, where an operator would see it running; and at most an
	// eighth of the heartbeat interval, past which a job claimed ahead
	// is released.
	claimAhead = 200 * time.Millisecond
	// maxLookahead bounds the jobs claimed ahead, so that a worker that
	// dies leaves few leases to expire.
	maxLookahead = 64
	// claimShare is how many times longer than a claim takes the work
	// it claims ahead runs, at least, up to a quarter of the heartbeat
	// interval: the workers sharing a backfill take turns on its cursor,
	// so that a claim waits for the others' (16 workers of Concurrency
	// 1 doing no work waited some 60 ms a claim for 200 ms of work,
	// idle meanwhile, and the cursor, held from each turn's first
	// statement to its commit, bound them all: 1,900/s at 28 partitions
	// a claim). A claim that takes longer claims more, so that the turns
	// are fewer, and shorter for the others to wait.
	claimShare = 8
	// queueBatch is how many jobs the dispatcher gathers before it
	// claims: enough that a call reaches past the jobs the cursor passes
	// over when many workers share the backfill.
	queueBatch = 1024
)

func (x *execution) newDispatcher(ctx context.Context) *dispatcher {
	return &dispatcher{x: x, ctx: ctx, pool: newPool(x.cfg.concurrency)}
}

// add queues a job to run, claiming once enough are queued.
func (d *dispatcher) add(u *job) {
	d.queue = append(d.queue, u)
	d.jobs = append(d.jobs, ledger.Job{RunID: d.x.runID(u), Partitions: u.partitions})
	if len(d.queue) >= queueBatch {
		d.claim(queueBatch / 2)
	}
}

// flush claims and starts every queued job.
func (d *dispatcher) flush() { d.claim(0) }

// claim claims and starts queued jobs while more than keep are queued,
// keeping the rest for when the scan has given more.
func (d *dispatcher) claim(keep int) {
	x := d.x
	for len(d.queue) > keep {
		if d.ctx.Err() != nil || x.stop.Load() {
			d.notRun(d.queue)
			d.queue, d.jobs = nil, nil
			return
		}
		d.takeOverDue()
		want := d.want() // may wait for a slot: before the lease's clock starts
		if d.ctx.Err() != nil || x.stop.Load() {
			continue // stopped while it took over or waited for a slot
		}
		claimed := x.keeper.Now()
		var grants []ledger.Grant
		sent := time.Now()
		err := x.call(d.ctx, "a claim", func(ctx context.Context) (err error) {
			grants, err = x.b.Ledger.ClaimNext(ctx, ledger.NextRequest{
				DAG: x.cfg.dag, Backfill: x.cfg.id, Worker: x.cfg.worker, Jobs: d.jobs, Descending: x.b.Order == NewestFirst,
				Want: want, Lease: x.cfg.lease, Policy: x.cfg.rerun, Revision: x.plan.Revision, Trigger: ledger.TriggerBackfill, CodeVersion: x.cfg.codeVersion,
			})
			return err
		})
		d.claimed(time.Since(sent))
		switch {
		case errors.Is(err, ledger.ErrBackfillCanceled):
			x.halt(fmt.Errorf("%w: %s", ErrBackfillCanceled, x.cfg.id), -1)
			continue
		case err != nil && d.ctx.Err() != nil:
			continue
		case err != nil:
			// Nothing was claimed: the first job counts the failure,
			// and the others are tried again unless it stops claims.
			u := d.queue[0]
			d.queue, d.jobs = d.queue[1:], d.jobs[1:]
			x.unclaimed(d.ctx, u, fmt.Errorf("tranche: claiming %s: %w", u.window, err), d.nextSeq())
			continue
		case len(grants) == 1 && grants[0].Lease == nil && errors.Is(grants[0].Err, ledger.ErrLimited):
			// The DAG's limit left no room: nothing was examined.
			x.awaitLimit(d.ctx, grants[0].Err)
			continue
		}
		x.granted()
		sawClock := false
		for i, g := range grants {
			u := d.queue[i]
			if errors.Is(g.Err, ledger.ErrSuperseded) {
				x.superseded(d.ctx, u, g.Err)
				continue
			}
			if g.Lease == nil {
				x.holdElsewhere(u)
				x.emitJob(d.ctx, KindPartitionHeld, u, g.Err)
				continue
			}
			if !sawClock {
				x.sawLease(g.Lease) // once a call: its leases share the ledger's time
				sawClock = true
			}
			u.seq = d.nextSeq()
			d.start(u, g.Lease, claimed)
		}
		d.queue, d.jobs = d.queue[len(grants):], d.jobs[len(grants):]
	}
}

// takeOverDue takes over, ahead of the next claims, the partitions held
// elsewhere whose leases have expired since the run passed them (a
// worker killed or cut off), once the last look said one would: the
// cursor has passed them, and a long backfill must not leave them until
// its end. They come before the jobs still queued in the backfill's
// order, and run in it among themselves.
func (d *dispatcher) takeOverDue() {
	x := d.x
	x.mu.Lock()
	// Judged by the ledger's clock, which a claim of this run has shown:
	// before that, the settling after the scan probes for it.
	due := len(x.held) > 0 && x.clockKnown && !time.Now().Before(d.nextHeld)
	x.mu.Unlock()
	if !due {
		return
	}
	r, _ := x.settleRound(d.ctx, d, true)
	d.nextHeld = time.Now().Add(max(r.wait, x.cfg.heartbeat/4))
}

// want is how many jobs to claim: the pool's free slots, and as many
// more as the slots run in claimAhead by the average job, or in
// claimShare times the average claim when that is longer. Jobs slower
// than that are claimed only as slots free up, so that a partition of
// minutes is never held waiting: with no slot free and none to claim
// ahead, want waits for a slot to free. Before any job has run, only the
// free slots are claimed.
func (d *dispatcher) want() int {
	d.mu.Lock()
	avg, took := d.avg, d.claimTook
	d.mu.Unlock()
	ahead := 0
	if avg > 0 {
		// A job claimed ahead that waits longer than an interval is
		// released: claim well within one.
		hb := d.x.cfg.heartbeat
		span := max(min(claimAhead, hb/8), min(claimShare*took, hb/4))
		ahead = int(min(int64(d.x.cfg.concurrency)*int64(span)/int64(avg), maxLookahead))
	}
	free := d.pool.free()
	if free == 0 && ahead == 0 {
		d.pool.awaitFree()
		free = d.pool.free()
	}
	return max(free+ahead, 1)
}

// start keeps the lease of a claimed job and, once a slot of the pool
// is free, begins it on the dispatcher's goroutine, so that jobs begin
// (their budget taken, their started event sent) in the order of claims,
// and runs it in the slot.
func (d *dispatcher) start(u *job, lease *ledger.Lease, claimed time.Duration) {
	x := d.x
	u.claimed = claimed
	kept, runCtx := x.keeper.Keep(lease, claimed, x.renewFailed(d.ctx, u))
	x.emitJob(d.ctx, KindPartitionClaimed, u, nil)
	d.begin(u, lease, kept, runCtx)
}

// begin takes a slot of the pool for a claimed job, begins it and runs
// it there.
func (d *dispatcher) begin(u *job, lease *ledger.Lease, kept *leases.Kept, runCtx context.Context) {
	x := d.x
	d.pool.acquire()
	if !x.begin(d.ctx, u, lease, kept) {
		d.pool.release()
		return
	}
	d.pool.run(func() {
		began := time.Now()
		x.runClaimed(d.ctx, u, lease, kept, runCtx)
		if x.b.Budget != nil {
			x.b.Budget.Release()
		}
		d.ran(time.Since(began))
	})
}

// renewFailed returns what reports a renewal of u's lease that failed or
// was slow, nil when there is no hook to report to.
func (x *execution) renewFailed(ctx context.Context, u *job) func(error, time.Duration) {
	if x.b.OnEvent == nil {
		return nil
	}
	return func(err error, took time.Duration) {
		kind := KindLeaseRenewFailed
		if err == nil {
			kind = KindLeaseRenewSlow
		}
		x.emitJob(ctx, kind, u, err, func(e *tranche.Event) { e.Duration = took })
	}
}

// ran adds a job's duration to the average.
func (d *dispatcher) ran(took time.Duration) {
	d.mu.Lock()
	if d.avg == 0 {
		d.avg = took
	} else {
		d.avg += (took - d.avg) / 8
	}
	d.avg = max(d.avg, time.Microsecond)
	d.mu.Unlock()
}

// claimed adds a claim's duration to the average.
func (d *dispatcher) claimed(took time.Duration) {
	d.mu.Lock()
	if d.claimTook == 0 {
		d.claimTook = took
	} else {
		d.claimTook += (took - d.claimTook) / 4
	}
	d.mu.Unlock()
}

// notRun counts jobs left pending.
func (d *dispatcher) notRun(jobs []*job) {
	n := 0
	for _, u := range jobs {
		n += len(u.partitions)
	}
	d.x.count(func(r *Report) { r.NotRun += n })
}

// stoppedBefore reports whether claims stopped before job u in the order
// of claims, so that u, claimed but not started, must not run.
func (x *execution) stoppedBefore(u *job) bool {
	if !x.stop.Load() {
		return false
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	return u.seq > x.stopSeq
}

// release withdraws the claim of a job that will not run, which stays
// pending. A release that fails leaves the partition to be taken over
// once its lease expires, as a worker that died would.
func (x *execution) release(u *job, kept *leases.Kept) {
	kept.Release()
	// Fenced: taken over, as it may be once the lease lapsed.
	_ = x.call(x.finishCtx, "a release", func(ctx context.Context) error { return x.b.Ledger.Release(ctx, kept.Lease()) })
	x.count(func(r *Report) { r.NotRun += len(u.partitions) })
}

// pool runs jobs on at most n goroutines. Its slots are taken by one
// goroutine, the dispatcher's, which takes a slot (acquire), begins the
// job and then runs it there (run), or gives the slot back (release).
// With n 1 a job runs on the calling goroutine: no goroutine per
// partition for a sequential backfill.
type pool struct {
	slots chan struct{}
	wg    sync.WaitGroup
}

func newPool(n int) *pool { return &pool{slots: make(chan struct{}, n)} }

// acquire waits for a free slot and takes it.
func (p *pool) acquire() { p.slots <- struct{}{} }

// release gives back a slot taken by acquire that runs nothing.
func (p *pool) release() { <-p.slots }

// run runs f in a slot taken by acquire, and frees the slot once f
// returns.
func (p *pool) run(f func()) {
	if cap(p.slots) == 1 {
		defer p.release()
		f()
		return
	}
	p.wg.Go(func() {
		defer p.release()
		f()
	})
}

// awaitFree waits until a slot is free, without taking it: only the
// dispatcher's goroutine takes slots.
func (p *pool) awaitFree() {
	p.acquire()
	p.release()
}

// free returns how many slots are free.
func (p *pool) free() int { return cap(p.slots) - len(p.slots) }

// wait waits for the jobs given so far; more may be given after.
func (p *pool) wait() { p.wg.Wait() }
