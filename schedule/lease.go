package schedule

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/tranche-dev/tranche/ledger"
)

// keeper renews the lease of one running slot, as a backfill's lease
// keeper does for each partition: a heartbeat every interval, each call
// bounded by what the lease has left, a failed one reported and tried
// again sooner. It also fences its run by this process's clock: the lease
// holds for its length less a margin after the start of the last claim or
// heartbeat that succeeded, and once that has passed without a renewal,
// or the ledger says a newer attempt took the slot over, the run's
// context is canceled with an error matching [ledger.ErrFenced], and its
// Err reports it right before each write. A scheduler has one running
// slot at a time, or a few, so a goroutine each costs nothing worth the
// shared timer loop a backfill of thousands needs.
//
// Leases are real time, whatever the scheduler's clock: the ledger
// judges them by its own clock, which runs at the pace of this one.
type keeper struct {
	l        ledger.Ledger
	every, d time.Duration
	margin   time.Duration
	failed   func(err error, took time.Duration) // a heartbeat that failed (err) or was slow (err nil)

	ctx    context.Context // the run's
	cancel context.CancelCauseFunc
	quit   chan struct{}
	wg     sync.WaitGroup

	mu      sync.Mutex
	lease   *ledger.Lease
	renewed time.Time // when the last claim or heartbeat that succeeded was sent
	lost    error
}

// leaseMargin is how long before a lease of d, renewed every interval,
// ends that its holder stops trusting it: backfill's rule, a tenth of the
// lease and less than half of what an interval leaves.
func leaseMargin(every, d time.Duration) time.Duration { return min(d/10, (d-every)/2) }

// keep renews lease, claimed by a call sent at claimed, until release,
// and returns it with the context to run the slot under.
func keep(ctx context.Context, l ledger.Ledger, lease *ledger.Lease, claimed time.Time, every, d time.Duration,
	failed func(error, time.Duration)) (*keeper, context.Context) {
	runCtx, cancel := context.WithCancelCause(ctx)
	k := &keeper{l: l, every: every, d: d, margin: leaseMargin(every, d), failed: failed,
		ctx: runCtx, cancel: cancel, quit: make(chan struct{}), lease: lease, renewed: claimed}
	k.wg.Go(k.loop)
	return k, &fencedContext{Context: runCtx, k: k}
}

// fencedContext is the run's context: the keeper cancels it when the
// lease is lost, and its Err checks the lease by this process's clock
// too, so that a process stopped past its lease writes nothing even
// before the timer that would cancel the context has fired. The runner
// checks a fenced run's context right before each write.
type fencedContext struct {
	context.Context
	k *keeper
}

func (c *fencedContext) Err() error {
	if err := c.Context.Err(); err != nil {
		return err
	}
	c.k.check()
	return c.Context.Err()
}

// check returns why the lease no longer holds, or nil.
func (k *keeper) check() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.lost == nil {
		if since := time.Since(k.renewed); since >= k.d-k.margin {
			k.lose(&lapsedError{since: since, lease: k.d, margin: k.margin})
		}
	}
	return k.lost
}

// lose records why the lease was lost and stops the run. Called under mu.
func (k *keeper) lose(err error) {
	if k.lost == nil {
		k.lost = err
		k.cancel(err)
	}
}

func (k *keeper) loop() {
	beat := time.NewTimer(k.every)
	defer beat.Stop()
	lapse := time.NewTimer(k.d - k.margin)
	defer lapse.Stop()
	for {
		select {
		case <-k.quit:
			return
		case <-lapse.C:
			if k.check() != nil {
				return
			}
			k.mu.Lock()
			lapse.Reset(k.d - k.margin - time.Since(k.renewed))
			k.mu.Unlock()
			continue
		case <-beat.C:
		}
		k.mu.Lock()
		copied := *k.lease // the ledger sets the copy's Until, not the one Finish reads
		sent := time.Now()
		left := k.d - k.margin - sent.Sub(k.renewed)
		k.mu.Unlock()
		ctx, cancel := context.WithTimeout(k.ctx, max(left, time.Millisecond))
		err := k.l.Heartbeat(ctx, &copied, k.d)
		timedOut := ctx.Err() != nil && k.ctx.Err() == nil
		cancel()
		took := time.Since(sent)
		select {
		case <-k.quit:
			return // released meanwhile: the outcome no longer matters
		default:
		}
		k.mu.Lock()
		switch {
		case k.lost != nil:
			k.mu.Unlock()
			return
		case err == nil:
			k.renewed, k.lease.Until = sent, copied.Until
			k.mu.Unlock()
			lapse.Reset(k.d - k.margin - took)
			beat.Reset(max(k.every-took, 0))
			if took > k.every {
				k.failed(nil, took)
			}
			continue
		case errors.Is(err, ledger.ErrFenced):
			k.lose(err)
			k.mu.Unlock()
			k.failed(err, took)
			return
		case k.ctx.Err() != nil:
			k.mu.Unlock()
			return // the run is stopping
		case timedOut:
			err = fmt.Errorf("tranche: heartbeat timed out after %v: %w", took.Round(time.Millisecond), err)
		}
		// Try again soon: within the interval, and before the lease
		// stops holding.
		retry := max(min(k.every, (k.d-k.margin-time.Since(k.renewed))/2), time.Millisecond)
		k.mu.Unlock()
		k.failed(err, took)
		beat.Reset(retry)
	}
}

// release stops renewing the lease and returns why it no longer holds,
// by the ledger or by this process's clock, or nil while it holds. A
// heartbeat in flight is canceled, not waited for to its end: it renews a
// copy of the lease, and nothing reads its outcome.
func (k *keeper) release() error {
	err := k.check()
	close(k.quit)
	k.cancel(nil)
	k.wg.Wait()
	return err
}

// lapsedError is a lease its holder stopped trusting: not renewed for
// longer than the lease less a margin, by the holder's clock. It matches
// ErrFenced.
type lapsedError struct {
	since, lease, margin time.Duration
}

func (e *lapsedError) Error() string {
	return fmt.Sprintf("tranche: lease not renewed for %v, past its %v less a margin of %v: this scheduler stopped the slot, which another may take over",
		e.since.Round(time.Millisecond), e.lease, e.margin)
}

func (e *lapsedError) Is(target error) bool { return target == ledger.ErrFenced }
