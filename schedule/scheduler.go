package schedule

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/internal/granularities"
	"github.com/tranche-dev/tranche/internal/hookcall"
	leases "github.com/tranche-dev/tranche/internal/lease"
	"github.com/tranche-dev/tranche/internal/slotmatch"
	"github.com/tranche-dev/tranche/internal/zone"
	"github.com/tranche-dev/tranche/ledger"
)

// Scheduler keeps a DAG current: each slot of the DAG's granularity (a
// partition, or a cron schedule's slot) runs once it has closed, plus
// Delay, recorded in a ledger as a backfill records its partitions, so
// that backfills of the same DAG skip what it landed and it skips what
// they landed. [Scheduler.Run] runs it until its context ends.
//
// A slot closes at its End: a day at the next local midnight of its zone
// (or the first instant of the next day, where midnight is skipped), an
// hour at the next local hour, a cron slot at its fire. Slots are the
// library's partitions, computed by [tranche.PartitionOf], so that DST
// days, skipped and repeated wall times, holidays excluded from a
// schedule and moved schedules behave as in backfills; a slot runs Delay
// after its End, Delay being elapsed time ([time.Time.Add]).
//
// The scheduler fires a slot when its own clock (Now) says it is due, and
// the ledger judges that by its own: each claim of a slot carries its End
// plus Delay as [ledger.ClaimRequest.NotBefore], which the ledger refuses
// before, by the clock that judges leases. A replica whose clock runs
// ahead of the ledger's is told how long to wait ([KindEarly]) and claims
// the slot again then, so that no slot starts before its close by the
// ledger's clock, however fast a replica's clock runs. The claims that
// record slots not run, skipped or missed, carry the bound too: refused
// as early, the scheduler decides again at the close, so that no slot is
// skipped because an earlier one ran when it came due by a fast clock.
//
// # Exactly once
//
// Any number of schedulers may run the same DAG on one ledger, in one
// process or many: each claims a due slot under a lease, with the rerun
// policy [ledger.RerunNone], and the ledger decides. A slot whose latest
// attempt succeeded, failed or was canceled is not run again, by any
// scheduler; one held under a live lease (by another replica, or by a
// backfill) is watched, and taken over once its lease expires, as after a
// crash. The run is fenced by the lease's tokens, as a backfill's
// partition is. A failed slot stays failed: a backfill (rerun policy
// failed) runs it again. When Run's context ends, or the lease is lost,
// a running slot's run is canceled and its attempt left to its lease
// rather than recorded failed, so that the next claim after the lease
// (by another replica, or this one restarted) runs it again.
//
// # Catch-up
//
// Slots that came due while no scheduler ran (the process was down, the
// machine slept, the wall clock jumped) are missed. When the scheduler
// starts, or wakes to find more than the slot it waited for due (by one
// rule for both: none of them is live), the missed slots within the
// catch-up window run, oldest first, triggered [ledger.TriggerCatchUp]; older
// missed slots without an attempt are not run:
// each is a [KindMissed] event, counts in [Status].Missed, and is
// recorded in the ledger canceled, its error saying it was missed, so
// that it shows in a backfill's status and grid, no later start reports
// it again, and a backfill under its default rerun policy runs it. The
// window is the newest MaxCatchUp missed slots, and, when CatchUpWindow
// is set, only those of them that came due within it.
//
// On its very first run, when the ledger holds no attempt of a scheduler
// (triggered live or catch-up), the scheduler starts from now: it waits
// for the next slot to close and catches nothing up. The past is a
// backfill's, whose window says how far back to go. Later, it resumes
// after the newest slot a scheduler ran or recorded: a run by hand
// ([backfill.RunRecorded]) counts for its own slot only. The slots that
// came due after it while a scheduler still ran (queued behind a long
// run: due before that attempt finished, or before its lease ran out,
// by the ledger's clock) are not missed: they run, in order, however
// many there are, as the scheduler that queued them would have run them.
//
// Fields must not change once Run has been called. A zero field takes the
// default its comment gives: a Scheduler with only DAG and Ledger set
// runs the DAG's granularity in its assets' zone.
type Scheduler struct {
	DAG    *tranche.DAG  // the assets to materialize; each must be partitioned, all alike
	Ledger ledger.Ledger // where attempts are recorded

	// Location is the zone of the slots when neither an asset's
	// Partitioning nor the schedule's CRON_TZ names one; nil means UTC.
	// When they do, it must be nil or the same.
	Location *time.Location

	// Delay is how long after a slot closes it runs: "the day, two hours
	// after it ends" is a Day granularity with Delay 2h. It is elapsed
	// time after the close. 0 means at the close.
	Delay time.Duration

	// MaxCatchUp is how many missed slots, the newest, a catch-up runs;
	// 0 means DefaultMaxCatchUp, a negative value none (only slots that
	// come due while the scheduler waits for them run). CatchUpWindow,
	// when positive, also bounds a catch-up by time: a missed slot runs
	// only if it came due within CatchUpWindow before now.
	//
	// The default is a count, as Dagster's max_catchup_runs (5) is, and
	// not a duration, as Temporal's catch-up window (a year, by default)
	// is: a duration allows 500,000 times more runs of a minutely
	// schedule than of a monthly one, where a count bounds the work
	// after an outage alike for every granularity. Airflow's catchup is
	// all or nothing: every interval since start_date, or only the
	// latest. Five runs the missed slots of a restart, a deploy or a
	// night's outage of an hourly DAG, and reports the rest of a long
	// outage instead of running it all at once.
	MaxCatchUp    int
	CatchUpWindow time.Duration

	// Overlap says what a slot that comes due while an earlier one still
	// runs does: wait for it ([OverlapQueue], "" too), wait unless one
	// waits already ([OverlapBufferOne]), not run ([OverlapSkip]), run
	// beside it ([OverlapConcurrent]) or stop it and run
	// ([OverlapCancelOther]). An earlier
	// slot runs here, or under another scheduler's live lease; one a
	// backfill runs does not count, since a backfill is not the live
	// run the policy orders, and a backfill of a year beside the
	// scheduler would otherwise hold every live slot back.
	Overlap Overlap

	// MaxQueue bounds the slots waiting under OverlapQueue: a slot that
	// comes due while MaxQueue wait is not run, and is recorded skipped
	// ([KindSkipped]). 0 means no bound; it must be 0 under the other
	// policies (OverlapBufferOne is a bound of one).
	MaxQueue int

	// Budget, when not nil, is a concurrency budget the scheduler shares
	// with the backfills and other schedulers of its process: each slot,
	// once claimed, waits for a place with [backfill.Budget.AcquireFirst],
	// ahead of every backfill partition waiting, runs, and gives the
	// place back. A slot that closes during a backfill sharing the budget
	// then starts before the backfill's next partition, waiting only for
	// the runs already going when the budget is full. Nil means no
	// bound: a slot runs whatever else runs.
	Budget *backfill.Budget

	// Runner runs each slot; nil means a zero Runner. Its OnEvent hook
	// sees the events of every run, each carrying its slot's trigger.
	Runner *tranche.Runner

	// Worker names this scheduler in the ledger; "" means host-pid.
	Worker string

	// Lease is how long a claim holds without a heartbeat; 0 means
	// backfill.DefaultLease (30s). Heartbeat is how often a running slot
	// renews it, and how often a slot another worker holds is looked at;
	// 0 means a third of Lease. A lease must be longer than the
	// heartbeat. Renewals follow backfill's rules (see
	// [backfill.Backfill].Lease): a run whose lease is lost, or lapses by
	// this process's clock, is stopped and writes nothing more.
	Lease, Heartbeat time.Duration

	// OnEvent receives the scheduler's events (the kinds of this package,
	// and [backfill.KindLeaseRenewFailed] and [backfill.KindLeaseRenewSlow])
	// and every event of every run it makes, each of a slot carrying the
	// slot's [ledger.Trigger] (see [TriggerOf]); nil means none. The contract is
	// the runner's (see [tranche.Runner.OnEvent]): one event at a time,
	// in order within a slot, with a context that carries Run's values but
	// is never canceled; a panic is recovered and kept in
	// [Status].HookErr.
	OnEvent func(context.Context, tranche.Event)

	// Now and After are the scheduler's clock: what time it is, and a
	// channel that receives once d has passed on that clock. Nil means
	// time.Now and time.After. A process under an accelerated clock
	// (a demonstration, a test) gives both; a clock that runs at the
	// system's pace, offset or not, needs only Now.
	//
	// Leases, and whether a slot has closed, are judged by the ledger's
	// clock, not by this one: the slots of a clock ahead of the ledger's
	// wait for the ledger's to reach their close. So a test under
	// testing/synctest gives its offset clock to the ledger too
	// (memledger.New takes one), and an accelerated clock, which the
	// ledger cannot follow (its leases are real time), starts its
	// calendar in the past of the ledger's, far enough that it never
	// overtakes it. The leases of slots other workers hold are judged by
	// the ledger's clock as its answers to this scheduler's claims showed
	// it; before any has, the scheduler asks the ledger, by a claim, once
	// a heartbeat interval.
	//
	// The scheduler sleeps on After until the next slot is due, but never
	// longer than a minute of this clock at a time: a timer counts the
	// monotonic clock, which stops while the machine is suspended and
	// ignores a step of the wall clock, so waking every minute is how the
	// scheduler notices either. A wake with nothing due costs a reading
	// of the clock and no call to the ledger.
	Now   func() time.Time
	After func(d time.Duration) <-chan time.Time

	// WaitUpstream, RunLate and RerunStale apply to a DAG whose assets
	// have several granularities (see docs/granularities.md), which the
	// scheduler runs asset by asset, each on its own slots and recorded
	// under the identity a backfill records it under
	// ([backfill.AssetDAG]), and which needs Runner.Read. A slot of an
	// asset that maps to partitions of its dependencies
	// ([tranche.Mapping]) is claimed once every one of them has
	// succeeded in the ledger ([KindWaiting] until then): a day once
	// its hours landed, not merely at midnight.
	//
	// WaitUpstream is how long after a slot comes due it waits for
	// them; 0 means as long as it takes. It is the Scheduler's, one
	// deadline for every asset, since it bounds how late the schedule
	// may run, which is the operator's choice, where what an asset
	// reads is the DAG's. Past it, the slot is recorded missed
	// ([KindMissed], its error naming the partition that had not
	// landed), for a backfill to run, or, with RunLate, run anyway
	// ([KindLate]), for assets that make do with what landed.
	//
	// RerunStale runs again a slot of the newest due ones (as many as
	// a catch-up runs) that succeeded before a partition it maps to
	// succeeded again (a late hour, a reload, a backfill upstream):
	// [KindStale], then a claim under policy [ledger.RerunAll] bounded
	// by the stale attempt's revision, so that among replicas one
	// reruns it. Its dependents are then stale in turn, and rerun by
	// their own asset's schedule. Without it, stale slots are left to a
	// backfill (policy stale).
	WaitUpstream time.Duration
	RunLate      bool
	RerunStale   bool

	// gate, for the scheduler of one asset of a DAG of several
	// granularities, checks its upstream partitions; only names that
	// asset, whose slots it runs. kids are the assets' schedulers of a
	// DAG of several granularities. began is when their Run began, by
	// the scheduler's clock, so that every asset's scheduler resumes from
	// one instant: a slot due after it came due while they ran.
	gate  *gate
	only  string
	kids  []*Scheduler
	began time.Time

	mu      sync.Mutex
	running bool
	status  Status
}

