package backfill

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tranche-dev/tranche"
	leases "github.com/tranche-dev/tranche/internal/lease"
	"github.com/tranche-dev/tranche/internal/wait"
	"github.com/tranche-dev/tranche/ledger"
)

// execution is the shared state of one Run.
type execution struct {
	b      *Backfill
	cfg    *config
	plan   *Plan
	runner *tranche.Runner
	start  time.Time
	// hookMu serializes OnEvent calls: the hook contract is the
	// runner's, one event at a time.
	hookMu sync.Mutex

	// finishCtx records outcomes: it outlives the run's context by
	// leases.FinishGrace, so that the partitions in flight when it ends are
	// still recorded, while a ledger that hangs cannot hold the backfill
	// longer than that.
	finishCtx context.Context
	keeper    *leases.Keeper
	// callers runs the ledger's finish calls (see finishCall).
	callers *callers
	// finisher records successes in batches; nil when the ledger
	// records one finish a call.
	finisher *finisher
	// watch tells when the worker lost its ledger (see lost.go).
	watch watch

	stop    atomic.Bool // no more claims
	limited atomic.Bool // the DAG's limit refused the last claim (see awaitLimit)
	mu      sync.Mutex
	stopSeq int // once stopped, the jobs numbered above it in the order of claims do not start
	report  Report
	stopped error   // why claims stopped, for the report's error
	held    []int64 // the starts (Unix ns) of the partitions Report.Held counts, and of those lost
	// lost is the partitions of held this worker was fenced from, by
	// start (Unix ns): Report.Failed counts them, not Report.Held. Under
	// WaitForOthers the run waits for the worker that took each over,
	// and takes it over in turn should that worker die.
	lost map[int64]bool

	// tried is when settleHeld last tried to take each held partition
	// over, so that a ledger that judges its lease live (by its own
	// clock) is asked again only an interval later.
	tried map[int64]time.Time
	// probed is when settleHeld last tried a running partition before
	// the ledger's clock was known.
	probed time.Time
	// leases is what settling saw of the leases of the partitions held
	// elsewhere, by start (Unix ns); only settling reads and writes it.
	leases map[int64]leaseSeen

	// ledgerAhead is how far the ledger's clock was ahead of the
	// worker's (Backfill.Now) when it served the last claim this
	// execution made, read from the lease's Until; clockKnown says
	// whether one did. Under x.mu.
	ledgerAhead time.Duration
	clockKnown  bool
}

// sawLease learns the ledger's clock from a lease of x.cfg.lease just
// claimed: its Until less the lease is the ledger's time when it served
// the claim, which this worker reads now, a moment later, so that the
// estimate is behind the ledger by at most that moment.
func (x *execution) sawLease(lease *ledger.Lease) {
	ahead := lease.Until.Add(-x.cfg.lease).Sub(x.b.now())
	x.mu.Lock()
	x.ledgerAhead, x.clockKnown = ahead, true
	x.mu.Unlock()
}

// ledgerNow returns the present by the ledger's clock, as the last
// claim showed it, and false when no claim has shown it yet.
func (x *execution) ledgerNow() (time.Time, bool) {
	x.mu.Lock()
	ahead, known := x.ledgerAhead, x.clockKnown
	x.mu.Unlock()
	return x.b.now().Add(ahead), known
}

