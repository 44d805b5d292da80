// Package lease keeps the leases of running attempts for every loop that
// claims, runs and finishes them: a backfill's partitions, RunRecorded's
// partition and a scheduler's slots. Its rules, once:
//
//   - Each kept lease is renewed on a timer of its own, every heartbeat
//     interval, each call bounded by what the lease has left, so that a
//     ledger call that hangs holds up no other lease; a call that fails
//     is reported and tried again sooner.
//   - The holder trusts a lease, by its own monotonic clock, for the
//     lease less a margin ([Margin]) after the start of its last claim
//     or renewal that succeeded; past that, or once the ledger says a
//     newer attempt took it, the run's context is canceled with an error
//     matching [ledger.ErrFenced], and its Err says so right before each
//     write, so that the holder never runs beside the worker that may
//     take the partition over.
//   - A finish in flight keeps the lease for a heartbeat interval, then
//     lets it lapse ([Kept.StopRenewing]): a hung call holds no
//     partition from other workers, and the ledger fences it should it
//     land after a takeover.
//   - A run is judged by one rule ([Kept.Verdict]): a success counts
//     only while its lease holds by this worker's clock, and a run whose
//     lease the ledger gave to a newer attempt records nothing.
//   - Its outcome is recorded even after the program's context ended,
//     for [FinishGrace] ([FinishContext]); the ledger fences the call,
//     so a partition taken over meanwhile records nothing.
//
// The claim half of the loop stays with each caller, which hands the
// lease it gets to a [Keeper]: a backfill claims the next jobs of its
// window in batches, ahead of its slots, in the order of a cursor its
// workers take turns on ([ledger.Leaser.ClaimNext]), while a scheduler
// claims one slot at a time, no earlier than the slot's close by the
// ledger's clock ([ledger.ClaimRequest.NotBefore], refused with a
// [ledger.EarlyError]). Beyond the lease the two share no step, so that
// one claim for both would carry each one's rules unused by the other.
package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/ledger"
)

// Keeper renews the leases of running jobs, each on its own timer,
// so that a heartbeat that hangs holds up no other partition: a call
// gets a timeout of the time its lease has left by this worker's clock,
// a failed one is reported (see keep) and tried again sooner, and a slow
// one (longer than an interval) is reported too. Most partitions of a
// backfill end before their first heartbeat is due, so a lease gets its
// timer only then, from one goroutine that looks every tick for leases
// whose first heartbeat is due and never calls the ledger itself.
//
// A kept lease also fences its worker by the worker's own clock: it
// holds for the lease less a margin after the start of the last claim or
// heartbeat that succeeded, the ledger having extended it from a later
// instant by its own clock. Once that time has passed without a renewal,
// the job's context is canceled with an error matching ErrFenced, and
// check refuses writes and successes, so that the worker stops before
// another may take the partition over rather than run beside it. Losing
// the lease to a newer attempt (a heartbeat failing with ErrFenced) does
// the same.
type Keeper struct {
	ctx      context.Context
	l        ledger.Ledger
	every, d time.Duration // the heartbeat interval and the lease
	margin   time.Duration // how long before the lease ends by this worker's clock it stops holding

	// stop, when not nil, is checked every interval while leases are
	// kept; its error cancels every kept lease's job with it.
	stop func(context.Context) error

	// NoAnswer, when not nil, is told of each heartbeat that got no
	// answer before its lease lapsed, with its error: the ledger may be
	// out of reach (a connection cut), which its user can check. Set
	// before the first Keep.
	NoAnswer func(err error)

	tick time.Duration // how often the first heartbeats due are looked for

	// base is the origin of the keeper's clock: instants are durations
	// since it, read from the monotonic clock alone, which costs a
	// fraction of time.Now.
	base time.Time

	mu        sync.Mutex
	kept      map[*Kept]struct{} // every lease kept, when stop is not nil
	unarmed   map[*Kept]struct{} // leases kept without a timer yet
	stopTimer *time.Timer
	closed    bool
	started   bool
	quit      chan struct{}
	loop      sync.WaitGroup
	calls     sync.WaitGroup // heartbeats and stop checks in flight

	// inFlight are the heartbeats under way, each with when it was
	// sent, so that close can name those it leaves behind.
	inFlight map[*Kept]time.Duration
	// reports guards done: a report of a heartbeat holds it shared and
	// checks done; close takes it to set done, after which nothing is
	// reported, since the run it reports to has returned.
	reports sync.RWMutex
	done    bool
}

