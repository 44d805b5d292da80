package tranche

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/tranche-dev/tranche/internal/hookcall"
	"github.com/tranche-dev/tranche/internal/wait"
)

// Runner materializes the assets of a [DAG] for a partition, a window, or
// nothing. The zero Runner is ready to use: GOMAXPROCS assets at a time,
// failing fast, without events. Its fields must not change once a run has
// started; one Runner may serve many runs at once.
type Runner struct {
	// MaxConcurrentAssets is the most assets run at once. Zero means
	// runtime.GOMAXPROCS(0); a negative value means 1.
	MaxConcurrentAssets int

	// OnFailure says what a failed asset does to the rest of the run:
	// "" and [FailStop] cancel the running assets and start no other,
	// [FailContinue] lets independent branches finish. Any other value
	// fails the run before it starts.
	OnFailure FailurePolicy

	// OnEvent, when not nil, is called with every [Event] of every run.
	// This is the hook contract of the library, which a backfill's
	// OnEvent keeps too: a hook is called synchronously, one event at a
	// time and in order within a run (a backfill: within one Run or
	// Execute), and from several goroutines at once when runs overlap. It
	// must be safe for concurrent use and fast, since the run waits for
	// it. Its context carries the values of the run's context but is
	// never canceled, so that the terminal events of a canceled run are
	// delivered too. Every event of a run has been delivered when Run
	// returns. A hook that panics is recovered: the panic is reported in
	// [Result.HookErr] and to Logger, and the run goes on. Combine hooks
	// with [Hooks].
	OnEvent func(context.Context, Event)

	// Logger, when not nil, receives every event through [SlogHook], as
	// well as the panics of OnEvent. Nil means silent.
	Logger *slog.Logger

	// Read, when not nil, gives the rows of a dependency's partition
	// that an asset reads through a mapping ([Asset.Mappings]) but that
	// the run does not materialize: a run then materializes only the
	// partitions of its target (and unpartitioned assets), and reads
	// every other mapped partition through Read, before the call of the
	// asset that reads it, in that call's attempt (an error fails the
	// attempt as the asset's own would). A program reads them from
	// where its destinations wrote them. Nil means a run materializes
	// every mapped partition too, each once, before the assets that
	// read it (see [Runner.Run]).
	Read func(ctx context.Context, asset string, p TimePartition) ([]Row, error)
}

// FailurePolicy says what a failure does to the rest of the work: to the
// other assets of a run ([Runner.OnFailure]), or to the other partitions
// of a backfill (the package backfill's Backfill.OnFailure). Its text
// forms are "stop" and "continue"; "" means [FailStop].
type FailurePolicy string

const (
	// FailStop stops at the first failure. A run cancels the context of
	// its running assets and starts no other; every asset that did not
	// finish is reported canceled. A backfill claims nothing more: its
	// running partitions finish, unreached ones stay pending. The
	// default.
	FailStop FailurePolicy = "stop"

	// FailContinue lets the rest go on. A run lets independent branches
	// finish: only the assets that depend, directly or not, on a failed
	// asset are canceled, and the result lists every outcome. A backfill
	// runs every partition whatever fails.
	FailContinue FailurePolicy = "continue"
)

// parseFailurePolicy parses "stop" or "continue"; "" is "stop".
func parseFailurePolicy(s string) (FailurePolicy, error) {
	switch p := FailurePolicy(s); p {
	case "":
		return FailStop, nil
	case FailStop, FailContinue:
		return p, nil
	}
	return "", fmt.Errorf("tranche: unknown failure policy %q; accepted: stop, continue", s)
}

// MarshalText implements [encoding.TextMarshaler]: "stop" or "continue"
// ("" stays ""), so that JSON, YAML and flag.TextVar take a policy.
func (p FailurePolicy) MarshalText() ([]byte, error) {
	switch p {
	case "", FailStop, FailContinue:
		return []byte(p), nil
	}
	return nil, fmt.Errorf("tranche: unknown failure policy %q; accepted: stop, continue", string(p))
}

// UnmarshalText implements [encoding.TextUnmarshaler]: "stop" or
// "continue", and "" as "stop"; any other text is refused with an error
// that lists them. As with slog.Level, it is also the parser.
func (p *FailurePolicy) UnmarshalText(text []byte) error {
	v, err := parseFailurePolicy(string(text))
	if err != nil {
		return err
	}
	*p = v
	return nil
}

// Target is what a run materializes: a [TimePartition], a
// [TimePartitionWindow], or nil for a DAG whose assets are all
// unpartitioned. No other type implements it.
type Target interface{ isTarget() }

