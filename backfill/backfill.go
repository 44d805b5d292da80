package backfill

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/internal/hookcall"
	"github.com/tranche-dev/tranche/internal/slotmatch"
	"github.com/tranche-dev/tranche/internal/zone"
	"github.com/tranche-dev/tranche/ledger"
)

// Backfill materializes a DAG over every partition of a window, recording
// each partition's attempts in a [ledger.Ledger], so that running it again
// resumes it: succeeded partitions are skipped, failed ones retried under
// their run ids, and pending ones run. Several workers, in one process or
// many, may run the same backfill at once against one ledger: each
// partition is claimed under a lease before it runs, so it runs in one
// place at a time, and a worker killed mid-partition loses it to another
// once its lease expires.
//
// The same DAG, window and chunk size always name the same backfill (see
// [BackfillID]), and the same DAG, chosen partitions and chunk size too
// (see [BackfillIDOf]). A backfill with nothing to run is not recorded in
// the ledger. A backfill canceled in its ledger can be resumed
// ([Backfill.Resume]): it plans again every partition that has not
// succeeded. Fields must not change once a method has been called. A
// zero field takes the default its comment gives.
//
// Workers sharing a backfill never race for a partition: each asks the
// ledger for its next jobs ([ledger.Ledger.ClaimNext]), which hands each
// to one worker in the backfill's order, in batches. A worker whose
// partitions take milliseconds claims a few ahead of its free slots
// (about 50 ms of work), so that a batch costs one claim; those claimed
// ahead show running, and once a failure stops the backfill, or a
// cancellation is seen (at the next claim, or at the next heartbeat),
// those not started are released, left pending as if never claimed.
// Partitions start in the order of claims, so that under FailStop a
// failure stops only the partitions after it.
//
// A DAG whose schedule moved keeps its history: when a cron schedule that
// fires once a day, or once an hour, moves within its days ("0 2 * * *" to
// "0 1 * * *"), its DAG identity stays (see [DAGIdentity]) and a plan
// matches each slot to the latest attempts at its own start and at every
// other schedule's slot that fired on the same local date (or in the same
// local hour), taking the one changed last: the days the old schedule
// covered are not planned again.
type Backfill struct {
	DAG    *tranche.DAG                // the assets to materialize; each must be partitioned
	Window tranche.TimePartitionWindow // the partitions to backfill
	Ledger ledger.Ledger               // where attempts are recorded

	// Partitions, when not empty, are the partitions to backfill in
	// place of Window's: chosen partitions of one granularity and
	// location, not necessarily adjacent, in any order, each counted
	// once (the slots Dagu's repeated --slot names, each from
	// [tranche.SlotAt]). Window may then be zero; when it is not, it
	// must hold them, and gives their granularity and location. A chunk
	// is then a run of adjacent chosen partitions.
	Partitions []tranche.TimePartition

	// Runner runs each partition or chunk; nil means a zero Runner.
	// Its OnEvent hook sees the events of every run.
	Runner *tranche.Runner

	// Worker names this worker in the ledger; "" means host-pid.
	Worker string

	// Concurrency is how many partitions (or chunks) run at once;
	// 0 means 1.
	Concurrency int

	// Budget, when not nil, is a concurrency budget this backfill shares
	// with others and with live schedulers in the process: each
	// partition (or chunk) also takes a place in it to run, behind the
	// live slots waiting (see [Budget]), so that a slot that closes
	// during the backfill starts before its next partition.
	Budget *Budget

	// ChunkSize is how many partitions one run covers: 0 or 1 runs
	// each partition alone; N runs windows of N partitions (newest
	// first, see [TimePartitionWindow.Chunks]), which every asset must
	// allow with Partitioning.AllowWindow.
	ChunkSize int

	Order     Order                 // NewestFirst (the zero value) or OldestFirst
	Rerun     RerunPolicy           // "" means RerunFailed
	OnFailure tranche.FailurePolicy // "" means tranche.FailStop

	// Lease is how long a claim holds without a heartbeat; 0 means 30s.
	// Heartbeat is how often a running partition renews it; 0 means a
	// third of Lease. A lease must be longer than the heartbeat.
	//
	// Each running partition renews its lease on its own, each call
	// bounded by what the lease has left, so that a ledger call that
	// hangs holds up no other partition; a call that fails or times out
	// is a [KindLeaseRenewFailed] event, and is tried again sooner, and
	// one that takes longer than the heartbeat is a [KindLeaseRenewSlow]
	// event. A worker trusts its lease, by its own clock, for the lease
	// less a margin (a tenth of it, or less when the heartbeat leaves
	// less) after the start of its last renewal that succeeded: past
	// that, it stops the partition's run (its context is canceled with an
	// error matching [ErrFenced]), writes nothing more for it, and
	// records it failed, never succeeded, so that it never runs beside
	// the worker that may take it over.
	Lease, Heartbeat time.Duration

	// MaxPartitions bounds the window; 0 means 100,000.
	MaxPartitions int

	// StopOnCancel makes running partitions stop, recorded failed with
	// cause canceled, when the backfill is canceled in the ledger
	// ([Ledger.CancelBackfill]); by default they finish and only new
	// claims stop, unless the backfill was canceled with StopRunning
	// (BackfillRecord.StopRunning), which stops them in every worker.
	// Workers notice at their next heartbeat.
	StopOnCancel bool

	// WaitForOthers makes Run wait, once it has run what it could, for
	// the partitions other workers hold: it returns when each has
	// succeeded there, or failed there and ran here again, and it takes
	// over those whose holders' leases expire meanwhile. By default Run
	// returns at once, reporting them as Held, with an error matching
	// [ErrHeldElsewhere]; it takes over only the partitions whose leases
	// expired before its end.
	WaitForOthers bool

	// OnEvent receives the backfill's events (backfill and partition
	// kinds, with Progress); nil means none. The hook contract is the
	// runner's (see tranche.Runner.OnEvent): called synchronously, one
	// event at a time and in order within one Run or Execute, with a
	// context that carries the caller's values but is never canceled, so
	// that the terminal events of a canceled backfill are delivered too;
	// a panic is recovered into Result.HookErr.
	OnEvent func(context.Context, tranche.Event)

	// Now is the worker's clock: what time it is here, which judges
	// leases in plans and status and stamps the backfill's events; nil
	// means time.Now. A worker on another machine may disagree with the
	// ledger about the time by minutes, so a run judges leases by the
	// ledger's clock, never by this one: the ledger judges its claims,
	// and the run judges the leases of the partitions others hold by the
	// ledger's clock as the leases it claimed show it (their Until less
	// the lease, where this clock read the reply). A worker counts its
	// own lease on the monotonic clock, which an offset or a step of
	// the wall clock does not move. A test shifts this clock to run a
	// worker minutes ahead of, or behind, the others.
	Now func() time.Time
}