// closeWait is how long close waits for the calls in flight, which the
// released leases' contexts have canceled, before it leaves them behind:
// a ledger call that heeds its context returns at once, and one that
// does not (a driver stuck on a dead connection) must not hold up the
// backfill's return.
func (k *Keeper) closeWait() time.Duration { return max(k.every, 10*time.Millisecond) }

// NewKeeper returns a keeper of leases of d in l, renewed every
// interval (every) while ctx lasts. stop, when not nil, is called every
// interval while leases are kept; its error cancels every kept lease's
// job with it (a backfill canceled in the ledger).
func NewKeeper(ctx context.Context, l ledger.Ledger, every, d time.Duration, stop func(context.Context) error) *Keeper {
	margin := Margin(every, d)
	// A first heartbeat goes out at most a tick late, well before the
	// lease could lapse: the margin leaves more than an interval.
	tick := max(min(every, d-margin-every)/4, time.Millisecond)
	return &Keeper{ctx: ctx, l: l, every: every, d: d, margin: margin, tick: tick, stop: stop, base: time.Now(),
		kept: map[*Kept]struct{}{}, unarmed: map[*Kept]struct{}{}, quit: make(chan struct{}),
		inFlight: map[*Kept]time.Duration{}}
}

// Now returns the present on the keeper's clock.
func (k *Keeper) Now() time.Duration { return time.Since(k.base) }

// Margin is how long before a lease of d, renewed every interval,
// ends that its worker stops trusting it: a tenth of the lease, and less
// than half of what the lease leaves after an interval, so that a renewal
// that takes a moment does not stop it. The worker counts the lease from
// when it sent the call that took or renewed it, which the ledger served
// later, so the margin need only cover the drift of the clocks' rates and
// the moment between a check and what it allows.
func Margin(every, d time.Duration) time.Duration {
	return min(d/10, (d-every)/2)
}

// Kept is one lease being renewed.
type Kept struct {
	k      *Keeper
	lease  *ledger.Lease
	cancel context.CancelCauseFunc
	ctx    context.Context
	// renewFailed, when not nil, reports a heartbeat that failed (err
	// not nil) or was slow (err nil): it is called under mu, so never
	// after release.
	renewFailed func(err error, took time.Duration)

	// Opts are the run's options: its fencing is the lease's tokens,
	// kept with it; the caller adds the run's id and attempt.
	Opts tranche.RunOptions
	// job is the job's context, which checks this lease (see
	// leaseContext); kept here so that it costs no allocation of its
	// own.
	job leaseContext

	mu       sync.Mutex
	renewed  time.Duration // when the last claim or heartbeat that succeeded was sent, on the keeper's clock
	lost     error         // why the lease no longer holds, once it does not
	byLedger bool          // lost to a newer attempt, as the ledger said
	released bool
	frozen   bool // renewed no more: it lapses in its time
	// finishing: its finish is in flight, which ends the attempt, so
	// that a heartbeat the ledger refuses meanwhile tells nothing (the
	// finish itself says whether a newer attempt took it).
	finishing bool
	beat      *time.Timer
	lapse     *time.Timer // set by the first heartbeat: the lease cannot lapse before it
}

// Keep renews lease, claimed by a call sent at claimed (on the keeper's
// clock, see Now), until release is called, and returns it with the
// context to run its job under.
func (k *Keeper) Keep(lease *ledger.Lease, claimed time.Duration, renewFailed func(error, time.Duration)) (*Kept, context.Context) {
	runCtx, cancel := context.WithCancelCause(k.ctx)
	kl := &Kept{k: k, lease: lease, cancel: cancel, ctx: runCtx, renewFailed: renewFailed, renewed: claimed}
	kl.Opts = tranche.RunOptions{Tokens: lease.Tokens(), DAG: lease.DAG, Trigger: string(lease.Trigger)}
	kl.job = leaseContext{Context: runCtx, kl: kl}
	k.mu.Lock()
	k.unarmed[kl] = struct{}{}
	if !k.started {
		k.started = true
		k.loop.Go(k.arm)
	}
	if k.stop != nil {
		k.kept[kl] = struct{}{}
		if k.stopTimer == nil && !k.closed {
			k.stopTimer = time.AfterFunc(k.every, k.checkStop)
		}
	}
	k.mu.Unlock()
	return kl, &kl.job
}