func (TimePartition) isTarget()       {}
func (TimePartitionWindow) isTarget() {}

// Run materializes every asset of dag for target, each after its
// dependencies, independent ones concurrently, and returns how each ended.
//
// A partition run calls each partitioned asset with that partition. A
// window run calls each asset once with the whole window (never a
// partition at a time); it is refused unless every partitioned asset
// allows windows. Unpartitioned assets run on every run. The result's
// RunID is new for each call.
//
// A DAG whose assets have several granularities, or that maps a
// dependency to other partitions than its own ([Asset.Mappings]), runs
// each asset of the target's granularity for the target, and, unless
// [Runner.Read] is set, every partition of a dependency they map to,
// transitively, each once and before the assets that read it: one
// partition at a time, or runs of consecutive partitions as one window
// for an asset that allows windows and has a Partitioning.Column. A run
// of a New York day thus materializes its 23, 24 or 25 hours first, and
// a seven-day trailing model's day the seven days before. An asset none
// of whose partitions the target holds or a running asset reads (the
// monthly report of a day's run) is skipped, with an error wrapping
// [ErrSkip] that says so. Its [AssetResult] gathers the asset's
// partitions: the worst state, summed attempts and rows. A fenced run
// (RunOptions.Tokens, a backfill's) writes only its target's partitions,
// which its tokens fence: the others feed the assets that read them, and
// are written by runs of their own.
//
// Before anything runs or any event is emitted, Run checks the target
// against the assets, and refuses, with a nil Result, a nil target while
// some assets are partitioned, a window while some partitioned assets
// forbid windows (all named, sorted), a granularity or location other
// than an asset's, and a target reaching before an asset's first
// partition (a [*PartitionError]).
//
// Run returns the Result of every run that started. Its error is nil
// when the run completed, the failures (each an [*AssetError], joined)
// when it failed, and context.Cause(ctx) when ctx was canceled first.
func (r *Runner) Run(ctx context.Context, dag *DAG, target Target) (*Result, error) {
	return r.RunWith(ctx, dag, target, nil)
}

// RunOptions are what a caller may choose of a run that [Runner.Run]
// leaves to defaults: a scheduler of its own that records runs, as a
// backfill does, names them and fences their writes through these. A
// nil *RunOptions, and the zero value of each field, mean the defaults.
type RunOptions struct {
	// RunID names the run in its events, batches and result; "" means a
	// new random id (32 hexadecimal digits).
	RunID string
	// Attempt is the run's attempt number, 1 for the first; 0 means 1.
	Attempt int
	// Backfill is the id of the backfill the run belongs to, copied to
	// every event of the run; "" for none.
	Backfill string
	// Tokens are the fencing tokens of the target's partitions, oldest
	// first (a ledger's, ledger.Lease.Tokens), given to each batch of a
	// partitioned asset (Batch.Token); nil when the run is not fenced.
	// DAG is the identity of the DAG whose claim made them
	// (Batch.DAG), as backfill.DAGIdentity computes it.
	//
	// A fenced run's context is checked right before each destination
	// write, after the asset's call: a context canceled by then (with a
	// cause matching ErrFenced, say, as a backfill cancels a run whose
	// lease lapsed) fails the write before the destination is called. A
	// scheduler that fences by its own clock gives a context whose Err
	// checks that clock, as a backfill does.
	Tokens []int64
	DAG    string
	// Trigger says why the run runs, copied to every event of the run
	// (Event.Trigger) and given to its assets ([Materialization.Trigger]):
	// the trigger its ledger records (ledger.Trigger's values); "" for
	// none.
	Trigger string
}

