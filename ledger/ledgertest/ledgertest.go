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
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
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

var ledgerTests = []struct {
	name string
	run  func(*ledgerSuite)
}{
	{"ClaimFresh", testClaimFresh},
	{"ClaimChunk", testClaimChunk},
	{"HeldUnderLiveLease", testHeldUnderLiveLease},
	{"TakeoverAfterExpiry", testTakeoverAfterExpiry},
	{"TokensOrderClaims", testTokensOrderClaims},
	{"FencedAfterTakeover", testFencedAfterTakeover},
	{"FencedChunk", testFencedChunk},
	{"FencedForeignLease", testFencedForeignLease},
	{"FinishTwice", testFinishTwice},
	{"FinishAfterOwnLeaseExpired", testFinishAfterOwnLeaseExpired},
	{"Heartbeat", testHeartbeat},
	{"Outcomes", testOutcomes},
	{"OutcomeRan", testOutcomeRan},
	{"RerunPolicies", testRerunPolicies},
	{"RerunAllRevisionBound", testRerunAllRevisionBound},
	{"ChunkAllOrNothing", testChunkAllOrNothing},
	{"Latest", testLatest},
	{"LatestLoopBodyMayCallLedger", testLatestLoopBody},
	{"SameInstantOtherLocation", testSameInstantOtherLocation},
	{"DAGsAreSeparate", testDAGsAreSeparate},
	{"OrdinaryRunsCount", testOrdinaryRunsCount},
	{"Triggers", testTriggers},
	{"Revision", testRevision},
	{"ConcurrentClaimers", testConcurrentClaimers},
	{"ConcurrentChunkClaimers", testConcurrentChunkClaimers},
	{"FinishRacesTakeover", testFinishRacesTakeover},
	{"FinishBatch", testFinishBatch},
	{"FinishBatchFenced", testFinishBatchFenced},
	{"FinishBatchCanceled", testFinishBatchCanceled},
	{"FinishBatchRacesTakeover", testFinishBatchRacesTakeover},
	{"Backfills", testBackfills},
	{"ConcurrentPutBackfill", testConcurrentPutBackfill},
	{"CanceledBackfill", testCanceledBackfill},
	{"ResumeBackfill", testResumeBackfill},
	{"SchedulePause", testSchedulePause},
	{"Limit", testLimit},
	{"LimitConcurrent", testLimitConcurrent},
	{"BackfillRecordFields", testBackfillRecordFields},
	{"BackfillDAGName", testBackfillDAGName},
	{"CodeVersions", testCodeVersions},
	{"NotBefore", testNotBefore},
	{"DeployVersions", testDeployVersions},
	{"DeployVersionsHeld", testDeployVersionsHeld},
	{"RevisionIn", testRevisionIn},
	{"RecentSuccesses", testRecentSuccesses},
	{"BadClaims", testBadClaims},
	{"BadFinish", testBadFinish},
	{"CanceledContext", testCanceledContext},
	{"HistoryIsACopy", testHistoryIsACopy},
	{"LatestReader", testLatestReader},
	{"NewestFailures", testNewestFailures},
	{"ClaimNextFresh", testClaimNextFresh},
	{"ClaimNextWantMore", testClaimNextWantMore},
	{"ClaimNextPolicies", testClaimNextPolicies},
	{"ClaimNextTakeover", testClaimNextTakeover},
	{"ClaimNextCursor", testClaimNextCursor},
	{"ClaimNextCursorAfterRefusals", testClaimNextCursorAfterRefusals},
	{"ClaimNextCursors", testClaimNextCursors},
	{"ClaimNextRerunAfterPass", testClaimNextRerunAfterPass},
	{"ClaimNextChunks", testClaimNextChunks},
	{"ClaimNextCanceledBackfill", testClaimNextCanceledBackfill},
	{"ClaimNextConcurrent", testClaimNextConcurrent},
	{"ClaimNextShared", testClaimNextShared},
	{"ClaimNextModel", testClaimNextModel},
	{"BadClaimNext", testBadClaimNext},
	{"NextCanceledContext", testNextCanceledContext},
	{"Release", testRelease},
	{"ReleaseRevision", testReleaseRevision},
	{"ReleaseRevisionIn", testReleaseRevisionIn},
	{"ReleaseFenced", testReleaseFenced},
	{"ReleaseChunk", testReleaseChunk},
	{"ReleaseTakeover", testReleaseTakeover},
}