// DefaultMaxCatchUp is the catch-up of MaxCatchUp zero: how many missed
// slots, the newest, run after downtime.
const DefaultMaxCatchUp = 5

// maxSleep is the longest the scheduler sleeps without reading its clock.
const maxSleep = time.Minute

// Overlap says what a slot that comes due while an earlier slot runs
// does. Its text forms are "queue", "buffer-one", "skip", "concurrent"
// and "cancel-other"; "" means [OverlapQueue]. A slot a policy does not
// run is recorded in the ledger canceled, its error saying why, so that
// a backfill (rerun policy failed, its default) finds and runs it.
type Overlap string

const (
	// OverlapQueue runs slots one at a time, oldest first: a slot that
	// comes due while another runs waits for it. The default.
	OverlapQueue Overlap = "queue"
	// OverlapSkip never queues: a slot that comes due while another
	// runs or waits to run is not run ([KindSkipped]); of the slots that
	// come due at once, after downtime, only the newest runs.
	OverlapSkip Overlap = "skip"
	// OverlapConcurrent runs every slot as soon as it is due, beside
	// those still running.
	OverlapConcurrent Overlap = "concurrent"
	// OverlapBufferOne queues at most one slot, as Temporal's BUFFER_ONE:
	// a slot that comes due while another runs waits, unless one waits
	// already; then it is not run ([KindSkipped]). OverlapQueue with
	// MaxQueue 1.
	OverlapBufferOne Overlap = "buffer-one"
	// OverlapCancelOther stops the slot running when a later one comes
	// due, and runs the later one, as Temporal's CANCEL_OTHER: the
	// stopped run is recorded canceled ([KindCanceled]); of the slots
	// that come due at once, after downtime, only the newest runs, and
	// the others are skipped. Each replica stops its own runs when it
	// sees the later slot come due (by its clock), and the later one does
	// not wait for another replica's.
	OverlapCancelOther Overlap = "cancel-other"
)

// MarshalText implements [encoding.TextMarshaler]: the policy's text
// form, "queue" for "". With UnmarshalText, it lets an Overlap be a flag
// ([flag.TextVar]) or a field of a configuration file.
func (o Overlap) MarshalText() ([]byte, error) {
	if o == "" {
		o = OverlapQueue
	}
	return []byte(o), nil
}

// UnmarshalText implements [encoding.TextUnmarshaler]: "queue" ("" too),
// "buffer-one", "skip", "concurrent" or "cancel-other"; any other text is
// refused with an error that lists them.
func (o *Overlap) UnmarshalText(text []byte) error {
	switch v := Overlap(text); v {
	case "":
		*o = OverlapQueue
	case OverlapQueue, OverlapBufferOne, OverlapSkip, OverlapConcurrent, OverlapCancelOther:
		*o = v
	default:
		return fmt.Errorf("tranche: unknown overlap policy %q; accepted: queue, buffer-one, skip, concurrent, cancel-other", text)
	}
	return nil
}

// Status is what a scheduler has done since its Run began.
type Status struct {
	DAG    string // the DAG's identity (backfill.DAGIdentity)
	Worker string // the scheduler's name in the ledger

	// Last is the newest slot this scheduler started, when its run
	// started by the scheduler's clock, and how it is: running,
	// succeeded, failed, or canceled when its run was interrupted
	// (LastErr says why, and the ledger keeps the attempt running until
	// its lease expires). Zero before the first.
	Last      tranche.TimePartition
	LastStart time.Time
	LastState ledger.State
	LastErr   error

	// Next is the next slot to come due, and NextDue when: its End plus
	// Delay. Zero until the scheduler has read the ledger.
	Next    tranche.TimePartition
	NextDue time.Time

	Running []tranche.TimePartition // slots running here, oldest first
	Waiting []tranche.TimePartition // slots due and not run yet: queued, or held by another worker

	Succeeded   int // slots run here that succeeded
	Failed      int // slots run here that failed
	Interrupted int // runs here stopped before they ended, not recorded
	Elsewhere   int // due slots found finished by another worker
	// Missed counts the slots recorded missed in the ledger (older than
	// the catch-up window, not run) whose latest attempt is still that
	// record: read from the ledger when Run starts (those a backfill ran
	// since are not counted), plus those this Run records.
	Missed   int
	Skipped  int // slots not run under OverlapSkip, OverlapBufferOne, OverlapCancelOther or MaxQueue
	Canceled int // runs here stopped and recorded canceled under OverlapCancelOther

	// Pause is the schedule's pause as the scheduler last read it from
	// the ledger ([Scheduler.Pause]): when Run starts, before it claims
	// or records a slot, and while paused once a heartbeat interval.
	// While Pause.Paused, it starts no slot.
	Pause ledger.SchedulePause

	// HookErr is the last panic of OnEvent, a [*tranche.PanicError]; nil
	// when none panicked. A panicking hook changes nothing else.
	HookErr error

	// Assets, for a DAG of several granularities, holds each asset's
	// schedule's status, in the DAG's order (each DAG the asset's
	// identity); the counts and slots above are their sums, and DAG,
	// Last and Next are unset. Nil for a DAG of one granularity.
	Assets []Status
}

// Pause pauses the schedule of s's DAG in its Ledger, recording by (who)
// and note (why), so that every scheduler of the DAG on that ledger, in
// any process, starts no slot from its next look at the ledger: each
// reads the pause before it claims a slot, and while paused, once a
// heartbeat interval. Slots running go on to their end. The slots that
// come due while paused are missed, as while no scheduler runs: once
// resumed, the catch-up window's run ([ledger.TriggerCatchUp]), and the older
// are recorded missed, saying the schedule was paused. Backfills and
// runs by hand ignore a pause. Pausing a paused schedule changes
// nothing; Pause returns the pause in force. s need not be running.
func (s *Scheduler) Pause(ctx context.Context, by, note string) (ledger.SchedulePause, error) {
	return s.setPause(ctx, ledger.SchedulePause{Paused: true, By: by, Note: note})
}

// Resume resumes the schedule of s's DAG paused by [Scheduler.Pause],
// recording by and note; resuming a schedule that is not paused changes
// nothing.
func (s *Scheduler) Resume(ctx context.Context, by, note string) (ledger.SchedulePause, error) {
	return s.setPause(ctx, ledger.SchedulePause{By: by, Note: note})
}

func (s *Scheduler) setPause(ctx context.Context, p ledger.SchedulePause) (ledger.SchedulePause, error) {
	if s.gate == nil && s.DAG != nil && granularities.Several(s.DAG) {
		return s.assetsPause(ctx, p)
	}
	cfg, err := s.config()
	if err != nil {
		return ledger.SchedulePause{}, err
	}
	return s.Ledger.SetSchedulePause(ctx, cfg.dag, p)
}

// Status returns what the scheduler has done since its last Run began.
// It is safe to call while Run runs.
func (s *Scheduler) Status() Status {
	s.mu.Lock()
	st := s.status
	kids := s.kids
	s.mu.Unlock()
	st.Running = slices.Clone(st.Running)
	st.Waiting = slices.Clone(st.Waiting)
	assetsStatus(&st, kids)
	return st
}

