package backfill

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/internal/granularities"
	leases "github.com/tranche-dev/tranche/internal/lease"
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
// [ID]), and the same DAG, chosen partitions and chunk size too
// (see [IDOf]). A backfill with nothing to run is not recorded in
// the ledger. A backfill canceled in its ledger can be resumed
// ([Backfill.Resume]): it plans again every partition that has not
// succeeded. Fields must not change once a method has been called. A
// zero field takes the default its comment gives.
//
// Workers sharing a backfill never race for a partition: each asks the
// ledger for its next jobs ([ledger.Leaser.ClaimNext]), which hands each
// to one worker in the backfill's order, in batches. A worker whose
// partitions take milliseconds claims a few ahead of its free slots
// (about a fifth of a second of work), so that a batch costs one claim;
// those claimed ahead show running, and once a failure stops the
// backfill, or a cancellation is seen, those not started are released,
// left pending as if never claimed.
//
// Whatever the speed, a run keeps these promises:
//
//   - A success counts once it is recorded: a slot keeps its place until
//     its finish is durable in the ledger, and its partition.succeeded
//     event, the report's count and the slot's next start come after.
//     Slots that end together share a call (a group commit), so a
//     SIGKILL makes at most Concurrency partitions run again.
//   - A cancel stops what has not started: the call that records each
//     run's end says whether the backfill was canceled
//     ([ledger.Finish.Canceled]), so no partition starts later than one
//     partition's run after it; the partitions claimed ahead are
//     released, and Run returns an error matching ErrBackfillCanceled.
//   - Partitions start (take their place in the Budget, send their
//     started event) in the order of claims, whatever the Budget and the
//     Concurrency, so that under FailStop a failure stops only the
//     partitions after it.
//   - A lease is trusted for its length less a margin after its last
//     renewal, by this worker's clock; a finish that hangs past that and
//     a lease more is left behind (ErrLeftBehind), and the ledger fences
//     it should it land after another worker took the partition over.
//   - A worker cut off from its ledger returns: a call without an answer
//     for a lease makes it read the backfill's record, and with no
//     answer to that either within a lease it claims nothing more,
//     abandons its calls in flight and returns an error that wraps the
//     ledger's (for PostgreSQL, matching postgres.ErrConnectionLost). A
//     call that is only slow (a claim waiting for a lock) is waited for.
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
	Window tranche.TimePartitionWindow // the partitions to backfill; one starting in year 1 (an unset time.Time) is refused
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
	Rerun     ledger.RerunPolicy    // "" means RerunFailed
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
	// ([Writer.CancelBackfill]); by default they finish and only what
	// has not started stops, unless the backfill was canceled with
	// StopRunning (BackfillRecord.StopRunning), which stops them in every
	// worker. Workers notice a running partition's stop at their next
	// heartbeat.
	StopOnCancel bool

	// WaitForOthers makes Run wait, once it has run what it could, for
	// the partitions other workers hold: it returns when each has
	// succeeded there, or failed there and ran here again, and it takes
	// over those whose holders' leases expire meanwhile. A partition this
	// worker lost to a newer attempt (its failure matching
	// tranche.ErrFenced) is one of them: it counts failed, and Run waits
	// for the worker that took it over, and takes it over in turn should
	// that worker's lease expire. By default Run
	// returns once it has run what it could, reporting them in
	// [Report].Held (not an error: ordinary overlap), after taking over
	// the partitions whose leases expired before its end and, unless
	// ReturnHeld is set, those whose leases stopped being renewed.
	WaitForOthers bool

	// ReturnHeld makes Run return at once whatever holds the partitions
	// other workers hold. By default, a Run that does not wait for
	// others still waits for the partitions held under leases that
	// stopped being renewed (a worker killed), one [KindPartitionWaiting]
	// event each, and takes them over once they expire, so that running
	// a backfill again after a crash finishes it; leases renewed within
	// an interval are ordinary overlap, reported in Report.Held.
	ReturnHeld bool

	// OnEvent receives the backfill's events (backfill and partition
	// kinds, with Progress); nil means none. The hook contract is the
	// runner's (see tranche.Runner.OnEvent): called synchronously, one
	// event at a time and in order within one Run or Execute, with a
	// context that carries the caller's values but is never canceled, so
	// that the terminal events of a canceled backfill are delivered too;
	// a panic is recovered into Report.HookErr.
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

	// only, in the backfill of one asset of a DAG of several
	// granularities (see assets.go), names that asset: the DAG's other
	// assets are its dependencies, only read.
	only string
	// id, set with only, is the backfill's id: derived from the id of
	// the backfill of several granularities that runs it
	// (assetBackfillID), so that the id that backfill's plan shows
	// reaches it.
	id string

	// reads, set by PlanFrom, is read in place of Ledger.
	reads ledger.Reader
}