const (
	suiteDAG      = "tranchetest-dag"
	suiteBackfill = "tranchetest-backfill"
	suiteLease    = time.Minute

	alpha = "worker-alpha"
	beta  = "worker-beta"
	gamma = "worker-gamma"
)

var (
	suiteNow   = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)           // the ledger clock's start
	suiteFirst = time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC)           // the start of part(0)
	suiteFrom  = time.Date(2023, 1, 1, 0, 0, 0, 0, time.UTC)           // before every partition used
	suiteTo    = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)           // after every partition used
	suiteEST   = time.FixedZone("EST", -5*60*60)                       // whole hours off UTC: same hour partitions
	suiteIST   = time.FixedZone("IST", 5*60*60+30*60)                  // a half-hour offset
	succeeded  = ledger.Outcome{State: ledger.StateSucceeded, Rows: 1} // the usual outcome
)

type ledgerSuite struct {
	t     testingT
	ctx   context.Context
	clock *Clock
	l     ledger.Ledger
}

// part returns the hourly partition i hours after suiteFirst, in UTC.
func part(i int) tranche.TimePartition {
	return tranche.PartitionOf(tranche.Hour, suiteFirst.Add(time.Duration(i)*time.Hour))
}

// parts returns part(i) for each i.
func parts(is ...int) []tranche.TimePartition {
	out := make([]tranche.TimePartition, len(is))
	for k, i := range is {
		out[k] = part(i)
	}
	return out
}

// in returns p with its bounds in loc: the same partition to a ledger.
func in(p tranche.TimePartition, loc *time.Location) tranche.TimePartition {
	return tranche.TimePartition{Start: p.Start.In(loc), End: p.End.In(loc), Granularity: p.Granularity}
}

// req returns a claim of ps by worker in the suite's DAG and backfill.
func req(worker string, ps ...tranche.TimePartition) ledger.ClaimRequest {
	return ledger.ClaimRequest{
		DAG: suiteDAG, Backfill: suiteBackfill, Worker: worker, RunID: "run-" + worker,
		Partitions: ps, Lease: suiteLease, Policy: ledger.RerunFailed,
	}
}

func describeReq(r ledger.ClaimRequest) string {
	keys := make([]string, len(r.Partitions))
	for i, p := range r.Partitions {
		keys[i] = p.Key()
	}
	return fmt.Sprintf("Claim(dag %q, backfill %q, worker %q, partitions [%s], lease %v, policy %q, revision %d)",
		r.DAG, r.Backfill, r.Worker, strings.Join(keys, " "), r.Lease, r.Policy, r.Revision)
}

func describeLease(l *ledger.Lease) string {
	keys := make([]string, len(l.Partitions))
	for i, p := range l.Partitions {
		keys[i] = p.Key()
	}
	return fmt.Sprintf("lease of worker %q on [%s] attempts %v", l.Worker, strings.Join(keys, " "), l.Attempts)
}

// claim claims r and fails the test unless the ledger grants it.
func (s *ledgerSuite) claim(r ledger.ClaimRequest) *ledger.Lease {
	s.t.Helper()
	lease, err := s.l.Claim(s.ctx, r)
	if err != nil {
		s.t.Fatalf("%s = %v; want a lease", describeReq(r), err)
	}
	if lease == nil {
		s.t.Fatalf("%s returned a nil lease and no error", describeReq(r))
	}
	return lease
}

// refuse claims r, wants an error matching ErrNotClaimable that names
// holder (unless ""), and checks that nothing was written.
func (s *ledgerSuite) refuse(r ledger.ClaimRequest, holder string) {
	s.t.Helper()
	before := s.snapshot(r.Partitions...)
	lease, err := s.l.Claim(s.ctx, r)
	switch {
	case err == nil:
		s.t.Fatalf("%s granted %s; want an error matching ErrNotClaimable", describeReq(r), describeLease(lease))
	case !errors.Is(err, ledger.ErrNotClaimable):
		s.t.Fatalf("%s = %v; want an error matching ErrNotClaimable", describeReq(r), err)
	case holder != "" && !strings.Contains(err.Error(), holder):
		s.t.Errorf("%s = %v; want the message to name the holder %q", describeReq(r), err, holder)
	}
	s.unchanged(before, describeReq(r)+" (refused)")
}