func (b *Backfill) execute(ctx context.Context, cfg *config, plan *Plan) (*Report, error) {
	// A backfill with nothing to run is not recorded; should a partition
	// call for a run after all (a lease expired since the plan), the
	// backfill is recorded before its claim.
	recorded := false
	if plan.Counts.Run > 0 {
		if err := b.record(ctx, cfg); err != nil {
			return nil, err
		}
		recorded = true
	}
	x := &execution{b: b, cfg: cfg, plan: plan, runner: b.Runner, start: time.Now()}
	if b.WaitForOthers {
		// It settles held partitions in rounds until they are done, so
		// its first try of a running one can wait an interval; a run
		// that does not wait settles them in one round, which must try.
		x.probed = x.start
	}
	var stopFinish func()
	x.finishCtx, stopFinish = finishContext(ctx)
	defer stopFinish()
	x.watch.ctx, x.watch.lose = context.WithCancelCause(x.finishCtx)
	defer x.watch.lose(nil)
	x.callers = newCallers()
	defer x.callers.close()
	x.finisher = newFinisher(x)
	// Every worker looks at each heartbeat whether the backfill was
	// canceled with its running partitions to stop: the operator who
	// cancels so (CancelBackfill with CancelOptions.StopRunning) cannot reach the
	// workers' configuration. StopOnCancel stops them at any cancellation.
	// A cancellation also stops the partitions claimed ahead and not
	// started, which the ledger's refusal of the next claim would not
	// reach.
	canceled := func(ctx context.Context) error {
		record, err := b.Ledger.Backfill(ctx, cfg.id)
		if err != nil || !record.Canceled {
			return nil
		}
		err = fmt.Errorf("%w: %s", ErrBackfillCanceled, cfg.id)
		x.halt(err, -1)
		if b.StopOnCancel || record.StopRunning {
			return err
		}
		return nil
	}
	x.keeper = leases.NewKeeper(ctx, b.Ledger, cfg.heartbeat, cfg.lease, canceled)
	x.keeper.NoAnswer = func(err error) { x.suspect("a heartbeat", err) }
	if x.runner == nil {
		x.runner = &tranche.Runner{}
	}
	x.report = Report{Backfill: cfg.id, Worker: cfg.worker, Total: cfg.total, Plan: plan}
	x.emit(ctx, tranche.Event{Kind: KindStarted})

	d := x.newDispatcher(ctx)
	var scanErr error
	seen := 0 // partitions the scan reached
	scanCtx, stopScan := context.WithCancelCause(ctx)
	defer stopScan(nil)
	defer context.AfterFunc(x.watch.ctx, func() { stopScan(context.Cause(x.watch.ctx)) })()
	for u, err := range b.scan(scanCtx, cfg, plan.Revision, b.Order) {
		if err != nil {
			scanErr = cmp.Or(x.lostLedger(), err)
			break
		}
		if u.action == ledger.ActionRun && !recorded && ctx.Err() == nil && !x.stop.Load() {
			if err := b.record(ctx, cfg); errors.Is(err, ErrBackfillCanceled) {
				x.halt(err, -1)
			} else if err != nil {
				scanErr = err
				break
			}
			recorded = true
		}
		seen += len(u.partitions)
		switch u.action {
		case ledger.ActionRun:
			if ctx.Err() != nil || x.stop.Load() {
				x.count(func(r *Report) { r.NotRun += len(u.partitions) })
				continue
			}
			d.add(u)
		case ledger.ActionSkipRunning:
			x.holdElsewhere(u)
			x.emitJob(ctx, KindPartitionHeld, u, nil)
		case ledger.ActionSkipSuperseded:
			x.superseded(ctx, u, nil)
		default:
			x.count(func(r *Report) { r.Skipped += len(u.partitions) })
			x.emitJob(ctx, KindPartitionSkipped, u, nil)
		}
	}
	if scanErr == nil {
		d.flush()
		x.settleHeld(ctx, d)
	} else {
		d.notRun(d.queue)
		d.queue, d.jobs = nil, nil
	}
	d.pool.wait()
	x.finisher.wait()
	x.keeper.Close()
	if left := x.report.Total - seen; left > 0 {
		// The scan ended early (its context ended, or the ledger
		// failed): the partitions it did not reach stay pending.
		x.count(func(r *Report) { r.NotRun += left })
	}
	return x.finish(ctx, scanErr)
}

// record records the backfill in its ledger, failing with
// ErrBackfillCanceled if it was canceled there.
func (b *Backfill) record(ctx context.Context, cfg *config) error {
	record, err := b.Ledger.PutBackfill(ctx, ledger.BackfillRecord{ID: cfg.id, DAG: cfg.dag, DAGName: b.DAG.Name, Window: cfg.window.String(),
		Partitions: cfg.starts(), Chunk: cfg.chunk})
	if err != nil {
		return fmt.Errorf("tranche: recording backfill %s: %w", cfg.id, err)
	}
	if record.Canceled {
		return fmt.Errorf("%w: %s", ErrBackfillCanceled, cfg.id)
	}
	return nil
}

// superseded counts a job's partitions that another version of the DAG
// landed since the backfill was created as skipped, and reports them
// skipped, with err, the ledger's refusal when it gave one (matching
// ledger.ErrSuperseded either way).
func (x *execution) superseded(ctx context.Context, u *job, err error) {
	n := len(u.partitions)
	x.count(func(r *Report) { r.Skipped += n; r.Superseded += n })
	if err == nil {
		err = fmt.Errorf("%w: %s: landed by a newer version of the DAG after backfill %s was created", ledger.ErrSuperseded, u.window, x.cfg.id)
	}
	x.emitJob(ctx, KindPartitionSkipped, u, err)
}

// holdElsewhere counts a job's partitions held by other workers, to be
// settled once the run has run what it could.
func (x *execution) holdElsewhere(u *job) {
	x.mu.Lock()
	x.report.Held += len(u.partitions)
	for _, p := range u.partitions {
		x.held = append(x.held, p.Start.UnixNano())
	}
	x.mu.Unlock()
}

