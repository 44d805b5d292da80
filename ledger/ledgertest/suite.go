package ledgertest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/ledger"
)

// ledgerTests are the suite's checks, by name; each method group's are
// in a file of its own (claim.go, next.go, lease.go, finish.go, read.go,
// latest.go, backfills.go, pause.go, limit.go, context.go).
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
	{"LimitGroup", testLimitGroup},
	{"LimitGroupConcurrent", testLimitGroupConcurrent},
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
