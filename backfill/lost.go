package backfill

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// A worker cut off from its ledger (a network that went silent) gets no
// answer to any call: neither an error nor a reply, until the network
// heals, maybe in minutes. A call that takes long is not proof of that:
// a claim may wait for a lock that a stopped worker holds, a finish for
// a server that is slow for a moment. So a call that has had no answer
// for a lease (a heartbeat whose lease lapsed first, a finish left
// behind, a claim or a read in flight that long) makes the worker ask
// the ledger something that waits for no lock, a read of the
// backfill's record, under a lease of its own. An answer, even an
// error, says the ledger is within reach and the call was slow; no
// answer says it is not: the worker has lost its ledger. It then stops
// as a backfill stopped for a failure does (no claim after it, the
// jobs claimed ahead not started), abandons every call in flight but
// the finishes, whose answers it waits for no longer either, and Run
// returns with that error, which wraps the ledger's (for PostgreSQL,
// postgres.ErrConnectionLost or ErrConnect). The leases it held lapse
// meanwhile, and other workers take its partitions over once they
// expire; should a call it abandoned land later, the ledger fences it.
type watch struct {
	// ctx is canceled, with the loss as its cause, once the ledger is
	// lost; calls made through call end with it.
	ctx  context.Context
	lose context.CancelCauseFunc

	mu      sync.Mutex
	probing chan struct{} // closed when the probe under way ends; nil when none is
	lost    error
}

// suspect starts a probe of the ledger, unless one is under way or the
// ledger is lost: what, a call, had no answer for a lease (err, its
// error, when it returned one).
func (x *execution) suspect(what string, err error) {
	x.watch.mu.Lock()
	if x.watch.probing != nil || x.watch.lost != nil || x.watch.ctx.Err() != nil {
		x.watch.mu.Unlock()
		return
	}
	x.watch.probing = make(chan struct{})
	x.watch.mu.Unlock()
	go x.probe(what, err)
}

// awaitProbe waits for the probe under way, if one is, for at most a
// lease (its own bound, should the ledger ignore its context), so that a
// call given up meanwhile says whether the ledger was lost rather than
// race the probe's verdict.
func (x *execution) awaitProbe() {
	x.watch.mu.Lock()
	done := x.watch.probing
	x.watch.mu.Unlock()
	if done == nil {
		return
	}
	t := time.NewTimer(x.cfg.lease)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}

// probe reads the backfill's record under a lease, and, with no answer
// by then, loses the ledger.
func (x *execution) probe(what string, cause error) {
	d := x.cfg.lease
	ctx, cancel := context.WithTimeout(x.watch.ctx, d)
	_, err := x.b.Ledger.Backfill(ctx, x.cfg.id)
	noAnswer := ctx.Err() != nil && x.watch.ctx.Err() == nil
	cancel()
	x.watch.mu.Lock()
	defer x.watch.mu.Unlock()
	close(x.watch.probing)
	x.watch.probing = nil
	if !noAnswer || x.watch.lost != nil {
		return
	}
	if cause == nil {
		cause = errNoAnswer
	}
	lost := fmt.Errorf("tranche: lost the ledger: %s had no answer within the lease of %v (%w), nor did a read of the backfill's record within %v after it: %w",
		what, d, cause, d, err)
	x.watch.lost = lost
	x.halt(lost, -1)
	x.watch.lose(lost)
}

// errNoAnswer is the cause of a call still in flight when it made the
// worker probe its ledger.
var errNoAnswer = errors.New("still in flight")

// lostLedger returns why the ledger was lost, nil while it was not.
func (x *execution) lostLedger() error {
	x.watch.mu.Lock()
	defer x.watch.mu.Unlock()
	return x.watch.lost
}

// call makes a ledger call, f, under ctx and the watch: it ends once the
// ledger is lost, and one still in flight after a lease makes the worker
// probe the ledger (suspect).
func (x *execution) call(ctx context.Context, what string, f func(context.Context) error) error {
	if x.watch.ctx == nil {
		return f(ctx) // an execution made by a test, watched by none
	}
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(x.watch.ctx, func() { cancel(context.Cause(x.watch.ctx)) })
	defer stop()
	t := time.AfterFunc(x.cfg.lease, func() { x.suspect(what, nil) })
	defer t.Stop()
	err := f(cctx)
	if err != nil && ctx.Err() == nil && cctx.Err() != nil {
		// Abandoned: the ledger was lost meanwhile.
		return fmt.Errorf("%w (%w)", context.Cause(cctx), err)
	}
	return err
}