// settleHeld settles the partitions other workers held when the run
// reached them. Those that succeeded there count as done elsewhere;
// those whose holders' leases have expired, or that failed there (unless
// the rerun policy is none), run here. Under WaitForOthers it waits for
// the rest, until each is settled or ctx ends; otherwise it waits only
// for those whose leases stopped being renewed (a worker killed: the
// rerun after a crash finishes the backfill), unless ReturnHeld is set.
// What is left counts as Held.
func (x *execution) settleHeld(ctx context.Context, d *dispatcher) {
	takeOver := true
	backoff := 10 * time.Millisecond
	for {
		d.pool.wait()
		if ctx.Err() != nil || x.stop.Load() {
			takeOver = false
		}
		r, ok := x.settleRound(ctx, d, takeOver)
		if !ok || !takeOver {
			return // none held, or a last count after the runs of the last round
		}
		switch {
		case !x.b.WaitForOthers && (r.unrenewed == 0 || x.b.ReturnHeld):
			takeOver = false // count what the runs of this round left
		case r.ran == 0:
			// Wait for a lease to expire, or for the holders to
			// finish, looking again soon at first, then less often, up
			// to every heartbeat interval: partitions of a millisecond
			// end within one, of an hour are looked at a few times.
			wait.Sleep(ctx, min(r.wait, backoff))
			backoff = min(2*backoff, x.cfg.heartbeat)
		}
	}
}

// settled is what a round of settling did.
type settled struct {
	ran       int           // partitions claimed to run here
	unrenewed int           // partitions left held under leases that stopped being renewed, or not known to be
	wait      time.Duration // how long to wait before the next round
}

// settleRound sorts the partitions held elsewhere once (see sortHeld),
// runs here those it may take over, and keeps the rest held; ok is
// false when none was held.
func (x *execution) settleRound(ctx context.Context, d *dispatcher, takeOver bool) (r settled, ok bool) {
	x.mu.Lock()
	held := x.held
	x.held = nil
	x.report.Held -= x.countsHeld(held)
	x.mu.Unlock()
	if len(held) == 0 {
		return r, false
	}
	run, waiting, wait, err := x.sortHeld(ctx, held, takeOver)
	if err != nil {
		// The ledger could not say: they stay held.
		run, waiting = nil, held
	}
	r.wait = wait
	if x.judgesHolders() {
		r.unrenewed = x.unrenewed(ctx, waiting)
	}
	x.mu.Lock()
	x.report.Held += x.countsHeld(waiting)
	x.held = append(x.held, waiting...)
	x.mu.Unlock()
	if !takeOver {
		return r, true
	}
	for _, part := range run {
		x.found(part.p)
		u := &job{window: part.window, partitions: []tranche.TimePartition{part.p}, action: ledger.ActionRun}
		x.claimJob(ctx, d, u)
	}
	r.ran = len(run)
	return r, true
}

// judgesHolders reports whether settling judges the holders of the
// partitions held elsewhere by their leases (unrenewed), which reads
// their names: not when the run waits for the holders anyway
// (WaitForOthers), or returns what they hold (ReturnHeld).
func (x *execution) judgesHolders() bool { return !x.b.WaitForOthers && !x.b.ReturnHeld }

// countsHeld returns how many of starts Report.Held counts: those not
// lost, which Report.Failed counts. Called under x.mu.
func (x *execution) countsHeld(starts []int64) int {
	n := len(starts)
	for _, start := range starts {
		if x.lost[start] {
			n--
		}
	}
	return n
}

// lose counts a job's partitions, which this worker was fenced from and
// failed, among the held ones under WaitForOthers, so that the run
// settles them as it settles the partitions other workers hold: the
// worker that took one over may die before it finishes. Called under
// x.mu.
func (x *execution) lose(u *job) {
	if x.lost == nil {
		x.lost = map[int64]bool{}
	}
	for _, p := range u.partitions {
		start := p.Start.UnixNano()
		x.held = append(x.held, start)
		x.lost[start] = true
	}
}

// found undoes the failure of a lost partition that the run takes over
// again: its count and its entry among the failures go, so that the run
// counts it once, by its run here.
func (x *execution) found(p tranche.TimePartition) {
	start := p.Start.UnixNano()
	x.mu.Lock()
	defer x.mu.Unlock()
	if !x.lost[start] {
		return
	}
	delete(x.lost, start)
	x.report.Failed--
	key := p.Key()
	for i := len(x.report.Failures) - 1; i >= 0; i-- {
		if x.report.Failures[i].Key == key {
			x.report.Failures = slices.Delete(x.report.Failures, i, i+1)
			break
		}
	}
}