// RerunPolicy decides which recorded partitions a backfill runs again. It
// is the ledger's type ([ledger.RerunPolicy], which a ledger judges
// claims by), named here with its values so that a Backfill with every
// policy set needs only this package and tranche; ledger's names remain
// the same values.
type RerunPolicy = ledger.RerunPolicy

// The rerun policies, as [ledger.RerunNone] and its kin.
const (
	RerunNone   = ledger.RerunNone   // only partitions with no recorded run
	RerunFailed = ledger.RerunFailed // also those whose latest run failed or was canceled; the default
	RerunAll    = ledger.RerunAll    // every partition once more
	RerunStale  = ledger.RerunStale  // what RerunFailed runs, and those whose latest success ran other code
)

// Order is the order a backfill runs its partitions in.
type Order int

const (
	// NewestFirst runs the newest partition first, so that an
	// interrupted backfill leaves recent data in place. The default.
	NewestFirst Order = iota
	// OldestFirst runs the oldest partition first.
	OldestFirst
)

// String returns "newest-first" or "oldest-first", the text
// MarshalText writes.
func (o Order) String() string {
	if o == OldestFirst {
		return "oldest-first"
	}
	return "newest-first"
}

// MarshalText implements [encoding.TextMarshaler]: "newest-first" or
// "oldest-first", so that JSON, YAML and flag.TextVar take an order.
func (o Order) MarshalText() ([]byte, error) {
	switch o {
	case NewestFirst:
		return []byte("newest-first"), nil
	case OldestFirst:
		return []byte("oldest-first"), nil
	}
	return nil, fmt.Errorf("tranche: unknown order %d; accepted: newest-first, oldest-first", int(o))
}

// UnmarshalText implements [encoding.TextUnmarshaler]: "newest-first"
// ("" too) or "oldest-first".
func (o *Order) UnmarshalText(text []byte) error {
	switch string(text) {
	case "", "newest-first":
		*o = NewestFirst
	case "oldest-first":
		*o = OldestFirst
	default:
		return fmt.Errorf("tranche: unknown order %q; accepted: newest-first, oldest-first", text)
	}
	return nil
}

// Defaults of a Backfill's zero fields.
const (
	DefaultLease         = 30 * time.Second
	DefaultMaxPartitions = 100_000
)

// config is a Backfill's validated settings, with defaults applied.
type config struct {
	dag, id, worker    string
	chunk, concurrency int
	rerun              ledger.RerunPolicy
	codeVersion        string // CodeVersion of the DAG: what its attempts record
	onFailure          tranche.FailurePolicy
	lease, heartbeat   time.Duration
	selection                            // what the backfill covers
	match              slotmatch.Matcher // how attempts match its partitions
}

// config validates the backfill before anything is read or written.
func (b *Backfill) config() (*config, error) {
	var errs []error
	if b.Ledger == nil {
		errs = append(errs, errors.New("tranche: backfill: no Ledger"))
	}
	cfg, err := b.fields()
	if err != nil || len(errs) > 0 {
		return nil, errors.Join(append(errs, err)...)
	}
	return cfg, nil
}

