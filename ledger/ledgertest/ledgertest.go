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
	"slices"
	"strconv"
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

func testClaimFresh(s *ledgerSuite) {
	p := part(0)
	now := s.clock.Now()
	r := req(alpha, p)
	r.RunID = "run-fresh"
	lease := s.claim(r)
	if lease.DAG != suiteDAG || lease.Backfill != suiteBackfill || lease.Worker != alpha || lease.RunID != "run-fresh" {
		s.t.Errorf("lease names dag %q, backfill %q, worker %q, run %q; want %q, %q, %q, %q",
			lease.DAG, lease.Backfill, lease.Worker, lease.RunID, suiteDAG, suiteBackfill, alpha, "run-fresh")
	}
	if len(lease.Partitions) != 1 || !lease.Partitions[0].Start.Equal(p.Start) || !lease.Partitions[0].End.Equal(p.End) {
		s.t.Errorf("lease.Partitions = %v; want [%v]", lease.Partitions, p)
	}
	if len(lease.Attempts) != 1 || lease.Attempts[0] != 1 {
		s.t.Errorf("lease.Attempts = %v; want [1]", lease.Attempts)
	}
	if want := now.Add(suiteLease); !lease.Until.Equal(want) {
		s.t.Errorf("lease.Until = %v; want the ledger clock's now + lease = %v", lease.Until, want)
	}

	a := s.only(s.history(p), "History after a fresh claim")
	s.checkAttempt(a, p, 1, ledger.StateRunning, alpha)
	if a.DAG != suiteDAG || a.Backfill != suiteBackfill || a.RunID != "run-fresh" || a.Key != p.Key() {
		s.t.Errorf("attempt %s; want dag %q, backfill %q, run %q, key %q", formatAttempt(a), suiteDAG, suiteBackfill, "run-fresh", p.Key())
	}
	if !a.Started.Equal(now) || !a.Finished.IsZero() || !a.LeaseUntil.Equal(lease.Until) || a.Duration() != 0 {
		s.t.Errorf("attempt %s; want started %v, not finished, lease until %v, duration 0", formatAttempt(a), now, lease.Until)
	}
	if a.Err != "" || a.Rows != 0 {
		s.t.Errorf("attempt %s; want no error and no rows while running", formatAttempt(a))
	}
	if rev := s.revision(); a.Revision != rev {
		s.t.Errorf("attempt revision %d; want the ledger's revision %d", a.Revision, rev)
	}
	if d := diffAttempts([]ledger.Attempt{a}, s.latest(suiteFrom, suiteTo)); d != "" {
		s.t.Errorf("Latest after a fresh claim:\n%s", d)
	}
	if h := s.history(part(1)); len(h) != 0 {
		s.t.Errorf("History of an unclaimed partition:\n%s", formatAttempts(h))
	}
	if got := s.latestOf("tranchetest-unknown-dag", suiteFrom, suiteTo); len(got) != 0 {
		s.t.Errorf("Latest of an unknown DAG:\n%s", formatAttempts(got))
	}
}

func testClaimChunk(s *ledgerSuite) {
	ps := parts(3, 1, 2) // a chunk need not be sorted
	lease := s.claim(req(alpha, ps...))
	if fmt.Sprint(lease.Attempts) != "[1 1 1]" || len(lease.Partitions) != 3 {
		s.t.Fatalf("chunk %s; want attempts [1 1 1] on 3 partitions", describeLease(lease))
	}
	for i, p := range ps {
		if !lease.Partitions[i].Start.Equal(p.Start) {
			s.t.Errorf("lease.Partitions[%d] = %v; want %v (the request's order)", i, lease.Partitions[i], p)
		}
	}
	got := s.latest(suiteFrom, suiteTo)
	if len(got) != 3 {
		s.t.Fatalf("Latest after a chunk claim:\n%s", formatAttempts(got))
	}
	for i, a := range got {
		s.checkAttempt(a, part(i+1), 1, ledger.StateRunning, alpha)
		if !a.LeaseUntil.Equal(lease.Until) {
			s.t.Errorf("attempt %s; want lease until %v", formatAttempt(a), lease.Until)
		}
	}
}

func testHeldUnderLiveLease(s *ledgerSuite) {
	p := part(0)
	lease := s.claim(req(alpha, p))
	s.refuse(req(beta, p), alpha)
	s.refuse(req(alpha, p), alpha) // holding a partition does not let its holder claim it again
	s.clock.Advance(suiteLease - time.Second)
	s.refuse(req(beta, p), alpha)
	r := req(beta, p)
	r.Policy = ledger.RerunAll
	r.Revision = s.revision()
	s.refuse(r, alpha) // no policy overrides a live lease
	if err := s.l.Heartbeat(s.ctx, lease, suiteLease); err != nil {
		s.t.Fatalf("Heartbeat of the live lease = %v", err)
	}
}

// testTokensOrderClaims checks the fencing tokens of leases: each
// lease records when the ledger granted it (Claimed, by its clock), its
// tokens hold its attempt numbers, and a later claim of a partition has
// a higher token, a takeover's and another DAG identity's (a deploy)
// alike, whatever their attempt numbers.
func testTokensOrderClaims(s *ledgerSuite) {
	p := part(0)
	t0 := s.clock.Now()
	first := s.claim(req(alpha, p))
	if !first.Claimed.Equal(t0) {
		s.t.Errorf("lease %s claimed at %v; want Claimed %v, the ledger's clock", describeLease(first), first.Claimed, t0)
	}
	tok := func(l *ledger.Lease) int64 { return l.Tokens()[0] }
	if ledger.TokenAttempt(tok(first)) != 1 {
		s.t.Errorf("token %d of attempt 1 reads back attempt %d", tok(first), ledger.TokenAttempt(tok(first)))
	}
	s.clock.Advance(suiteLease)
	takeover := s.claim(req(beta, p))
	if tok(takeover) <= tok(first) || ledger.TokenAttempt(tok(takeover)) != 2 {
		s.t.Errorf("takeover's token %d (attempt %d) after token %d; want a higher token, of attempt 2", tok(takeover), ledger.TokenAttempt(tok(takeover)), tok(first))
	}
	// A changed DAG numbers its attempts from 1, yet its claim comes
	// after the takeover, and so does its token.
	s.clock.Advance(time.Second)
	r := req(gamma, p)
	r.DAG = suiteDAG + "-deployed"
	deployed := s.claim(r)
	if deployed.Attempts[0] != 1 || tok(deployed) <= tok(takeover) {
		s.t.Errorf("the changed DAG's claim: attempt %d, token %d after token %d; want attempt 1, a higher token", deployed.Attempts[0], tok(deployed), tok(takeover))
	}
	// A rerun at the same instant as the failure it reruns: the attempt
	// number orders them.
	s.finish(deployed, ledger.StateFailed)
	rerun := s.claim(r)
	if tok(rerun) <= tok(deployed) {
		s.t.Errorf("a rerun at the failure's instant: token %d after %d; want a higher token", tok(rerun), tok(deployed))
	}
}

func testTakeoverAfterExpiry(s *ledgerSuite) {
	p := part(0)
	t0 := s.clock.Now()
	old := s.claim(req(alpha, p))
	rev0 := s.revision()
	s.clock.Advance(suiteLease) // the lease expires at Until
	t1 := s.clock.Now()
	lease := s.claim(req(beta, p))
	if fmt.Sprint(lease.Attempts) != "[2]" || !lease.Until.Equal(t1.Add(suiteLease)) {
		s.t.Errorf("takeover %s until %v; want attempt 2 until %v", describeLease(lease), lease.Until, t1.Add(suiteLease))
	}
	rev1 := s.revision()
	if rev1 <= rev0 {
		s.t.Errorf("Revision %d after a takeover; want more than %d", rev1, rev0)
	}
	h := s.history(p)
	if len(h) != 2 {
		s.t.Fatalf("History after a takeover: %d attempts; want 2:\n%s", len(h), formatAttempts(h))
	}
	stale, cur := h[0], h[1]
	s.checkAttempt(stale, p, 1, ledger.StateFailed, alpha)
	s.checkAttempt(cur, p, 2, ledger.StateRunning, beta)
	if !strings.Contains(stale.Err, beta) {
		s.t.Errorf("stale attempt's error %q; want a reason naming the new worker %q", stale.Err, beta)
	}
	if !stale.Started.Equal(t0) || stale.Finished.IsZero() || stale.Finished.Before(stale.Started) || stale.Finished.After(t1) {
		s.t.Errorf("stale attempt %s; want started %v and finished in [%v, %v]", formatAttempt(stale), t0, t0, t1)
	}
	if stale.Revision <= rev0 || stale.Revision > rev1 {
		s.t.Errorf("stale attempt revision %d; want in (%d, %d]: the takeover changed it", stale.Revision, rev0, rev1)
	}
	if !cur.Started.Equal(t1) || cur.Revision != rev1 || cur.RunID != "run-"+beta {
		s.t.Errorf("new attempt %s; want started %v, revision %d, run %q", formatAttempt(cur), t1, rev1, "run-"+beta)
	}
	if d := diffAttempts([]ledger.Attempt{cur}, s.latest(suiteFrom, suiteTo)); d != "" {
		s.t.Errorf("Latest after a takeover; want the new attempt:\n%s", d)
	}
	s.fenced(old)

	// A third worker takes over the second attempt in turn.
	s.clock.Advance(suiteLease + time.Second)
	third := s.claim(req(gamma, p))
	if fmt.Sprint(third.Attempts) != "[3]" {
		s.t.Errorf("second takeover %s; want attempt 3", describeLease(third))
	}
	h = s.history(p)
	if len(h) != 3 {
		s.t.Fatalf("History after two takeovers:\n%s", formatAttempts(h))
	}
	s.checkAttempt(h[0], p, 1, ledger.StateFailed, alpha)
	s.checkAttempt(h[1], p, 2, ledger.StateFailed, beta)
	s.checkAttempt(h[2], p, 3, ledger.StateRunning, gamma)
	if !strings.Contains(h[1].Err, gamma) {
		s.t.Errorf("second stale attempt's error %q; want it to name %q", h[1].Err, gamma)
	}
	s.fenced(lease)
	s.finish(third, succeeded)
}

func testFencedAfterTakeover(s *ledgerSuite) {
	p := part(0)
	old := s.claim(req(alpha, p))
	s.clock.Advance(2 * suiteLease)
	cur := s.claim(req(beta, p))
	s.fenced(old)
	s.clock.Advance(time.Second)
	s.finish(cur, ledger.Outcome{State: ledger.StateSucceeded, Rows: 7})
	s.fenced(old) // still fenced after the newer attempt finished
	h := s.history(p)
	if len(h) != 2 || h[1].State != ledger.StateSucceeded || h[1].Rows != 7 || h[1].Worker != beta {
		s.t.Errorf("History; want attempt 2 succeeded by %q with 7 rows:\n%s", beta, formatAttempts(h))
	}
}