// RunWith is [Runner.Run] with the run's id, attempt, backfill and
// fencing chosen by opts, which may be nil.
func (r *Runner) RunWith(ctx context.Context, dag *DAG, tg Target, opts *RunOptions) (*Result, error) {
	var runID, backfill, trigger string
	attempt := 1
	if opts != nil {
		runID, backfill, trigger = opts.RunID, opts.Backfill, opts.Trigger
		if opts.Attempt > 0 {
			attempt = opts.Attempt
		}
	}
	if runID == "" {
		runID = newRunID()
	}
	if dag == nil {
		return nil, errors.New("tranche: Run with a nil *DAG")
	}
	policy, err := parseFailurePolicy(string(r.OnFailure))
	if err != nil {
		return nil, err
	}
	t, err := resolveTarget(tg)
	if err != nil {
		return nil, err
	}
	if err := preflight(dag, &t); err != nil {
		return nil, err
	}
	var plan *runPlan
	if !dag.uniform && !t.none {
		if plan, err = buildPlan(dag, &t, r.Read != nil); err != nil {
			return nil, err
		}
	}
	n := len(dag.assets)
	if plan != nil {
		n = len(plan.nodes)
	}
	s := &runState{
		dag:      dag,
		id:       runID,
		attempt:  attempt,
		backfill: backfill,
		trigger:  trigger,
		target:   t,
		plan:     plan,
		runner:   r,
		outcomes: make([]AssetResult, n),
		assets:   make([]assetState, n),
	}
	if opts != nil && opts.Tokens != nil {
		s.fencing = opts // kept, not copied: a backfill's options live beside its lease
		s.ctx = ctx
	}
	if r.Logger != nil {
		s.logHook = SlogHook(r.Logger)
	}
	if s.hasHooks() {
		s.hookCtx = context.WithoutCancel(ctx)
	}
	for i := range s.outcomes {
		s.outcomes[i].Asset = s.assetOf(i).Name
	}
	start := time.Now()
	s.emit(&Event{Kind: KindRunStarted, Time: start, Attempt: attempt})
	s.schedule(ctx, start, r.limit(), policy)
	res := s.result(start)

	var runErr error
	kind := KindRunSucceeded
	switch res.State {
	case StateFailed:
		kind = KindRunFailed
		var errs []error
		for _, o := range s.outcomes {
			if o.State == StateFailed {
				errs = append(errs, o.Err)
			}
		}
		runErr = errs[0]
		if len(errs) > 1 {
			runErr = errors.Join(errs...)
		}
	case StateCanceled:
		kind = KindRunCanceled
		runErr = context.Cause(ctx)
	}
	s.emit(&Event{Kind: kind, Time: res.End, Attempt: attempt, Duration: res.End.Sub(start), Rows: res.Rows, Err: runErr})
	s.mu.Lock()
	s.closed = true // a goroutine an asset left behind logs no more
	res.HookErr = errors.Join(s.hookErrs...)
	s.mu.Unlock()
	return res, runErr
}

// newRunID returns a random run id: 32 hexadecimal digits.
func newRunID() string {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], rand.Uint64())
	binary.LittleEndian.PutUint64(b[8:], rand.Uint64())
	return hex.EncodeToString(b[:])
}

func (r *Runner) limit() int {
	if r.MaxConcurrentAssets == 0 {
		return runtime.GOMAXPROCS(0)
	}
	return max(1, r.MaxConcurrentAssets)
}

// target is a resolved Target.
type target struct {
	none      bool // no partition: only unpartitioned assets
	isWindow  bool
	partition TimePartition       // a partition run's
	window    TimePartitionWindow // a window run's
	text      string
}

func resolveTarget(tg Target) (target, error) {
	switch v := tg.(type) {
	case nil:
		return target{none: true}, nil
	case TimePartition:
		if !v.Granularity.IsValid() {
			return target{}, errors.New("tranche: Run with a TimePartition without a granularity; pass nil to run unpartitioned assets")
		}
		if p := PartitionOf(v.Granularity, v.Start); !p.Start.Equal(v.Start) || !p.End.Equal(v.End) {
			return target{}, fmt.Errorf("tranche: Run with [%s, %s), which is not a %v partition; the %v partition holding its start is %s",
				v.Start.Format(time.RFC3339Nano), v.End.Format(time.RFC3339Nano), v.Granularity, v.Granularity, p)
		}
		return target{partition: v, text: v.Key()}, nil
	case TimePartitionWindow:
		if v.Len() == 0 {
			return target{}, errors.New("tranche: Run with an empty TimePartitionWindow")
		}
		return target{isWindow: true, window: v, text: v.String()}, nil
	}
	return target{}, fmt.Errorf("tranche: Run with an unknown target %T", tg)
}

func (t *target) granularity() TimeGranularity {
	if t.isWindow {
		return t.window.Granularity()
	}
	return t.partition.Granularity
}

func (t *target) location() *time.Location {
	if t.isWindow {
		return t.window.Location()
	}
	return t.partition.Start.Location()
}

func (t *target) oldest() TimePartition {
	if t.isWindow {
		return t.window.Oldest()
	}
	return t.partition
}

// asWindow returns the run's window, or a window of its one partition.
func (t *target) asWindow() TimePartitionWindow {
	switch {
	case t.none:
		return TimePartitionWindow{}
	case t.isWindow:
		return t.window
	}
	w, err := NewTimePartitionWindow(t.partition.Granularity, t.partition.Start, t.partition.Start)
	if err != nil {
		panic("tranche: one-partition window: " + err.Error()) // unreachable: the partition was checked
	}
	return w
}