// unrenewed counts the partitions of waiting whose leases, by what
// sortHeld read, stopped being renewed: not moved since the run first
// saw them, and either with less left, by the ledger's clock, than this
// worker's lease less its heartbeat interval (a holder that renews as
// often as this worker does has more), or held by a worker of this
// machine's default name ([Backfill.Worker]) whose process has ended (a
// rerun right after a crash). It sends a partition.waiting event for
// each the first time it counts it.
func (x *execution) unrenewed(ctx context.Context, waiting []int64) int {
	now, known := x.ledgerNow()
	n := 0
	for _, start := range waiting {
		seen, ok := x.leases[start]
		if !ok || seen.moved {
			continue
		}
		if !(known && seen.until.Sub(now) <= x.cfg.lease-x.cfg.heartbeat) && !endedHere(seen.worker) {
			continue // renewed within an interval: its holder is alive
		}
		n++
		if !seen.told && !x.b.WaitForOthers && !x.b.ReturnHeld {
			seen.told = true
			x.leases[start] = seen
			p := tranche.PartitionOf(x.cfg.window.Granularity(), time.Unix(0, start).In(x.cfg.window.Location()))
			w, err := tranche.NewTimePartitionWindow(p.Granularity, p.Start, p.Start)
			if err != nil {
				continue
			}
			u := &job{window: w, partitions: []tranche.TimePartition{p}}
			why := fmt.Errorf("%w: worker %s's lease stopped being renewed; taken over when it expires", ledger.ErrNotClaimable, seen.worker)
			x.emitJob(ctx, KindPartitionWaiting, u, why, func(e *tranche.Event) { e.Duration = max(seen.until.Sub(now), 0) })
		}
	}
	return n
}

// endedHere reports whether worker is a default worker name of this
// machine (host-pid) whose process has ended.
func endedHere(worker string) bool {
	i := strings.LastIndexByte(worker, '-')
	if i < 0 {
		return false
	}
	pid, err := strconv.Atoi(worker[i+1:])
	if err != nil || pid <= 0 || pid == os.Getpid() {
		return false
	}
	if host, err := os.Hostname(); err != nil || host != worker[:i] {
		return false
	}
	proc, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	return errors.Is(proc.Signal(syscall.Signal(0)), os.ErrProcessDone)
}

// leaseSeen is what the run saw of a held partition's lease: its end when
// first read, whether it moved since (renewed: its holder is alive), and
// whether the run said that it waits for it.
type leaseSeen struct {
	until  time.Time
	worker string
	moved  bool
	told   bool
}

// heldRun is a held partition to run here, with its window.
type heldRun struct {
	p      tranche.TimePartition
	window tranche.TimePartitionWindow
}