func testFencedChunk(s *ledgerSuite) {
	old := s.claim(req(alpha, part(0), part(1)))
	s.clock.Advance(suiteLease)
	s.claim(req(beta, part(1)))
	s.fenced(old) // one partition taken over fences the whole lease
	a := s.only(s.history(part(0)), "the chunk's other partition")
	s.checkAttempt(a, part(0), 1, ledger.StateRunning, alpha)
	// The untouched partition is taken over like any other once its lease
	// has expired.
	lease := s.claim(req(gamma, part(0)))
	if fmt.Sprint(lease.Attempts) != "[2]" {
		s.t.Errorf("takeover %s; want attempt 2", describeLease(lease))
	}
}

func testFencedForeignLease(s *ledgerSuite) {
	p := part(0)
	lease := s.claim(req(alpha, p))
	forge := func(change func(*ledger.Lease)) *ledger.Lease {
		l := *lease
		l.Partitions = append([]tranche.TimePartition(nil), lease.Partitions...)
		l.Attempts = append([]int(nil), lease.Attempts...)
		change(&l)
		return &l
	}
	s.fenced(forge(func(l *ledger.Lease) { l.Worker = beta }))                                      // another worker's name
	s.fenced(forge(func(l *ledger.Lease) { l.Attempts[0] = 2 }))                                    // an attempt that does not exist
	s.fenced(forge(func(l *ledger.Lease) { l.Partitions[0] = part(5) }))                            // a partition never claimed
	s.fenced(forge(func(l *ledger.Lease) { l.DAG = "tranchetest-unknown-dag" }))                    // another DAG
	s.fenced(forge(func(l *ledger.Lease) { l.Partitions = parts(0, 5); l.Attempts = []int{1, 1} })) // one of two
	s.finish(lease, succeeded)                                                                      // the real lease still holds
}

func testFinishTwice(s *ledgerSuite) {
	p := part(0)
	lease := s.claim(req(alpha, p))
	s.finish(lease, succeeded)
	s.fenced(lease)
	s.checkAttempt(s.only(s.history(p), "History"), p, 1, ledger.StateSucceeded, alpha)

	q := part(1)
	lease = s.claim(req(alpha, q))
	s.finish(lease, ledger.StateFailed)
	s.fenced(lease) // a failed attempt is over too
	again := s.claim(req(alpha, q))
	s.fenced(lease) // and the retry by the same worker is a newer attempt
	s.finish(again, succeeded)
}

func testFinishAfterOwnLeaseExpired(s *ledgerSuite) {
	p := part(0)
	lease := s.claim(req(alpha, p))
	s.clock.Advance(10 * suiteLease)
	s.finish(lease, ledger.Outcome{State: ledger.StateSucceeded, Rows: 3})
	a := s.only(s.history(p), "History")
	s.checkAttempt(a, p, 1, ledger.StateSucceeded, alpha)
	if !a.Finished.Equal(s.clock.Now()) || a.Duration() != 10*suiteLease || a.Rows != 3 {
		s.t.Errorf("attempt %s; want finished %v after %v with 3 rows", formatAttempt(a), s.clock.Now(), 10*suiteLease)
	}

	// An expired lease not taken over may also heartbeat back to life.
	q := part(1)
	lease = s.claim(req(alpha, q))
	s.clock.Advance(2 * suiteLease)
	if err := s.l.Heartbeat(s.ctx, lease, suiteLease); err != nil {
		s.t.Fatalf("Heartbeat after the lease expired, not taken over = %v; want nil", err)
	}
	if want := s.clock.Now().Add(suiteLease); !lease.Until.Equal(want) {
		s.t.Errorf("lease.Until = %v after Heartbeat; want %v", lease.Until, want)
	}
	s.refuse(req(beta, q), alpha)
}

func testHeartbeat(s *ledgerSuite) {
	p := part(0)
	t0 := s.clock.Now()
	lease := s.claim(req(alpha, p, part(1)))
	rev := s.revision()
	s.clock.Advance(45 * time.Second)
	if err := s.l.Heartbeat(s.ctx, lease, 2*suiteLease); err != nil {
		s.t.Fatalf("Heartbeat = %v", err)
	}
	until := t0.Add(45*time.Second + 2*suiteLease)
	if !lease.Until.Equal(until) {
		s.t.Errorf("lease.Until = %v after Heartbeat; want now + d = %v", lease.Until, until)
	}
	for _, q := range parts(0, 1) {
		if a := s.only(s.history(q), "History"); !a.LeaseUntil.Equal(until) || a.State != ledger.StateRunning {
			s.t.Errorf("attempt %s after Heartbeat; want running, lease until %v", formatAttempt(a), until)
		}
	}
	if r := s.revision(); r != rev {
		s.t.Errorf("Heartbeat changed Revision from %d to %d; a heartbeat is neither a claim nor a state change", rev, r)
	}
	s.clock.Advance(suiteLease) // past the lease's first Until, within the extended one
	s.refuse(req(beta, p), alpha)
	s.clock.Advance(until.Sub(s.clock.Now())) // now at the extended Until
	lease2 := s.claim(req(beta, p))
	if fmt.Sprint(lease2.Attempts) != "[2]" {
		s.t.Errorf("takeover %s; want attempt 2", describeLease(lease2))
	}
}

// testOutcomeRan: an outcome's Ran moves the attempt's start to its
// finish less Ran, never before the claim; no Ran keeps the claim's
// instant. A Finish of several partitions, and of one (a statement of
// its own in the SQL ledgers), are checked.
func testOutcomeRan(s *ledgerSuite) {
	ps := parts(10, 11, 12)
	claimed := s.clock.Now()
	lease := s.claim(req(alpha, ps...))
	s.clock.Advance(time.Minute)
	finished := s.clock.Now()
	s.finish(lease,
		ledger.Outcome{State: ledger.StateSucceeded, Ran: 20 * time.Second}, // claimed ahead of its run
		ledger.Outcome{State: ledger.StateFailed, Err: "boom"},              // no Ran: from its claim
		ledger.Outcome{State: ledger.StateSucceeded, Ran: time.Hour})        // longer than held: from its claim
	want := []time.Time{finished.Add(-20 * time.Second), claimed, claimed}
	for i, p := range ps {
		a := s.only(s.history(p), "History")
		if !a.Started.Equal(want[i]) || !a.Finished.Equal(finished) {
			s.t.Errorf("attempt %s; want started %v, finished %v", formatAttempt(a), want[i], finished)
		}
	}
	one := parts(13)
	lease = s.claim(req(alpha, one...))
	s.clock.Advance(time.Minute)
	s.finish(lease, ledger.Outcome{State: ledger.StateSucceeded, Ran: 5 * time.Second})
	if a := s.only(s.history(one[0]), "History"); a.Duration() != 5*time.Second {
		s.t.Errorf("attempt %s; want a duration of 5s, its Ran", formatAttempt(a))
	}
}

func testOutcomes(s *ledgerSuite) {
	ps := parts(0, 1, 2)
	t0 := s.clock.Now()
	lease := s.claim(req(alpha, ps...))
	rev := s.revision()
	s.clock.Advance(30 * time.Second)
	want := []ledger.Outcome{
		{State: ledger.StateSucceeded, Rows: 42},
		{State: ledger.StateFailed, Err: "boom", Rows: 5},
		{State: ledger.StateCanceled, Err: "context canceled"},
	}
	s.finish(lease, want[0], want[1], want[2])
	rev2 := s.revision()
	if rev2 <= rev {
		s.t.Errorf("Revision %d after Finish; want more than %d", rev2, rev)
	}
	for i, p := range ps {
		a := s.only(s.history(p), "History")
		s.checkAttempt(a, p, 1, want[i].State, alpha)
		if a.Err != want[i].Err || a.Rows != want[i].Rows {
			s.t.Errorf("attempt %s; want err %q, rows %d", formatAttempt(a), want[i].Err, want[i].Rows)
		}
		if !a.Started.Equal(t0) || !a.Finished.Equal(t0.Add(30*time.Second)) || a.Duration() != 30*time.Second {
			s.t.Errorf("attempt %s; want started %v, finished 30s later", formatAttempt(a), t0)
		}
		if a.Revision != rev2 {
			s.t.Errorf("attempt %s; want revision %d, its Finish", formatAttempt(a), rev2)
		}
	}
}