// finish finishes lease with outcomes, each a State or an Outcome.
func (s *ledgerSuite) finish(lease *ledger.Lease, outcomes ...any) {
	s.t.Helper()
	os := outcomesOf(outcomes...)
	if err := s.l.Finish(s.ctx, lease, os); err != nil {
		s.t.Fatalf("Finish(%s, %v) = %v", describeLease(lease), os, err)
	}
}

func outcomesOf(outcomes ...any) []ledger.Outcome {
	os := make([]ledger.Outcome, len(outcomes))
	for i, o := range outcomes {
		switch o := o.(type) {
		case ledger.State:
			os[i] = ledger.Outcome{State: o}
		case ledger.Outcome:
			os[i] = o
		default:
			panic(fmt.Sprintf("tranchetest: outcome %T", o))
		}
	}
	return os
}

// fenced calls Heartbeat and Finish with lease and wants ErrFenced from
// both, with nothing written.
func (s *ledgerSuite) fenced(lease *ledger.Lease) {
	s.t.Helper()
	before := s.snapshot(lease.Partitions...)
	until := lease.Until
	if err := s.l.Heartbeat(s.ctx, lease, suiteLease); !errors.Is(err, tranche.ErrFenced) {
		s.t.Errorf("Heartbeat(%s) = %v; want an error matching ErrFenced", describeLease(lease), err)
	}
	if !lease.Until.Equal(until) {
		s.t.Errorf("fenced Heartbeat(%s) moved lease.Until from %v to %v", describeLease(lease), until, lease.Until)
		lease.Until = until
	}
	outcomes := make([]ledger.Outcome, len(lease.Partitions))
	for i := range outcomes {
		outcomes[i] = succeeded
	}
	if err := s.l.Finish(s.ctx, lease, outcomes); !errors.Is(err, tranche.ErrFenced) {
		s.t.Errorf("Finish(%s) = %v; want an error matching ErrFenced", describeLease(lease), err)
	}
	s.unchanged(before, "fenced Heartbeat and Finish of "+describeLease(lease))
}

func (s *ledgerSuite) history(p tranche.TimePartition) []ledger.Attempt {
	s.t.Helper()
	return s.historyOf(suiteDAG, p)
}

func (s *ledgerSuite) historyOf(dag string, p tranche.TimePartition) []ledger.Attempt {
	s.t.Helper()
	h, err := s.l.History(s.ctx, dag, p.Start)
	if err != nil {
		s.t.Fatalf("History(%q, %s) = %v", dag, p.Key(), err)
	}
	return h
}

func (s *ledgerSuite) latest(from, to time.Time) []ledger.Attempt {
	s.t.Helper()
	return s.latestOf(suiteDAG, from, to)
}

func (s *ledgerSuite) latestOf(dag string, from, to time.Time) []ledger.Attempt {
	s.t.Helper()
	var out []ledger.Attempt
	for a, err := range s.l.Latest(s.ctx, dag, from, to) {
		if err != nil {
			s.t.Fatalf("Latest(%q, %v, %v) yielded error %v", dag, from, to, err)
		}
		out = append(out, a)
		if len(out) > maxLatest {
			s.t.Fatalf("Latest(%q, %v, %v) yielded more than %d attempts: it repeats itself", dag, from, to, maxLatest)
		}
	}
	return out
}

// maxLatest bounds what the suite collects from Latest: it never records
// as many partitions.
const maxLatest = 100_000

func (s *ledgerSuite) revision() int64 {
	s.t.Helper()
	return s.revisionOf(suiteDAG)
}

func (s *ledgerSuite) revisionOf(dag string) int64 {
	s.t.Helper()
	r, err := s.l.Revision(s.ctx, dag)
	if err != nil {
		s.t.Fatalf("Revision(%q) = %v", dag, err)
	}
	return r
}