// preflight checks the target against the DAG's partitioned assets.
func preflight(dag *DAG, t *target) error {
	var partitioned, forbid []string
	var errs []error
	// A DAG of several granularities runs the assets of the target's,
	// and maps the others; it needs one of the target's.
	mixed := false
	if !dag.uniform && !t.none {
		for i := range dag.assets {
			if dag.assets[i].Partitioning.Granularity == t.granularity() {
				mixed = true
				break
			}
		}
	}
	for i := range dag.assets {
		a := &dag.assets[i]
		if !a.partitioned() {
			continue
		}
		if t.none {
			partitioned = append(partitioned, a.Name)
			continue
		}
		p := a.Partitioning
		g, loc := t.granularity(), t.location()
		if mixed && p.Granularity != g {
			if p.Location != nil && !sameZone(p.Location, loc) {
				errs = append(errs, fmt.Errorf("tranche: asset %q is partitioned in %v, but the run's target %s is in %v",
					a.Name, p.Location, t.text, loc))
			}
			continue
		}
		if t.isWindow && !p.AllowWindow {
			forbid = append(forbid, a.Name)
		}
		if p.Granularity != g {
			errs = append(errs, fmt.Errorf("tranche: asset %q is partitioned by %v, but the run's target %s is by %v",
				a.Name, p.Granularity, t.text, g))
			continue
		}
		if p.Location != nil && !sameZone(p.Location, loc) {
			errs = append(errs, fmt.Errorf("tranche: asset %q is partitioned in %v, but the run's target %s is in %v",
				a.Name, p.Location, t.text, loc))
			continue
		}
		if !p.First.IsZero() {
			first, oldest := PartitionOf(g, p.First.In(loc)), t.oldest()
			if oldest.Start.Before(first.Start) {
				errs = append(errs, &PartitionError{Asset: a.Name, Oldest: oldest, First: first})
			}
		}
	}
	slices.Sort(partitioned)
	slices.Sort(forbid)
	if t.none && len(partitioned) > 0 {
		return fmt.Errorf("tranche: run without a partition or window, but %s partitioned; pass a TimePartition or a TimePartitionWindow",
			nameList(partitioned, "is", "are"))
	}
	if len(forbid) > 0 {
		errs = append([]error{fmt.Errorf("tranche: window run of %s, but %s allow windows (Partitioning.AllowWindow is false); run the window's partitions one at a time",
			t.text, nameList(forbid, "does not", "do not"))}, errs...)
	}
	return errors.Join(errs...)
}

// nameList formats sorted asset names and a verb: `asset "a" is` or
// `assets "a", "b" are`.
func nameList(names []string, one, many string) string {
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = strconv.Quote(n)
	}
	if len(names) == 1 {
		return "asset " + quoted[0] + " " + one
	}
	return "assets " + strings.Join(quoted, ", ") + " " + many
}

// runState is one run in progress.
type runState struct {
	dag      *DAG
	id       string
	attempt  int
	backfill string          // the backfill the run belongs to, or ""
	trigger  string          // why it runs, or ""
	fencing  *RunOptions     // nil when the run is not fenced
	ctx      context.Context // the run's context, checked before each fenced write
	target   target
	plan     *runPlan // nil for a uniform DAG: each node is the asset of its index

	runner   *Runner // its OnEvent, Logger and Read
	logHook  func(context.Context, Event)
	hookCtx  context.Context
	mu       sync.Mutex // serializes hook calls; guards hookErrs and closed
	hookErrs []error
	closed   bool // the run's last event was delivered
	failFast bool // the first failure stops the run (FailStop); beside closed, where it costs no padding

	outcomes []AssetResult // by node (DAG position when there is no plan), each written by one goroutine at a time
	assets   []assetState  // by node
	sched    scheduler
}

// assetState is what a run keeps of one asset, besides its outcome.
type assetState struct {
	m         Materialization // its first attempt's; a retry gets its own, see try
	rows      []Row           // its rows, once it completed and until its dependents finish
	waiting   int             // its unfinished dependencies
	consumers int             // its unfinished dependents
	queued    int             // the scheduler's queue: the k-th asset to become ready is assets[k].queued
}

func (s *runState) hasHooks() bool { return s.runner.OnEvent != nil || s.logHook != nil }

// assetOf returns the asset node i materializes.
func (s *runState) assetOf(i int) *Asset {
	if s.plan == nil {
		return &s.dag.assets[i]
	}
	return &s.dag.assets[s.plan.nodes[i].asset]
}

// assetIndex returns the DAG position of node i's asset.
func (s *runState) assetIndex(i int) int {
	if s.plan == nil {
		return i
	}
	return s.plan.nodes[i].asset
}