// Lease returns the lease kept.
func (kl *Kept) Lease() *ledger.Lease { return kl.lease }

// leaseContext is a kept lease's job's context: the context that the
// keeper cancels when the lease is lost, whose Err also checks the lease
// by the worker's clock. The runner checks a fenced run's context right
// before each write (see tranche.RunOptions), so a worker paused past its
// lease writes nothing even when the timer that would cancel the context
// has not fired yet. Done and Value are the canceled context's, so that
// contexts derived from it are canceled with it as from any other.
type leaseContext struct {
	context.Context
	kl *Kept
}

// Err returns the context's error, once the lease has been checked: a
// lease that no longer holds cancels the context first, with why.
func (c *leaseContext) Err() error {
	if err := c.Context.Err(); err != nil {
		return err
	}
	c.kl.Check()
	return c.Context.Err()
}

// arm gives each kept lease, once its first heartbeat is due, its own
// timer, which renews it from then on.
func (k *Keeper) arm() {
	t := time.NewTicker(k.tick)
	defer t.Stop()
	for {
		select {
		case <-k.quit:
			return
		case <-t.C:
		}
		now := k.Now()
		k.mu.Lock()
		for kl := range k.unarmed {
			// renewed is set before the lease is added, and changes only
			// once it is armed.
			if now-kl.renewed >= k.every {
				delete(k.unarmed, kl)
				kl.mu.Lock()
				if !kl.released {
					kl.beat = time.AfterFunc(0, kl.heartbeat)
				}
				kl.mu.Unlock()
			}
		}
		k.mu.Unlock()
	}
}

// Check returns nil while the lease holds by this worker's clock, and
// otherwise why it does not, an error matching ErrFenced.
func (kl *Kept) Check() error {
	err, _ := kl.State()
	return err
}

// State returns what Check does, and whether the ledger said the lease
// was lost to a newer attempt.
func (kl *Kept) State() (err error, byLedger bool) {
	kl.mu.Lock()
	defer kl.mu.Unlock()
	if kl.lost == nil && !kl.released {
		if kl.lost = kl.lapsedErr(kl.k.Now()); kl.lost != nil {
			kl.cancel(kl.lost)
		}
	}
	return kl.lost, kl.byLedger
}

// lapsedErr returns the error of a lease not renewed in time at now, or
// nil while it holds. Called under mu.
func (kl *Kept) lapsedErr(now time.Duration) error {
	k := kl.k
	since := now - kl.renewed
	if since < k.d-k.margin {
		return nil
	}
	return &lapsedError{since: since, lease: k.d, margin: k.margin}
}

// Release stops renewing the lease and cancels its context. A heartbeat
// in flight is canceled, not waited for: it renews a copy of the lease,
// and reports nothing once released.
func (kl *Kept) Release() {
	kl.mu.Lock()
	kl.released = true
	if kl.beat != nil {
		kl.beat.Stop()
	}
	if kl.lapse != nil {
		kl.lapse.Stop()
	}
	kl.mu.Unlock()
	kl.cancel(nil)
	k := kl.k
	k.mu.Lock()
	delete(k.unarmed, kl)
	if k.stop != nil {
		delete(k.kept, kl)
	}
	k.mu.Unlock()
}

// Finishing marks the lease's finish in flight: a heartbeat the
// ledger refuses meanwhile tells nothing, the finish itself says
// whether a newer attempt took the partition.
func (kl *Kept) Finishing() {
	kl.mu.Lock()
	kl.finishing = true
	kl.mu.Unlock()
}

// StopRenewing stops renewing the lease, which then lapses in its time,
// and returns when, on the keeper's clock: its holder no longer holds
// it then, and other workers may take it over once it expires.
func (kl *Kept) StopRenewing() time.Duration {
	kl.mu.Lock()
	defer kl.mu.Unlock()
	kl.frozen = true
	if kl.beat != nil {
		kl.beat.Stop()
	}
	return kl.renewed + kl.k.d - kl.k.margin
}