// only returns the single attempt of h, failing the test otherwise.
func (s *ledgerSuite) only(h []ledger.Attempt, what string) ledger.Attempt {
	s.t.Helper()
	if len(h) != 1 {
		s.t.Fatalf("%s: %d attempts; want 1:\n%s", what, len(h), formatAttempts(h))
	}
	return h[0]
}

// ledgerState is what a request must leave alone when it is refused.
type ledgerState struct {
	revision  int64
	latest    []ledger.Attempt
	histories [][]ledger.Attempt
	parts     []tranche.TimePartition
}

// snapshot records the suite DAG's revision, latest attempts and the
// histories of ps.
func (s *ledgerSuite) snapshot(ps ...tranche.TimePartition) ledgerState {
	s.t.Helper()
	st := ledgerState{revision: s.revision(), latest: s.latest(suiteFrom, suiteTo), parts: ps}
	for _, p := range ps {
		if p.Granularity.IsValid() && !p.Start.IsZero() {
			st.histories = append(st.histories, s.history(p))
		} else {
			st.histories = append(st.histories, nil)
		}
	}
	return st
}

// unchanged fails the test if the ledger moved since before.
func (s *ledgerSuite) unchanged(before ledgerState, what string) {
	s.t.Helper()
	after := s.snapshot(before.parts...)
	if after.revision != before.revision {
		s.t.Errorf("%s changed Revision from %d to %d; want nothing written", what, before.revision, after.revision)
	}
	if d := diffAttempts(before.latest, after.latest); d != "" {
		s.t.Errorf("%s changed Latest; want nothing written:\n%s", what, d)
	}
	for i := range before.histories {
		if d := diffAttempts(before.histories[i], after.histories[i]); d != "" {
			s.t.Errorf("%s changed the history of %s; want nothing written:\n%s", what, before.parts[i].Key(), d)
		}
	}
}

func sameAttempt(a, b ledger.Attempt) bool {
	return a.DAG == b.DAG && a.Backfill == b.Backfill && a.Start.Equal(b.Start) && a.End.Equal(b.End) &&
		a.Key == b.Key && a.RunID == b.RunID && a.Worker == b.Worker && a.Number == b.Number &&
		a.State == b.State && a.Started.Equal(b.Started) && a.Finished.Equal(b.Finished) &&
		a.LeaseUntil.Equal(b.LeaseUntil) && a.Err == b.Err && a.Rows == b.Rows && a.Revision == b.Revision
}

func formatAttempt(a ledger.Attempt) string {
	return fmt.Sprintf("{%s %s attempt %d: %s by %q (dag %q, backfill %q, run %q), started %s, finished %s, lease until %s, rows %d, err %q, revision %d}",
		a.Key, a.Start.UTC().Format(time.RFC3339), a.Number, a.State, a.Worker, a.DAG, a.Backfill, a.RunID,
		formatTime(a.Started), formatTime(a.Finished), formatTime(a.LeaseUntil), a.Rows, a.Err, a.Revision)
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339Nano)
}

func formatAttempts(as []ledger.Attempt) string {
	var b strings.Builder
	for _, a := range as {
		b.WriteString("\t" + formatAttempt(a) + "\n")
	}
	if len(as) == 0 {
		b.WriteString("\t(none)\n")
	}
	return b.String()
}

// diffAttempts returns "" if want and got hold the same attempts, and
// otherwise a listing of the differences.
func diffAttempts(want, got []ledger.Attempt) string {
	var b strings.Builder
	if len(want) != len(got) {
		fmt.Fprintf(&b, "%d attempts; want %d\n", len(got), len(want))
	}
	for i := range max(len(want), len(got)) {
		switch {
		case i >= len(got):
			fmt.Fprintf(&b, "[%d] -%s\n", i, formatAttempt(want[i]))
		case i >= len(want):
			fmt.Fprintf(&b, "[%d] +%s\n", i, formatAttempt(got[i]))
		case !sameAttempt(want[i], got[i]):
			fmt.Fprintf(&b, "[%d] -%s\n[%d] +%s\n", i, formatAttempt(want[i]), i, formatAttempt(got[i]))
		}
		if b.Len() > 4000 {
			b.WriteString("...\n")
			break
		}
	}
	return b.String()
}