// targetOf returns the target of node i.
func (s *runState) targetOf(i int) *target {
	if s.plan == nil {
		return &s.target
	}
	return &s.plan.nodes[i].t
}

// nodeDeps returns the nodes node i waits for, and nodeDependents those
// waiting for it.
func (s *runState) nodeDeps(i int) []int {
	if s.plan == nil {
		return s.dag.deps[i]
	}
	return s.plan.deps[i]
}

func (s *runState) nodeDependents(i int) []int {
	if s.plan == nil {
		return s.dag.dependents[i]
	}
	return s.plan.dependents[i]
}

// emitAt is emit for an event of node i: it carries the node's target
// when the node is not for the run's.
func (s *runState) emitAt(i int, e *Event) {
	if s.plan != nil && s.hasHooks() {
		if t := &s.plan.nodes[i].t; !t.none && !s.plan.nodes[i].own {
			e.Target = t.text
			if t.isWindow {
				e.Window = t.window
			} else {
				e.Partition = t.partition
			}
		}
	}
	s.emit(e)
}

// emit completes e with the run's fields and delivers it to the hooks.
func (s *runState) emit(e *Event) {
	if !s.hasHooks() {
		return
	}
	e.RunID, e.runAttempt, e.Backfill, e.Trigger = s.id, s.attempt, s.backfill, s.trigger
	if l, ok := e.Kind.level(); ok {
		e.Level = l
	}
	if !s.target.none && e.Target == "" {
		if s.target.isWindow {
			e.Window = s.target.window
		} else {
			e.Partition = s.target.partition
		}
		e.Target = s.target.text
	}
	if e.Time.IsZero() && e.Kind != KindLog {
		e.Time = time.Now()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.deliver(s.runner.OnEvent, e, true)
	s.deliver(s.logHook, e, false)
}

// deliver calls one hook, recovering and reporting its panic; the
// caller holds s.mu, which serializes the calls.
func (s *runState) deliver(hook func(context.Context, Event), e *Event, report bool) {
	if hook == nil {
		return
	}
	err := hookcall.Call[PanicError](nil, s.hookCtx, hook, *e, func() string {
		return fmt.Sprintf("event hook, for %s of run %q", e.Kind, e.RunID)
	})
	if err == nil {
		return
	}
	s.hookErrs = append(s.hookErrs, err)
	if report && s.runner.Logger != nil {
		func() {
			defer func() { _ = recover() }() // a logger that panics too has been reported once already
			s.runner.Logger.LogAttrs(s.hookCtx, slog.LevelError, "tranche: event hook panicked",
				slog.String("kind", string(e.Kind)), slog.String("run", e.RunID), slog.Any("panic", err.Value),
				slog.String("stack", string(err.Stack)))
		}()
	}
}

// schedule runs the assets, each once its dependencies have finished,
// and returns when every asset has an outcome.
//
// Workers take ready assets from a queue: the calling goroutine is the
// first, and more are started, through an errgroup.Group, whenever assets
// are ready and fewer than limit workers are busy; a worker that finds the
// queue empty ends. A chain of assets thus runs on the calling goroutine
// with no hand-off, and independent assets spread over at most limit
// goroutines. The group only bounds and waits (SetLimit, Wait): its
// functions return nil, because the calling goroutine, which errgroup
// does not run, is a worker too, and because FailStop must also stop
// the one-worker case without a context; the first failure is kept in
// the scheduler and cancels the workers' context with its cause.
func (s *runState) schedule(ctx context.Context, start time.Time, limit int, policy FailurePolicy) {
	n := len(s.assets)
	if n == 0 {
		return
	}
	c := &s.sched
	c.s, c.ctx, c.limit = s, ctx, limit
	s.failFast = policy == FailStop
	if s.failFast && limit > 1 && n > 1 {
		// Running assets are canceled at the first failure. With one
		// worker, no other asset runs then, and the failure flag alone
		// stops the rest.
		var cancel context.CancelCauseFunc
		c.ctx, cancel = context.WithCancelCause(ctx)
		defer cancel(nil)
		c.cancel = cancel
	}
	if limit > 1 && n > 1 {
		c.g.SetLimit(limit - 1) // the calling goroutine is the other worker
	}
	for i := range n {
		a := &s.assets[i]
		a.waiting, a.consumers = len(s.nodeDeps(i)), len(s.nodeDependents(i))
		if a.waiting == 0 {
			s.assets[c.tail].queued = i
			c.tail++
		}
	}
	c.active = min(limit, c.tail)
	for range c.active - 1 {
		c.g.Go(c.work)
	}
	c.worker(start)
	_ = c.g.Wait() // the outcomes hold every error
}

// scheduler is the state of schedule's workers.
type scheduler struct {
	s      *runState
	ctx    context.Context
	limit  int
	cancel context.CancelCauseFunc // cancels ctx at the first failure, when failing fast with several workers
	g      errgroup.Group

	mu         sync.Mutex
	head, tail int   // the queue of ready assets, in runState.assets: each enters it once
	active     int   // workers started and not ended
	failure    error // the first failure, when failing fast
}

// work is a worker started by the errgroup.
func (c *scheduler) work() error {
	c.worker(time.Time{})
	return nil
}

// worker takes and settles ready assets until none is left. now, when
// not zero, is the time it starts at: each asset's end is the next one's
// start, so that the clock is read once per asset.
func (c *scheduler) worker(now time.Time) {
	for {
		c.mu.Lock()
		if c.head == c.tail {
			c.active--
			c.mu.Unlock()
			return
		}
		i := c.s.assets[c.head].queued
		c.head++
		failure := c.failure
		c.mu.Unlock()

		if !c.preempt(i, failure) {
			var err error
			if now, err = c.s.runAsset(c.ctx, i, now); err != nil && c.s.failFast {
				c.mu.Lock()
				if c.failure == nil {
					c.failure = err
				}
				c.mu.Unlock()
				if c.cancel != nil {
					c.cancel(err)
				}
			}
		}
		c.finish(i)
	}
}

// finish queues the dependents of asset i that it made ready, starts
// workers for them if fewer than limit are busy, and frees the rows no
// dependent needs any more.
func (c *scheduler) finish(i int) {
	s, assets := c.s, c.s.assets
	c.mu.Lock()
	for _, j := range s.nodeDependents(i) {
		if assets[j].waiting--; assets[j].waiting == 0 {
			assets[c.tail].queued = j
			c.tail++
		}
	}
	for _, k := range s.nodeDeps(i) {
		if assets[k].consumers--; assets[k].consumers == 0 {
			assets[k].rows = nil
		}
	}
	// This worker takes one of the queued assets itself.
	start := min(c.tail-c.head-1, c.limit-c.active)
	if start > 0 {
		c.active += start
	}
	c.mu.Unlock()
	for range start {
		c.g.Go(c.work)
	}
}

// preempt settles, without running it, an asset whose dependencies did
// not all complete, or that comes after a failure when failing fast or
// after the run's context ended, and reports whether it did.
func (c *scheduler) preempt(i int, failure error) bool {
	s := c.s
	o := &s.outcomes[i]
	if s.plan != nil && s.plan.nodes[i].out != nil {
		o.State, o.Err = StateSkipped, s.plan.nodes[i].out
		s.emit(&Event{Kind: KindAssetSkipped, Asset: o.Asset, Err: o.Err})
		return true
	}
	for _, j := range s.nodeDeps(i) {
		dep := &s.outcomes[j]
		switch dep.State {
		case StateFailed, StateCanceled:
			what := fmt.Sprintf("dependency %q %s", dep.Asset, dep.State)
			if s.plan != nil && !s.plan.nodes[j].t.none {
				what = fmt.Sprintf("dependency %q %s for %s", dep.Asset, dep.State, s.plan.nodes[j].t.text)
			}
			s.cancel(i, errors.New(what))
			return true
		case StateSkipped:
			o.State, o.Err = StateSkipped, fmt.Errorf("tranche: asset %q skipped: dependency %q skipped: %w", o.Asset, dep.Asset, ErrSkip)
			s.emitAt(i, &Event{Kind: KindAssetSkipped, Asset: o.Asset, Err: o.Err})
			return true
		}
	}
	switch {
	case failure != nil:
		s.cancel(i, failure)
		return true
	case c.ctx.Err() != nil:
		s.cancel(i, context.Cause(c.ctx))
		return true
	}
	return false
}

// cancel settles an asset as canceled for the given cause.
func (s *runState) cancel(i int, cause error) {
	o := &s.outcomes[i]
	o.State, o.Err = StateCanceled, errCanceled(o.Asset, cause)
	var took time.Duration
	if !o.Start.IsZero() {
		o.End = time.Now()
		took = o.End.Sub(o.Start)
	}
	s.emitAt(i, &Event{Kind: KindAssetCanceled, Asset: o.Asset, Attempt: o.Attempts, Duration: took, Err: o.Err})
}

// runAsset runs one asset's attempts from now (the zero time: the
// present), and returns when it ended and its failure.
func (s *runState) runAsset(ctx context.Context, i int, now time.Time) (time.Time, error) {
	a := s.assetOf(i)
	o := &s.outcomes[i]
	if now.IsZero() {
		now = time.Now()
	}
	o.Start = now
	for attempt := 1; ; attempt++ {
		if ctx.Err() != nil {
			s.cancel(i, context.Cause(ctx))
			return o.End, nil
		}
		o.Attempts = attempt
		started := o.Start
		if attempt > 1 {
			started = time.Now()
		}
		s.emitAt(i, &Event{Kind: KindAssetStarted, Time: started, Asset: a.Name, Attempt: attempt})
		timedOut, err := s.try(ctx, i, attempt)
		switch {
		case err == nil:
			o.State, o.End = StateSucceeded, time.Now()
			s.emitAt(i, &Event{Kind: KindAssetSucceeded, Time: o.End, Asset: a.Name, Attempt: attempt, Duration: o.End.Sub(o.Start), Rows: o.Rows})
			return o.End, nil
		case ctx.Err() != nil:
			s.cancel(i, context.Cause(ctx))
			return o.End, nil
		case errors.Is(err, ErrSkip):
			o.State, o.End, o.Err = StateSkipped, time.Now(), err
			s.emitAt(i, &Event{Kind: KindAssetSkipped, Time: o.End, Asset: a.Name, Attempt: attempt, Duration: o.End.Sub(o.Start), Err: err})
			return o.End, nil
		case attempt < a.Retry.Attempts && (timedOut || isRetryable(err)):
			delay := a.Retry.delay(attempt)
			s.emitAt(i, &Event{Kind: KindAssetRetrying, Asset: a.Name, Attempt: attempt, Duration: delay, Err: err})
			if wait.Sleep(ctx, delay) != nil {
				s.cancel(i, context.Cause(ctx))
				return o.End, nil
			}
			continue
		}
		o.State, o.End = StateFailed, time.Now()
		o.Err = &AssetError{Asset: a.Name, Target: s.targetOf(i).text, Attempts: attempt, Err: err}
		s.emitAt(i, &Event{Kind: KindAssetFailed, Time: o.End, Asset: a.Name, Attempt: attempt, Duration: o.End.Sub(o.Start), Err: o.Err})
		return o.End, o.Err
	}
}

// try calls the asset once and writes its rows, under its timeout.
func (s *runState) try(ctx context.Context, i, n int) (timedOut bool, err error) {
	a := s.assetOf(i)
	actx := ctx
	if a.Timeout > 0 {
		var cancel context.CancelFunc
		actx, cancel = context.WithTimeout(ctx, a.Timeout)
		defer cancel()
		defer func() {
			if err != nil && ctx.Err() == nil && actx.Err() != nil {
				timedOut, err = true, &timeoutError{a.Timeout, err}
			}
		}()
	}
	// Each attempt has its own Materialization: a goroutine an earlier
	// attempt left behind may still log through that attempt's, which
	// must keep saying so. The first attempt's is kept in the run's
	// state, so that a run without retries allocates none.
	m := &s.assets[i].m
	if n > 1 {
		m = new(Materialization)
	}
	m.run, m.index, m.attempt = s, i, n
	if s.plan != nil {
		if err := s.readInputs(actx, i); err != nil {
			return false, err
		}
	}
	rows, err := materialize(actx, a, m)
	if err == nil {
		err = context.Cause(actx) // a call that outlived its timeout failed it
	}
	if err != nil {
		return false, err
	}
	var batches []Batch
	t := s.targetOf(i)
	if len(a.Destinations) > 0 || a.Partitioning.Column != "" {
		if batches, err = split(a, t, rows); err != nil {
			return false, err
		}
		if s.plan == nil || s.plan.nodes[i].own {
			s.stamp(batches)
		} else {
			for k := range batches {
				batches[k].RunID = s.id
			}
		}
	}
	dsts := a.Destinations
	if s.fencing != nil && s.plan != nil && !s.plan.nodes[i].own {
		dsts = nil // no token fences it: its own run writes it
	}
	for k, dst := range dsts {
		if err := s.write(actx, i, a, n, k, dst, batches, len(rows)); err != nil {
			return false, err
		}
	}
	o := &s.outcomes[i]
	o.Rows, o.RowsByPartition = len(rows), nil
	if a.partitioned() && a.Partitioning.Column != "" {
		o.RowsByPartition = make(map[string]int, len(batches))
		for _, b := range batches {
			o.RowsByPartition[b.Partition.Key()] = len(b.Rows)
		}
	}
	s.assets[i].rows = rows
	if s.plan != nil && t.isWindow {
		s.plan.batches[i] = batches
	}
	return false, nil
}

// stamp gives each batch the run's id and its partition's fencing token.
// Batches of a partitioned asset come oldest first, one per partition of
// the target, in the order of the tokens. The batch of an unpartitioned
// asset gets no token: the tokens of the partition a run is for do not
// order its writes of the asset's whole rows, which runs for other
// partitions make too.
func (s *runState) stamp(batches []Batch) {
	f := s.fencing
	for k := range batches {
		batches[k].RunID = s.id
		if f != nil && len(f.Tokens) == len(batches) && batches[k].Partition.Granularity.IsValid() {
			batches[k].Token, batches[k].DAG = f.Tokens[k], f.DAG
		}
	}
}

// write writes the batches to the asset's destination number k, with
// its events.
func (s *runState) write(ctx context.Context, i int, a *Asset, attempt, k int, dst Destination, batches []Batch, rows int) (err error) {
	name := destinationName(dst)
	s.emitAt(i, &Event{Kind: KindWriteStarted, Asset: a.Name, Destination: name, Attempt: attempt, Rows: rows, seq: k})
	start := time.Now()
	func() {
		defer func() {
			if v := recover(); v != nil {
				err = &PanicError{Value: v, Stack: debug.Stack(), Where: fmt.Sprintf("destination %s", name)}
			}
		}()
		// A fenced run's context is checked last, right before the
		// write: a worker paused since its last heartbeat, whose lease
		// lapsed by its clock, writes nothing. The run's own context,
		// not the asset's: a context derived from it does not ask it.
		if s.fencing != nil && s.ctx.Err() != nil {
			err = context.Cause(s.ctx)
			return
		}
		err = dst.Write(ctx, batches)
	}()
	took := time.Since(start)
	if err != nil {
		err = fmt.Errorf("destination %s: %w", name, err)
		s.emitAt(i, &Event{Kind: KindWriteFailed, Asset: a.Name, Destination: name, Attempt: attempt, Duration: took, Err: err, seq: k})
		return err
	}
	s.emitAt(i, &Event{Kind: KindWriteSucceeded, Asset: a.Name, Destination: name, Attempt: attempt, Duration: took, Rows: rows, seq: k})
	return nil
}

// materialize calls the asset's Materialize, turning a panic into a
// *PanicError.
func materialize(ctx context.Context, a *Asset, m *Materialization) (rows []Row, err error) {
	defer func() {
		if v := recover(); v != nil {
			rows, err = nil, &PanicError{Value: v, Stack: debug.Stack(), Where: fmt.Sprintf("asset %q", a.Name)}
		}
	}()
	return a.Materialize(ctx, m)
}

// timeoutError is an attempt that ran out of its asset's Timeout.
type timeoutError struct {
	timeout time.Duration
	err     error
}

func (e *timeoutError) Error() string {
	return fmt.Sprintf("timed out after %v: %v", e.timeout, e.err)
}

func (e *timeoutError) Unwrap() error { return e.err }

func (e *timeoutError) Is(target error) bool { return target == context.DeadlineExceeded }

// result gathers the outcomes into a Result.
func (s *runState) result(start time.Time) *Result {
	outcomes := s.outcomes
	if s.plan != nil {
		outcomes = s.gather()
	}
	res := &Result{RunID: s.id, Attempt: s.attempt, Target: s.target.text, Start: start, End: start, Assets: outcomes}
	// The run ended when its last asset did; when some asset never
	// started, at the present.
	for _, o := range outcomes {
		if o.End.IsZero() {
			res.End = time.Now()
			break
		}
		if o.End.After(res.End) {
			res.End = o.End
		}
	}
	// The four name lists share one array, each capped at its length.
	var count [4]int
	for _, o := range outcomes {
		res.Rows += o.Rows
		count[statusIndex(o.State)]++
	}
	names := make([]string, 0, len(outcomes))
	lists := [4]*[]string{&res.Succeeded, &res.Failed, &res.Canceled, &res.Skipped}
	for k, list := range lists {
		if count[k] == 0 {
			continue
		}
		from := len(names)
		for _, o := range outcomes {
			if statusIndex(o.State) == k {
				names = append(names, o.Asset)
			}
		}
		*list = names[from:len(names):len(names)]
	}
	switch {
	case len(res.Failed) > 0:
		res.State = StateFailed
	case len(res.Canceled) > 0:
		res.State = StateCanceled
	default:
		res.State = StateSucceeded
	}
	return res
}

func statusIndex(s State) int {
	switch s {
	case StateFailed:
		return 1
	case StateCanceled:
		return 2
	case StateSkipped:
		return 3
	}
	return 0
}