// sortHeld reads the latest attempts of the held partitions (starts, Unix
// ns): those that succeeded count as done elsewhere, as do, under
// RerunNone, those that failed there; when takeOver is set, those whose
// leases expired and those that failed are returned to run here, unless
// tried less than an interval ago; the others are returned waiting, with
// how long to wait before looking again (at most an interval).
func (x *execution) sortHeld(ctx context.Context, held []int64, takeOver bool) (run []heldRun, waiting []int64, wait time.Duration, err error) {
	slices.Sort(held)
	// A partition is marked lost as it joins x.held, under x.mu: those
	// of this round were marked before it took them, so one copy of
	// the marks serves the round.
	x.mu.Lock()
	lost := maps.Clone(x.lost)
	x.mu.Unlock()
	latest, err := x.readHeld(ctx, held, len(lost) == 0)
	if err != nil {
		return nil, nil, 0, err
	}
	// The holders' leases are judged by the ledger's clock, which takes
	// them over by it: a worker minutes behind it would otherwise leave
	// expired leases alone for minutes. Before any claim of this run has
	// shown that clock, it is at least the latest time the attempts just
	// read were started or finished at; the running partition whose lease
	// ends first is tried once that says its lease expired, and otherwise
	// once an interval, so that a clock behind the attempts' still finds
	// an expired lease. The ledger judges the try: if it refuses, the
	// leases that end later hold too; if it grants, the lease shows the
	// clock. At most one claim a round, not one a partition held.
	now, clockKnown := x.ledgerNow()
	probe := int64(-1)
	if !clockKnown {
		for _, a := range latest {
			now = latestOf(now, a.Started, a.Finished)
		}
		var first time.Time
		for _, start := range held {
			if a, ok := latest[start]; ok && a.State == ledger.StateRunning && (probe < 0 || a.LeaseUntil.Before(first)) {
				probe, first = start, a.LeaseUntil
			}
		}
		// A lease is live only before its end (ledger.ClaimRequest.Judge):
		// one that ends at now has expired, and is tried at once.
		if probe >= 0 && now.Before(first) && time.Since(x.probed) < x.cfg.heartbeat {
			probe = -1
		}
		if probe >= 0 {
			x.probed = time.Now()
		}
	}
	// The running partitions judged by the probe's answer wait for it:
	// until its next try, when it was tried less than an interval ago.
	var probeWait time.Duration
	if since := time.Since(x.tried[probe]); probe >= 0 && since < x.cfg.heartbeat {
		probeWait = x.cfg.heartbeat - since
	}
	wait, done := x.cfg.heartbeat, 0
	for _, start := range held {
		a, ok := latest[start]
		if ok && a.State == ledger.StateRunning && x.judgesHolders() {
			x.seeLease(start, a)
		}
		switch {
		case lost[start] && (!ok || a.State == ledger.StateSucceeded || a.Worker == x.cfg.worker ||
			a.State.Terminal() && x.cfg.rerun == ledger.RerunNone):
			// Settled, and failed here: finished by the worker that took
			// it over, or still this worker's attempt (its lease lapsed
			// by its own clock, not taken over), which a later run runs
			// again as it runs every partition that failed.
			x.mu.Lock()
			delete(x.lost, start)
			x.mu.Unlock()
			continue
		case ok && a.State == ledger.StateSucceeded,
			ok && a.State.Terminal() && x.cfg.rerun == ledger.RerunNone:
			done++
			continue
		case !takeOver:
		case ok && a.State == ledger.StateRunning && clockKnown && now.Before(a.LeaseUntil):
			wait = min(wait, a.LeaseUntil.Sub(now))
		case ok && a.State == ledger.StateRunning && !clockKnown && start != probe:
			// Judged by the probe's answer, in a later round.
			wait = min(wait, max(a.LeaseUntil.Sub(now), probeWait))
		case time.Since(x.tried[start]) < x.cfg.heartbeat:
			wait = min(wait, x.cfg.heartbeat-time.Since(x.tried[start]))
		default:
			if x.tried == nil {
				x.tried = map[int64]time.Time{}
			}
			x.tried[start] = time.Now()
			p := tranche.PartitionOf(x.cfg.window.Granularity(), time.Unix(0, start).In(x.cfg.window.Location()))
			w, err := tranche.NewTimePartitionWindow(p.Granularity, p.Start, p.Start)
			if err != nil {
				return nil, nil, 0, err
			}
			run = append(run, heldRun{p, w})
			continue
		}
		waiting = append(waiting, start)
	}
	x.count(func(r *Report) { r.Elsewhere += done })
	return run, waiting, wait, nil
}

// readHeld reads the latest attempts of the held partitions (starts,
// Unix ns, sorted), by start. Where the ledger reads in brief
// ([ledger.BriefReader]), settling does not judge the holders
// (judgesHolders) and no partition held is one this worker lost (whose
// latest attempt it tells from its own by the holder's name: noneLost
// says so), it reads briefs, without the holders' names and the other
// strings of each attempt: every worker sharing a backfill reads each
// partition that the others run, which made whole attempts an eighth of
// the workers' CPU, and more of the server's, in a backfill of no-work
// partitions shared by 16 processes.
func (x *execution) readHeld(ctx context.Context, held []int64, noneLost bool) (map[int64]ledger.Attempt, error) {
	from, to := time.Unix(0, held[0]), time.Unix(0, held[len(held)-1]+1)
	latest := make(map[int64]ledger.Attempt, len(held))
	keep := func(a ledger.Attempt) {
		if _, ok := slices.BinarySearch(held, a.Start.UnixNano()); ok {
			latest[a.Start.UnixNano()] = a
		}
	}
	br, brief := x.b.Ledger.(ledger.BriefReader)
	brief = brief && !x.judgesHolders() && noneLost
	err := x.call(ctx, "a read of the partitions held elsewhere", func(ctx context.Context) error {
		if brief {
			for b, err := range br.LatestBriefs(ctx, x.cfg.dag, from, to) {
				if err != nil {
					return err
				}
				keep(ledger.Attempt{Start: b.Start, State: b.State, Started: b.Started, Finished: b.Finished, LeaseUntil: b.LeaseUntil})
			}
			return nil
		}
		for a, err := range x.b.Ledger.Latest(ctx, x.cfg.dag, from, to) {
			if err != nil {
				return err
			}
			keep(a)
		}
		return nil
	})
	return latest, err
}

// seeLease records the lease of a's attempt at the held partition
// starting at start (Unix ns): its end when first seen, and whether it
// moved since.
func (x *execution) seeLease(start int64, a ledger.Attempt) {
	if x.leases == nil {
		x.leases = map[int64]leaseSeen{}
	}
	seen, ok := x.leases[start]
	switch {
	case !ok || seen.worker != a.Worker:
		x.leases[start] = leaseSeen{until: a.LeaseUntil, worker: a.Worker}
	case !a.LeaseUntil.Equal(seen.until):
		seen.moved = true
		x.leases[start] = seen
	}
}