// config is a Scheduler's validated settings, with defaults applied.
type config struct {
	g                tranche.TimeGranularity
	loc              *time.Location
	dag, worker      string
	delay            time.Duration
	maxCatchUp       int // negative: none
	window           time.Duration
	overlap          Overlap
	maxQueue         int // the bound on waiting slots; 0: none
	lease, heartbeat time.Duration
	first            time.Time // the start of the oldest slot every asset takes; zero when none is bounded
	match            slotmatch.Matcher
	now              func() time.Time
	after            func(time.Duration) <-chan time.Time
}

func (s *Scheduler) config() (*config, error) {
	var errs []error
	fail := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("tranche: scheduler: "+format, args...))
	}
	if s.DAG == nil {
		fail("no DAG")
	}
	if s.Ledger == nil {
		fail("no Ledger")
	} else if v := reflect.ValueOf(s.Ledger); nilable(v.Kind()) && v.IsNil() {
		// An Open whose error was dropped: refused here, before a call
		// on it panics in the loop.
		fail("Ledger is a nil %T", s.Ledger)
	}
	cfg := &config{worker: s.Worker, delay: s.Delay, window: s.CatchUpWindow, lease: s.Lease, heartbeat: s.Heartbeat,
		now: s.Now, after: s.After, maxCatchUp: s.MaxCatchUp}
	if err := cfg.overlap.UnmarshalText([]byte(s.Overlap)); err != nil {
		errs = append(errs, err)
	}
	if s.Delay < 0 {
		fail("delay %v: want 0 or more", s.Delay)
	}
	switch {
	case s.MaxQueue < 0:
		fail("max queue %d: want 0 (no bound) or more", s.MaxQueue)
	case s.MaxQueue > 0 && cfg.overlap != OverlapQueue:
		fail("max queue %d under overlap policy %s: it bounds the queue of policy queue", s.MaxQueue, cfg.overlap)
	}
	cfg.maxQueue = s.MaxQueue
	if cfg.overlap == OverlapBufferOne {
		cfg.maxQueue = 1
	}
	if s.CatchUpWindow < 0 {
		fail("catch-up window %v: want 0 (no bound by time) or more", s.CatchUpWindow)
	}
	if cfg.maxCatchUp == 0 {
		cfg.maxCatchUp = DefaultMaxCatchUp
	}
	if cfg.lease == 0 {
		cfg.lease = backfill.DefaultLease
	}
	if cfg.heartbeat == 0 {
		cfg.heartbeat = cfg.lease / 3
	}
	if cfg.lease < 0 || cfg.heartbeat <= 0 || cfg.lease <= cfg.heartbeat {
		fail("lease %v and heartbeat %v: the lease must be positive and longer than the heartbeat", cfg.lease, cfg.heartbeat)
	}
	if s.DAG != nil {
		g, loc, first, err := partitioning(s.DAG, s.Location, s.only)
		if err != nil {
			errs = append(errs, err)
		} else {
			cfg.g, cfg.loc = g, loc
			if !first.IsZero() {
				cfg.first = tranche.PartitionOf(g, first.In(loc)).Start
			}
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	cfg.dag = backfill.DAGIdentity(s.DAG, cfg.g, cfg.loc)
	cfg.match = slotmatch.New(cfg.g, cfg.loc)
	if cfg.worker == "" {
		host, err := os.Hostname()
		if err != nil || host == "" {
			host = "worker"
		}
		cfg.worker = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	if cfg.now == nil {
		cfg.now = time.Now
	}
	if cfg.after == nil {
		cfg.after = time.After
	}
	return cfg, nil
}

// nilable reports whether a value of kind k can be nil.
func nilable(k reflect.Kind) bool {
	switch k {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface:
		return true
	}
	return false
}

// partitioning returns the granularity and zone of the DAG's slots, as a
// backfill of it takes them (tranchecli reads them alike), and the latest
// of its assets' First instants.
func partitioning(dag *tranche.DAG, loc *time.Location, only string) (g tranche.TimeGranularity, _ *time.Location, first time.Time, _ error) {
	fail := func(format string, args ...any) (tranche.TimeGranularity, *time.Location, time.Time, error) {
		return g, nil, first, fmt.Errorf("tranche: scheduler: "+format, args...)
	}
	var from string
	var unpartitioned []string
	for a := range dag.Assets() {
		if only != "" && a.Name != only {
			continue // a dependency of another granularity, only read
		}
		p := a.Partitioning
		if !p.Granularity.IsValid() {
			unpartitioned = append(unpartitioned, fmt.Sprintf("%q", a.Name))
			continue
		}
		if g.IsValid() && p.Granularity != g {
			return fail("assets %q (%v) and %q (%v) are partitioned differently; a scheduler runs one granularity", from, g, a.Name, p.Granularity)
		}
		if !g.IsValid() {
			g, from = p.Granularity, a.Name
		}
		if p.Location != nil {
			if loc != nil && !zone.Same(loc, p.Location) {
				return fail("asset %q follows %v, and the slots %v; give one zone", a.Name, p.Location, loc)
			}
			loc = p.Location
		}
		if p.First.After(first) {
			first = p.First
		}
	}
	switch {
	case len(unpartitioned) > 0:
		slices.Sort(unpartitioned)
		return fail("unpartitioned assets %s would be re-extracted whole by every slot; give them a Partitioning or run them apart", strings.Join(unpartitioned, ", "))
	case !g.IsValid():
		return fail("no asset is partitioned; a scheduler runs partitions")
	}
	if z := slotmatch.CronZone(g); z != nil {
		if loc != nil && !zone.Same(loc, z) {
			return fail("schedule %v fires in %v, and the slots follow %v; give one zone", g, z, loc)
		}
		loc = z
	}
	if loc == nil {
		loc = time.UTC
	}
	if !zone.Portable(loc) {
		// The ledger names the DAG by its zone, which must name the
		// same calendar on every host that shares it.
		return fail("the slots are in the host's zone (time.Local), which has no name another host can load; load the zone by name (time.LoadLocation) or set TZ")
	}
	return g, loc, first, nil
}

// due returns when slot p runs: Delay after it closes.
func (c *config) due(p tranche.TimePartition) time.Time { return p.End.Add(c.delay) }

// newestDue returns the newest slot due at now: the one before the
// first slot whose due time is after now. It judges by due itself, so
// that the loop, which sleeps until the due time of the next slot, never
// wakes to find it not due.
func (c *config) newestDue(now time.Time) tranche.TimePartition {
	q := tranche.PartitionOf(c.g, now.Add(-c.delay).In(c.loc)) // the open slot, if the clock agrees
	for !c.due(q).After(now) {
		q = q.Next()
	}
	for p := q.Prev(); c.due(p).After(now); p = p.Prev() {
		q = p
	}
	return q.Prev()
}

// catchUpFrom returns the oldest slot a catch-up at now runs, walking
// back from newest, the newest missed slot: at most maxCatchUp slots,
// none starting before floor or the DAG's first slot, none due before the
// window; newest.Next() when none.
func (c *config) catchUpFrom(newest tranche.TimePartition, now, floor time.Time) tranche.TimePartition {
	oldest := newest.Next()
	p := newest
	for range max(c.maxCatchUp, 0) {
		if p.Start.Before(floor) || p.Start.Before(c.first) || (c.window > 0 && c.due(p).Before(now.Add(-c.window))) {
			break
		}
		oldest, p = p, p.Prev()
	}
	return oldest
}

// slot is a due slot this scheduler means to run, while it waits.
type slot struct {
	p       tranche.TimePartition
	trigger ledger.Trigger
	// check: read the slot's history before claiming it.
	check bool
	// heldUntil: another worker holds the slot; look again then (by the
	// system's clock, as leases are). Zero when not held.
	heldUntil time.Time
	refused   bool // the ledger refused a claim that its history allowed
	announced bool // KindHeld was emitted
	// probe: held while the ledger's clock was unknown; once the hold
	// ends, the slot is claimed rather than read, so that the ledger
	// judges the lease by its clock.
	probe bool
	// notBefore: the ledger refused the slot's claim as early (it has
	// not closed by the ledger's clock); claimed again then, by the
	// system's clock. Zero when not refused so.
	notBefore time.Time
	// decide: under OverlapSkip, whether the slot runs or is skipped is
	// decided at notBefore, its close by the ledger's clock: it came due
	// by this scheduler's clock, and the ledger refused to record it
	// skipped (or missed) as early. Until then it is neither claimed nor
	// recorded, nor is any later slot claimed.
	decide bool
	// byBackfill: the holder is a backfill, whose run is no earlier live
	// run for the overlap policy.
	byBackfill bool
	// limited: the DAG's limit refused the slot's claim (KindLimited
	// was emitted); claimed again at notBefore, its demand renewed.
	limited bool
	// waiting: KindWaiting was emitted (a gated asset's slot waits for
	// its upstream partitions).
	waiting bool
	// rerun: a stale slot that succeeded at revision, run again.
	rerun    bool
	revision int64
}

// maxLimitPoll bounds how long a slot that the DAG's limit holds back
// ([ledger.Limiter]) waits before it is claimed again: its demand, which
// lasts a lease, holds backfills back meanwhile, and the slot starts
// within this of a run's end.
const maxLimitPoll = 100 * time.Millisecond

// superseded is why a run is stopped under OverlapCancelOther: a later
// slot came due.
type superseded struct{ by tranche.TimePartition }

func (e *superseded) Error() string {
	return fmt.Sprintf("canceled: slot %s came due while it ran, under the overlap policy cancel-other; a backfill runs it again", e.by.Key())
}

// run is the state of one Run. The loop goroutine owns every field but
// hookMu; the goroutines of the slots' runs report to it on done.
type run struct {
	s   *Scheduler
	cfg *config
	ctx context.Context

	next     tranche.TimePartition // the oldest slot not looked at yet
	lastLook time.Time             // the scheduler's clock when it last looked for due slots
	// alive is the last sign of life, by the ledger's clock, of the
	// scheduler that made the newest scheduler's attempt begin found:
	// when it finished it, or until when its lease held. Slots that came
	// due by then came due while a scheduler ran, queued behind a slot
	// it ran: they are not missed. Zero when begin found none.
	alive    time.Time
	pending  []*slot // due slots to run, oldest first
	inflight int
	started  bool          // the ledger was read and next set
	retryAt  time.Time     // after a ledger error, when to try again (system clock)
	done     chan struct{} // a run ended
	wg       sync.WaitGroup

	// ahead is how far the ledger's clock was ahead of the system's
	// when it last answered with its time (a claim granted, or refused
	// as early), read as the answer arrived, so that it errs behind the
	// ledger by no more than the call took; clockKnown says whether it
	// has answered. The leases of slots others hold are judged by it.
	ahead      time.Duration
	clockKnown bool

	// stops cancels the runs in flight, by slot, for OverlapCancelOther;
	// the loop adds to it, and each run removes itself as it ends.
	stopMu sync.Mutex
	stops  map[tranche.TimePartition]context.CancelCauseFunc

	queued int // len(pending) as publish last reported it

	// pause is the schedule's pause as last read, before each step that
	// may claim; pauseRead says whether it has been.
	pause     ledger.SchedulePause
	pauseRead bool

	hookMu sync.Mutex // serializes OnEvent
}

// Run runs the scheduler until ctx ends, and then returns nil once the
// slots it runs are over: recorded, or, when ctx ended their runs, left
// to their leases. It returns an error at once, running nothing, when
// the Scheduler is invalid or already running. Ledger failures do not end
// it: each is a [KindLedgerError] event, and the call is tried again a
// heartbeat interval later.
func (s *Scheduler) Run(ctx context.Context) error {
	if s.gate == nil && s.DAG != nil && granularities.Several(s.DAG) {
		return s.runAssets(ctx)
	}
	cfg, err := s.config()
	if err != nil {
		return err
	}
	s.mu.Lock()
	if s.running {
		s.mu.Unlock()
		return errors.New("tranche: scheduler: Run called while the scheduler runs")
	}
	s.running = true
	s.status = Status{DAG: cfg.dag, Worker: cfg.worker}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.running = false
		s.mu.Unlock()
	}()
	r := &run{s: s, cfg: cfg, ctx: ctx, done: make(chan struct{}), stops: map[tranche.TimePartition]context.CancelCauseFunc{}}
	r.loop()
	return nil
}

func (r *run) loop() {
	ctx := r.ctx
	for {
		if r.retryAt.IsZero() || !time.Now().Before(r.retryAt) {
			r.retryAt = time.Time{}
			if err := r.step(ctx); err != nil && ctx.Err() == nil {
				r.retryAt = time.Now().Add(r.cfg.heartbeat)
				r.emit(KindLedgerError, nil, func(e *tranche.Event) { e.Err = err })
			}
			r.publish()
		}
		wait, realWait := r.waits()
		var timer *time.Timer
		var realC <-chan time.Time
		if realWait >= 0 {
			timer = time.NewTimer(realWait)
			realC = timer.C
		}
		select {
		case <-ctx.Done():
		case <-r.done:
			r.inflight--
		case <-r.cfg.after(wait):
		case <-realC:
		}
		if timer != nil {
			timer.Stop()
		}
		if ctx.Err() != nil {
			r.stop()
			return
		}
	}
}

// waits returns how long to sleep on the scheduler's clock (until the
// next slot is due, at most maxSleep) and on the system's (until a held
// slot is looked at again, a slot refused as early is claimed again, or
// a failed call is tried again; negative for no such wait).
func (r *run) waits() (time.Duration, time.Duration) {
	wait := maxSleep
	if r.pause.Paused && r.retryAt.IsZero() {
		// The pause is read again a heartbeat interval later: the
		// slots pending wait for the resume.
		return wait, r.cfg.heartbeat
	}
	if r.started && r.retryAt.IsZero() {
		wait = min(max(r.cfg.due(r.next).Sub(r.cfg.now()), 0), maxSleep)
	}
	realWait := time.Duration(-1)
	at := func(t time.Time) {
		if d := max(time.Until(t), 0); realWait < 0 || d < realWait {
			realWait = d
		}
	}
	if !r.retryAt.IsZero() {
		at(r.retryAt)
		return wait, realWait
	}
	now := time.Now()
	if g := r.s.gate; g != nil && g.stale {
		at(g.looked.Add(r.cfg.heartbeat)) // the next look for stale slots
	}
	for _, sl := range r.pending {
		switch {
		case sl.check:
			at(time.Time{}) // refused by the ledger: look at it at once
		case !sl.heldUntil.IsZero():
			at(sl.heldUntil)
		case sl.notBefore.After(now):
			at(sl.notBefore) // refused as early: claimed again then
		}
	}
	return wait, realWait
}

// stop waits for the runs in flight, which ctx's end cancels, and
// reports the end of Run.
func (r *run) stop() {
	for r.inflight > 0 {
		<-r.done
		r.inflight--
	}
	r.wg.Wait()
	r.publish()
	r.emit(KindStopped, nil, func(e *tranche.Event) { e.Err = context.Cause(r.ctx) })
}

// step looks at the clock and the ledger, and starts what is due: nothing
// while the schedule is paused.
func (r *run) step(ctx context.Context) error {
	now := r.cfg.now()
	// The pause is read before anything is claimed or recorded, and
	// while paused; a wake with nothing due reads nothing.
	if !r.started || r.pause.Paused || len(r.pending) > 0 || !r.cfg.newestDue(now).Start.Before(r.next.Start) {
		if err := r.readPause(ctx); err != nil {
			return err
		}
	}
	if !r.started {
		at := now
		if !r.s.began.IsZero() {
			at = r.s.began
		}
		if err := r.begin(ctx, at); err != nil {
			return err
		}
		r.started = true
		first := r.next
		r.emit(KindStarted, nil, func(e *tranche.Event) { e.Partition, e.Target = first, first.Key() })
	}
	if r.pause.Paused {
		// What comes due meanwhile comes due while no scheduler runs
		// it: missed, by the catch-up rules, once resumed.
		r.lastLook = now
		return nil
	}
	if err := r.decide(ctx); err != nil {
		return err
	}
	if err := r.advance(ctx, now); err != nil {
		return err
	}
	if err := r.refresh(ctx); err != nil {
		return err
	}
	if err := r.findStale(ctx); err != nil {
		return err
	}
	return r.dispatch(ctx)
}

// readPause reads the schedule's pause from the ledger, before anything
// is claimed, so that a pause recorded before the read stops every
// replica's next start, and reports a change.
func (r *run) readPause(ctx context.Context) error {
	p, err := r.s.Ledger.SchedulePause(ctx, r.cfg.dag)
	if err != nil {
		return fmt.Errorf("tranche: reading the schedule's pause: %w", err)
	}
	changed := r.pauseRead && p.Paused != r.pause.Paused
	first := !r.pauseRead && p.Paused
	r.pause, r.pauseRead = p, true
	r.count(func(st *Status) { st.Pause = p })
	if changed || first {
		kind := KindResumed
		if p.Paused {
			kind = KindPaused
		}
		r.emit(kind, nil, func(e *tranche.Event) {
			e.Attrs = append(e.Attrs, slog.String("by", p.By), slog.String("note", p.Note), slog.Time("since", p.Since))
		})
	}
	return nil
}

// pausedAt reports whether slot p came due while the schedule was paused,
// as the pause last read says (by the ledger's clock).
func (r *run) pausedAt(p tranche.TimePartition) bool {
	pz, due := r.pause, r.cfg.due(p)
	return !pz.PausedAt.IsZero() && !due.Before(pz.PausedAt) && (pz.Paused || !due.After(pz.Since))
}

// begin finds where the scheduler resumes: after the newest slot a
// scheduler ran or recorded, or, when there is none, at the next slot to
// come due.
func (r *run) begin(ctx context.Context, now time.Time) error {
	cfg := r.cfg
	newest := cfg.newestDue(now)
	h, err := r.horizon(ctx, now)
	if err != nil {
		return err
	}
	r.lastLook = now // what is due now came due while this scheduler did not run
	if err := r.countMissed(ctx, now); err != nil {
		return err
	}
	if h == nil {
		r.next = newest.Next()
	} else {
		r.alive = h.Finished
		if h.State == ledger.StateRunning {
			r.alive = h.LeaseUntil
		}
		r.next = tranche.PartitionOf(cfg.g, h.Start.In(cfg.loc))
		if pz := r.pause; !pz.PausedAt.IsZero() && pz.PausedAt.Before(r.alive) && (pz.Paused || pz.Since.After(cfg.due(r.next))) {
			// Paused after that slot came due: what came due after the
			// pause was not queued, it was paused.
			r.alive = pz.PausedAt
		}
		if h.State.Terminal() && r.next.Start.Equal(h.Start) && r.next.End.Equal(h.End) {
			// The newest run is over: resume after it. (A slot of a
			// moved schedule that merely overlaps it is looked at.)
			r.next = r.next.Next()
		}
		// The catch-up window may reach before the newest run: slots
		// there that a scheduler left running (its process stopped or
		// died, and others with it) are taken over once their leases
		// expire. Slots there without an attempt were reported missed,
		// or skipped, when they came due.
		if oldest := cfg.catchUpFrom(newest, now, time.Time{}); oldest.Start.Before(r.next.Start) {
			var parts []tranche.TimePartition
			for p := oldest; p.Start.Before(r.next.Start); p = p.Next() {
				parts = append(parts, p)
			}
			att, err := latest(ctx, r.s.Ledger, cfg.dag, cfg.match, parts)
			if err != nil {
				return err
			}
			for i, a := range att {
				if a != nil && a.State == ledger.StateRunning {
					r.add(parts[i], ledger.TriggerCatchUp)
				}
			}
		}
	}
	if r.next.Start.Before(cfg.first) {
		r.next = tranche.PartitionOf(cfg.g, cfg.first.In(cfg.loc))
	}
	return nil
}

// missedLookback bounds how far back Run reads the slots recorded
// missed, for Status.Missed: as far as a DAG's summary looks
// (backfill.SummaryLookback).
const missedLookback = backfill.SummaryLookback

// countMissed sets Status.Missed to the slots of the last missedLookback
// whose latest attempt is a scheduler's record of a missed slot.
func (r *run) countMissed(ctx context.Context, now time.Time) error {
	n := 0
	for a, err := range r.s.Ledger.Latest(ctx, r.cfg.dag, now.Add(-missedLookback), now) {
		if err != nil {
			return fmt.Errorf("tranche: reading ledger: %w", err)
		}
		if scheduled(a) && a.State == ledger.StateCanceled && strings.HasPrefix(a.Err, "missed:") {
			n++
		}
	}
	r.count(func(st *Status) { st.Missed = n })
	return nil
}

// minLedgerStart is the oldest partition start a ledger keys.
var minLedgerStart = time.Unix(0, math.MinInt64)

// horizon returns the newest attempt of a scheduler (no backfill, and
// triggered live or catch-up: a slot run, or recorded skipped or missed)
// of the DAG at a slot starting before now, or nil when there is none:
// the scheduler's own history. A manual run ([backfill.RunRecorded])
// counts for its own slot only, which a catch-up finds run; it does not
// move where the catch-up starts, so that the slots before it that no
// scheduler ran are caught up or reported missed. It reads the ledger backwards over spans that
// grow fourfold, so that a recent run is found at once, and an empty
// ledger answers in a dozen reads.
func (r *run) horizon(ctx context.Context, now time.Time) (*ledger.Attempt, error) {
	hi, span := now, time.Hour
	for {
		lo := hi.Add(-span)
		if lo.Before(minLedgerStart) || lo.After(hi) {
			lo = minLedgerStart
		}
		var best *ledger.Attempt
		for a, err := range r.s.Ledger.Latest(ctx, r.cfg.dag, lo, hi) {
			if err != nil {
				return nil, fmt.Errorf("tranche: reading ledger: %w", err)
			}
			if scheduled(a) && (best == nil || a.End.After(best.End)) {
				best = &a
			}
		}
		if best != nil || !lo.After(minLedgerStart) {
			return best, nil
		}
		hi, span = lo, min(span*4, 100*365*24*time.Hour)
	}
}

// scheduled reports whether a is an attempt of a scheduler.
func scheduled(a ledger.Attempt) bool {
	return a.Backfill == "" && (a.Trigger == ledger.TriggerLive || a.Trigger == ledger.TriggerCatchUp)
}

// missedBatch is how many missed slots are read from the ledger at once.
const missedBatch = 4096

// advance takes the slots that came due since the scheduler last looked.
// When only the slot it waited for did, that slot is live. When more did
// at once (it starts, or the machine slept, or its clock stepped, or the
// ledger did not answer), none is: those that came due while a scheduler
// ran (queued behind a slot it ran, see run.alive) join the pending
// slots; the others are missed, and the rule is the same for a scheduler
// that starts and one that runs: the missed slots in the catch-up window
// join the pending slots, older ones without an attempt are reported
// missed.
func (r *run) advance(ctx context.Context, now time.Time) error {
	cfg := r.cfg
	newest := cfg.newestDue(now)
	if newest.Start.Before(r.next.Start) {
		r.lastLook = now
		return nil
	}
	live := newest.Start.Equal(r.next.Start) && cfg.due(newest).After(r.lastLook)
	newestMissed := newest
	if live {
		newestMissed = newest.Prev()
	}
	var queued []tranche.TimePartition
	for ; !r.next.Start.After(newest.Start) && !cfg.due(r.next).After(r.alive); r.next = r.next.Next() {
		queued = append(queued, r.next)
	}
	oldest := cfg.catchUpFrom(newestMissed, now, r.next.Start)
	for r.next.Start.Before(oldest.Start) {
		parts := make([]tranche.TimePartition, 0, min(missedBatch, 64))
		for p := r.next; p.Start.Before(oldest.Start) && len(parts) < missedBatch; p = p.Next() {
			parts = append(parts, p)
		}
		att, err := latest(ctx, r.s.Ledger, cfg.dag, cfg.match, parts)
		if err != nil {
			return err
		}
		var missed []tranche.TimePartition // a run of adjacent slots with no attempt
		flush := func() error {
			err := r.recordMissed(ctx, missed)
			missed = missed[:0]
			return err
		}
		for i, a := range att {
			if a == nil {
				missed = append(missed, parts[i])
				continue
			}
			if err := flush(); err != nil {
				return err
			}
			if a.State == ledger.StateRunning {
				// Left running by a worker that may be gone: its lease
				// says.
				r.add(parts[i], ledger.TriggerCatchUp)
			}
		}
		if err := flush(); err != nil {
			return err
		}
		r.next = parts[len(parts)-1].Next()
	}
	var due []*slot
	for _, p := range queued {
		trigger := ledger.TriggerCatchUp
		if live && p.Start.Equal(newest.Start) {
			trigger = ledger.TriggerLive
		}
		due = append(due, &slot{p: p, trigger: trigger, check: true})
	}
	for p := r.next; !p.Start.After(newest.Start); p = p.Next() {
		trigger := ledger.TriggerCatchUp
		if live && p.Start.Equal(newest.Start) {
			trigger = ledger.TriggerLive
		}
		due = append(due, &slot{p: p, trigger: trigger, check: true})
	}
	if len(due) > 0 {
		switch {
		case cfg.overlap == OverlapSkip:
			busy, err := r.busy(ctx, due[len(due)-1].p)
			if err != nil {
				return err
			}
			keep := len(due) - 1
			if busy {
				keep = len(due)
			}
			if due, err = r.skipOlder(ctx, due, keep, whySkipped); err != nil {
				return err
			}
		case cfg.overlap == OverlapCancelOther:
			var err error
			if due, err = r.skipOlder(ctx, due, len(due)-1, whySkippedAtOnce); err != nil {
				return err
			}
			if len(due) > 0 {
				r.cancelOlder(due[len(due)-1].p)
			}
		case cfg.maxQueue > 0:
			var err error
			if due, err = r.bound(ctx, due); err != nil {
				return err
			}
		}
	}
	r.pending = append(r.pending, due...)
	r.next, r.lastLook = newest.Next(), now
	return nil
}

// skipOlder records the first keep slots of due skipped, saying why,
// and returns those left pending. A slot the ledger refuses to record as
// early is not closed by its clock, nor is any later one: those are
// postponed, and decided at their close under OverlapSkip.
func (r *run) skipOlder(ctx context.Context, due []*slot, keep int, why string) ([]*slot, error) {
	for i, sl := range due[:keep] {
		recorded, retry, err := r.record(ctx, []tranche.TimePartition{sl.p}, why, sl.trigger)
		if err != nil {
			return nil, err
		}
		if !retry.IsZero() {
			for _, later := range due[i:] {
				r.postpone(later, retry, later == sl)
			}
			return due[i:], nil
		}
		if recorded {
			r.count(func(st *Status) { st.Skipped++ })
			r.emit(KindSkipped, sl, nil)
		}
	}
	return due[keep:], nil
}

// bound keeps of due, oldest first, the slots the queue's bound lets
// wait, and records the others skipped. A slot waits when another runs
// (here, or under another scheduler's lease) or waits before it; the
// first of the queue starts when nothing runs.
func (r *run) bound(ctx context.Context, due []*slot) ([]*slot, error) {
	cfg := r.cfg
	running, waiting := r.inflight > 0, 0
	for _, sl := range r.pending {
		switch {
		case sl.byBackfill:
		case !sl.heldUntil.IsZero():
			running = true
		default:
			waiting++
		}
	}
	if !running {
		first := due[0].p
		if len(r.pending) > 0 {
			first = r.pending[0].p
		}
		var err error
		if running, err = r.runsBefore(ctx, first); err != nil {
			return nil, err
		}
	}
	free := !running // the first of the queue starts now
	if free && waiting > 0 {
		free, waiting = false, waiting-1
	}
	why := fmt.Sprintf("skipped: it came due while %d slots waited to run, under the overlap policy %s (at most %d waiting); a backfill runs it",
		cfg.maxQueue, cfg.overlap, cfg.maxQueue)
	kept := due[:0:0]
	for _, sl := range due {
		switch {
		case free:
			free = false
		case waiting < cfg.maxQueue:
			waiting++
		default:
			recorded, retry, err := r.record(ctx, []tranche.TimePartition{sl.p}, why, sl.trigger)
			switch {
			case err != nil:
				return nil, err
			case !retry.IsZero():
				// Not closed by the ledger's clock: it waits for its
				// close, as the slots before it do.
				r.postpone(sl, retry, true)
			case recorded:
				r.count(func(st *Status) { st.Skipped++ })
				r.emit(KindSkipped, sl, nil)
				continue
			default:
				continue // another worker recorded or holds it
			}
		}
		kept = append(kept, sl)
	}
	return kept, nil
}

// runsBefore reports whether the slot before p runs under a scheduler's
// live lease, by the ledger.
func (r *run) runsBefore(ctx context.Context, p tranche.TimePartition) (bool, error) {
	prev := p.Prev()
	now := r.ledgerNow(time.Now())
	for a, err := range r.s.Ledger.Latest(ctx, r.cfg.dag, prev.Start, p.Start) {
		if err != nil {
			return false, fmt.Errorf("tranche: reading ledger: %w", err)
		}
		if a.State == ledger.StateRunning && a.Backfill == "" && now.Before(a.LeaseUntil) {
			return true, nil
		}
	}
	return false, nil
}

// cancelOlder stops the runs in flight here of slots before p, for
// OverlapCancelOther: each is recorded canceled as it ends.
func (r *run) cancelOlder(p tranche.TimePartition) {
	r.stopMu.Lock()
	defer r.stopMu.Unlock()
	for q, stop := range r.stops {
		if q.Start.Before(p.Start) {
			stop(&superseded{by: p})
		}
	}
}

// Why a slot that did not run is recorded canceled.
const (
	whyMissed        = "missed: it came due while no scheduler ran, before the catch-up window; a backfill runs it"
	whyMissedPaused  = "missed: it came due while the schedule was paused, before the catch-up window; a backfill runs it"
	whySkipped       = "skipped: it came due while an earlier slot ran, under the overlap policy skip"
	whySkippedAtOnce = "skipped: a later slot came due with it, under the overlap policy cancel-other; a backfill runs it"
)

// recordMissed records adjacent slots with no attempt missed and reports
// each: claimed in one call, or, when another worker took some of them
// meanwhile, one by one.
func (r *run) recordMissed(ctx context.Context, ps []tranche.TimePartition) error {
	if len(ps) == 0 {
		return nil
	}
	paused := r.pausedAt(ps[0])
	if i := slices.IndexFunc(ps, func(p tranche.TimePartition) bool { return r.pausedAt(p) != paused }); i > 0 {
		// Recorded apart, each saying why.
		if err := r.recordMissed(ctx, ps[:i]); err != nil {
			return err
		}
		return r.recordMissed(ctx, ps[i:])
	}
	why := whyMissed
	if paused {
		why = whyMissedPaused
	}
	recorded, retry, err := r.record(ctx, ps, why, ledger.TriggerCatchUp)
	switch {
	case err != nil:
		return err
	case !retry.IsZero():
		// The last slot, at least, has not closed by the ledger's clock:
		// this scheduler's runs ahead of it by more than the catch-up
		// window. A slot not closed by the ledger's clock is not missed,
		// it is the next to come due: those are not recorded, and wait
		// for their close as due slots do, to run then (under
		// OverlapSkip, to be decided then). The others are recorded.
		ledgerNow := r.ledgerNow(time.Now())
		i := min(len(ps)-1, slices.IndexFunc(ps, func(p tranche.TimePartition) bool { return r.cfg.due(p).After(ledgerNow) }))
		if i < 0 {
			i = len(ps) - 1
		}
		if err := r.recordMissed(ctx, ps[:i]); err != nil {
			return err
		}
		for j, p := range ps[i:] {
			sl := &slot{p: p, trigger: ledger.TriggerCatchUp, check: true}
			r.postpone(sl, retry, j == 0)
			r.pending = append(r.pending, sl)
		}
		return nil
	case !recorded && len(ps) > 1:
		for _, p := range ps {
			if err := r.recordMissed(ctx, []tranche.TimePartition{p}); err != nil {
				return err
			}
		}
		return nil
	case !recorded:
		return nil // another worker recorded or holds it
	}
	for _, p := range ps {
		r.count(func(st *Status) { st.Missed++ })
		r.emit(KindMissed, &slot{p: p}, func(e *tranche.Event) {
			if paused {
				e.Attrs = append(e.Attrs, slog.Bool("paused", true))
			}
		})
	}
	return nil
}

// record records slots that this scheduler does not run as canceled, with
// why: so that no later start of any scheduler reports them again, a
// backfill's status shows them, and a backfill under its default rerun
// policy (failed) runs them. It reports false when the ledger refused
// the claim: another worker recorded a slot, or holds it. The attempts
// carry trigger, the scheduler's, so that none reads as a run by hand.
//
// The claim carries the close of the last slot plus Delay as NotBefore,
// as a run's does: this scheduler judges that the slots came due by its
// own clock, and a decision not to run a slot is taken no earlier than
// one to run it. When the ledger refuses it as early, record reports
// retry, when (by the system's clock) the ledger's will have reached
// that close; zero otherwise.
func (r *run) record(ctx context.Context, ps []tranche.TimePartition, why string, trigger ledger.Trigger) (recorded bool, retry time.Time, _ error) {
	cfg := r.cfg
	lease, err := r.s.Ledger.Claim(ctx, ledger.ClaimRequest{DAG: cfg.dag, Worker: cfg.worker,
		RunID: backfill.RunID(cfg.dag, ps[0].Start, ps[len(ps)-1].End), Partitions: ps, Lease: cfg.lease, Policy: ledger.RerunNone,
		Trigger: trigger, NotBefore: cfg.due(ps[len(ps)-1]), Record: true})
	answered := time.Now()
	var early *ledger.EarlyError
	switch {
	case errors.As(err, &early):
		r.ahead, r.clockKnown = early.Now.Sub(answered), true
		return false, answered.Add(max(early.Wait(), time.Millisecond)), nil
	case errors.Is(err, ledger.ErrNotClaimable):
		return false, time.Time{}, nil
	case err != nil:
		return false, time.Time{}, fmt.Errorf("tranche: recording slot %s: %w", ps[0].Key(), err)
	}
	if !lease.Claimed.IsZero() {
		r.ahead, r.clockKnown = lease.Claimed.Sub(answered), true
	}
	outcomes := make([]ledger.Outcome, len(ps))
	for i := range outcomes {
		outcomes[i] = ledger.Outcome{State: ledger.StateCanceled, Err: why}
	}
	finishCtx, cancel := leases.FinishContext(ctx)
	defer cancel()
	if err := r.s.Ledger.Finish(finishCtx, lease, outcomes); err != nil {
		// The attempts stay running until the lease expires; then a
		// scheduler takes them over as slots left running.
		return false, time.Time{}, fmt.Errorf("tranche: recording slot %s: %w", ps[0].Key(), err)
	}
	return true, time.Time{}, nil
}

// postpone makes sl, which the ledger refused to record as early, wait
// for its close by the ledger's clock: at retry, or, for a later slot,
// at its own close as the ledger's clock reads (run.ahead). Under
// OverlapSkip, whether it runs is decided then (see run.decide). The
// refused slot's KindEarly is emitted when refused is set.
func (r *run) postpone(sl *slot, retry time.Time, refused bool) {
	sl.notBefore = retry
	if at := r.cfg.due(sl.p).Add(-r.ahead); at.After(retry) {
		sl.notBefore = at
	}
	sl.decide = r.cfg.overlap == OverlapSkip
	if refused {
		wait := max(time.Until(retry), 0)
		r.emit(KindEarly, sl, func(e *tranche.Event) {
			e.Duration = wait
			e.Attrs = append(e.Attrs, slog.Time("ledger_time", r.ledgerNow(time.Now())))
		})
	}
}

// decide takes the OverlapSkip decisions that waited for their slots'
// close by the ledger's clock (slot.decide), oldest first, as advance
// takes them when a slot comes due: a slot is skipped when an earlier
// one runs (here, or under another scheduler's lease) or waits to run,
// or when the next slot has closed too; otherwise it is left pending, to
// be claimed. A slot another worker holds is left to it.
func (r *run) decide(ctx context.Context) error {
	for i := 0; i < len(r.pending); {
		sl := r.pending[i]
		now := time.Now()
		switch {
		case !sl.decide, !sl.heldUntil.IsZero():
			i++
			continue
		case now.Before(sl.notBefore):
			return nil // not closed by the ledger's clock, nor is any later slot
		}
		busy := i+1 < len(r.pending) && r.pending[i+1].decide && !now.Before(r.pending[i+1].notBefore)
		if !busy {
			var err error
			if busy, err = r.busy(ctx, sl.p); err != nil {
				return err
			}
		}
		if !busy {
			sl.decide = false
			i++
			continue
		}
		recorded, retry, err := r.record(ctx, []tranche.TimePartition{sl.p}, whySkipped, sl.trigger)
		switch {
		case err != nil:
			return err
		case !retry.IsZero():
			r.postpone(sl, retry, true)
			return nil
		}
		r.pending = slices.Delete(r.pending, i, i+1)
		if recorded {
			r.count(func(st *Status) { st.Skipped++ })
			r.emit(KindSkipped, sl, nil)
		}
	}
	return nil
}

// busy reports, for OverlapSkip, whether a slot before p runs here or
// under another scheduler's lease, or waits to run here. A backfill's
// run does not count.
func (r *run) busy(ctx context.Context, p tranche.TimePartition) (bool, error) {
	// A stale slot's rerun is no earlier live slot either.
	if r.inflight > 0 || slices.ContainsFunc(r.pending, func(sl *slot) bool { return !sl.byBackfill && !sl.rerun && sl.p.Start.Before(p.Start) }) {
		return true, nil
	}
	prev := p.Prev()
	now := r.ledgerNow(time.Now())
	for a, err := range r.s.Ledger.Latest(ctx, r.cfg.dag, prev.Start, p.Start) {
		if err != nil {
			return false, fmt.Errorf("tranche: reading ledger: %w", err)
		}
		if a.State == ledger.StateRunning && a.Backfill == "" && now.Before(a.LeaseUntil) {
			return true, nil
		}
	}
	return false, nil
}

// add makes slot p pending.
func (r *run) add(p tranche.TimePartition, trigger ledger.Trigger) {
	r.pending = append(r.pending, &slot{p: p, trigger: trigger, check: true})
}

// refresh reads the history of the pending slots that are new, or held
// elsewhere and due a look: a slot recorded since is dropped, one held
// under a live lease waits, the others may be claimed.
func (r *run) refresh(ctx context.Context) error {
	now := time.Now()
	var look []*slot
	for _, sl := range r.pending {
		switch {
		case sl.check:
		case sl.heldUntil.IsZero() || now.Before(sl.heldUntil):
			continue
		case sl.probe:
			// Claimed next, not read: the ledger judges the lease.
			sl.heldUntil, sl.probe = time.Time{}, false
			continue
		}
		look = append(look, sl)
	}
	if len(look) == 0 {
		return nil
	}
	parts := make([]tranche.TimePartition, len(look))
	for i, sl := range look {
		parts[i] = sl.p
	}
	att, err := latest(ctx, r.s.Ledger, r.cfg.dag, r.cfg.match, parts)
	if err != nil {
		return err
	}
	now = time.Now()
	ledgerNow := r.ledgerNow(now)
	gone := map[*slot]bool{}
	for i, sl := range look {
		a := att[i]
		sl.check, sl.probe = false, false
		switch {
		case a != nil && a.State.Terminal():
			gone[sl] = true
			r.count(func(st *Status) { st.Elsewhere++ })
			r.emit(KindElsewhere, sl, func(e *tranche.Event) {
				e.Attempt = a.Number
				e.Attrs = append(e.Attrs, slog.String("state", string(a.State)), slog.String("worker", a.Worker))
			})
		case a != nil && a.State == ledger.StateRunning && ledgerNow.Before(a.LeaseUntil):
			// Until when, by the system's clock, the ledger's says.
			r.hold(sl, a.LeaseUntil.Add(-r.ahead), now, a)
			// Until the ledger has shown its clock, that reading is
			// the system's, which may be behind: once the hold ends,
			// the ledger is asked.
			sl.probe = !r.clockKnown
		case sl.refused:
			// The ledger refused a claim its history allows (a read
			// behind the write): look again later.
			r.hold(sl, now.Add(r.cfg.heartbeat), now, nil)
		default:
			sl.heldUntil, sl.byBackfill = time.Time{}, false
		}
		sl.refused = false
	}
	if len(gone) > 0 {
		r.pending = slices.DeleteFunc(r.pending, func(sl *slot) bool { return gone[sl] })
	}
	return nil
}

// hold marks sl held by another worker until (by the system's clock),
// looked at again at the latest a heartbeat interval from now.
func (r *run) hold(sl *slot, until, now time.Time, a *ledger.Attempt) {
	sl.heldUntil = minTime(until, now.Add(r.cfg.heartbeat))
	sl.byBackfill = a != nil && a.Backfill != ""
	if !sl.announced {
		sl.announced = true
		r.emit(KindHeld, sl, func(e *tranche.Event) {
			if a != nil {
				e.Attempt = a.Number
				e.Attrs = append(e.Attrs, slog.String("worker", a.Worker))
			}
		})
	}
}

// ledgerNow returns the ledger's time at the system's time now, as the
// ledger last showed it (see run.ahead); now itself until it has.
func (r *run) ledgerNow(now time.Time) time.Time { return now.Add(r.ahead) }

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// dispatch claims and starts the pending slots the overlap policy lets
// run: every one that is not held, or, unless slots run concurrently,
// the oldest, once nothing runs here. A slot a backfill holds is passed
// over: its run is not an earlier live run that later slots wait for.
func (r *run) dispatch(ctx context.Context) error {
	// Under OverlapCancelOther a slot does not wait for an earlier one:
	// this scheduler stopped its own, and each replica stops its own.
	concurrent := r.cfg.overlap == OverlapConcurrent || r.cfg.overlap == OverlapCancelOther
	for i := 0; i < len(r.pending); {
		sl := r.pending[i]
		switch {
		case !concurrent && r.inflight > 0:
			return nil
		case !sl.heldUntil.IsZero() && !concurrent && !sl.byBackfill:
			return nil // the earlier slot runs under another scheduler's lease
		case !sl.heldUntil.IsZero():
			i++
			continue
		case sl.decide:
			return nil // run or skipped: decided at its close by the ledger's clock
		case time.Now().Before(sl.notBefore):
			// Not closed by the ledger's clock, nor is any later slot.
			return nil
		}
		if r.s.gate != nil {
			v, err := r.admit(ctx, sl)
			switch {
			case err != nil:
				return err
			case v == gateDrop:
				r.pending = slices.Delete(r.pending, i, i+1)
				continue
			case v == gateWait && !concurrent:
				return nil // the later slots wait behind it
			case v == gateWait:
				i++
				continue
			}
		}
		started, err := r.claim(ctx, sl)
		switch {
		case err != nil:
			return err
		case started:
			r.pending = slices.Delete(r.pending, i, i+1)
		case !concurrent:
			return nil // refused: looked at again at once
		default:
			i++
		}
	}
	return nil
}

// claim claims sl and starts its run, reporting whether it did. A slot
// the ledger refuses is looked at again at once; one it refuses as early
// (not closed by its clock) is claimed again once the ledger says it
// will have closed.
func (r *run) claim(ctx context.Context, sl *slot) (bool, error) {
	cfg := r.cfg
	sent := time.Now()
	trigger := sl.trigger
	if sl.announced {
		// Held by another worker until its lease expired: a takeover.
		trigger = ledger.TriggerCatchUp
	}
	req := ledger.ClaimRequest{DAG: cfg.dag, Worker: cfg.worker,
		RunID: backfill.RunID(cfg.dag, sl.p.Start, sl.p.End), Partitions: []tranche.TimePartition{sl.p},
		Lease: cfg.lease, Policy: ledger.RerunNone, Trigger: trigger, NotBefore: cfg.due(sl.p)}
	if sl.rerun {
		// Stale: run again unless it ran since it was found stale.
		req.Policy, req.Revision = ledger.RerunAll, sl.revision
	}
	lease, err := r.s.Ledger.Claim(ctx, req)
	answered := time.Now()
	var early *ledger.EarlyError
	switch {
	case errors.As(err, &early):
		r.ahead, r.clockKnown = early.Now.Sub(answered), true
		// Waited on the system's timers, which run at the pace of the
		// ledger's clock, as leases are.
		wait := max(early.Wait(), time.Millisecond)
		sl.notBefore = answered.Add(wait)
		r.emit(KindEarly, sl, func(e *tranche.Event) {
			e.Duration = wait
			e.Attrs = append(e.Attrs, slog.Time("ledger_time", early.Now))
		})
		return false, nil
	case errors.Is(err, ledger.ErrLimited):
		// Claimed again soon, which renews the slot's demand: backfills
		// start nothing meanwhile, and the slot takes the first room.
		sl.notBefore = answered.Add(min(cfg.heartbeat/2, maxLimitPoll))
		if !sl.limited {
			sl.limited = true
			r.emit(KindLimited, sl, func(e *tranche.Event) { e.Err = err })
		}
		return false, nil
	case errors.Is(err, ledger.ErrNotClaimable):
		sl.check, sl.refused = true, true
		return false, nil
	case err != nil && ctx.Err() != nil:
		return false, nil
	case err != nil:
		return false, fmt.Errorf("tranche: claiming slot %s: %w", sl.p.Key(), err)
	}
	if !lease.Claimed.IsZero() {
		r.ahead, r.clockKnown = lease.Claimed.Sub(answered), true
	}
	sl.trigger = lease.Trigger
	r.inflight++
	started := cfg.now()
	r.count(func(st *Status) {
		st.Last, st.LastStart, st.LastState, st.LastErr = sl.p, started, ledger.StateRunning, nil
		st.Running = append(st.Running, sl.p)
		slices.SortFunc(st.Running, tranche.TimePartition.Compare)
	})
	// The lag from the slot's close to its claim, by the scheduler's
	// clock: what an operator alerts on (trancheotel's
	// tranche.schedule.lag).
	lag := started.Sub(sl.p.End)
	r.emit(KindClaimed, sl, func(e *tranche.Event) { e.Attempt, e.Duration = lease.Attempts[0], lag })
	r.wg.Add(1)
	go r.execute(sl, lease, sent)
	return true, nil
}

// execute runs a claimed slot and records how it ended.
func (r *run) execute(sl *slot, lease *ledger.Lease, claimed time.Time) {
	defer r.wg.Done()
	cfg := r.cfg
	failed := func(err error, took time.Duration) {
		kind := backfill.KindLeaseRenewFailed
		if err == nil {
			kind = backfill.KindLeaseRenewSlow
		}
		r.emit(kind, sl, func(e *tranche.Event) { e.Err, e.Duration = err, took })
	}
	slotCtx, stop := context.WithCancelCause(r.ctx)
	defer stop(nil)
	r.stopMu.Lock()
	r.stops[sl.p] = stop
	r.stopMu.Unlock()
	defer func() {
		r.stopMu.Lock()
		delete(r.stops, sl.p)
		r.stopMu.Unlock()
	}()
	keeper := leases.NewKeeper(slotCtx, r.s.Ledger, cfg.heartbeat, cfg.lease, nil)
	// The claim was sent at claimed: on the keeper's clock, as long
	// before now.
	kept, runCtx := keeper.Keep(lease, keeper.Now()-time.Since(claimed), failed)
	opts := &kept.Opts
	opts.RunID, opts.Attempt, opts.DAG = lease.RunID, lease.Attempts[0], cfg.dag
	var res *tranche.Result
	var runErr error
	var took time.Duration
	waitErr := r.place(runCtx, sl)
	if waitErr == nil {
		began := time.Now()
		res, runErr = r.runner(sl).RunWith(runCtx, r.s.DAG, sl.p, opts)
		took = time.Since(began)
		if r.s.Budget != nil {
			// Given back before the outcome is recorded, so that the
			// backfill's next partition does not wait on the ledger.
			r.s.Budget.Release()
		}
	}
	var failure, lost error
	if waitErr == nil {
		var byLedger bool
		failure, byLedger = kept.Verdict(res, runErr, lease.RunID)
		if byLedger || errors.Is(failure, ledger.ErrFenced) {
			// Lost, or lapsed by this scheduler's clock: left to its
			// lease, a slot left running that a scheduler takes over
			// and runs again.
			lost = failure
		}
	}
	kept.Release()
	keeper.Close()
	succeeded := waitErr == nil && failure == nil
	var stopped *superseded
	if !succeeded && r.ctx.Err() == nil && lost == nil {
		errors.As(context.Cause(slotCtx), &stopped)
	}

	var kind tranche.Kind
	var why error
	rows := 0
	switch {
	case lost != nil:
		kind, why = KindInterrupted, lost
	case waitErr != nil:
		// Stopped before its run began: the claim is withdrawn, so that
		// the slot is claimable at once rather than after the lease.
		kind, why = KindInterrupted, fmt.Errorf("canceled while waiting for a place in the budget: %w", context.Cause(r.ctx))
		finishCtx, cancel := leases.FinishContext(r.ctx)
		if err := r.s.Ledger.Release(finishCtx, lease); err != nil {
			why = fmt.Errorf("%w; the attempt is left to its lease (releasing it: %v)", why, err)
		}
		cancel()
	case r.ctx.Err() != nil && !succeeded:
		kind, why = KindInterrupted, fmt.Errorf("canceled: %w", context.Cause(r.ctx))
	case stopped != nil:
		kind, why = KindCanceled, stopped
		finishCtx, cancel := leases.FinishContext(r.ctx)
		err := r.s.Ledger.Finish(finishCtx, lease, []ledger.Outcome{{State: ledger.StateCanceled, Err: why.Error(), Ran: took}})
		cancel()
		if err != nil {
			kind, why = KindInterrupted, fmt.Errorf("tranche: recording slot %s: %w; the attempt is left to its lease", sl.p.Key(), err)
		}
	default:
		// Ran makes the attempt's Started the run's start, after any wait
		// for a place in the budget.
		outcome := ledger.Outcome{State: ledger.StateSucceeded, Ran: took}
		kind = KindSucceeded
		if succeeded {
			for _, o := range res.Assets {
				rows += o.RowsByPartition[sl.p.Key()]
			}
			outcome.Rows = int64(rows)
		} else {
			why = failure
			kind, outcome = KindFailed, ledger.Outcome{State: ledger.StateFailed, Err: why.Error(), Ran: took}
		}
		finishCtx, cancel := leases.FinishContext(r.ctx)
		err := r.s.Ledger.Finish(finishCtx, lease, []ledger.Outcome{outcome})
		cancel()
		if err != nil {
			kind, why = KindInterrupted, fmt.Errorf("tranche: recording slot %s: %w; the attempt is left to its lease", sl.p.Key(), err)
		}
	}
	r.count(func(st *Status) {
		state := ledger.StateCanceled
		switch kind {
		case KindSucceeded:
			st.Succeeded++
			state = ledger.StateSucceeded
		case KindFailed:
			st.Failed++
			state = ledger.StateFailed
		case KindCanceled:
			st.Canceled++
		default:
			st.Interrupted++
		}
		if st.Last.Equal(sl.p) {
			st.LastState, st.LastErr = state, why
		}
		st.Running = slices.DeleteFunc(st.Running, sl.p.Equal)
	})
	r.emit(kind, sl, func(e *tranche.Event) {
		e.Err, e.Duration, e.Attempt, e.Rows = why, took, lease.Attempts[0], rows
	})
	r.done <- struct{}{}
}

// place waits for a place in the Budget, when there is one, ahead of
// every backfill partition waiting, and marks the slot's run started.
func (r *run) place(ctx context.Context, sl *slot) error {
	if r.s.Budget == nil {
		return nil
	}
	if err := r.s.Budget.AcquireFirst(ctx); err != nil {
		return err
	}
	started := r.cfg.now()
	r.count(func(st *Status) {
		if st.Last.Equal(sl.p) {
			st.LastStart = started
		}
	})
	return nil
}

// runner returns the runner of sl's run: the Scheduler's, whose events
// also reach OnEvent with the slot's trigger.
func (r *run) runner(sl *slot) *tranche.Runner {
	var rr tranche.Runner
	if r.s.Runner != nil {
		rr = *r.s.Runner
	}
	if r.s.OnEvent == nil {
		return &rr
	}
	own := rr.OnEvent
	rr.OnEvent = func(ctx context.Context, e tranche.Event) {
		r.deliver(ctx, e)
		if own != nil {
			own(ctx, e)
		}
	}
	return &rr
}

// count updates the status under its lock.
func (r *run) count(f func(*Status)) {
	r.s.mu.Lock()
	f(&r.s.status)
	r.s.mu.Unlock()
}

// publish copies what the loop owns into the status, and reports a change
// in the number of slots waiting ([KindQueue]).
func (r *run) publish() {
	waiting := make([]tranche.TimePartition, len(r.pending))
	for i, sl := range r.pending {
		waiting[i] = sl.p
	}
	if n := len(waiting); n != r.queued {
		r.queued = n
		r.emit(KindQueue, nil, func(e *tranche.Event) { e.Attrs = append(e.Attrs, slog.Int("queued", n)) })
	}
	r.count(func(st *Status) {
		st.Waiting = waiting
		if r.started {
			st.Next, st.NextDue = r.next, r.cfg.due(r.next)
		}
	})
}

// emit delivers an event of slot sl (nil for none) to OnEvent.
func (r *run) emit(kind tranche.Kind, sl *slot, more func(*tranche.Event)) {
	if r.s.OnEvent == nil {
		return
	}
	e := tranche.Event{Kind: kind, Time: time.Now(), DAG: r.s.DAG.Name}
	e.Level, _ = kindLevel(kind)
	if sl != nil {
		e.Partition, e.Target = sl.p, sl.p.Key()
		e.RunID = backfill.RunID(r.cfg.dag, sl.p.Start, sl.p.End)
		e.Trigger = string(sl.trigger)
	}
	if more != nil {
		more(&e)
	}
	r.deliver(r.ctx, e)
}

// deliver calls the hook, one event at a time, recovering a panic so that
// a broken hook cannot stop the scheduler; Status.HookErr keeps it.
func (r *run) deliver(ctx context.Context, e tranche.Event) {
	err := hookcall.Call[tranche.PanicError](&r.hookMu, context.WithoutCancel(ctx), r.s.OnEvent, e, func() string {
		return "scheduler event hook on " + string(e.Kind)
	})
	if err != nil {
		r.count(func(st *Status) { st.HookErr = err })
	}
}