// fields validates every field but Ledger, which naming a backfill does
// not need.
func (b *Backfill) fields() (*config, error) {
	var errs []error
	fail := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("tranche: backfill: "+format, args...))
	}
	if b.DAG == nil {
		fail("no DAG")
	}
	cfg := &config{chunk: max(1, b.ChunkSize), concurrency: max(1, b.Concurrency), worker: b.Worker}
	if b.DAG != nil {
		cfg.codeVersion = CodeVersion(b.DAG)
	}
	if err := cfg.rerun.UnmarshalText([]byte(b.Rerun)); err != nil {
		errs = append(errs, err)
	}
	if err := cfg.onFailure.UnmarshalText([]byte(b.OnFailure)); err != nil {
		errs = append(errs, err)
	}
	if b.Concurrency < 0 {
		fail("concurrency %d: want 1 or more (0 means 1)", b.Concurrency)
	}
	if b.ChunkSize < 0 {
		fail("chunk size %d: want 1 or more partitions per run (0 means 1)", b.ChunkSize)
	}
	if b.Order != NewestFirst && b.Order != OldestFirst {
		fail("unknown order %d: want NewestFirst or OldestFirst", b.Order)
	}
	cfg.lease = b.Lease
	if cfg.lease == 0 {
		cfg.lease = DefaultLease
	}
	cfg.heartbeat = b.Heartbeat
	if cfg.heartbeat == 0 {
		cfg.heartbeat = cfg.lease / 3
	}
	if cfg.lease < 0 || cfg.heartbeat <= 0 || cfg.lease <= cfg.heartbeat {
		fail("lease %v and heartbeat %v: the lease must be positive and longer than the heartbeat", cfg.lease, cfg.heartbeat)
	}
	limit := b.MaxPartitions
	if limit == 0 {
		limit = DefaultMaxPartitions
	}
	if limit < 0 {
		fail("MaxPartitions %d: want 1 or more (0 means %d)", limit, DefaultMaxPartitions)
	}
	sel, selErrs := b.selection(limit)
	errs = append(errs, selErrs...)
	if sel.total > 0 && !zone.Portable(sel.window.Location()) {
		// The ledger records the window's text form, which must name the
		// same zone on every host that reads it.
		fail("window %s is in the host's zone (time.Local), which has no name another host can load; load the zone by name (time.LoadLocation) or set TZ",
			sel.window)
	}
	if b.DAG != nil && sel.total > 0 {
		errs = append(errs, checkAssets(b.DAG, sel.window, cfg.chunk)...)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	cfg.selection = sel
	w := sel.window
	cfg.match = slotmatch.New(w.Granularity(), w.Location())
	cfg.dag = DAGIdentity(b.DAG, w.Granularity(), w.Location())
	if sel.chosen() {
		cfg.id = backfillIDOf(cfg.dag, sel.starts(), cfg.chunk)
	} else {
		cfg.id = BackfillID(cfg.dag, w, cfg.chunk)
	}
	if cfg.worker == "" {
		cfg.worker = defaultWorker()
	}
	return cfg, nil
}

// checkAssets refuses assets a backfill of window w cannot run partition
// by partition.
func checkAssets(dag *tranche.DAG, w tranche.TimePartitionWindow, chunk int) []error {
	var unpartitioned, noWindow []string
	var errs []error
	g := w.Granularity()
	for a := range dag.Assets() {
		p := a.Partitioning
		switch {
		case !a.Partitioning.Granularity.IsValid():
			unpartitioned = append(unpartitioned, a.Name)
			continue
		case p.Granularity != g:
			errs = append(errs, fmt.Errorf("tranche: backfill: asset %q is partitioned by %v, the window by %v", a.Name, p.Granularity, g))
		case p.Location != nil && !zone.Same(p.Location, w.Location()):
			errs = append(errs, fmt.Errorf("tranche: backfill: asset %q follows %v, the window %v", a.Name, p.Location, w.Location()))
		}
		if chunk > 1 && !p.AllowWindow {
			noWindow = append(noWindow, a.Name)
		}
		if !p.First.IsZero() && w.Start().Before(p.First) {
			first := tranche.PartitionOf(g, p.First.In(w.Location()))
			if w.Start().Before(first.Start) {
				errs = append(errs, &tranche.PartitionError{Asset: a.Name, Oldest: w.Oldest(), First: first})
			}
		}
	}
	if len(unpartitioned) > 0 {
		slices.Sort(unpartitioned)
		errs = append(errs, fmt.Errorf("tranche: backfill: unpartitioned assets %s would be re-extracted whole by every run; give them a Partitioning or run them outside the backfill",
			strings.Join(quoteAll(unpartitioned), ", ")))
	}
	if len(noWindow) > 0 {
		slices.Sort(noWindow)
		errs = append(errs, fmt.Errorf("tranche: backfill: chunk size %d needs window runs, which assets %s do not allow (they run one partition at a time); use chunk size 1 (--chunk 1)",
			chunk, strings.Join(quoteAll(noWindow), ", ")))
	}
	return errs
}

func quoteAll(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = fmt.Sprintf("%q", n)
	}
	return out
}

func defaultWorker() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "worker"
	}
	return fmt.Sprintf("%s-%d", host, os.Getpid())
}

func (b *Backfill) now() time.Time {
	if b.Now != nil {
		return b.Now()
	}
	return time.Now()
}

// ID returns the backfill's id, or why the backfill is invalid. It needs
// no Ledger, so that a program can check a backfill and name it before it
// opens one.
func (b *Backfill) ID() (string, error) {
	cfg, err := b.fields()
	if err != nil {
		return "", err
	}
	return cfg.id, nil
}

