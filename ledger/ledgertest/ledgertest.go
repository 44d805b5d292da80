// Package ledgertest checks that a [ledger.Ledger] implementation keeps
// the ledger contract, as testing/fstest checks an fs.FS and
// testing/slogtest a slog.Handler: [Run] runs the suite as subtests of a
// test, and [TestLedger] runs it anywhere and returns what failed. Both
// drive the ledger's clock through a [Clock] instead of sleeping.
package ledgertest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/tranche-dev/tranche/internal/checkrec"
	"github.com/tranche-dev/tranche/ledger"
)

// Clock is a manual clock for [Run] and [TestLedger]: it stands still until
// [Clock.Advance] moves it. It is safe for concurrent use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a clock that reads now until it is advanced.
func NewClock(now time.Time) *Clock { return &Clock{now: now} }

// Now returns the clock's time. Pass the method value, clock.Now, where a
// ledger takes a func() time.Time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d. It panics if d is negative: a
// ledger's clock never goes back.
func (c *Clock) Advance(d time.Duration) {
	if d < 0 {
		panic(fmt.Sprintf("ledgertest: Clock.Advance(%v): the clock never goes back", d))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Run checks that a [ledger.Ledger] implementation follows the
// ledger contract, in subtests that each get a fresh ledger from
// newLedger. Use it in a test of the implementation:
//
//	func TestMyLedger(t *testing.T) {
//		ledgertest.Run(t, func(t *testing.T, clock *ledgertest.Clock) ledger.Ledger {
//			return mine.Open(t.TempDir(), mine.WithClock(clock.Now))
//		})
//	}
//
// The ledger must judge leases and stamp attempts by clock, which the suite
// advances to expire leases instead of sleeping. A ledger that reads the
// database's clock in production must accept an injected clock for the
// suite. The clock and every time the suite passes are whole seconds, so a
// ledger that stores instants to the second passes; the ledger may return
// them in any location.
//
// The suite checks:
//   - a claim of a fresh partition or chunk starts attempt 1, running,
//     under a lease of the requested length by the ledger's clock;
//   - a partition held under a live lease refuses a claim with an error
//     matching [ledger.ErrNotClaimable] that names the holder; at its
//     Until the lease has expired and the next claim takes the partition
//     over: a new attempt number, the stale attempt recorded failed with a
//     reason naming the new worker;
//   - a lease records when the ledger granted it (Lease.Claimed, by the
//     ledger's clock), and its fencing tokens (Lease.Tokens) hold its
//     attempt numbers and order the claims of a partition: a takeover's,
//     a rerun's and a changed DAG identity's claim outrank the claims
//     before them;
//   - Heartbeat and Finish of a lease whose attempt was taken over, already
//     finished, or never existed fail with [tranche.ErrFenced] and record
//     nothing; Finish after the worker's own lease expired but before a
//     takeover succeeds;
//   - the rerun policies none, failed ("" too) and all, and the Revision
//     bound of all: one plan reruns a partition once;
//   - chunk claims are all or nothing;
//   - Latest yields the latest attempt of each partition in [from, to),
//     oldest first, across 1,000 partitions, stops when the loop does, and
//     lets the loop body call the ledger;
//   - equal instants in different locations are one partition, and DAGs
//     do not share partitions, but ordinary runs and backfills of one DAG
//     share history;
//   - Revision strictly increases on every claim and Finish (the RerunAll
//     bound compares revisions), and stays put on reads, heartbeats,
//     refused requests and other DAGs' changes;
//   - concurrent claimers of the same partitions and chunks: each
//     partition is claimed once;
//   - a finish racing a takeover of its expired lease: one of them wins,
//     never both;
//   - backfill records: PutBackfill is idempotent, even when workers
//     starting one backfill at once put it together, Backfill of an unknown
//     id fails with [ledger.ErrUnknownBackfill], Backfills lists oldest
//     first, every field of a record is kept (chosen partitions, when it
//     was canceled and resumed), CancelBackfill marks a backfill canceled
//     at the ledger's time and refuses its further claims, while its
//     running leases may still finish, with StopRunning set from its
//     first call with StopRunning until ResumeBackfill, which lets
//     claims go on, recording when;
//   - a schedule's pause: SchedulePause of a DAG never paused is the
//     zero value; SetSchedulePause pauses it at the ledger's time, by
//     whom and why, for that DAG alone, and resumes it, recording when
//     and keeping when it was paused; pausing a paused schedule or
//     resuming a running one changes nothing;
//   - a ledger that is a [ledger.Limiter] keeps a DAG's limit, by whom,
//     why and since when (a negative one refused), and counts its runs
//     (a chunk as one, an expired lease as none): at the limit a
//     backfill's claim, a run by hand and a live slot are refused with
//     an error matching ErrLimited and ErrNotClaimable, writing nothing,
//     while a claim that only records passes; a refused slot's demand
//     holds back backfill claims and ClaimNext (one grant refused, the
//     cursor unmoved) until the slot is claimed or its demand lapses;
//     ClaimNext claims only what the limit leaves; of 12 concurrent
//     claimers under a limit of 3, 3 are granted;
//   - a ledger that is a [ledger.LatestReader] answers as Latest and
//     History do, over random histories: CountLatest's groups,
//     FindLatest's attempts in both orders, ChangedIn's partitions;
//   - RevisionIn gives the highest revision of the changes in a range of
//     partitions after a revision, ignoring the other partitions and
//     DAGs; RecentSuccesses gives a DAG's latest successes, the last to
//     finish first;
//   - a claim whose NotBefore is after the ledger's clock is refused,
//     writing nothing, with a [*ledger.EarlyError] that matches
//     ErrNotClaimable and carries that clock, whatever the partitions'
//     history (a DAG never seen, a fresh partition, a failed attempt, a
//     chunk); at NotBefore and after it the claim is granted, its
//     attempts starting then; a canceled backfill's claim is refused as
//     canceled, early or not;
//   - malformed requests (no DAG or worker, no partitions, a zero or empty
//     partition, one partition twice, a lease that is not positive, an
//     unknown policy, Finish with the wrong number of outcomes or a state
//     that is not terminal) are refused without writing anything, with
//     errors matching neither ErrNotClaimable nor ErrFenced;
//   - a canceled context fails every method with an error matching
//     context.Canceled, and writes nothing;
//   - ClaimNext grants, in order, the first Want claimable jobs, each
//     under a lease of its own, judging each job as Claim judges its
//     partitions (rerun policies, RerunAll's bound, takeovers, chunks
//     all or none), and passes over, unclaimed, the jobs at or before
//     the cursor of its DAG, backfill and order when the cursor moved
//     after the request's plan revision, but not when it moved before;
//     it refuses malformed requests (no backfill, Want below 1, no jobs,
//     jobs out of order, a partition twice) and fails for a canceled
//     backfill with an error matching both ErrBackfillCanceled and
//     ErrNotClaimable, claiming nothing;
//   - a deploy: a backfill's claim (Claim and ClaimNext) of a partition
//     that another identity of its DAG name (a backfill recorded under
//     the same BackfillRecord.DAGName) succeeded at, or holds under a
//     live lease, since the backfill was created is refused, a landed one
//     with an error matching [ledger.ErrSuperseded], writing nothing; what
//     the other version did before the backfill's creation, a partition
//     of other bounds, a backfill of no name or of another name, and
//     RerunAll are not bound;
//   - Release withdraws a lease's attempts so that History, Latest,
//     RevisionIn and ChangedIn read as before the claim and the next
//     claim takes the same numbers, while Revision still moves forward;
//     it fails with ErrFenced, withdrawing nothing, for a lease taken
//     over, finished, released or not the worker's, all or none.
func Run(t *testing.T, newLedger func(t *testing.T, clock *Clock) ledger.Ledger) {
	t.Helper()
	for _, test := range ledgerTests {
		t.Run(test.name, func(t *testing.T) {
			clock := NewClock(suiteNow)
			l := newLedger(t, clock)
			if l == nil {
				t.Fatal("newLedger returned nil")
			}
			test.run(&ledgerSuite{t: testT{t}, ctx: t.Context(), clock: clock, l: l})
		})
	}
}

// TestLedger runs the checks of [Run] outside a test, each on a fresh
// ledger from newLedger, and returns every failure, each prefixed by the
// name of its check, joined; nil when the ledger keeps the contract. A
// ledger that is an [io.Closer] is closed after its check. ctx bounds
// every call the checks make.
func TestLedger(ctx context.Context, newLedger func(clock *Clock) (ledger.Ledger, error)) error {
	var errs []error
	for _, test := range ledgerTests {
		rec := recT{checkrec.New("ledgertest", test.name)}
		checkrec.Isolate(func() {
			clock := NewClock(suiteNow)
			l, err := newLedger(clock)
			if err != nil || l == nil {
				rec.Fatalf("newLedger: %v, %v", l, err)
			}
			if c, ok := l.(io.Closer); ok {
				defer c.Close()
			}
			cctx, cancel := context.WithCancel(ctx)
			defer cancel()
			test.run(&ledgerSuite{t: rec, ctx: cctx, clock: clock, l: l})
		})
		errs = append(errs, rec.Errs()...)
	}
	return errors.Join(errs...)
}

// testingT is what the checks need of a test: *testing.T through testT,
// or recT, which collects failures for TestLedger.
type testingT interface {
	Helper()
	Errorf(format string, args ...any)
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Failed() bool
	run(name string, f func(t testingT))
}

// testT is a *testing.T as a testingT: run is t.Run.
type testT struct{ *testing.T }

func (t testT) run(name string, f func(t testingT)) {
	t.T.Run(name, func(t *testing.T) { f(testT{t}) })
}

// recT is a *checkrec.T as a testingT: run runs a subcheck on a
// goroutine of its own, as t.Run does.
type recT struct{ *checkrec.T }

func (e recT) run(name string, f func(t testingT)) {
	sub := recT{e.Sub(name)}
	checkrec.Isolate(func() { f(sub) })
}