// heartbeat renews the lease once, on its timer's goroutine, and sets the
// timer for the next.
func (kl *Kept) heartbeat() {
	k := kl.k
	kl.mu.Lock()
	if kl.released || kl.lost != nil || kl.frozen {
		kl.mu.Unlock()
		return
	}
	if kl.lapse == nil {
		kl.lapse = time.AfterFunc(kl.renewed+k.d-k.margin-k.Now(), kl.lapsed)
	}
	// Added under mu before release, so before close waits.
	k.calls.Add(1)
	defer k.calls.Done()
	lease := *kl.lease // the ledger sets the copy's Until, not the one Finish reads
	sent := k.Now()
	left := kl.renewed + k.d - k.margin - sent
	kl.mu.Unlock()
	k.mu.Lock()
	k.inFlight[kl] = sent
	k.mu.Unlock()
	defer func() {
		k.mu.Lock()
		delete(k.inFlight, kl)
		k.mu.Unlock()
	}()

	// The call may take what the lease has left: a slow ledger still
	// renews it, and past that it no longer matters.
	timeout := max(left, time.Millisecond)
	ctx, cancel := context.WithTimeout(kl.ctx, timeout)
	err := k.l.Heartbeat(ctx, &lease, k.d)
	timedOut := ctx.Err() != nil && kl.ctx.Err() == nil
	cancel()
	took := k.Now() - sent

	kl.mu.Lock()
	defer kl.mu.Unlock()
	_, lapsed := kl.lost.(*lapsedError)
	switch {
	case kl.lost != nil && !lapsed:
		return
	case err == nil && lapsed:
		return // too late: the job was stopped meanwhile
	case kl.released && !lapsed:
		// A call that outlived the lease falls through to be reported
		// even when the job it stopped has released the lease since:
		// it is why the job stopped.
		return
	case err == nil:
		kl.renewed = sent
		kl.lease.Until = lease.Until
		kl.lapse.Reset(k.d - k.margin - took)
		kl.beat.Reset(max(k.every-took, 0))
		if took > k.every {
			kl.report(nil, took)
		}
		return
	case errors.Is(err, ledger.ErrFenced) && kl.finishing:
		return
	case errors.Is(err, ledger.ErrFenced):
		if kl.lost == nil {
			kl.lost, kl.byLedger = err, true
			kl.cancel(err)
		}
	case lapsed:
		// The call outlived the lease, which stopped the job.
		if errors.Is(err, context.Canceled) {
			// Canceled by the lapse, which came first: the call had no
			// answer within its deadline all the same.
			err = context.DeadlineExceeded
		}
		err = fmt.Errorf("tranche: heartbeat timed out after %v, and the lease lapsed: %w", took.Round(time.Millisecond), err)
		if k.NoAnswer != nil {
			k.NoAnswer(err)
		}
	case kl.ctx.Err() != nil:
		return // the job is stopping: its lease is about to be released
	case timedOut:
		err = fmt.Errorf("tranche: heartbeat timed out after %v: %w", took.Round(time.Millisecond), err)
		if k.NoAnswer != nil {
			k.NoAnswer(err)
		}
	}
	kl.report(err, took)
	if kl.lost == nil {
		// Try again soon: within the interval, and before the lease
		// stops holding.
		left := kl.renewed + k.d - k.margin - k.Now()
		kl.beat.Reset(max(min(k.every, left/2), time.Millisecond))
	}
}

// report reports a heartbeat that failed or was slow, unless the keeper
// was closed: a call left behind that returns after the backfill did
// reports nothing. Called under mu.
func (kl *Kept) report(err error, took time.Duration) {
	if kl.renewFailed == nil {
		return
	}
	k := kl.k
	k.reports.RLock()
	defer k.reports.RUnlock()
	if !k.done {
		kl.renewFailed(err, took)
	}
}

// lapsed runs when the lease stops holding by this worker's clock unless
// renewed: it cancels the job, whose partition another worker may take
// over from now on.
func (kl *Kept) lapsed() {
	kl.mu.Lock()
	defer kl.mu.Unlock()
	if kl.released || kl.lost != nil {
		return
	}
	now := kl.k.Now()
	if err := kl.lapsedErr(now); err != nil {
		kl.lost = err
		kl.cancel(err)
		return
	}
	// A renewal came in since the timer was set.
	kl.lapse.Reset(kl.renewed + kl.k.d - kl.k.margin - now)
}

// checkStop calls stop, every interval while the keeper is open, when
// some lease is kept, and cancels every kept lease's job with its error.
func (k *Keeper) checkStop() {
	k.mu.Lock()
	if k.closed {
		k.mu.Unlock()
		return
	}
	kept := make([]*Kept, 0, len(k.kept))
	for kl := range k.kept {
		kept = append(kept, kl)
	}
	k.calls.Add(1)
	defer k.calls.Done()
	k.mu.Unlock()
	if len(kept) > 0 {
		ctx, cancel := context.WithTimeout(k.ctx, k.every)
		err := k.stop(ctx)
		cancel()
		if err != nil {
			for _, kl := range kept {
				kl.cancel(err)
			}
		}
	}
	k.mu.Lock()
	if !k.closed {
		k.stopTimer.Reset(k.every)
	}
	k.mu.Unlock()
}