// latestOf returns the latest of t and the others.
func latestOf(t time.Time, others ...time.Time) time.Time {
	for _, o := range others {
		if o.After(t) {
			t = o
		}
	}
	return t
}

// finishContext returns a context that is not canceled with ctx but
// leases.FinishGrace after it, and a function that releases it.
func finishContext(ctx context.Context) (context.Context, func()) {
	fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var (
		mu      sync.Mutex
		grace   *time.Timer
		stopped bool
	)
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if !stopped {
			grace = time.AfterFunc(leases.FinishGrace, cancel)
		}
	})
	return fctx, func() {
		stop()
		mu.Lock()
		stopped = true
		if grace != nil {
			grace.Stop()
		}
		mu.Unlock()
		cancel()
	}
}

// runID returns the run id of a job, computed once.
func (x *execution) runID(u *job) string {
	if u.runID == "" {
		u.runID = RunID(x.cfg.dag, u.window.Start(), u.window.End())
	}
	return u.runID
}

// count updates the report under the lock.
func (x *execution) count(f func(*Report)) {
	x.mu.Lock()
	f(&x.report)
	x.mu.Unlock()
}

// claimJob claims one partition or chunk alone, once a slot of the pool
// is free, and runs and records it: a partition settled after the scan,
// which the cursor of ClaimNext has passed.
func (x *execution) claimJob(ctx context.Context, d *dispatcher, u *job) {
	cfg := x.cfg
	d.pool.awaitFree()
	if ctx.Err() != nil || x.stop.Load() {
		x.count(func(r *Report) { r.NotRun += len(u.partitions) })
		return
	}
	var lease *ledger.Lease
	var err error
	var claimed time.Duration
	for {
		claimed = x.keeper.Now() // the lease holds from no earlier, by the ledger's clock
		err = x.call(ctx, "a claim", func(ctx context.Context) (err error) {
			lease, err = x.b.Ledger.Claim(ctx, ledger.ClaimRequest{
				DAG: cfg.dag, Backfill: cfg.id, Worker: cfg.worker, RunID: x.runID(u), Partitions: u.partitions,
				Lease: cfg.lease, Policy: cfg.rerun, Revision: x.plan.Revision, Trigger: ledger.TriggerBackfill, CodeVersion: cfg.codeVersion,
			})
			return err
		})
		// Claimed again once the DAG's limit leaves room, unless the
		// backfill stopped meanwhile: room may come only once runs
		// elsewhere end, and the job would not start.
		if !errors.Is(err, ledger.ErrLimited) || x.stop.Load() || !x.awaitLimit(ctx, err) {
			break
		}
	}
	switch {
	case errors.Is(err, ledger.ErrLimited): // ctx ended, or the backfill stopped, while it waited
		x.count(func(r *Report) { r.NotRun += len(u.partitions) })
		return
	case errors.Is(err, ledger.ErrBackfillCanceled):
		x.halt(fmt.Errorf("%w: %s", ErrBackfillCanceled, cfg.id), -1)
		x.count(func(r *Report) { r.NotRun += len(u.partitions) })
		return
	case errors.Is(err, ledger.ErrSuperseded):
		x.superseded(ctx, u, err)
		return
	case errors.Is(err, ledger.ErrNotClaimable):
		x.holdElsewhere(u)
		x.emitJob(ctx, KindPartitionHeld, u, err)
		return
	case err != nil:
		if ctx.Err() != nil {
			x.count(func(r *Report) { r.NotRun += len(u.partitions) })
			return
		}
		x.unclaimed(ctx, u, fmt.Errorf("tranche: claiming %s: %w", u.window, err), d.nextSeq())
		return
	}
	x.granted()
	x.sawLease(lease)
	u.seq = d.nextSeq()
	d.start(u, lease, claimed)
}