// StalePlanError is returned by [Backfill.Execute] when the history of the
// plan's partitions changed in the ledger since the plan was made. Plan is
// the plan as things stand now.
type StalePlanError struct {
	Old, Plan *Plan
}

func (e *StalePlanError) Error() string {
	return fmt.Sprintf("tranche: backfill %s: its partitions changed in the ledger since the plan was made (at revision %d, now %d); review the new plan",
		e.Plan.Backfill, e.Old.Revision, e.Plan.Revision)
}

// ErrBackfillCanceled is returned when a backfill was canceled in its
// ledger (see [ledger.Ledger.CancelBackfill]).
var ErrBackfillCanceled = ledger.ErrBackfillCanceled

// ErrHeldElsewhere is matched by the error of a backfill run that ended
// while other workers still held some of its partitions, or had failed
// them (Result.Held): the backfill is not done. Run it again, or set
// [Backfill.WaitForOthers].
var ErrHeldElsewhere = errors.New("tranche: partitions held by other workers")

// Run plans the backfill and executes the plan: running the same backfill
// again resumes it. It returns when every claimed partition has finished
// and is recorded. On context cancellation, in-flight partitions are
// recorded failed, cause canceled, before Run returns.
func (b *Backfill) Run(ctx context.Context) (*Result, error) {
	cfg, err := b.config()
	if err != nil {
		return nil, err
	}
	plan, err := b.plan(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return b.execute(ctx, cfg, plan)
}

// Execute runs a plan made by [Backfill.Plan]. If the history of the
// plan's partitions changed in the ledger since, it runs nothing and
// returns a [*StalePlanError] holding the new plan; changes to other
// partitions of the DAG (the live schedule running today while the plan
// covers last year) leave the plan as it is.
func (b *Backfill) Execute(ctx context.Context, plan *Plan) (*Result, error) {
	cfg, err := b.config()
	if err != nil {
		return nil, err
	}
	if plan.Backfill != cfg.id {
		return nil, fmt.Errorf("tranche: plan of backfill %s given to backfill %s", plan.Backfill, cfg.id)
	}
	changed, err := b.changedSince(ctx, cfg, plan.Revision)
	if err != nil {
		return nil, fmt.Errorf("tranche: reading ledger revision: %w", err)
	}
	if changed {
		fresh, err := b.plan(ctx, cfg)
		if err != nil {
			return nil, err
		}
		return nil, &StalePlanError{Old: plan, Plan: fresh}
	}
	return b.execute(ctx, cfg, plan)
}

// changedSince reports whether an attempt that matches a partition of the
// backfill changed after revision rev (changedIn): changes to the
// neighbouring partitions that a schedule's reads look at do not count.
// On a ledger.LatestReader the changed partitions are read once, for the
// whole span; on another ledger each question is a call of RevisionIn, a
// few for a window, and a few per run of adjacent chosen partitions when
// the span changed.
func (b *Backfill) changedSince(ctx context.Context, cfg *config, rev int64) (bool, error) {
	changed := func(from, to time.Time) (bool, error) {
		top, err := b.Ledger.RevisionIn(ctx, cfg.dag, from, to, rev)
		return top != 0, err
	}
	if lr, ok := b.Ledger.(ledger.LatestReader); ok && cfg.match.ByFire() {
		from, to := cfg.match.Span(cfg.window.Start(), cfg.window.End())
		starts, err := lr.ChangedIn(ctx, cfg.dag, from, to, rev)
		if err != nil {
			return false, err
		}
		changed = func(from, to time.Time) (bool, error) {
			i, _ := slices.BinarySearchFunc(starts, from, time.Time.Compare)
			return i < len(starts) && starts[i].Before(to), nil
		}
	}
	if ok, err := changedIn(ctx, b.Ledger, cfg.dag, cfg.match, cfg.window, rev, changed); err != nil || !ok || !cfg.chosen() {
		return ok, err
	}
	for w := range cfg.windows(OldestFirst) {
		if ok, err := changedIn(ctx, b.Ledger, cfg.dag, cfg.match, w, rev, changed); err != nil || ok {
			return ok, err
		}
	}
	return false, nil
}

// Resume resumes the backfill: it undoes a cancellation in the ledger
// ([ledger.Ledger.ResumeBackfill]) and runs the backfill, which plans again
// every partition that has not succeeded (under the rerun policy: the
// default, RerunFailed, runs those that failed, were canceled or never
// ran). A backfill that was not canceled, or never recorded, simply runs:
// resuming a failed backfill is running it again.
func (b *Backfill) Resume(ctx context.Context) (*Result, error) {
	cfg, err := b.config()
	if err != nil {
		return nil, err
	}
	if err := b.Ledger.ResumeBackfill(ctx, cfg.id); err != nil && !errors.Is(err, ledger.ErrUnknownBackfill) {
		return nil, fmt.Errorf("tranche: resuming backfill %s: %w", cfg.id, err)
	}
	plan, err := b.plan(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return b.execute(ctx, cfg, plan)
}

// Result is what one worker's run of a backfill did. RanHere + Skipped +
// Elsewhere + Held + NotRun + Unclaimed == Total.
type Result struct {
	Backfill string
	Worker   string
	Total    int // partitions in the window, or chosen

	Succeeded int // partitions this worker ran that succeeded
	Failed    int // partitions this worker ran that failed (or lost to a newer attempt)
	Skipped   int // partitions that had succeeded already, or were left alone by the rerun policy
	Elsewhere int // partitions other workers held during the run, and finished: succeeded there (or, under RerunNone, failed there)
	Held      int // partitions other workers held during the run, not succeeded when it ended: running there still, or failed there
	NotRun    int // partitions left pending: the backfill stopped, was canceled, or its context ended
	Unclaimed int // partitions whose claims failed (the ledger unreachable): never run, nor recorded

	Failures      []Failure // the failed partitions, in the order they failed
	ClaimFailures []Failure // the partitions Unclaimed counts, with why their claims failed
	Duration      time.Duration
	Plan          *Plan

	// HookErr joins the panics of OnEvent, each a [*PanicError]; nil when
	// none panicked. A panicking hook does not change the backfill.
	HookErr error
}

// RanHere returns the partitions this worker ran.
func (r *Result) RanHere() int { return r.Succeeded + r.Failed }

// Done reports whether the run left nothing for a later run to do: every
// partition of the window succeeded, here or elsewhere, or was left alone
// by the rerun policy. [StatusOf] tells whether every partition has
// succeeded.
func (r *Result) Done() bool {
	return r.Succeeded+r.Skipped+r.Elsewhere == r.Total
}

// String summarizes the report in one line.
func (r *Result) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "backfill %s by %s: %d partitions: %d succeeded here, %d failed here, %d skipped, %d done elsewhere",
		r.Backfill, r.Worker, r.Total, r.Succeeded, r.Failed, r.Skipped, r.Elsewhere)
	if r.Held > 0 {
		fmt.Fprintf(&b, ", %d held by other workers (not done)", r.Held)
	}
	fmt.Fprintf(&b, ", %d not run", r.NotRun)
	if r.Unclaimed > 0 {
		fmt.Fprintf(&b, ", %d not claimed (the ledger failed; neither run nor recorded)", r.Unclaimed)
	}
	fmt.Fprintf(&b, ", in %v", r.Duration.Round(time.Millisecond))
	return b.String()
}