// Close stops the keeper once every lease is released, and waits for the
// calls in flight, which the released leases' contexts have canceled, for
// at most closeWait: a call that ignores its context is left behind,
// each heartbeat among them reported as a failed renewal of its
// partition's lease (an error matching [ErrLeftBehind] that names the
// call and how long it has been in flight), and reports nothing once it
// returns.
func (k *Keeper) Close() {
	k.mu.Lock()
	k.closed = true
	if k.stopTimer != nil {
		k.stopTimer.Stop()
	}
	k.mu.Unlock()
	close(k.quit)
	k.loop.Wait()
	waited := make(chan struct{})
	go func() {
		k.calls.Wait()
		close(waited)
	}()
	timer := time.NewTimer(k.closeWait())
	defer timer.Stop()
	select {
	case <-waited:
		k.stopReports()
		return
	case <-timer.C:
	}
	now := k.Now()
	k.mu.Lock()
	left := make(map[*Kept]time.Duration, len(k.inFlight))
	for kl, sent := range k.inFlight {
		left[kl] = sent
	}
	k.mu.Unlock()
	for kl, sent := range left {
		if kl.renewFailed == nil {
			continue
		}
		kl.mu.Lock()
		kl.report(&LeftBehindError{call: fmt.Sprintf("Heartbeat of %s (attempt %d of worker %s)",
			Describe(kl.lease), kl.lease.Attempts[0], kl.lease.Worker), since: now - sent}, now-sent)
		kl.mu.Unlock()
	}
	k.stopReports()
}

func (k *Keeper) stopReports() {
	k.reports.Lock()
	k.done = true
	k.reports.Unlock()
}

// Describe names a lease's partitions: the first one's key, and how
// many more.
func Describe(l *ledger.Lease) string {
	if len(l.Partitions) == 1 {
		return l.Partitions[0].Key()
	}
	return fmt.Sprintf("%s and %d more", l.Partitions[0].Key(), len(l.Partitions)-1)
}

// ErrLeftBehind is matched by a call the keeper's user stopped waiting
// for (see backfill.ErrLeftBehind, which names it for users).
var ErrLeftBehind = errors.New("tranche: ledger call left behind")

// LeftBehind returns the error of call, left behind after since: once
// its lease lapsed (lapsed), or past its context's cancellation.
func LeftBehind(call string, since time.Duration, lapsed bool) error {
	return &LeftBehindError{call: call, since: since, lapsed: lapsed}
}

// LeftBehindError is a call that the backfill stopped waiting for: a
// heartbeat still in flight when it returned, or a finish in flight
// once its leases lapsed (lapsed).
type LeftBehindError struct {
	call   string
	since  time.Duration
	lapsed bool
}

func (e *LeftBehindError) Error() string {
	if e.lapsed {
		return fmt.Sprintf("tranche: %s still in flight after %v, once its lease lapsed: left behind, its outcome unknown (the ledger refuses it if another worker took the partition over)",
			e.call, e.since.Round(time.Millisecond))
	}
	return fmt.Sprintf("tranche: %s still in flight after %v, past its context's cancellation: left behind as the backfill returns",
		e.call, e.since.Round(time.Millisecond))
}

// Is matches ErrLeftBehind, and, for a finish left behind once its
// lease lapsed, ErrFenced: the worker no longer holds the partition.
func (e *LeftBehindError) Is(target error) bool {
	return target == ErrLeftBehind || e.lapsed && target == ledger.ErrFenced
}

// lapsedError is a lease that its worker stopped trusting: not renewed
// for longer than the lease less a margin, by the worker's own clock. It
// matches ErrFenced.
type lapsedError struct {
	since, lease, margin time.Duration
}

func (e *lapsedError) Error() string {
	return fmt.Sprintf("tranche: lease not renewed for %v, past its %v less a margin of %v: this worker stopped the partition, which another may take over",
		e.since.Round(time.Millisecond), e.lease, e.margin)
}

func (e *lapsedError) Is(target error) bool { return target == ledger.ErrFenced }