// begin decides, on the dispatcher's goroutine and in the order of
// claims, whether a claimed job starts: not when the backfill stopped
// before it in that order or its context ended (its claim is released
// and it stays pending), nor when it waited so long since its claim
// that its lease may be better spent by another worker. Under a Budget
// it takes the job's place there, so that places go in the order of
// claims too; the caller gives it back once the job is recorded. It
// sends the job's started event.
func (x *execution) begin(ctx context.Context, u *job, lease *ledger.Lease, kept *leases.Kept) bool {
	b, cfg := x.b, x.cfg
	if ctx.Err() != nil || x.stoppedBefore(u) {
		x.release(u, kept)
		return false
	}
	if x.keeper.Now()-u.claimed > cfg.heartbeat {
		// Claimed ahead, and the jobs before it ran longer than the
		// lookahead foresaw, or the worker stalled: rather than hold it
		// from workers that may be free, give it back, and settle it
		// with the partitions held elsewhere. It never runs under a
		// lease it may have lost.
		kept.Release()
		switch err := x.call(x.finishCtx, "a release", func(ctx context.Context) error { return b.Ledger.Release(ctx, lease) }); {
		case err == nil:
			x.holdElsewhere(u)
		case errors.Is(err, ledger.ErrFenced):
			// Taken over while it waited: lost to a newer attempt, as a
			// run that loses its lease is.
			x.fail(ctx, u, fmt.Errorf("tranche: %s, claimed ahead, was taken over before it started: %w", u.window, err))
		default:
			// Still held, until its lease expires: the holders' settling
			// finds it then.
			x.holdElsewhere(u)
		}
		return false
	}
	if b.Budget != nil {
		if err := b.Budget.Acquire(ctx); err != nil {
			x.release(u, kept)
			return false
		}
		if x.stoppedBefore(u) {
			// Stopped while it waited for its place.
			b.Budget.Release()
			x.release(u, kept)
			return false
		}
	}
	x.emitJob(ctx, KindPartitionStarted, u, nil)
	return true
}

// runClaimed runs a job that began and records its outcome, holding its
// slot until the outcome is recorded: a success counts, is reported and
// lets the next job start only once it is durable in the ledger.
func (x *execution) runClaimed(ctx context.Context, u *job, lease *ledger.Lease, kept *leases.Kept, runCtx context.Context) {
	b, cfg, n := x.b, x.cfg, len(u.partitions)
	runID := x.runID(u)
	var target tranche.Target
	if n == 1 {
		target = u.partitions[0]
	} else {
		target = u.window
	}
	kept.Opts.RunID, kept.Opts.Attempt, kept.Opts.Backfill = runID, lease.Attempts[0], cfg.id
	began := b.now()
	res, runErr := x.runner.RunWith(runCtx, b.DAG, target, &kept.Opts)
	ran := b.now().Sub(began)
	failure, lost := kept.Verdict(res, runErr, runID)
	cause := context.Cause(runCtx)
	switch {
	case lost:
	case errors.Is(cause, ErrBackfillCanceled):
		failure = fmt.Errorf("canceled: %w", cause)
		x.halt(cause, -1)
	case failure != nil && ctx.Err() != nil && !errors.Is(failure, ledger.ErrFenced):
		failure = fmt.Errorf("canceled: %w", context.Cause(ctx))
	}
	outcomes := make([]ledger.Outcome, n)
	var rows map[string]int
	if failure == nil {
		rows = rowsByPartition(res)
	}
	for i, p := range u.partitions {
		switch {
		case failure != nil:
			outcomes[i] = ledger.Outcome{State: ledger.StateFailed, Err: failure.Error(), Ran: ran}
		case len(rows) > 0:
			outcomes[i] = ledger.Outcome{State: ledger.StateSucceeded, Ran: ran, Rows: int64(rows[p.Key()])}
		default:
			outcomes[i] = ledger.Outcome{State: ledger.StateSucceeded, Ran: ran}
		}
	}
	if failure == nil && x.finisher.takes(lease) {
		// Recorded with the successes of the other slots that end
		// meanwhile, the lease renewed until then.
		x.finisher.finish(&finishing{ctx: ctx, u: u, lease: lease, kept: kept, outcomes: outcomes})
		return
	}
	if lost {
		kept.Release()
		x.fail(ctx, u, failure)
		return
	}
	// Record the outcome even when ctx ended, or the lease lapsed by
	// this worker's clock: a partition must not stay running until its
	// lease expires. The ledger fences the call, so a partition taken
	// over meanwhile records nothing.
	x.settle(ctx, u, kept, outcomes, failure)
}

// unclaimed records a job whose claim failed for a reason other than its
// partitions being held: they were neither run nor recorded. Claims stop
// under tranche.FailStop.
func (x *execution) unclaimed(ctx context.Context, u *job, err error, seq int) {
	x.count(func(r *Report) {
		r.Unclaimed += len(u.partitions)
		for _, p := range u.partitions {
			r.ClaimFailures = append(r.ClaimFailures, Failure{Key: p.Key(), Err: err})
		}
	})
	if x.cfg.onFailure == tranche.FailStop && ctx.Err() == nil {
		x.halt(fmt.Errorf("stopped after the claim of partition %s failed", u.partitions[len(u.partitions)-1].Key()), seq)
	}
	x.emitJob(ctx, KindPartitionUnclaimed, u, err)
}