// checkAttempt compares the fields of a that a test cares about.
func (s *ledgerSuite) checkAttempt(a ledger.Attempt, p tranche.TimePartition, number int, state ledger.State, worker string) {
	s.t.Helper()
	if !a.Start.Equal(p.Start) || !a.End.Equal(p.End) || a.Number != number || a.State != state || a.Worker != worker {
		s.t.Errorf("attempt %s; want attempt %d at %s [%v, %v), %s by %q",
			formatAttempt(a), number, p.Key(), p.Start, p.End, state, worker)
	}
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// contend runs work in workers goroutines released at once.
func contend(workers int, work func(w int)) {
	start := make(chan struct{})
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			<-start
			work(w)
		})
	}
	close(start)
	wg.Wait()
}

func testCanceledContext(s *ledgerSuite) {
	ctx, cancel := context.WithCancel(s.ctx)
	cancel()
	if _, err := s.l.PutBackfill(s.ctx, ledger.BackfillRecord{ID: suiteBackfill, DAG: suiteDAG}); err != nil {
		s.t.Fatal(err)
	}
	lease := s.claim(req(alpha, part(0)))
	before := s.snapshot(part(0), part(1))
	wantCanceled := func(what string, err error) {
		s.t.Helper()
		if !errors.Is(err, context.Canceled) {
			s.t.Errorf("%s with a canceled context = %v; want an error matching context.Canceled", what, err)
		}
	}
	_, err := s.l.Claim(ctx, req(beta, part(1)))
	wantCanceled("Claim", err)
	until := lease.Until
	s.clock.Advance(time.Second)
	wantCanceled("Heartbeat", s.l.Heartbeat(ctx, lease, suiteLease))
	if !lease.Until.Equal(until) {
		s.t.Errorf("Heartbeat with a canceled context moved lease.Until")
	}
	wantCanceled("Finish", s.l.Finish(ctx, lease, []ledger.Outcome{succeeded}))
	_, err = s.l.History(ctx, suiteDAG, part(0).Start)
	wantCanceled("History", err)
	_, err = s.l.Revision(ctx, suiteDAG)
	wantCanceled("Revision", err)
	n := 0
	for a, err := range s.l.Latest(ctx, suiteDAG, suiteFrom, suiteTo) {
		n++
		if err == nil {
			s.t.Errorf("Latest with a canceled context yielded %s; want an error first", formatAttempt(a))
		} else {
			wantCanceled("Latest", err)
		}
		break
	}
	if n == 0 {
		s.t.Errorf("Latest with a canceled context yielded nothing; want an error")
	}
	_, err = s.l.PutBackfill(ctx, ledger.BackfillRecord{ID: "bf-canceled", DAG: suiteDAG})
	wantCanceled("PutBackfill", err)
	_, err = s.l.Backfill(ctx, suiteBackfill)
	wantCanceled("Backfill", err)
	_, err = s.l.Backfills(ctx)
	wantCanceled("Backfills", err)
	wantCanceled("CancelBackfill", s.l.CancelBackfill(ctx, suiteBackfill, ledger.CancelOptions{StopRunning: true}))
	wantCanceled("ResumeBackfill", s.l.ResumeBackfill(ctx, suiteBackfill))
	_, err = s.l.RevisionIn(ctx, suiteDAG, suiteFrom, suiteTo, 0)
	wantCanceled("RevisionIn", err)
	_, err = s.l.RecentSuccesses(ctx, suiteDAG, 20)
	wantCanceled("RecentSuccesses", err)

	s.unchanged(before, "calls with a canceled context")
	if _, err := s.l.Backfill(s.ctx, "bf-canceled"); !errors.Is(err, ledger.ErrUnknownBackfill) {
		s.t.Errorf("PutBackfill with a canceled context stored the backfill: Backfill = %v", err)
	}
	if b, err := s.l.Backfill(s.ctx, suiteBackfill); err != nil || b.Canceled {
		s.t.Errorf("CancelBackfill with a canceled context canceled the backfill: %+v, %v", b, err)
	}
	s.finish(lease, succeeded)
}