// Failure is a partition that failed in a backfill.
type Failure struct {
	Key string
	Err error
}

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
	// finishGrace, so that the partitions in flight when it ends are
	// still recorded, while a ledger that hangs cannot hold the backfill
	// longer than that.
	finishCtx context.Context
	keeper    *leaseKeeper

	stop    atomic.Bool // no more claims
	mu      sync.Mutex
	stopSeq int // once stopped, the jobs numbered above it in the order of claims do not start
	report  Result
	stopped error   // why claims stopped, for the report's error
	held    []int64 // the starts (Unix ns) of the partitions Result.Held counts

	// tried is when settleHeld last tried to take each held partition
	// over, so that a ledger that judges its lease live (by its own
	// clock) is asked again only an interval later.
	tried map[int64]time.Time

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

func (b *Backfill) execute(ctx context.Context, cfg *config, plan *Plan) (*Result, error) {
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
	var stopFinish func()
	x.finishCtx, stopFinish = finishContext(ctx)
	defer stopFinish()
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
	x.keeper = newLeaseKeeper(ctx, b.Ledger, cfg.heartbeat, cfg.lease, canceled)
	if x.runner == nil {
		x.runner = &tranche.Runner{}
	}
	x.report = Result{Backfill: cfg.id, Worker: cfg.worker, Total: cfg.total, Plan: plan}
	x.emit(ctx, tranche.Event{Kind: KindStarted})

	d := x.newDispatcher(ctx)
	var scanErr error
	seen := 0 // partitions the scan reached
	for u, err := range b.scan(ctx, cfg, plan.Revision, b.Order) {
		if err != nil {
			scanErr = err
			break
		}
		if u.action == ActionRun && !recorded && ctx.Err() == nil && !x.stop.Load() {
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
		case ActionRun:
			if ctx.Err() != nil || x.stop.Load() {
				x.count(func(r *Result) { r.NotRun += len(u.partitions) })
				continue
			}
			d.add(u)
		case ActionSkipRunning:
			x.holdElsewhere(u)
			x.emitJob(ctx, KindPartitionHeld, u, nil)
		default:
			x.count(func(r *Result) { r.Skipped += len(u.partitions) })
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
	x.keeper.close()
	if left := x.report.Total - seen; left > 0 {
		// The scan ended early (its context ended, or the ledger
		// failed): the partitions it did not reach stay pending.
		x.count(func(r *Result) { r.NotRun += left })
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
// the rerun policy is none), run here; under WaitForOthers it waits for
// the rest, until each is settled or ctx ends. What is left counts as
// Held.
func (x *execution) settleHeld(ctx context.Context, d *dispatcher) {
	takeOver := true
	backoff := 10 * time.Millisecond
	for {
		d.pool.wait()
		x.mu.Lock()
		held := x.held
		x.held = nil
		x.report.Held -= len(held)
		x.mu.Unlock()
		if len(held) == 0 {
			return
		}
		if ctx.Err() != nil || x.stop.Load() {
			takeOver = false
		}
		run, waiting, wait, err := x.sortHeld(ctx, held, takeOver)
		if err != nil {
			// The ledger could not say: they stay held.
			run, waiting = nil, held
		}
		x.mu.Lock()
		x.report.Held += len(waiting)
		x.held = append(x.held, waiting...)
		x.mu.Unlock()
		if !takeOver {
			return // a last count, after the runs of the last round
		}
		for _, part := range run {
			u := &job{window: part.window, partitions: []tranche.TimePartition{part.p}, action: ActionRun}
			d.pool.run(func() { x.claimJob(ctx, d, u) })
		}
		switch {
		case !x.b.WaitForOthers:
			takeOver = false // count what the runs of this round left
		case len(run) == 0:
			// Wait for a lease to expire, or for the holders to
			// finish, looking again soon at first, then less often, up
			// to every heartbeat interval: partitions of a millisecond
			// end within one, of an hour are looked at a few times.
			sleepCtx(ctx, min(wait, backoff))
			backoff = min(2*backoff, x.cfg.heartbeat)
		}
	}
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
	from, to := time.Unix(0, held[0]), time.Unix(0, held[len(held)-1]+1)
	latest := make(map[int64]ledger.Attempt, len(held))
	for a, err := range x.b.Ledger.Latest(ctx, x.cfg.dag, from, to) {
		if err != nil {
			return nil, nil, 0, err
		}
		if _, ok := slices.BinarySearch(held, a.Start.UnixNano()); ok {
			latest[a.Start.UnixNano()] = a
		}
	}
	// The holders' leases are judged by the ledger's clock, which takes
	// them over by it: a worker minutes behind it would otherwise leave
	// expired leases alone for minutes. Before any claim has shown that
	// clock, the running partition whose lease ends first is tried, as
	// if expired, and the ledger judges it: if it refuses, the leases
	// that end later hold too, and if it grants, the lease shows the
	// clock. One claim a round, not one a partition held.
	now, clockKnown := x.ledgerNow()
	probe := int64(-1)
	if !clockKnown {
		var first time.Time
		for _, start := range held {
			if a, ok := latest[start]; ok && a.State == ledger.StateRunning && time.Since(x.tried[start]) >= x.cfg.heartbeat &&
				(probe < 0 || a.LeaseUntil.Before(first)) {
				probe, first = start, a.LeaseUntil
			}
		}
	}
	wait, done := x.cfg.heartbeat, 0
	for _, start := range held {
		a, ok := latest[start]
		switch {
		case ok && a.State == ledger.StateSucceeded,
			ok && a.State.Terminal() && x.cfg.rerun == ledger.RerunNone:
			done++
			continue
		case !takeOver:
		case ok && a.State == ledger.StateRunning && clockKnown && now.Before(a.LeaseUntil):
			wait = min(wait, a.LeaseUntil.Sub(now))
		case ok && a.State == ledger.StateRunning && !clockKnown && start != probe:
			// Judged by the probe's answer, in a later round.
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
	x.count(func(r *Result) { r.Elsewhere += done })
	return run, waiting, wait, nil
}

// finishGrace is how long outcomes may still be recorded after a
// backfill's context ends.
const finishGrace = 30 * time.Second

// finishContext returns a context that is not canceled with ctx but
// finishGrace after it, and a function that releases it.
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
			grace = time.AfterFunc(finishGrace, cancel)
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
func (x *execution) count(f func(*Result)) {
	x.mu.Lock()
	f(&x.report)
	x.mu.Unlock()
}

// claimJob claims one partition or chunk alone, and runs and records
// it: a partition settled after the scan, which the cursor of
// ClaimNext has passed.
func (x *execution) claimJob(ctx context.Context, d *dispatcher, u *job) {
	cfg := x.cfg
	if ctx.Err() != nil || x.stop.Load() {
		x.count(func(r *Result) { r.NotRun += len(u.partitions) })
		return
	}
	claimed := x.keeper.now() // the lease holds from no earlier, by the ledger's clock
	lease, err := x.b.Ledger.Claim(ctx, ledger.ClaimRequest{
		DAG: cfg.dag, Backfill: cfg.id, Worker: cfg.worker, RunID: x.runID(u), Partitions: u.partitions,
		Lease: cfg.lease, Policy: cfg.rerun, Revision: x.plan.Revision, Trigger: ledger.TriggerBackfill, CodeVersion: cfg.codeVersion,
	})
	switch {
	case errors.Is(err, ledger.ErrBackfillCanceled):
		x.halt(fmt.Errorf("%w: %s", ErrBackfillCanceled, cfg.id), -1)
		x.count(func(r *Result) { r.NotRun += len(u.partitions) })
		return
	case errors.Is(err, ledger.ErrNotClaimable):
		x.holdElsewhere(u)
		x.emitJob(ctx, KindPartitionHeld, u, err)
		return
	case err != nil:
		if ctx.Err() != nil {
			x.count(func(r *Result) { r.NotRun += len(u.partitions) })
			return
		}
		x.unclaimed(ctx, u, fmt.Errorf("tranche: claiming %s: %w", u.window, err), d.nextSeq())
		return
	}
	x.sawLease(lease)
	u.seq, u.claimed = d.nextSeq(), claimed
	kept, runCtx := x.keeper.keep(lease, claimed, x.renewFailed(ctx, u))
	x.emitJob(ctx, KindPartitionClaimed, u, nil)
	x.runClaimed(ctx, u, lease, kept, runCtx)
}

// runClaimed runs and records a claimed partition or chunk, unless the
// backfill stopped before it in the order of claims or its context
// ended: then its claim is released and it stays pending.
func (x *execution) runClaimed(ctx context.Context, u *job, lease *ledger.Lease, kept *keptLease, runCtx context.Context) {
	b, cfg, n := x.b, x.cfg, len(u.partitions)
	if ctx.Err() != nil || x.stoppedBefore(u) {
		x.release(u, kept)
		return
	}
	if x.keeper.now()-u.claimed > cfg.heartbeat {
		// Claimed ahead, and the jobs before it ran longer than the
		// lookahead foresaw, or the worker stalled: rather than hold it
		// from workers that may be free, give it back, and settle it
		// with the partitions held elsewhere. It never runs under a
		// lease it may have lost.
		kept.release()
		switch err := b.Ledger.Release(x.finishCtx, lease); {
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
		return
	}
	if b.Budget != nil {
		if err := b.Budget.Acquire(ctx); err != nil {
			x.release(u, kept)
			return
		}
		defer b.Budget.Release()
	}
	runID := x.runID(u)
	x.emitJob(ctx, KindPartitionStarted, u, nil)
	var target tranche.Target
	if n == 1 {
		target = u.partitions[0]
	} else {
		target = u.window
	}
	kept.opts.RunID, kept.opts.Attempt, kept.opts.Backfill = runID, lease.Attempts[0], cfg.id
	began := b.now()
	res, runErr := x.runner.RunWith(runCtx, b.DAG, target, &kept.opts)
	ran := b.now().Sub(began)
	// A success is recorded only while the lease holds by this worker's
	// clock: past it, another worker may have taken the partition over.
	held, byLedger := kept.state()
	var lost error
	if byLedger {
		lost = held
	}
	cause := context.Cause(runCtx)
	kept.release()

	outcomes := make([]ledger.Outcome, n)
	var failure error
	switch {
	case lost != nil:
		failure = lost
	case errors.Is(cause, ErrBackfillCanceled):
		failure = fmt.Errorf("canceled: %w", cause)
		x.halt(cause, -1)
	case errors.Is(cause, ledger.ErrFenced):
		failure = cause
	case runErr == nil && res.Status == tranche.StatusCompleted && held != nil:
		failure = held
	case runErr == nil && res.Status == tranche.StatusCompleted:
		rows := rowsByPartition(res)
		for i, p := range u.partitions {
			outcomes[i] = ledger.Outcome{State: ledger.StateSucceeded, Ran: ran}
			if len(rows) > 0 {
				outcomes[i].Rows = int64(rows[p.Key()])
			}
		}
	case ctx.Err() != nil:
		failure = fmt.Errorf("canceled: %w", context.Cause(ctx))
	case runErr != nil:
		failure = runErr
	default:
		failure = fmt.Errorf("run %s %s: %w", runID, res.Status, errors.Join(outcomeErrors(res)...))
	}
	if failure != nil {
		for i := range outcomes {
			outcomes[i] = ledger.Outcome{State: ledger.StateFailed, Err: failure.Error(), Ran: ran}
		}
	}
	if lost == nil {
		// Record the outcome even when ctx ended, or the lease lapsed
		// by this worker's clock: a partition must not stay running
		// until its lease expires. The ledger fences the call, so a
		// partition taken over meanwhile records nothing.
		err := b.Ledger.Finish(x.finishCtx, lease, outcomes)
		switch {
		case err == nil:
		case errors.Is(err, ledger.ErrFenced) && failure != nil:
			// Taken over: the newer attempt records it.
		case failure == nil:
			failure = fmt.Errorf("tranche: recording %s: %w", u.window, err)
		default:
			failure = fmt.Errorf("%w; and recording the failure failed, so the partition stays running until its lease expires: %w", failure, err)
		}
	}
	if failure != nil {
		x.fail(ctx, u, failure)
		return
	}
	x.count(func(r *Result) { r.Succeeded += n })
	x.emitJob(ctx, KindPartitionSucceeded, u, nil)
}

// unclaimed records a job whose claim failed for a reason other than its
// partitions being held: they were neither run nor recorded. Claims stop
// under tranche.FailStop.
func (x *execution) unclaimed(ctx context.Context, u *job, err error, seq int) {
	x.count(func(r *Result) {
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

func outcomeErrors(res *tranche.Result) []error {
	var errs []error
	for _, o := range res.Assets {
		if o.Err != nil && o.Status == tranche.StatusFailed {
			errs = append(errs, o.Err)
		}
	}
	return errs
}

// fail records a failed job and stops claims under tranche.FailStop.
func (x *execution) fail(ctx context.Context, u *job, err error) {
	x.count(func(r *Result) {
		r.Failed += len(u.partitions)
		for _, p := range u.partitions {
			r.Failures = append(r.Failures, Failure{Key: p.Key(), Err: err})
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

func (x *execution) finish(ctx context.Context, scanErr error) (*Result, error) {
	x.mu.Lock()
	x.report.Duration = time.Since(x.start)
	report := x.report
	x.mu.Unlock()
	var err error
	kind := KindCompleted
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
		kind = KindUnfinished
		err = fmt.Errorf("tranche: backfill %s: not done: %s held by other workers, not succeeded when this run ended (run again, or set WaitForOthers): %w",
			report.Backfill, partitions(report.Held), ErrHeldElsewhere)
	}
	if err != nil && report.Held > 0 && kind != KindUnfinished {
		err = fmt.Errorf("%w; and %s %s held by other workers: %w", err, partitions(report.Held), plural(report.Held, "is", "are"), ErrHeldElsewhere)
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

func (x *execution) emit(ctx context.Context, e tranche.Event) {
	if x.b.OnEvent == nil {
		return
	}
	e.Time = x.b.now()
	e.Backfill, e.DAG, e.Trigger = x.cfg.id, x.b.DAG.Name, string(ledger.TriggerBackfill)
	e.Window = x.cfg.window
	e.Target = x.cfg.window.String()
	e.Progress = x.progress()
	e.Level, _ = kindLevel(e.Kind)
	x.deliver(ctx, e)
}

func (x *execution) emitJob(ctx context.Context, kind tranche.Kind, u *job, err error, more ...func(*tranche.Event)) {
	if x.b.OnEvent == nil {
		return
	}
	e := tranche.Event{Kind: kind, Time: x.b.now(), Backfill: x.cfg.id, DAG: x.b.DAG.Name, Trigger: string(ledger.TriggerBackfill), Err: err, Progress: x.progress(),
		RunID: x.runID(u), Target: u.window.String()}
	if len(u.partitions) == 1 {
		e.Partition, e.Target = u.partitions[0], u.partitions[0].Key()
	} else {
		e.Window = u.window
	}
	e.Level, _ = kindLevel(kind)
	for _, f := range more {
		f(&e)
	}
	x.deliver(ctx, e)
}

// deliver calls the hook, one call at a time, recovering a panic so that
// a broken hook cannot take a backfill down half-recorded; the report's
// HookErr keeps it.
func (x *execution) deliver(ctx context.Context, e tranche.Event) {
	err := hookcall.Call[tranche.PanicError](&x.hookMu, context.WithoutCancel(ctx), x.b.OnEvent, e, func() string {
		return "backfill event hook on " + string(e.Kind)
	})
	if err != nil {
		x.count(func(r *Result) { r.HookErr = errors.Join(r.HookErr, err) })
	}
}

// RunRecorded runs dag for partition p with r and records the run in l
// like a backfill's partition: claimed under a lease, then finished. A
// scheduled job that runs through RunRecorded shares its history with
// later backfills of the same DAG, which skip what it landed. It always
// runs the partition (rerun policy all) unless another worker holds it,
// which fails with [ledger.ErrNotClaimable]; worker "" means host-pid.
func RunRecorded(ctx context.Context, l ledger.Ledger, r *tranche.Runner, dag *tranche.DAG, p tranche.TimePartition, worker string) (*tranche.Result, error) {
	if r == nil {
		r = &tranche.Runner{}
	}
	if worker == "" {
		worker = defaultWorker()
	}
	id := DAGIdentity(dag, p.Granularity, p.Start.Location())
	revision, err := l.Revision(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("tranche: reading ledger revision: %w", err)
	}
	runID := RunID(id, p.Start, p.End)
	keeper := newLeaseKeeper(ctx, l, DefaultLease/3, DefaultLease, nil)
	claimed := keeper.now()
	lease, err := l.Claim(ctx, ledger.ClaimRequest{DAG: id, Worker: worker, RunID: runID, Partitions: []tranche.TimePartition{p},
		Lease: DefaultLease, Policy: ledger.RerunAll, Revision: revision, Trigger: ledger.TriggerManual})
	if err != nil {
		return nil, err
	}
	kept, runCtx := keeper.keep(lease, claimed, nil)
	kept.opts.RunID, kept.opts.Attempt = runID, lease.Attempts[0]
	res, runErr := r.RunWith(runCtx, dag, p, &kept.opts)
	if runErr == nil {
		// A success is recorded only while the lease holds by this
		// worker's clock.
		runErr = kept.check()
	}
	kept.release()
	keeper.close()
	outcome := ledger.Outcome{State: ledger.StateSucceeded}
	switch {
	case runErr != nil:
		outcome = ledger.Outcome{State: ledger.StateFailed, Err: runErr.Error()}
	case res.Status != tranche.StatusCompleted:
		outcome = ledger.Outcome{State: ledger.StateFailed, Err: fmt.Sprintf("run %s: %v", res.Status, errors.Join(outcomeErrors(res)...))}
	default:
		outcome.Rows = int64(rowsByPartition(res)[p.Key()])
	}
	finishCtx, done := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer done()
	if err := l.Finish(finishCtx, lease, []ledger.Outcome{outcome}); err != nil {
		return res, errors.Join(runErr, fmt.Errorf("tranche: recording run %s: %w", runID, err))
	}
	return res, runErr
}

// sleepCtx sleeps for d, or until ctx ends with its error.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