// rowsByPartition sums the rows of each partition over the assets; nil
// when no asset counts rows by partition.
func rowsByPartition(res *tranche.Result) map[string]int {
	var rows map[string]int
	for _, o := range res.Assets {
		if len(o.RowsByPartition) > 0 && rows == nil {
			rows = map[string]int{}
		}
		for k, n := range o.RowsByPartition {
			rows[k] += n
		}
	}
	return rows
}

// fail records a failed job and stops claims under tranche.FailStop.
func (x *execution) fail(ctx context.Context, u *job, err error) {
	x.count(func(r *Report) {
		r.Failed += len(u.partitions)
		for _, p := range u.partitions {
			r.Failures = append(r.Failures, Failure{Key: p.Key(), Err: err})
		}
		if x.b.WaitForOthers && errors.Is(err, ledger.ErrFenced) {
			x.lose(u)
		}
	})
	// Claims stop before the event goes out, so that a hook that sees the
	// failure sees no partition claimed after it.
	if x.cfg.onFailure == tranche.FailStop && ctx.Err() == nil {
		x.halt(fmt.Errorf("stopped after the failure of partition %s", u.partitions[len(u.partitions)-1].Key()), u.seq)
	}
	x.emitJob(ctx, KindPartitionFailed, u, err)
}

// halt stops claims, for why, after the job numbered seq in the order
// of claims: the jobs claimed before it still run, those after it do
// not. A seq of -1 stops every job not started yet.
func (x *execution) halt(why error, seq int) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.stop.CompareAndSwap(false, true) {
		x.stopped, x.stopSeq = why, seq
	} else {
		x.stopSeq = min(x.stopSeq, seq)
	}
}

func (x *execution) finish(ctx context.Context, scanErr error) (*Report, error) {
	x.mu.Lock()
	x.report.Duration = time.Since(x.start)
	report := x.report
	x.mu.Unlock()
	var err error
	kind := KindSucceeded
	switch {
	case scanErr != nil && ctx.Err() == nil:
		kind, err = KindFailed, scanErr
	case ctx.Err() != nil:
		kind, err = KindCanceled, fmt.Errorf("tranche: backfill %s canceled: %w", report.Backfill, context.Cause(ctx))
	case errors.Is(x.stopped, ErrBackfillCanceled):
		// Partitions stopped by the cancellation count as failed, but
		// the backfill was canceled, not failed.
		kind, err = KindCanceled, fmt.Errorf("tranche: backfill %s: %w", report.Backfill, x.stopped)
	case report.Failed > 0:
		kind = KindFailed
		first := report.Failures[0]
		err = fmt.Errorf("tranche: backfill %s: %s failed (first %s: %w)", report.Backfill, partitions(report.Failed), first.Key, first.Err)
	case report.Unclaimed > 0:
		kind = KindFailed
		first := report.ClaimFailures[0]
		err = fmt.Errorf("tranche: backfill %s: %s not claimed, neither run nor recorded (first %s: %w)",
			report.Backfill, partitions(report.Unclaimed), first.Key, first.Err)
	case x.stopped != nil:
		kind, err = KindCanceled, fmt.Errorf("tranche: backfill %s: %w", report.Backfill, x.stopped)
	case report.Held > 0:
		// Ordinary overlap: the run did its part, and other workers
		// hold the rest. Not an error; the report and the event say it.
		kind = KindUnfinished
	}
	if lost := x.lostLedger(); lost != nil && ctx.Err() == nil {
		// Said once, whichever failure came first: the partitions that
		// failed lost their leases with it.
		kind = KindFailed
		switch {
		case err == nil:
			err = fmt.Errorf("tranche: backfill %s: %w", report.Backfill, lost)
		case !errors.Is(err, lost):
			err = fmt.Errorf("%w; %w", err, lost)
		}
	}
	if err != nil && report.Held > 0 {
		err = fmt.Errorf("%w; and %s %s held by other workers", err, partitions(report.Held), plural(report.Held, "is", "are"))
	}
	x.emit(ctx, tranche.Event{Kind: kind, Err: err, Duration: report.Duration})
	return &report, err
}

// progress returns the counts so far with an estimate of the time left.
func (x *execution) progress() *tranche.Progress {
	x.mu.Lock()
	r := x.report
	x.mu.Unlock()
	p := &tranche.Progress{Done: r.Succeeded, Failed: r.Failed + r.Unclaimed, Skipped: r.Skipped + r.Elsewhere, Held: r.Held, Total: r.Total}
	if ran := r.Succeeded + r.Failed; ran > 0 {
		left := r.Total - ran - r.Skipped - r.Elsewhere - r.Held - r.NotRun - r.Unclaimed
		p.ETA = time.Since(x.start) / time.Duration(ran) * time.Duration(max(left, 0))
	}
	return p
}