// reader returns what the backfill's plan reads: the reader PlanFrom was
// given, or else Ledger.
func (b *Backfill) reader() ledger.Reader {
	if b.reads != nil {
		return b.reads
	}
	return b.Ledger
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
	// versions are the other versions of the DAG (identities whose
	// backfills share its name) whose attempts the plan judges by the
	// ledger's rule of deploys (ledger.ClaimRequest.JudgeVersion), and
	// since is when the backfill was recorded; set by the plan.
	versions []string
	since    time.Time
	// mixed: the DAG has assets of several granularities, which the
	// backfill runs asset by asset (see assets.go).
	mixed bool
}

// config validates the backfill before anything is read or written.
func (b *Backfill) config() (*config, error) {
	var errs []error
	if b.Ledger == nil && b.reads == nil {
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
	unset := sel.total > 0 && sel.window.Start().Year() <= 1
	if unset {
		// The zero time.Time is year 1: a window starting there is an
		// unset start, not two thousand years of history to backfill,
		// and what the assets would say of it (before their first
		// partition) would hide that.
		fail("window %s starts in year %d, at the zero time.Time: the window's start was not set; give its first partition",
			sel.window, sel.window.Start().Year())
	}
	if b.DAG != nil && sel.total > 0 && !unset {
		if cfg.mixed = b.only == "" && granularities.Several(b.DAG); cfg.mixed {
			errs = append(errs, b.checkMixed(sel.window)...)
		} else {
			errs = append(errs, checkAssets(b.DAG, sel.window, cfg.chunk, b.only)...)
		}
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
		cfg.id = ID(cfg.dag, w, cfg.chunk)
	}
	if b.id != "" {
		cfg.id = b.id
	}
	if cfg.worker == "" {
		cfg.worker = defaultWorker()
	}
	return cfg, nil
}

// checkAssets refuses assets a backfill of window w cannot run partition
// by partition: every asset, or the one named only (the others being
// read, not run).
func checkAssets(dag *tranche.DAG, w tranche.TimePartitionWindow, chunk int, only string) []error {
	var unpartitioned, noWindow []string
	var errs []error
	g := w.Granularity()
	for a := range dag.Assets() {
		if only != "" && a.Name != only {
			continue
		}
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
// ledger (see [ledger.Writer.CancelBackfill]).
var ErrBackfillCanceled = ledger.ErrBackfillCanceled

// ErrLeftBehind is matched by the error of the failed-renewal event
// ([KindLeaseRenewFailed]) that a backfill reports, as it returns, of
// each heartbeat still in flight a moment after its partitions ended
// (the ledger call ignored the cancellation of its context, and the
// backfill returned without waiting for it), and by the failure of a
// partition whose finish hung a lease past its lease's lapse: the
// backfill stopped waiting for it, so that a hung call holds neither
// the run nor the partition, which another worker takes over once its
// lease expires. Should the finish land after that, the ledger refuses
// it.
var ErrLeftBehind = leases.ErrLeftBehind

// Run plans the backfill and executes the plan: running the same backfill
// again resumes it. It returns when every claimed partition has finished
// and is recorded. On context cancellation, in-flight partitions are
// recorded failed, cause canceled, before Run returns.
func (b *Backfill) Run(ctx context.Context) (*Report, error) {
	cfg, err := b.config()
	if err != nil {
		return nil, err
	}
	if cfg.mixed {
		return b.runMixed(ctx, cfg, false)
	}
	if err := b.checkName(ctx, cfg); err != nil {
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
func (b *Backfill) Execute(ctx context.Context, plan *Plan) (*Report, error) {
	cfg, err := b.config()
	if err != nil {
		return nil, err
	}
	if plan.Backfill != cfg.id {
		return nil, fmt.Errorf("tranche: plan of backfill %s given to backfill %s", plan.Backfill, cfg.id)
	}
	if cfg.mixed {
		// Each wave is planned once the waves before it ran.
		return b.runMixed(ctx, cfg, false)
	}
	if err := b.checkName(ctx, cfg); err != nil {
		return nil, err
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
// ([ledger.Writer.ResumeBackfill]) and runs the backfill, which plans again
// every partition that has not succeeded (under the rerun policy: the
// default, RerunFailed, runs those that failed, were canceled or never
// ran). A backfill that was not canceled, or never recorded, simply runs:
// resuming a failed backfill is running it again.
func (b *Backfill) Resume(ctx context.Context) (*Report, error) {
	cfg, err := b.config()
	if err != nil {
		return nil, err
	}
	if cfg.mixed {
		return b.runMixed(ctx, cfg, true)
	}
	if err := b.Ledger.ResumeBackfill(ctx, cfg.id); err != nil && !errors.Is(err, ledger.ErrUnknownBackfill) {
		return nil, fmt.Errorf("tranche: resuming backfill %s: %w", cfg.id, err)
	}
	if err := b.checkName(ctx, cfg); err != nil {
		return nil, err
	}
	plan, err := b.plan(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return b.execute(ctx, cfg, plan)
}