func testRerunPolicies(s *ledgerSuite) {
	states := []ledger.State{ledger.StatePending, ledger.StateSucceeded, ledger.StateFailed, ledger.StateCanceled}
	policies := []struct {
		policy    ledger.RerunPolicy
		claimable map[ledger.State]bool
	}{
		{ledger.RerunNone, map[ledger.State]bool{ledger.StatePending: true}},
		{ledger.RerunFailed, map[ledger.State]bool{ledger.StatePending: true, ledger.StateFailed: true, ledger.StateCanceled: true}},
		{"", map[ledger.State]bool{ledger.StatePending: true, ledger.StateFailed: true, ledger.StateCanceled: true}},
		{ledger.RerunAll, map[ledger.State]bool{ledger.StatePending: true, ledger.StateSucceeded: true, ledger.StateFailed: true, ledger.StateCanceled: true}},
	}
	i := 0
	for _, pol := range policies {
		for _, prior := range states {
			p := part(i)
			i++
			s.t.run(fmt.Sprintf("%s-after-%s", cmpOr(string(pol.policy), "default"), prior), func(t testingT) {
				s := &ledgerSuite{t: t, ctx: s.ctx, clock: s.clock, l: s.l}
				prev := 0
				if prior != ledger.StatePending {
					s.finish(s.claim(req(gamma, p)), prior)
					prev = 1
				}
				r := req(alpha, p)
				r.Policy = pol.policy
				r.Revision = s.revision() // a plan made now
				if !pol.claimable[prior] {
					s.refuse(r, "")
					return
				}
				lease := s.claim(r)
				if fmt.Sprint(lease.Attempts) != fmt.Sprintf("[%d]", prev+1) {
					s.t.Errorf("%s; want attempt %d", describeLease(lease), prev+1)
				}
			})
		}
	}
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func testRerunAllRevisionBound(s *ledgerSuite) {
	p := part(0)
	s.finish(s.claim(req(gamma, p)), succeeded)
	plan := s.revision()

	r := req(alpha, p)
	r.Policy, r.Revision = ledger.RerunAll, plan
	lease := s.claim(r)
	if fmt.Sprint(lease.Attempts) != "[2]" {
		s.t.Errorf("RerunAll %s; want attempt 2", describeLease(lease))
	}
	s.finish(lease, succeeded)

	// Another worker of the same plan: the partition succeeded after the
	// plan was made, so the plan does not run it again.
	r2 := req(beta, p)
	r2.Policy, r2.Revision = ledger.RerunAll, plan
	s.refuse(r2, "")

	// A plan made before the first success does not rerun it either.
	r3 := req(beta, p)
	r3.Policy, r3.Revision = ledger.RerunAll, 0
	s.refuse(r3, "")

	// A new plan does.
	r4 := req(beta, p)
	r4.Policy, r4.Revision = ledger.RerunAll, s.revision()
	if lease := s.claim(r4); fmt.Sprint(lease.Attempts) != "[3]" {
		s.t.Errorf("RerunAll with a new plan %s; want attempt 3", describeLease(lease))
	}

	// A partition running when the plan was made and succeeding right
	// after it is not run again by that plan.
	q := part(1)
	running := s.claim(req(gamma, q))
	plan = s.revision()
	s.finish(running, succeeded)
	r5 := req(alpha, q)
	r5.Policy, r5.Revision = ledger.RerunAll, plan
	s.refuse(r5, "")
}

func testChunkAllOrNothing(s *ledgerSuite) {
	held := s.claim(req(alpha, part(1)))
	s.refuse(req(beta, parts(0, 1, 2)...), alpha) // held by another
	s.finish(s.claim(req(gamma, part(3))), succeeded)
	s.refuse(req(beta, parts(2, 3, 4)...), "") // succeeded under RerunFailed
	r := req(beta, parts(0, 4)...)
	r.Policy = ledger.RerunNone
	s.finish(s.claim(req(gamma, part(4))), ledger.StateFailed)
	s.refuse(r, "") // failed under RerunNone
	for _, i := range []int{0, 2, 4} {
		if i != 4 && len(s.history(part(i))) != 0 {
			s.t.Errorf("partition %d has attempts after refused chunk claims:\n%s", i, formatAttempts(s.history(part(i))))
		}
	}

	lease := s.claim(req(beta, parts(0, 2, 4)...))
	if fmt.Sprint(lease.Attempts) != "[1 1 2]" {
		s.t.Errorf("chunk %s; want attempts [1 1 2]", describeLease(lease))
	}
	s.clock.Advance(suiteLease)
	takeover := s.claim(req(gamma, parts(1, 5)...))
	if fmt.Sprint(takeover.Attempts) != "[2 1]" {
		s.t.Errorf("chunk takeover %s; want attempts [2 1]", describeLease(takeover))
	}
	s.fenced(held)
}

func testLatest(s *ledgerSuite) {
	const n = 1000
	// Claim in a scattered order, so that no ledger can rely on claims
	// arriving oldest first.
	leases := make([]*ledger.Lease, n)
	for k := range n {
		i := k * 7919 % n
		leases[i] = s.claim(req([]string{alpha, beta, gamma}[k%3], part(i)))
	}
	type want struct {
		number int
		state  ledger.State
	}
	wants := make([]want, n)
	for i, lease := range leases {
		switch i % 4 {
		case 0:
			s.finish(lease, ledger.StateSucceeded)
			wants[i] = want{1, ledger.StateSucceeded}
		case 1:
			s.finish(lease, ledger.StateFailed)
			wants[i] = want{1, ledger.StateFailed}
		case 2:
			wants[i] = want{1, ledger.StateRunning}
		case 3:
			s.finish(lease, ledger.StateCanceled)
			wants[i] = want{1, ledger.StateCanceled}
		}
	}
	s.clock.Advance(2 * suiteLease)
	for i := range n {
		if i%4 == 1 || i%8 == 2 { // retry a failed one, take over an expired one
			s.claim(req(gamma, part(i)))
			wants[i] = want{2, ledger.StateRunning}
		}
	}
	// Another DAG's partitions, interleaved, stay out of this DAG's Latest.
	for i := 0; i < n; i += 10 {
		r := req(alpha, part(i), in(part(i+1), suiteIST))
		r.DAG = "tranchetest-other-dag"
		s.claim(r)
	}

	check := func(from, to time.Time, lo, hi int) {
		s.t.Helper()
		got := s.latest(from, to)
		if len(got) != hi-lo {
			s.t.Errorf("Latest(%v, %v): %d attempts; want %d (partitions %d to %d)", from, to, len(got), hi-lo, lo, hi-1)
		}
		for k, a := range got {
			i := lo + k
			if i >= hi {
				break
			}
			if a.DAG != suiteDAG || !a.Start.Equal(part(i).Start) || a.Number != wants[i].number || a.State != wants[i].state {
				s.t.Fatalf("Latest(%v, %v)[%d] = %s; want partition %d (%s) attempt %d %s, oldest first",
					from, to, k, formatAttempt(a), i, part(i).Key(), wants[i].number, wants[i].state)
			}
		}
	}
	check(suiteFrom, suiteTo, 0, n)
	check(part(0).Start, part(n-1).End, 0, n)
	check(part(0).Start, part(n-1).Start, 0, n-1) // to is excluded
	check(part(100).Start.In(suiteEST), part(900).Start.In(suiteIST), 100, 900)
	check(part(10).Start.Add(30*time.Minute), part(20).Start, 11, 20) // by start: 10 begins before from
	check(part(500).Start, part(500).Start, 500, 500)
	check(part(600).Start, part(500).Start, 500, 500) // inverted: nothing
	check(part(n).Start, suiteTo, 0, 0)
	check(suiteFrom, part(0).Start, 0, 0)

	// Stopping the loop early stops the sequence, at and around any batch
	// size a ledger might use.
	for _, stop := range []int{1, 100, 255, 256, 257, 500, 511, 512, 513, 999} {
		seen := 0
		for _, err := range s.l.Latest(s.ctx, suiteDAG, suiteFrom, suiteTo) {
			if err != nil {
				s.t.Fatalf("Latest yielded %v", err)
			}
			seen++
			if seen == stop {
				break
			}
		}
		if seen != stop {
			s.t.Errorf("Latest stopped at %d; want %d", seen, stop)
		}
	}
	if got := s.latestOf("tranchetest-other-dag", suiteFrom, suiteTo); len(got) != n/5 {
		s.t.Errorf("Latest of the other DAG: %d attempts; want %d", len(got), n/5)
	}
}

func testLatestLoopBody(s *ledgerSuite) {
	for i := range 600 {
		s.claim(req(alpha, part(i)))
	}
	done := make(chan struct{})
	var seen int
	go func() {
		defer close(done)
		for a, err := range s.l.Latest(s.ctx, suiteDAG, suiteFrom, suiteTo) {
			if err != nil {
				s.t.Errorf("Latest yielded %v", err)
				return
			}
			// Reads and writes from the loop body must not deadlock.
			if _, err := s.l.History(s.ctx, suiteDAG, a.Start); err != nil {
				s.t.Errorf("History inside the Latest loop = %v", err)
				return
			}
			if seen%100 == 0 {
				if _, err := s.l.Claim(s.ctx, req(beta, part(1000+seen))); err != nil {
					s.t.Errorf("Claim inside the Latest loop = %v", err)
					return
				}
			}
			seen++
			if seen > 10000 {
				s.t.Errorf("Latest yielded more than 10,000 attempts")
				return
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		s.t.Fatal("a ledger call inside the loop over Latest deadlocked: Latest must not hold a lock or connection the loop body needs")
	}
	if seen < 600 {
		s.t.Errorf("Latest yielded %d attempts; want at least 600", seen)
	}
}

func testSameInstantOtherLocation(s *ledgerSuite) {
	p := part(0)
	q := tranche.PartitionOf(tranche.Hour, p.Start.In(suiteEST)) // the same hour, in New York's winter offset
	if !q.Start.Equal(p.Start) || !q.End.Equal(p.End) {
		s.t.Fatalf("test bug: %v and %v are not the same instants", p, q)
	}
	lease := s.claim(req(alpha, p))
	s.refuse(req(beta, q), alpha)
	s.refuse(req(beta, in(p, suiteIST)), alpha)
	hp, hq := s.history(p), s.historyOf(suiteDAG, q)
	if d := diffAttempts(hp, hq); d != "" || len(hp) != 1 {
		s.t.Errorf("History by the same instant in two locations differs:\n%s", d)
	}
	if got := s.latest(p.Start.In(suiteEST), p.End.In(suiteIST)); len(got) != 1 {
		s.t.Errorf("Latest with bounds in other locations:\n%s", formatAttempts(got))
	}
	s.finish(lease, succeeded)
	s.refuse(req(beta, q), "")

	// A chunk naming one partition in two locations is malformed.
	before := s.snapshot(part(1))
	if _, err := s.l.Claim(s.ctx, req(beta, part(1), in(part(1), suiteEST))); err == nil {
		s.t.Errorf("Claim of one partition twice, in two locations, succeeded")
	}
	s.unchanged(before, "a claim of one partition twice")
}

func testDAGsAreSeparate(s *ledgerSuite) {
	p := part(0)
	s.claim(req(alpha, p))
	rev := s.revision()
	r := req(beta, p)
	r.DAG = "tranchetest-other-dag"
	other := s.claim(r)
	if fmt.Sprint(other.Attempts) != "[1]" {
		s.t.Errorf("claim in another DAG %s; want attempt 1", describeLease(other))
	}
	if got := s.revision(); got != rev {
		s.t.Errorf("a claim in another DAG changed this DAG's Revision from %d to %d", rev, got)
	}
	s.finish(other, succeeded)
	if got := s.revision(); got != rev {
		s.t.Errorf("a Finish in another DAG changed this DAG's Revision from %d to %d", rev, got)
	}
	s.checkAttempt(s.only(s.history(p), "History"), p, 1, ledger.StateRunning, alpha)
	a := s.only(s.historyOf("tranchetest-other-dag", p), "History of the other DAG")
	s.checkAttempt(a, p, 1, ledger.StateSucceeded, beta)
	if a.DAG != "tranchetest-other-dag" {
		s.t.Errorf("attempt %s; want dag %q", formatAttempt(a), "tranchetest-other-dag")
	}
}

func testOrdinaryRunsCount(s *ledgerSuite) {
	p, q := part(0), part(1)
	ordinary := func(pt tranche.TimePartition) ledger.ClaimRequest {
		r := req(gamma, pt)
		r.Backfill = ""
		return r
	}
	s.finish(s.claim(ordinary(p)), succeeded)
	s.finish(s.claim(ordinary(q)), ledger.StateFailed)
	if a := s.only(s.history(p), "History"); a.Backfill != "" {
		s.t.Errorf("ordinary run %s; want no backfill", formatAttempt(a))
	}
	s.refuse(req(alpha, p), "") // the daily job's success counts for the backfill
	lease := s.claim(req(alpha, q))
	if fmt.Sprint(lease.Attempts) != "[2]" {
		s.t.Errorf("backfill retry of a failed ordinary run %s; want attempt 2", describeLease(lease))
	}
	h := s.history(q)
	if len(h) != 2 || h[0].Backfill != "" || h[1].Backfill != suiteBackfill {
		s.t.Errorf("History; want the ordinary run then the backfill's attempt:\n%s", formatAttempts(h))
	}
}

// testTriggers checks that every way of starting an attempt records the
// claim's trigger, or TriggerOf's default, on the lease and the attempt,
// as History, Latest and RecentSuccesses read it: a fresh partition, a
// chunk, a takeover, and ClaimNext's fresh and recorded jobs.
func testTriggers(s *ledgerSuite) {
	check := func(what string, lease *ledger.Lease, want ledger.Trigger) {
		s.t.Helper()
		if lease.Trigger != want {
			s.t.Errorf("%s: lease's trigger %q; want %q", what, lease.Trigger, want)
		}
		for _, p := range lease.Partitions {
			h := s.history(p)
			if a := h[len(h)-1]; a.Trigger != want {
				s.t.Errorf("%s: attempt %s of trigger %q; want %q", what, formatAttempt(a), a.Trigger, want)
			}
		}
	}
	with := func(r ledger.ClaimRequest, backfill string, t ledger.Trigger) ledger.ClaimRequest {
		r.Backfill, r.Trigger = backfill, t
		return r
	}
	live := s.claim(with(req(alpha, part(0)), "", ledger.TriggerLive))
	check("a live slot", live, ledger.TriggerLive)
	s.finish(live, succeeded)
	check("a live slot, finished", live, ledger.TriggerLive)
	check("an ordinary run without a trigger", s.claim(with(req(alpha, part(1)), "", "")), ledger.TriggerManual)
	check("a backfill's chunk without a trigger", s.claim(with(req(alpha, part(2), part(3)), suiteBackfill, "")), ledger.TriggerBackfill)
	check("a backfill's claim with one", s.claim(with(req(alpha, part(4)), suiteBackfill, ledger.TriggerManual)), ledger.TriggerManual)

	// The ordinary run of part(1) is taken over after its lease by a
	// catch-up: the new attempt is the catch-up's, the old one stays
	// manual.
	s.clock.Advance(2 * suiteLease)
	takeover := s.claim(with(req(beta, part(1)), "", ledger.TriggerCatchUp))
	check("a takeover", takeover, ledger.TriggerCatchUp)
	if h := s.history(part(1)); len(h) != 2 || h[0].Trigger != ledger.TriggerManual {
		s.t.Errorf("History after a takeover:\n%swant the manual attempt, then the catch-up's", formatAttempts(h))
	}

	// ClaimNext: fresh jobs, and a recorded one (part(0) under RerunAll).
	r := nextReq(gamma, []ledger.Job{job(0), job(5), job(6)}, 3, s.revision())
	r.Policy, r.Trigger = ledger.RerunAll, ""
	for _, g := range s.expect(r, "LLL") {
		check("ClaimNext without a trigger", g.Lease, ledger.TriggerBackfill)
	}
	r = nextReq(gamma, []ledger.Job{job(7)}, 1, s.revision())
	r.Trigger = ledger.TriggerLive
	check("ClaimNext with a trigger", s.expect(r, "L")[0].Lease, ledger.TriggerLive)

	for _, a := range s.latest(suiteFrom, suiteTo) {
		if a.Trigger == "" {
			s.t.Errorf("Latest: attempt %s without a trigger", formatAttempt(a))
		}
	}
	recent, err := s.l.RecentSuccesses(s.ctx, suiteDAG, 10)
	if err != nil || len(recent) != 1 || recent[0].Trigger != ledger.TriggerLive {
		s.t.Errorf("RecentSuccesses = %v, %v; want the live slot's success, of trigger %q", recent, err, ledger.TriggerLive)
	}
}

func testRevision(s *ledgerSuite) {
	var last int64
	step := func(what string, changes bool) {
		s.t.Helper()
		r := s.revision()
		switch {
		case changes && r <= last:
			s.t.Errorf("after %s Revision = %d; want more than %d", what, r, last)
		case !changes && r != last:
			s.t.Errorf("after %s Revision = %d; want %d, unchanged", what, r, last)
		}
		last = r
	}
	last = s.revision()
	step("Revision", false)
	lease := s.claim(req(alpha, part(0)))
	step("a claim", true)
	if a := s.only(s.history(part(0)), "History"); a.Revision != last {
		s.t.Errorf("attempt revision %d; want %d", a.Revision, last)
	}
	s.history(part(0))
	s.latest(suiteFrom, suiteTo)
	if _, err := s.l.Backfills(s.ctx); err != nil {
		s.t.Fatal(err)
	}
	step("reads", false)
	if err := s.l.Heartbeat(s.ctx, lease, suiteLease); err != nil {
		s.t.Fatal(err)
	}
	step("a heartbeat", false)
	if _, err := s.l.Claim(s.ctx, req(beta, part(0))); err == nil {
		s.t.Fatal("claim of a held partition succeeded")
	}
	step("a refused claim", false)
	s.finish(lease, succeeded)
	step("a Finish", true)
	if a := s.only(s.history(part(0)), "History"); a.Revision != last {
		s.t.Errorf("attempt revision %d after Finish; want %d", a.Revision, last)
	}
	s.fenced(lease)
	step("a fenced Finish", false)
	old := s.claim(req(alpha, part(1), part(2)))
	step("a chunk claim", true)
	s.clock.Advance(suiteLease)
	s.claim(req(beta, part(1)))
	step("a takeover", true)
	s.fenced(old)
	step("a fenced chunk", false)
	s.clock.Advance(suiteLease)
	s.finish(s.claim(req(gamma, part(2))), ledger.StateFailed)
	step("a takeover and a failure", true)
	r := req(beta, part(3))
	r.DAG = "tranchetest-other-dag"
	s.finish(s.claim(r), succeeded)
	step("another DAG's claim and Finish", false)
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

func testConcurrentClaimers(s *ledgerSuite) {
	const workers, n = 8, 64
	var mu sync.Mutex
	claims := make([]int, n)
	contend(workers, func(w int) {
		worker := fmt.Sprintf("worker-%d", w)
		for k := range n {
			i := (k + w*n/workers) % n // each starts elsewhere and meets the others
			if w%2 == 1 {
				i = n - 1 - i
			}
			lease, err := s.l.Claim(s.ctx, req(worker, part(i)))
			if errors.Is(err, ledger.ErrNotClaimable) {
				continue
			}
			if err != nil {
				s.t.Errorf("%s: Claim(%s) = %v", worker, part(i).Key(), err)
				return
			}
			mu.Lock()
			claims[i]++
			mu.Unlock()
			if err := s.l.Heartbeat(s.ctx, lease, suiteLease); err != nil {
				s.t.Errorf("%s: Heartbeat = %v", worker, err)
			}
			if err := s.l.Finish(s.ctx, lease, []ledger.Outcome{succeeded}); err != nil {
				s.t.Errorf("%s: Finish = %v", worker, err)
			}
		}
	})
	for i, c := range claims {
		if c != 1 {
			s.t.Errorf("partition %s claimed %d times by concurrent claimers; want once", part(i).Key(), c)
		}
		if h := s.history(part(i)); len(h) != 1 || h[0].State != ledger.StateSucceeded {
			s.t.Errorf("History of %s; want one success:\n%s", part(i).Key(), formatAttempts(h))
		}
	}
}

func testConcurrentChunkClaimers(s *ledgerSuite) {
	const workers, n, chunk = 8, 64, 3
	var mu sync.Mutex
	claims := make([]int, n)
	contend(workers, func(w int) {
		worker := fmt.Sprintf("worker-%d", w)
		for k := range n {
			i := (k*5 + w*7) % (n - chunk + 1) // overlapping chunks, in different orders
			ps := make([]tranche.TimePartition, chunk)
			for j := range ps {
				ps[j] = part(i + j)
			}
			lease, err := s.l.Claim(s.ctx, req(worker, ps...))
			if errors.Is(err, ledger.ErrNotClaimable) {
				continue
			}
			if err != nil {
				s.t.Errorf("%s: %s = %v", worker, describeReq(req(worker, ps...)), err)
				return
			}
			mu.Lock()
			for j := range ps {
				claims[i+j]++
			}
			mu.Unlock()
			if err := s.l.Finish(s.ctx, lease, []ledger.Outcome{succeeded, succeeded, succeeded}); err != nil {
				s.t.Errorf("%s: Finish = %v", worker, err)
			}
		}
	})
	for i, c := range claims {
		h := s.history(part(i))
		switch {
		case c > 1:
			s.t.Errorf("partition %s claimed %d times by concurrent chunk claimers; want at most once", part(i).Key(), c)
		case len(h) != c:
			s.t.Errorf("partition %s claimed %d times; History:\n%s", part(i).Key(), c, formatAttempts(h))
		case c == 0:
			// No chunk could take it: its neighbours went in other chunks.
			// It is still claimable alone.
			s.finish(s.claim(req(alpha, part(i))), succeeded)
		}
	}
}

func testBackfills(s *ledgerSuite) {
	checkBackfills := func(what string, want ...ledger.BackfillRecord) {
		s.t.Helper()
		bs, err := s.l.Backfills(s.ctx)
		if err != nil {
			s.t.Fatalf("Backfills = %v", err)
		}
		if len(bs) != len(want) {
			s.t.Fatalf("%s: Backfills = %+v; want %+v", what, bs, want)
		}
		for i := range want {
			checkBackfill(s.t, fmt.Sprintf("%s: Backfills[%d]", what, i), bs[i], want[i])
		}
	}
	checkBackfills("a new ledger")

	t0 := s.clock.Now()
	b1 := ledger.BackfillRecord{ID: "bf-one", DAG: suiteDAG, Window: "2024-03-01/2024-03-31", Chunk: 1}
	got, err := s.l.PutBackfill(s.ctx, b1)
	if err != nil {
		s.t.Fatalf("PutBackfill = %v", err)
	}
	b1.Created = t0 // a zero Created becomes the ledger's now
	checkBackfill(s.t, "PutBackfill of a new backfill", got, b1)

	s.clock.Advance(time.Minute)
	b2 := ledger.BackfillRecord{ID: "bf-two", DAG: "tranchetest-other-dag", Window: "2024", Chunk: 7, Created: t0.Add(30 * time.Second)}
	if got, err := s.l.PutBackfill(s.ctx, b2); err != nil {
		s.t.Fatalf("PutBackfill = %v", err)
	} else {
		checkBackfill(s.t, "PutBackfill with a Created time", got, b2) // a given Created is kept
	}

	s.clock.Advance(time.Minute)
	again := b1
	again.Window, again.Chunk, again.Created = "2020", 99, time.Time{}
	if got, err := s.l.PutBackfill(s.ctx, again); err != nil {
		s.t.Fatalf("PutBackfill of a known id = %v", err)
	} else {
		checkBackfill(s.t, "PutBackfill of a known id", got, b1) // the stored record, unchanged
	}
	if got, err := s.l.Backfill(s.ctx, b1.ID); err != nil {
		s.t.Fatalf("Backfill(%q) = %v", b1.ID, err)
	} else {
		checkBackfill(s.t, "Backfill", got, b1)
	}
	if _, err := s.l.Backfill(s.ctx, "bf-unknown"); !errors.Is(err, ledger.ErrUnknownBackfill) {
		s.t.Errorf("Backfill of an unknown id = %v; want an error matching ErrUnknownBackfill", err)
	}
	b3 := ledger.BackfillRecord{ID: "bf-three", DAG: suiteDAG, Window: "2025"}
	if _, err := s.l.PutBackfill(s.ctx, b3); err != nil {
		s.t.Fatal(err)
	}
	b3.Created = s.clock.Now()
	checkBackfills("three backfills", b1, b2, b3) // oldest first

	if err := s.l.CancelBackfill(s.ctx, b1.ID, ledger.CancelOptions{}); err != nil {
		s.t.Fatalf("CancelBackfill = %v", err)
	}
	if err := s.l.CancelBackfill(s.ctx, b1.ID, ledger.CancelOptions{}); err != nil {
		s.t.Fatalf("CancelBackfill twice = %v; want nil", err)
	}
	b1.Canceled, b1.CanceledAt = true, s.clock.Now()
	if got, err := s.l.Backfill(s.ctx, b1.ID); err != nil {
		s.t.Fatal(err)
	} else {
		checkBackfill(s.t, "Backfill after CancelBackfill", got, b1)
	}
	if got, err := s.l.PutBackfill(s.ctx, again); err != nil {
		s.t.Fatal(err)
	} else {
		checkBackfill(s.t, "PutBackfill after CancelBackfill", got, b1) // still canceled
	}
	if err := s.l.CancelBackfill(s.ctx, "bf-unknown", ledger.CancelOptions{StopRunning: true}); !errors.Is(err, ledger.ErrUnknownBackfill) {
		s.t.Errorf("CancelBackfill of an unknown id = %v; want an error matching ErrUnknownBackfill", err)
	}
	if _, err := s.l.PutBackfill(s.ctx, ledger.BackfillRecord{DAG: suiteDAG}); err == nil {
		s.t.Errorf("PutBackfill without an id succeeded")
	}
	checkBackfills("after cancel and refusals", b1, b2, b3) // only b1 canceled, nothing added
}

// testFinishRacesTakeover finishes attempts whose lease has just expired
// while another worker takes them over, at once: either the finish lands
// and the claim is refused, or the takeover lands and the finish is
// fenced, never both.
func testFinishRacesTakeover(s *ledgerSuite) {
	const rounds = 48
	for i := range rounds {
		p := part(i)
		lease := s.claim(req(alpha, p))
		s.clock.Advance(suiteLease)
		var finishErr, claimErr error
		contend(2, func(w int) {
			if w == 0 {
				finishErr = s.l.Finish(s.ctx, lease, []ledger.Outcome{succeeded})
			} else {
				_, claimErr = s.l.Claim(s.ctx, req(beta, p))
			}
		})
		h := s.history(p)
		switch {
		case finishErr == nil && errors.Is(claimErr, ledger.ErrNotClaimable):
			if len(h) != 1 || h[0].State != ledger.StateSucceeded {
				s.t.Errorf("%s: the finish won; History:\n%swant one success", p.Key(), formatAttempts(h))
			}
		case claimErr == nil && errors.Is(finishErr, tranche.ErrFenced):
			if len(h) != 2 || h[0].State != ledger.StateFailed || h[1].State != ledger.StateRunning {
				s.t.Errorf("%s: the takeover won; History:\n%swant attempt 1 failed, attempt 2 running", p.Key(), formatAttempts(h))
			}
		default:
			s.t.Errorf("%s: Finish = %v and a takeover's Claim = %v at once; want one to win, the other refused or fenced\n%s",
				p.Key(), finishErr, claimErr, formatAttempts(h))
		}
	}
}

// testConcurrentPutBackfill puts each of several backfills from many
// workers at once, as workers started together do: every put succeeds and
// all see one record, the first stored.
func testConcurrentPutBackfill(s *ledgerSuite) {
	const workers, backfills = 8, 16
	got := make([][]ledger.BackfillRecord, workers)
	contend(workers, func(w int) {
		for i := range backfills {
			b := ledger.BackfillRecord{ID: fmt.Sprintf("bf-%02d", i), DAG: suiteDAG, Window: fmt.Sprint(w), Chunk: w}
			stored, err := s.l.PutBackfill(s.ctx, b)
			if err != nil {
				s.t.Errorf("worker %d: PutBackfill(%s) = %v", w, b.ID, err)
				return
			}
			got[w] = append(got[w], stored)
		}
	})
	if s.t.Failed() {
		return
	}
	bs, err := s.l.Backfills(s.ctx)
	if err != nil {
		s.t.Fatalf("Backfills = %v", err)
	}
	if len(bs) != backfills {
		s.t.Fatalf("Backfills after concurrent puts = %d records; want %d:\n%+v", len(bs), backfills, bs)
	}
	for _, stored := range bs {
		i, _ := strconv.Atoi(strings.TrimPrefix(stored.ID, "bf-"))
		for w := range workers {
			checkBackfill(s.t, fmt.Sprintf("worker %d: PutBackfill(%s)", w, stored.ID), got[w][i], stored)
		}
	}
}

func checkBackfill(t testingT, what string, got, want ledger.BackfillRecord) {
	t.Helper()
	if got.ID != want.ID || got.DAG != want.DAG || got.DAGName != want.DAGName || got.Window != want.Window || got.Chunk != want.Chunk ||
		!got.Created.Equal(want.Created) || got.Canceled != want.Canceled ||
		!got.CanceledAt.Equal(want.CanceledAt) || !got.ResumedAt.Equal(want.ResumedAt) || got.StopRunning != want.StopRunning ||
		!slices.EqualFunc(got.Partitions, want.Partitions, time.Time.Equal) {
		t.Errorf("%s = %+v; want %+v", what, got, want)
	}
}

// testCodeVersions checks that an attempt keeps the code version of its
// claim, through Claim (one partition, and a chunk) and ClaimNext, in
// History, Latest and RecentSuccesses; and that RerunStale claims a
// success of another code version, and refuses one of the same.
func testCodeVersions(s *ledgerSuite) {
	r := req(alpha, part(0))
	r.CodeVersion = "events=v1"
	s.finish(s.claim(r), succeeded)
	chunk := req(alpha, part(1), part(2))
	chunk.RunID, chunk.CodeVersion = "run-chunk", "events=v1"
	s.finish(s.claim(chunk), succeeded, succeeded)
	plain := req(alpha, part(3))
	plain.RunID = "run-plain"
	s.finish(s.claim(plain), succeeded)
	next := ledger.NextRequest{DAG: suiteDAG, Backfill: suiteBackfill, Worker: beta, Want: 1, Lease: suiteLease, Policy: ledger.RerunFailed,
		Jobs: []ledger.Job{{RunID: "run-next", Partitions: parts(4)}}, CodeVersion: "events=v1"}
	grants, err := s.l.ClaimNext(s.ctx, next)
	if err != nil || len(grants) != 1 || grants[0].Lease == nil {
		s.t.Fatalf("ClaimNext = %v, %v; want a lease", grants, err)
	}
	s.finish(grants[0].Lease, succeeded)
	for i, want := range []string{"events=v1", "events=v1", "events=v1", "", "events=v1"} {
		if h := s.history(part(i)); len(h) != 1 || h[0].CodeVersion != want {
			s.t.Errorf("History of %s = %s; want one attempt of code version %q", part(i).Key(), formatAttempts(h), want)
		}
	}
	for _, a := range s.latest(part(0).Start, part(5).Start) {
		if want := map[bool]string{true: "", false: "events=v1"}[a.Key == part(3).Key()]; a.CodeVersion != want {
			s.t.Errorf("Latest: %s has code version %q; want %q", a.Key, a.CodeVersion, want)
		}
	}
	recent, err := s.l.RecentSuccesses(s.ctx, suiteDAG, 10)
	if err != nil || len(recent) != 5 {
		s.t.Fatalf("RecentSuccesses = %d, %v; want 5", len(recent), err)
	}

	stale := req(beta, part(0))
	stale.Policy, stale.CodeVersion, stale.RunID = ledger.RerunStale, "events=v1", "run-stale-same"
	s.refuse(stale, "")
	stale.CodeVersion, stale.RunID = "events=v2", "run-stale-new"
	lease := s.claim(stale)
	s.finish(lease, succeeded)
	if h := s.history(part(0)); len(h) != 2 || h[1].CodeVersion != "events=v2" {
		s.t.Errorf("History after the stale rerun = %s; want a second attempt of events=v2", formatAttempts(h))
	}
	stale.Partitions, stale.RunID = parts(3), "run-stale-plain"
	s.finish(s.claim(stale), succeeded) // "" is another version than events=v2
}

// testDeployVersions checks the rule of deploys
// (ledger.ClaimRequest.JudgeVersion): the old DAG's backfill, created
// before the new DAG (another identity, one name) landed partitions, does
// not claim them, in Claim or ClaimNext, unless under RerunAll; a backfill
// created after them (a rollback started afresh) does, and so do a
// backfill of no name and a partition of other bounds.
func testDeployVersions(s *ledgerSuite) {
	const (
		oldDAG, newDAG = suiteDAG + "-v1", suiteDAG + "-v2"
		name           = "deploy-events"
	)
	put := func(id, dag, name string) {
		s.t.Helper()
		if _, err := s.l.PutBackfill(s.ctx, ledger.BackfillRecord{ID: id, DAG: dag, DAGName: name, Window: "2024-03", Chunk: 1}); err != nil {
			s.t.Fatalf("PutBackfill(%s) = %v", id, err)
		}
	}
	claim := func(dag, backfill, worker string, policy ledger.RerunPolicy, ps ...tranche.TimePartition) ledger.ClaimRequest {
		r := req(worker, ps...)
		r.DAG, r.Backfill, r.Policy, r.RunID = dag, backfill, policy, "run-"+backfill+"-"+ps[0].Key()
		return r
	}
	day := tranche.PartitionOf(tranche.Day, part(48).Start) // starts with part(48), ends later
	// The new DAG lands part(9) before the old DAG's backfill exists.
	put("bf-new", newDAG, name)
	s.finish(s.claim(claim(newDAG, "bf-new", beta, "", part(9))), succeeded)
	s.clock.Advance(time.Second)
	put("bf-old", oldDAG, name)
	put("bf-unnamed", oldDAG, "")
	put("bf-other-name", oldDAG, "other")
	s.clock.Advance(time.Second)
	// The deploy: the new DAG lands 0, 1, 2, 15 and the day, and holds 3.
	for _, p := range []tranche.TimePartition{part(0), part(1), part(2), part(15), day} {
		s.finish(s.claim(claim(newDAG, "bf-new", beta, "", p)), succeeded)
	}
	running := s.claim(claim(newDAG, "bf-new", beta, "", part(3)))
	s.clock.Advance(time.Second)

	// The old DAG's backfill skips what the new DAG landed since it was
	// created, and waits for what it holds.
	for _, ps := range [][]tranche.TimePartition{parts(0), parts(1), parts(4, 5, 2)} {
		r := claim(oldDAG, "bf-old", alpha, ledger.RerunFailed, ps...)
		s.refuse(r, beta)
		if _, err := s.l.Claim(s.ctx, r); !errors.Is(err, ledger.ErrSuperseded) {
			s.t.Errorf("%s = %v; want an error matching ErrSuperseded", describeReq(r), err)
		}
	}
	s.refuse(claim(oldDAG, "bf-old", alpha, ledger.RerunStale, part(3)), beta)
	if _, err := s.l.Claim(s.ctx, claim(oldDAG, "bf-old", alpha, "", part(3))); errors.Is(err, ledger.ErrSuperseded) {
		s.t.Errorf("a claim of a partition the new DAG is running = %v; want it held, not superseded", err)
	}
	next := ledger.NextRequest{DAG: oldDAG, Backfill: "bf-old", Worker: alpha, Want: 3, Lease: suiteLease, Policy: ledger.RerunFailed,
		Jobs: []ledger.Job{{RunID: "next-0", Partitions: parts(0)}, {RunID: "next-1", Partitions: parts(1)}, {RunID: "next-3", Partitions: parts(3)},
			{RunID: "next-4", Partitions: parts(4)}, {RunID: "next-5", Partitions: parts(5, 6)}, {RunID: "next-7", Partitions: parts(7, 8, 9)}}}
	grants := s.expect(next, "RRRLLL")
	for i, want := range []bool{true, true, false} {
		if got := errors.Is(grants[i].Err, ledger.ErrSuperseded); got != want {
			s.t.Errorf("ClaimNext: job %d refused with %v; want ErrSuperseded %v", i, grants[i].Err, want)
		}
	}
	finishAll := func(ls []*ledger.Lease) {
		s.t.Helper()
		for _, l := range ls {
			outcomes := make([]any, len(l.Partitions))
			for i := range outcomes {
				outcomes[i] = succeeded
			}
			s.finish(l, outcomes...)
		}
	}
	finishAll(leases(grants))
	// The next ClaimNext, descending, refuses the new DAG's partitions
	// again and claims what is left.
	desc := ledger.NextRequest{DAG: oldDAG, Backfill: "bf-old", Worker: alpha, Want: 2, Lease: suiteLease, Policy: ledger.RerunFailed, Descending: true,
		Jobs: []ledger.Job{{RunID: "desc-11", Partitions: parts(11)}, {RunID: "desc-2", Partitions: parts(2)}, {RunID: "desc-1", Partitions: parts(1)}, {RunID: "desc-0", Partitions: parts(0)}}}
	finishAll(leases(s.expect(desc, "LRRR")))

	// What the new DAG landed before the backfill was created, a
	// partition of other bounds, and RerunAll are not bound; nor are
	// backfills of no name or another name.
	for _, r := range []ledger.ClaimRequest{
		claim(oldDAG, "bf-old", alpha, ledger.RerunFailed, part(48)),
		claim(oldDAG, "bf-old", alpha, ledger.RerunAll, part(0)),
		claim(oldDAG, "bf-unnamed", gamma, ledger.RerunFailed, part(1)),
		claim(oldDAG, "bf-other-name", gamma, ledger.RerunFailed, part(2)),
	} {
		s.finish(s.claim(r), succeeded)
	}
	// A rollback started afresh (a backfill created after the deploy)
	// replaces what the new DAG landed before it, not after.
	s.clock.Advance(time.Second)
	put("bf-rollback", oldDAG, name)
	s.clock.Advance(time.Second)
	s.finish(running, succeeded) // part(3), after the rollback's creation
	s.finish(s.claim(claim(newDAG, "bf-new", beta, "", part(12))), succeeded)
	s.clock.Advance(time.Second)
	rollback := ledger.NextRequest{DAG: oldDAG, Backfill: "bf-rollback", Worker: gamma, Want: 4, Lease: suiteLease, Policy: ledger.RerunFailed,
		Jobs: []ledger.Job{{RunID: "rb-3", Partitions: parts(3)}, {RunID: "rb-12", Partitions: parts(12)},
			{RunID: "rb-13", Partitions: parts(13)}, {RunID: "rb-15", Partitions: parts(15)}}}
	grants = s.expect(rollback, "RRLL")
	for _, i := range []int{0, 1} {
		if !errors.Is(grants[i].Err, ledger.ErrSuperseded) {
			s.t.Errorf("the rollback's job %d = %v; want ErrSuperseded: the new DAG landed it after the rollback was created", i, grants[i].Err)
		}
	}
}

// testDeployVersionsHeld checks the order of the claim rules where both
// bind: a partition that the backfill's own DAG holds under a live lease
// and that another version of the DAG landed since the backfill was
// created is refused as held by its own DAG's worker, in Claim and
// ClaimNext, as a backfill's plan judges it (its own history first,
// ledger.ClaimRequest.Judge, then ledger.ClaimRequest.JudgeVersion);
// not as superseded.
func testDeployVersionsHeld(s *ledgerSuite) {
	const (
		oldDAG, newDAG = suiteDAG + "-v1", suiteDAG + "-v2"
		name           = "deploy-held"
	)
	put := func(id, dag string) {
		s.t.Helper()
		if _, err := s.l.PutBackfill(s.ctx, ledger.BackfillRecord{ID: id, DAG: dag, DAGName: name, Window: "2024-03", Chunk: 1}); err != nil {
			s.t.Fatalf("PutBackfill(%s) = %v", id, err)
		}
	}
	claim := func(dag, backfill, worker string, ps ...tranche.TimePartition) ledger.ClaimRequest {
		r := req(worker, ps...)
		r.DAG, r.Backfill, r.RunID = dag, backfill, "run-"+dag+"-"+worker+"-"+ps[0].Key()
		return r
	}
	// The old DAG's backfill holds 0 and 2; the deploy's backfill,
	// created after those claims (which therefore do not bind it),
	// lands 0, 1 and 2.
	put("bf-old", oldDAG)
	s.clock.Advance(time.Second)
	s.claim(claim(oldDAG, "bf-old", alpha, part(0)))
	s.claim(claim(oldDAG, "bf-old", alpha, part(2)))
	s.clock.Advance(time.Second)
	put("bf-new", newDAG)
	s.clock.Advance(time.Second)
	for _, p := range parts(0, 1, 2) {
		s.finish(s.claim(claim(newDAG, "bf-new", beta, p)), succeeded)
	}
	s.clock.Advance(time.Second)
	for _, r := range []ledger.ClaimRequest{
		claim(oldDAG, "bf-old", gamma, part(0)),
		claim(oldDAG, "bf-old", gamma, part(2), part(1)), // part(2) first: held, before part(1)'s superseded
	} {
		s.refuse(r, alpha)
		if _, err := s.l.Claim(s.ctx, r); errors.Is(err, ledger.ErrSuperseded) {
			s.t.Errorf("%s = %v; want it held by the backfill's own DAG, judged first, not superseded", describeReq(r), err)
		}
	}
	next := ledger.NextRequest{DAG: oldDAG, Backfill: "bf-old", Worker: gamma, Want: 1, Lease: suiteLease, Policy: ledger.RerunFailed,
		Jobs: []ledger.Job{{RunID: "next-0", Partitions: parts(0)}, {RunID: "next-1", Partitions: parts(1)}, {RunID: "next-3", Partitions: parts(3)}}}
	grants := s.expect(next, "RRL")
	if err := grants[0].Err; errors.Is(err, ledger.ErrSuperseded) || !strings.Contains(err.Error(), alpha) {
		s.t.Errorf("ClaimNext: job 0 refused with %v; want it held by %s, not superseded", err, alpha)
	}
	if err := grants[1].Err; !errors.Is(err, ledger.ErrSuperseded) {
		s.t.Errorf("ClaimNext: job 1 refused with %v; want ErrSuperseded", err)
	}
}

// testBackfillDAGName checks that a backfill keeps its DAG's name, a
// label: PutBackfill of the known id with another name renames it and
// changes nothing else, and with none keeps the name.
func testBackfillDAGName(s *ledgerSuite) {
	b := ledger.BackfillRecord{ID: "bf-named", DAG: suiteDAG, DAGName: "events", Window: "2024-03-01/2024-03-31", Chunk: 1, Created: s.clock.Now()}
	got, err := s.l.PutBackfill(s.ctx, b)
	if err != nil {
		s.t.Fatalf("PutBackfill = %v", err)
	}
	checkBackfill(s.t, "PutBackfill of a named backfill", got, b)
	if err := s.l.CancelBackfill(s.ctx, b.ID, ledger.CancelOptions{}); err != nil {
		s.t.Fatal(err)
	}
	canceled, err := s.l.Backfill(s.ctx, b.ID)
	if err != nil {
		s.t.Fatal(err)
	}
	renamed := b
	renamed.DAGName, renamed.Window = "clicks", "2020" // the window is not the record's to change
	got, err = s.l.PutBackfill(s.ctx, renamed)
	want := canceled
	want.DAGName = "clicks"
	if err != nil {
		s.t.Fatalf("PutBackfill renaming = %v", err)
	}
	checkBackfill(s.t, "PutBackfill renaming the DAG", got, want)
	for _, name := range []string{"", "clicks"} {
		again := b
		again.DAGName = name
		if got, err := s.l.PutBackfill(s.ctx, again); err != nil {
			s.t.Fatal(err)
		} else {
			checkBackfill(s.t, fmt.Sprintf("PutBackfill with name %q", name), got, want)
		}
	}
	if got, err := s.l.Backfill(s.ctx, b.ID); err != nil {
		s.t.Fatal(err)
	} else {
		checkBackfill(s.t, "Backfill after the rename", got, want)
	}
}

func testCanceledBackfill(s *ledgerSuite) {
	if _, err := s.l.PutBackfill(s.ctx, ledger.BackfillRecord{ID: suiteBackfill, DAG: suiteDAG}); err != nil {
		s.t.Fatal(err)
	}
	running := s.claim(req(alpha, part(0)))
	if err := s.l.CancelBackfill(s.ctx, suiteBackfill, ledger.CancelOptions{}); err != nil {
		s.t.Fatal(err)
	}
	s.refuse(req(beta, part(1)), "")
	// Running partitions may finish.
	if err := s.l.Heartbeat(s.ctx, running, suiteLease); err != nil {
		s.t.Errorf("Heartbeat of a canceled backfill's running lease = %v; want nil", err)
	}
	s.finish(running, ledger.StateCanceled)
	s.refuse(req(beta, part(0)), "")
	// Other backfills and ordinary runs go on.
	r := req(beta, part(1))
	r.Backfill = ""
	s.claim(r)
	r = req(beta, part(2))
	r.Backfill = "tranchetest-another-backfill"
	s.claim(r)
}

// testNotBefore checks ClaimRequest.NotBefore, a scheduler's bound: a
// claim made before it by the ledger's clock is refused with an
// *EarlyError carrying that clock, writing nothing, whatever the
// history of its partitions; at it, or after, it is granted.
func testNotBefore(s *ledgerSuite) {
	slot := func(i int) ledger.ClaimRequest { // a scheduler's claim of a slot
		r := req(alpha, part(i))
		r.Backfill, r.Policy, r.Trigger = "", ledger.RerunNone, ledger.TriggerLive
		return r
	}
	early := func(r ledger.ClaimRequest, wait time.Duration, what string) {
		s.t.Helper()
		r.NotBefore = s.clock.Now().Add(wait)
		before := s.snapshot(r.Partitions...)
		lease, err := s.l.Claim(s.ctx, r)
		var e *ledger.EarlyError
		switch {
		case err == nil:
			s.t.Fatalf("%s, %v before its NotBefore, granted %s; want an *ledger.EarlyError", what, wait, describeLease(lease))
		case !errors.Is(err, ledger.ErrNotClaimable) || !errors.As(err, &e):
			s.t.Fatalf("%s, %v before its NotBefore = %v; want an *ledger.EarlyError matching ErrNotClaimable", what, wait, err)
		case !e.NotBefore.Equal(r.NotBefore) || !e.Now.Equal(s.clock.Now()) || e.Wait() != wait:
			s.t.Errorf("%s: %#v waits %v; want NotBefore %v, Now the ledger's clock %v, Wait %v", what, e, e.Wait(), r.NotBefore, s.clock.Now(), wait)
		}
		s.unchanged(before, what+" (refused as early)")
	}
	early(slot(0), time.Minute, "the first claim of a DAG")
	if got := s.latest(suiteFrom, suiteTo); len(got) != 0 {
		s.t.Fatalf("Latest after an early claim:\n%s", formatAttempts(got))
	}
	s.finish(s.claim(slot(1)), succeeded) // a zero NotBefore bounds nothing
	early(slot(0), time.Minute, "a claim of a fresh partition")
	early(slot(0), time.Second, "a claim a second early")
	failed := req(beta, part(2))
	s.finish(s.claim(failed), ledger.StateFailed)
	early(req(alpha, part(2)), time.Hour, "a rerun of a failed partition")
	early(req(alpha, parts(3, 4)...), time.Minute, "a chunk claim")

	r := slot(0)
	r.NotBefore = s.clock.Now().Add(time.Minute)
	s.clock.Advance(time.Minute)
	lease := s.claim(r) // at NotBefore
	if !lease.Claimed.Equal(r.NotBefore) {
		s.t.Errorf("lease claimed at %v; want at its NotBefore, %v", lease.Claimed, r.NotBefore)
	}
	a := s.only(s.history(part(0)), "History after a claim at its NotBefore")
	s.checkAttempt(a, part(0), 1, ledger.StateRunning, alpha)
	if !a.Started.Equal(r.NotBefore) {
		s.t.Errorf("attempt %s; want started at its NotBefore, %v", formatAttempt(a), r.NotBefore)
	}
	r = req(alpha, parts(3, 4)...)
	r.NotBefore = s.clock.Now().Add(-time.Hour)
	s.claim(r) // after NotBefore
	r = req(alpha, part(2))
	r.NotBefore = s.clock.Now().Add(-time.Second)
	if lease := s.claim(r); lease.Attempts[0] != 2 {
		s.t.Errorf("rerun of a failed partition after its NotBefore: %s; want attempt 2", describeLease(lease))
	}

	// A canceled backfill's claim is refused as canceled, early or not.
	if _, err := s.l.PutBackfill(s.ctx, ledger.BackfillRecord{ID: suiteBackfill, DAG: suiteDAG}); err != nil {
		s.t.Fatal(err)
	}
	if err := s.l.CancelBackfill(s.ctx, suiteBackfill, ledger.CancelOptions{}); err != nil {
		s.t.Fatal(err)
	}
	for _, ps := range [][]tranche.TimePartition{parts(6), parts(2), parts(7, 8)} {
		r := req(beta, ps...)
		r.NotBefore = s.clock.Now().Add(time.Minute)
		if _, err := s.l.Claim(s.ctx, r); !errors.Is(err, ledger.ErrBackfillCanceled) {
			s.t.Errorf("%s of a canceled backfill, a minute early = %v; want an error matching ErrBackfillCanceled", describeReq(r), err)
		}
	}
}

func testBadClaims(s *ledgerSuite) {
	s.claim(req(gamma, part(9))) // something to leave alone
	cases := []struct {
		name   string
		change func(*ledger.ClaimRequest)
	}{
		{"no DAG", func(r *ledger.ClaimRequest) { r.DAG = "" }},
		{"no worker", func(r *ledger.ClaimRequest) { r.Worker = "" }},
		{"nil partitions", func(r *ledger.ClaimRequest) { r.Partitions = nil }},
		{"empty partitions", func(r *ledger.ClaimRequest) { r.Partitions = []tranche.TimePartition{} }},
		{"zero partition", func(r *ledger.ClaimRequest) { r.Partitions = []tranche.TimePartition{{}} }},
		{"zero partition in a chunk", func(r *ledger.ClaimRequest) { r.Partitions = append(parts(0, 1), tranche.TimePartition{}) }},
		{"empty partition", func(r *ledger.ClaimRequest) {
			r.Partitions = []tranche.TimePartition{{Start: part(0).Start, End: part(0).Start, Granularity: tranche.Hour}}
		}},
		{"inverted partition", func(r *ledger.ClaimRequest) {
			r.Partitions = []tranche.TimePartition{{Start: part(0).End, End: part(0).Start, Granularity: tranche.Hour}}
		}},
		{"one partition twice", func(r *ledger.ClaimRequest) { r.Partitions = parts(0, 1, 0) }},
		{"zero lease", func(r *ledger.ClaimRequest) { r.Lease = 0 }},
		{"negative lease", func(r *ledger.ClaimRequest) { r.Lease = -time.Minute }},
		{"unknown policy", func(r *ledger.ClaimRequest) { r.Policy = "sometimes" }},
		{"policy in capitals", func(r *ledger.ClaimRequest) { r.Policy = "ALL" }},
	}
	for _, c := range cases {
		s.t.run(strings.ReplaceAll(c.name, " ", "-"), func(t testingT) {
			s := &ledgerSuite{t: t, ctx: s.ctx, clock: s.clock, l: s.l}
			r := req(alpha, parts(0, 1)...)
			c.change(&r)
			var ps []tranche.TimePartition
			for _, p := range r.Partitions {
				if p.Granularity.IsValid() && !p.Start.IsZero() {
					ps = append(ps, p)
				}
			}
			before := s.snapshot(append(ps, part(9))...)
			lease, err := s.l.Claim(s.ctx, r)
			switch {
			case err == nil:
				s.t.Errorf("Claim with %s granted %s; want an error", c.name, describeLease(lease))
			case errors.Is(err, ledger.ErrNotClaimable):
				s.t.Errorf("Claim with %s = %v; want an error not matching ErrNotClaimable (the request is wrong, not the partition)", c.name, err)
			}
			s.unchanged(before, "Claim with "+c.name)
		})
	}
}

func testBadFinish(s *ledgerSuite) {
	ps := parts(0, 1)
	lease := s.claim(req(alpha, ps...))
	ok := ledger.Outcome{State: ledger.StateSucceeded}
	cases := []struct {
		name     string
		outcomes []ledger.Outcome
	}{
		{"no outcomes", nil},
		{"too few outcomes", []ledger.Outcome{ok}},
		{"too many outcomes", []ledger.Outcome{ok, ok, ok}},
		{"state running", []ledger.Outcome{ok, {State: ledger.StateRunning}}},
		{"state pending", []ledger.Outcome{{State: ledger.StatePending}, ok}},
		{"no state", []ledger.Outcome{ok, {}}},
		{"unknown state", []ledger.Outcome{ok, {State: "done"}}},
	}
	for _, c := range cases {
		s.t.run(strings.ReplaceAll(c.name, " ", "-"), func(t testingT) {
			s := &ledgerSuite{t: t, ctx: s.ctx, clock: s.clock, l: s.l}
			before := s.snapshot(ps...)
			err := s.l.Finish(s.ctx, lease, c.outcomes)
			switch {
			case err == nil:
				s.t.Errorf("Finish with %s succeeded; want an error", c.name)
			case errors.Is(err, tranche.ErrFenced):
				s.t.Errorf("Finish with %s = %v; want an error not matching ErrFenced (the lease still holds)", c.name, err)
			}
			s.unchanged(before, "Finish with "+c.name)
		})
	}
	s.finish(lease, succeeded, ledger.StateFailed) // the lease survived the refusals
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

func testHistoryIsACopy(s *ledgerSuite) {
	p := part(0)
	s.finish(s.claim(req(alpha, p)), succeeded)
	h := s.history(p)
	h[0].State, h[0].Worker, h[0].Number = ledger.StateFailed, "worker-mallory", 9
	s.checkAttempt(s.only(s.history(p), "History"), p, 1, ledger.StateSucceeded, alpha)
	s.refuse(req(beta, p), "")
}

// testResumeBackfill cancels and resumes a backfill: claims are refused
// while it is canceled and granted once it is resumed, and the record
// keeps when it was last canceled and last resumed.
func testResumeBackfill(s *ledgerSuite) {
	if err := s.l.ResumeBackfill(s.ctx, "bf-unknown"); !errors.Is(err, ledger.ErrUnknownBackfill) {
		s.t.Errorf("ResumeBackfill of an unknown id = %v; want an error matching ErrUnknownBackfill", err)
	}
	b := ledger.BackfillRecord{ID: suiteBackfill, DAG: suiteDAG, Window: "2024-03-01/2024-03-31", Chunk: 1, Created: s.clock.Now()}
	if _, err := s.l.PutBackfill(s.ctx, b); err != nil {
		s.t.Fatal(err)
	}
	check := func(what string) {
		s.t.Helper()
		got, err := s.l.Backfill(s.ctx, b.ID)
		if err != nil {
			s.t.Fatalf("%s: Backfill = %v", what, err)
		}
		checkBackfill(s.t, what+": Backfill", got, b)
	}
	resume := func(what string) {
		s.t.Helper()
		if err := s.l.ResumeBackfill(s.ctx, b.ID); err != nil {
			s.t.Fatalf("%s: ResumeBackfill = %v", what, err)
		}
	}
	cancel := func(what string, stopRunning bool) {
		s.t.Helper()
		if err := s.l.CancelBackfill(s.ctx, b.ID, ledger.CancelOptions{StopRunning: stopRunning}); err != nil {
			s.t.Fatalf("%s: CancelBackfill = %v", what, err)
		}
	}

	s.clock.Advance(time.Minute)
	resume("a backfill never canceled")
	check("ResumeBackfill of a backfill never canceled") // changes nothing

	s.clock.Advance(time.Minute)
	cancel("first cancel", false)
	b.Canceled, b.CanceledAt = true, s.clock.Now()
	check("CancelBackfill")
	s.clock.Advance(time.Minute)
	cancel("second cancel", false)
	check("CancelBackfill of a canceled backfill") // keeps the first time
	s.refuse(req(alpha, part(0)), "")
	s.clock.Advance(time.Minute)
	cancel("cancel with stopRunning", true)
	b.StopRunning = true // and keeps the first time
	check("CancelBackfill with stopRunning of a canceled backfill")
	s.clock.Advance(time.Minute)
	cancel("cancel without stopRunning", false)
	check("CancelBackfill without stopRunning of a backfill canceled with") // StopRunning stays

	s.clock.Advance(time.Minute)
	resume("resume")
	b.Canceled, b.StopRunning, b.ResumedAt = false, false, s.clock.Now()
	check("ResumeBackfill") // StopRunning cleared
	s.finish(s.claim(req(alpha, part(0))), succeeded)
	s.clock.Advance(time.Minute)
	resume("second resume")
	check("ResumeBackfill of a resumed backfill") // keeps the first time

	s.clock.Advance(time.Minute)
	cancel("cancel after a resume", true)
	b.Canceled, b.CanceledAt, b.StopRunning = true, s.clock.Now(), true
	check("CancelBackfill with stopRunning after a resume")
	s.refuse(req(beta, part(1)), "")
	s.clock.Advance(time.Minute)
	resume("resume after the second cancel")
	b.Canceled, b.StopRunning, b.ResumedAt = false, false, s.clock.Now()
	check("ResumeBackfill after the second cancel")
	s.finish(s.claim(req(beta, part(1))), succeeded)

	if got, err := s.l.PutBackfill(s.ctx, ledger.BackfillRecord{ID: b.ID, DAG: suiteDAG, Window: "2020"}); err != nil {
		s.t.Fatal(err)
	} else {
		checkBackfill(s.t, "PutBackfill of a resumed backfill", got, b) // the stored record
	}
	if bs, err := s.l.Backfills(s.ctx); err != nil || len(bs) != 1 {
		s.t.Fatalf("Backfills = %+v, %v; want the one backfill", bs, err)
	} else {
		checkBackfill(s.t, "Backfills", bs[0], b)
	}
}

// testBackfillRecordFields puts records with every field set: a backfill
// of chosen partitions, and one canceled and resumed before it was put.
func testBackfillRecordFields(s *ledgerSuite) {
	t0 := s.clock.Now()
	chosen := ledger.BackfillRecord{ID: "bf-chosen", DAG: suiteDAG, Window: "hour 2024-03-01T00:00Z..2024-03-02T00:00Z", Chunk: 1,
		Partitions: []time.Time{part(0).Start, part(3).Start.In(suiteIST), part(4).Start, part(24).Start}}
	got, err := s.l.PutBackfill(s.ctx, chosen)
	if err != nil {
		s.t.Fatalf("PutBackfill of chosen partitions = %v", err)
	}
	chosen.Created = t0
	checkBackfill(s.t, "PutBackfill of chosen partitions", got, chosen)
	got.Partitions[0] = suiteTo // the caller's copy
	if got, err := s.l.Backfill(s.ctx, chosen.ID); err != nil {
		s.t.Fatal(err)
	} else {
		checkBackfill(s.t, "Backfill of chosen partitions", got, chosen)
	}

	marked := ledger.BackfillRecord{ID: "bf-marked", DAG: suiteDAG, Window: "2024", Chunk: 2, Created: t0.Add(-time.Hour),
		Canceled: true, CanceledAt: t0.Add(-30 * time.Minute), ResumedAt: t0.Add(-40 * time.Minute), StopRunning: true}
	if got, err := s.l.PutBackfill(s.ctx, marked); err != nil {
		s.t.Fatal(err)
	} else {
		checkBackfill(s.t, "PutBackfill with CanceledAt, ResumedAt and StopRunning", got, marked)
	}
	bs, err := s.l.Backfills(s.ctx)
	if err != nil || len(bs) != 2 {
		s.t.Fatalf("Backfills = %+v, %v; want two", bs, err)
	}
	checkBackfill(s.t, "Backfills[0]", bs[0], chosen)
	checkBackfill(s.t, "Backfills[1]", bs[1], marked)
}

// testRevisionIn reads the highest revision of the attempts in a range of
// partitions above a revision: the changes there, not elsewhere.
func testRevisionIn(s *ledgerSuite) {
	in := func(from, to time.Time, after int64) int64 {
		s.t.Helper()
		r, err := s.l.RevisionIn(s.ctx, suiteDAG, from, to, after)
		if err != nil {
			s.t.Fatalf("RevisionIn(%s, %s, after %d) = %v", from.Format(time.RFC3339), to.Format(time.RFC3339), after, err)
		}
		return r
	}
	want := func(what string, got, want int64) {
		s.t.Helper()
		if got != want {
			s.t.Errorf("RevisionIn %s = %d; want %d", what, got, want)
		}
	}
	p0, p5 := part(0), part(5)
	want("of an empty ledger", in(suiteFrom, suiteTo, 0), 0)

	lease0 := s.claim(req(alpha, p0))
	r1 := s.revision()
	want("of everything after a claim", in(suiteFrom, suiteTo, 0), r1)
	want("of the claimed partition", in(p0.Start, p0.End, 0), r1)
	want("of the claimed partition, in another location", in(p0.Start.In(suiteIST), p0.End.In(suiteEST), 0), r1)
	want("of the partitions after it", in(p0.End, suiteTo, 0), 0)
	want("up to its start, excluded", in(suiteFrom, p0.Start, 0), 0)
	want("after the claim's revision", in(suiteFrom, suiteTo, r1), 0)

	lease5 := s.claim(req(alpha, p5))
	r2 := s.revision()
	want("of the first partition after a claim of another", in(p0.Start, p0.End, r1), 0)
	want("of everything after a claim of another", in(suiteFrom, suiteTo, r1), r2)
	s.finish(lease0, succeeded)
	r3 := s.revision()
	want("of the first partition after its finish", in(p0.Start, p0.End, r1), r3)
	want("of the first partition from before the other's claim", in(p0.Start, p0.End, r1-1), r3)
	want("of the other partition after the finish of the first", in(p5.Start, p5.End, r2), 0)
	want("of the other partition from before its claim", in(p5.Start, p5.End, r1), r2)
	want("of everything after the finish", in(suiteFrom, suiteTo, r3), 0)

	// Another DAG's changes are its own.
	other := req(beta, p0)
	other.DAG = "tranchetest-other-dag"
	s.claim(other)
	want("after another DAG's claim", in(suiteFrom, suiteTo, r3), 0)
	if r, err := s.l.RevisionIn(s.ctx, "tranchetest-unknown-dag", suiteFrom, suiteTo, 0); err != nil || r != 0 {
		s.t.Errorf("RevisionIn of an unknown DAG = %d, %v; want 0", r, err)
	}

	// A takeover changes both attempts of the partition.
	s.clock.Advance(suiteLease)
	s.claim(req(gamma, p5))
	r4 := s.revision()
	want("of a partition taken over", in(p5.Start, p5.End, r3), r4)
	s.fenced(lease5)
	want("after a fenced heartbeat and finish", in(suiteFrom, suiteTo, r4), 0)
}

// testRecentSuccesses reads the latest successes of a DAG, the last to
// finish first, chunks by partition, latest first.
func testRecentSuccesses(s *ledgerSuite) {
	recent := func(n int) []ledger.Attempt {
		s.t.Helper()
		as, err := s.l.RecentSuccesses(s.ctx, suiteDAG, n)
		if err != nil {
			s.t.Fatalf("RecentSuccesses(%d) = %v", n, err)
		}
		return as
	}
	if as := recent(20); len(as) != 0 {
		s.t.Errorf("RecentSuccesses of an empty ledger:\n%swant none", formatAttempts(as))
	}
	s.finish(s.claim(req(alpha, part(0))), succeeded)
	s.clock.Advance(time.Second)
	s.finish(s.claim(req(alpha, part(1))), ledger.StateFailed)
	s.clock.Advance(time.Second)
	s.finish(s.claim(req(beta, part(2), part(3))), succeeded, succeeded)
	s.clock.Advance(time.Second)
	s.finish(s.claim(req(alpha, part(4))), ledger.StateCanceled)
	s.clock.Advance(time.Second)
	s.finish(s.claim(req(gamma, part(5))), succeeded)
	s.clock.Advance(time.Second)
	again := req(alpha, part(0))
	again.Policy, again.Revision = ledger.RerunAll, s.revision()
	s.finish(s.claim(again), succeeded)
	s.claim(req(beta, part(6))) // running: not a success
	other := req(alpha, part(7))
	other.DAG = "tranchetest-other-dag"
	s.finish(s.claim(other), succeeded)

	attempt := func(p tranche.TimePartition, number int) ledger.Attempt {
		s.t.Helper()
		h := s.history(p)
		if len(h) < number {
			s.t.Fatalf("History of %s:\n%swant attempt %d", p.Key(), formatAttempts(h), number)
		}
		return h[number-1]
	}
	all := []ledger.Attempt{attempt(part(0), 2), attempt(part(5), 1), attempt(part(3), 1), attempt(part(2), 1), attempt(part(0), 1)}
	for _, n := range []int{20, 5, 3, 1} {
		if d := diffAttempts(all[:min(n, len(all))], recent(n)); d != "" {
			s.t.Errorf("RecentSuccesses(%d):\n%s", n, d)
		}
	}
	for _, n := range []int{0, -1} {
		if as := recent(n); len(as) != 0 {
			s.t.Errorf("RecentSuccesses(%d):\n%swant none", n, formatAttempts(as))
		}
	}
	if as, err := s.l.RecentSuccesses(s.ctx, "tranchetest-unknown-dag", 20); err != nil || len(as) != 0 {
		s.t.Errorf("RecentSuccesses of an unknown DAG = %v:\n%swant none", err, formatAttempts(as))
	}
}
