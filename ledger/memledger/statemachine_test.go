package memledger_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/ledgertest"
	"github.com/tranche-dev/tranche/ledger/memledger"
)

// TestLedgerStateMachine drives a MemoryLedger through random interleavings
// of several workers sharing one backfill: claims (newest claimable
// partition or chunk first), executions, heartbeats, finishes, cancellations,
// crashes, clock jumps past leases and stale workers finishing late. A model
// predicts every answer of the ledger; invariants are checked after every
// step, and once the faults stop, honest workers must drive every partition
// to exactly one success.
func TestLedgerStateMachine(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := newLedgerMachine(t)
		t.Repeat(map[string]func(*rapid.T){
			"claim":     m.claim,
			"execute":   m.execute,
			"heartbeat": m.heartbeat,
			"finish":    m.finish,
			"cancel":    m.cancel,
			"crash":     m.crash,
			"advance":   m.advance,
			"stale":     m.staleFinish,
			"retry":     m.retryFinish,
			"":          m.check,
		})
		m.drain(t)
	})
}

const (
	smDAG      = "dag-statemachine"
	smBackfill = "backfill-statemachine"
	smLeaseFor = time.Minute
)

// smPartition is the model of one partition's latest attempt.
type smPartition struct {
	number    int          // the latest attempt's number; 0 if none
	state     ledger.State // of the latest attempt
	worker    string       // of the latest attempt
	until     time.Time    // the latest attempt's lease, while running
	succeeded bool         // some Finish recorded a success
	runs      int          // executions: writes to the destination
}

// smLease is a lease a simulated worker holds.
type smLease struct {
	worker   int
	lease    *ledger.Lease
	executed bool
}

// smWrite is the value a run writes to the model destination.
type smWrite struct {
	worker  string
	attempt int
}

type ledgerMachine struct {
	clock    *ledgertest.Clock
	ledger   *memledger.Ledger
	parts    []tranche.TimePartition // newest first, the backfill's order
	index    map[int64]int           // partition start (Unix ns) to its index in parts
	model    []smPartition
	workers  []string
	leases   []*smLease           // held by workers, in no order
	finished []*ledger.Lease      // leases already finished or fenced
	dest     map[string]smWrite   // by partition key; each execution replaces the value
	executed map[string][]smWrite // by partition key: every attempt that executed it
	revision int64
}

func newLedgerMachine(t *rapid.T) *ledgerMachine {
	n := rapid.IntRange(5, 30).Draw(t, "partitions")
	g := rapid.SampledFrom([]tranche.TimeGranularity{tranche.Hour, tranche.Day, tranche.Every(15, tranche.Minute)}).Draw(t, "granularity")
	loc := rapid.SampledFrom([]*time.Location{time.UTC, time.FixedZone("EST", -5*3600), time.FixedZone("IST", 5*3600+1800)}).Draw(t, "location")
	workers := rapid.IntRange(2, 5).Draw(t, "workers")

	m := &ledgerMachine{
		clock:    ledgertest.NewClock(time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)),
		index:    map[int64]int{},
		model:    make([]smPartition, n),
		dest:     map[string]smWrite{},
		executed: map[string][]smWrite{},
	}
	m.ledger = memledger.New(m.clock.Now)
	p := tranche.PartitionOf(g, time.Date(2024, 3, 9, 22, 0, 0, 0, loc))
	for range n {
		m.parts = append(m.parts, p)
		p = p.Next()
	}
	slices.Reverse(m.parts)
	for i, p := range m.parts {
		m.index[p.Start.UnixNano()] = i
	}
	for w := range workers {
		m.workers = append(m.workers, fmt.Sprintf("worker-%d", w))
	}
	if _, err := m.ledger.PutBackfill(t.Context(), ledger.BackfillRecord{ID: smBackfill, DAG: smDAG}); err != nil {
		t.Fatal(err)
	}
	m.revision = m.ledgerRevision(t)
	return m
}

func (m *ledgerMachine) ledgerRevision(t *rapid.T) int64 {
	r, err := m.ledger.Revision(t.Context(), smDAG)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// changed checks that a claim or Finish moved the revision on.
func (m *ledgerMachine) changed(t *rapid.T, what string) {
	r := m.ledgerRevision(t)
	if r <= m.revision {
		t.Fatalf("%s: Revision %d; want more than %d", what, r, m.revision)
	}
	m.revision = r
}

// claimable is the model's claim rule under RerunFailed.
func (m *ledgerMachine) claimable(i int) bool {
	p := m.model[i]
	switch p.state {
	case "", ledger.StateFailed, ledger.StateCanceled:
		return true
	case ledger.StateRunning:
		return !m.clock.Now().Before(p.until)
	}
	return false
}

// fenced reports whether the model says lease lost its attempts.
func (m *ledgerMachine) fenced(l *ledger.Lease) bool {
	for i, p := range l.Partitions {
		mp := m.model[m.index[p.Start.UnixNano()]]
		if mp.number != l.Attempts[i] || mp.worker != l.Worker || mp.state != ledger.StateRunning {
			return true
		}
	}
	return false
}

// claimNext has worker w claim the newest claimable chunk of size
// partitions, checking the ledger's every answer against the model.
func (m *ledgerMachine) claimNext(t *rapid.T, w, size int) *smLease {
	for first := 0; first+size <= len(m.parts); first++ {
		chunk := m.parts[first : first+size]
		want := true
		for i := range chunk {
			want = want && m.claimable(first+i)
		}
		lease, err := m.ledger.Claim(t.Context(), ledger.ClaimRequest{
			DAG: smDAG, Backfill: smBackfill, Worker: m.workers[w],
			RunID:      backfill.RunID(smDAG, chunk[0].Start, chunk[len(chunk)-1].End),
			Partitions: chunk, Lease: smLeaseFor, Policy: ledger.RerunFailed,
		})
		switch {
		case !want && errors.Is(err, ledger.ErrNotClaimable):
			continue
		case !want:
			t.Fatalf("%s claim of %v = %v, %v; the model says it is not claimable", m.workers[w], smKeys(chunk), lease, err)
		case err != nil:
			t.Fatalf("%s claim of %v = %v; the model says it is claimable", m.workers[w], smKeys(chunk), err)
		}
		m.changed(t, "claim")
		until := m.clock.Now().Add(smLeaseFor)
		if !lease.Until.Equal(until) {
			t.Fatalf("lease until %v; want %v", lease.Until, until)
		}
		for i := range chunk {
			mp := &m.model[first+i]
			mp.number++
			if lease.Attempts[i] != mp.number {
				t.Fatalf("claim of %s: attempt %d; want %d", chunk[i].Key(), lease.Attempts[i], mp.number)
			}
			mp.state, mp.worker, mp.until = ledger.StateRunning, m.workers[w], until
		}
		held := &smLease{worker: w, lease: lease}
		m.leases = append(m.leases, held)
		return held
	}
	return nil
}

func (m *ledgerMachine) claim(t *rapid.T) {
	w := rapid.IntRange(0, len(m.workers)-1).Draw(t, "worker")
	size := rapid.IntRange(1, 3).Draw(t, "chunk")
	if m.claimNext(t, w, size) == nil {
		t.Skip("nothing claimable")
	}
}

// pick draws a held lease, skipping the action when there is none.
func (m *ledgerMachine) pick(t *rapid.T) int {
	if len(m.leases) == 0 {
		t.Skip("no lease held")
	}
	return rapid.IntRange(0, len(m.leases)-1).Draw(t, "lease")
}

func (m *ledgerMachine) drop(i int) {
	m.leases = slices.Delete(m.leases, i, i+1)
}

// run executes a lease's partitions: each write replaces the partition's
// value in the model destination. A stale worker does not know it is
// stale, so it runs too.
func (m *ledgerMachine) run(l *smLease) {
	for i, p := range l.lease.Partitions {
		w := smWrite{worker: l.lease.Worker, attempt: l.lease.Attempts[i]}
		m.dest[p.Key()] = w
		m.executed[p.Key()] = append(m.executed[p.Key()], w)
		m.model[m.index[p.Start.UnixNano()]].runs++
	}
	l.executed = true
}

func (m *ledgerMachine) execute(t *rapid.T) {
	m.run(m.leases[m.pick(t)])
}

func (m *ledgerMachine) heartbeat(t *rapid.T) {
	i := m.pick(t)
	l := m.leases[i]
	fenced := m.fenced(l.lease)
	err := m.ledger.Heartbeat(t.Context(), l.lease, smLeaseFor)
	switch {
	case fenced && !errors.Is(err, tranche.ErrFenced):
		t.Fatalf("Heartbeat of a lease taken over = %v; want ErrFenced", err)
	case fenced:
		m.drop(i) // the worker learns it lost the partition and stops
		return
	case err != nil:
		t.Fatalf("Heartbeat of a held lease = %v", err)
	}
	until := m.clock.Now().Add(smLeaseFor)
	for _, p := range l.lease.Partitions {
		m.model[m.index[p.Start.UnixNano()]].until = until
	}
}

// end finishes lease i with outcomes, checking fencing against the model.
func (m *ledgerMachine) end(t *rapid.T, i int, outcomes []ledger.Outcome) {
	l := m.leases[i]
	m.drop(i)
	m.finished = append(m.finished, l.lease)
	fenced := m.fenced(l.lease)
	err := m.ledger.Finish(t.Context(), l.lease, outcomes)
	switch {
	case fenced && !errors.Is(err, tranche.ErrFenced):
		t.Fatalf("Finish of a lease taken over = %v; want ErrFenced", err)
	case fenced:
		return
	case err != nil:
		t.Fatalf("Finish of a held lease = %v", err)
	}
	m.changed(t, "Finish")
	for k, p := range l.lease.Partitions {
		mp := &m.model[m.index[p.Start.UnixNano()]]
		mp.state = outcomes[k].State
		if mp.state == ledger.StateSucceeded {
			if mp.succeeded {
				t.Fatalf("%s succeeded twice", p.Key())
			}
			mp.succeeded = true
		}
	}
}

func (m *ledgerMachine) finish(t *rapid.T) {
	i := m.pick(t)
	l := m.leases[i]
	outcomes := make([]ledger.Outcome, len(l.lease.Partitions))
	for k := range outcomes {
		outcomes[k] = ledger.Outcome{State: ledger.StateFailed, Err: "boom"}
		// An honest worker reports success only for what it ran.
		if l.executed && rapid.Bool().Draw(t, "succeeded") {
			outcomes[k] = ledger.Outcome{State: ledger.StateSucceeded, Rows: 1}
		}
	}
	m.end(t, i, outcomes)
}

func (m *ledgerMachine) cancel(t *rapid.T) {
	i := m.pick(t)
	outcomes := make([]ledger.Outcome, len(m.leases[i].lease.Partitions))
	for k := range outcomes {
		outcomes[k] = ledger.Outcome{State: ledger.StateCanceled, Err: "context canceled"}
	}
	m.end(t, i, outcomes)
}

// crash has a worker forget its leases without finishing them: its
// partitions stay running until their leases expire.
func (m *ledgerMachine) crash(t *rapid.T) {
	w := rapid.IntRange(0, len(m.workers)-1).Draw(t, "worker")
	m.leases = slices.DeleteFunc(m.leases, func(l *smLease) bool { return l.worker == w })
}

func (m *ledgerMachine) advance(t *rapid.T) {
	m.clock.Advance(time.Duration(rapid.IntRange(1, 150).Draw(t, "seconds")) * time.Second)
}

// staleFinish has a worker whose lease was taken over, say after a long
// pause, report success late: the ledger must fence it.
func (m *ledgerMachine) staleFinish(t *rapid.T) {
	var stale []int
	for i, l := range m.leases {
		if m.fenced(l.lease) {
			stale = append(stale, i)
		}
	}
	if len(stale) == 0 {
		t.Skip("no stale lease")
	}
	i := rapid.SampledFrom(stale).Draw(t, "stale")
	l := m.leases[i]
	m.run(l)
	outcomes := make([]ledger.Outcome, len(l.lease.Partitions))
	for k := range outcomes {
		outcomes[k] = ledger.Outcome{State: ledger.StateSucceeded}
	}
	m.end(t, i, outcomes) // fails the test unless fenced
}

// retryFinish finishes a lease again, as a worker might after losing the
// answer to its first Finish: the ledger must refuse it, whatever its
// outcome, and keep the first.
func (m *ledgerMachine) retryFinish(t *rapid.T) {
	if len(m.finished) == 0 {
		t.Skip("no finished lease")
	}
	l := m.finished[rapid.IntRange(0, len(m.finished)-1).Draw(t, "finished")]
	state := rapid.SampledFrom([]ledger.State{ledger.StateSucceeded, ledger.StateFailed, ledger.StateCanceled}).Draw(t, "state")
	outcomes := make([]ledger.Outcome, len(l.Partitions))
	for k := range outcomes {
		outcomes[k] = ledger.Outcome{State: state}
	}
	if err := m.ledger.Finish(t.Context(), l, outcomes); !errors.Is(err, tranche.ErrFenced) {
		t.Fatalf("Finish again of a finished lease = %v; want ErrFenced", err)
	}
}

// check holds after every step.
func (m *ledgerMachine) check(t *rapid.T) {
	now := m.clock.Now()
	if r := m.ledgerRevision(t); r != m.revision {
		t.Fatalf("Revision %d; want %d: only claims and finishes change it", r, m.revision)
	}
	var recorded []int
	for i, p := range m.parts {
		h, err := m.ledger.History(t.Context(), smDAG, p.Start)
		if err != nil {
			t.Fatal(err)
		}
		mp := m.model[i]
		if len(h) != mp.number {
			t.Fatalf("%s: %d attempts; the model has %d", p.Key(), len(h), mp.number)
		}
		succeeded, live := 0, 0
		for k, a := range h {
			if a.Number != k+1 {
				t.Fatalf("%s: attempt numbers %v; want 1..%d", p.Key(), smNumbers(h), len(h))
			}
			if a.State == ledger.StateSucceeded {
				succeeded++
			}
			if a.State == ledger.StateRunning {
				if k != len(h)-1 {
					t.Fatalf("%s: attempt %d running behind attempt %d", p.Key(), a.Number, len(h))
				}
				if now.Before(a.LeaseUntil) {
					live++
				}
			}
		}
		if succeeded > 1 || live > 1 {
			t.Fatalf("%s: %d successes and %d live leases; want at most one of each", p.Key(), succeeded, live)
		}
		if mp.number == 0 {
			continue
		}
		recorded = append(recorded, i)
		a := h[len(h)-1]
		if mp.succeeded && a.State != ledger.StateSucceeded {
			t.Fatalf("%s succeeded, and now its latest attempt is %d %s: a success was lost", p.Key(), a.Number, a.State)
		}
		if a.State != mp.state || a.Worker != mp.worker || (a.State == ledger.StateRunning && !a.LeaseUntil.Equal(mp.until)) {
			t.Fatalf("%s: latest attempt %d %s by %s until %v; the model has %s by %s until %v",
				p.Key(), a.Number, a.State, a.Worker, a.LeaseUntil, mp.state, mp.worker, mp.until)
		}
	}
	// Latest yields the same, oldest first: the reverse of parts.
	var got []int
	for a, err := range m.ledger.Latest(t.Context(), smDAG, m.parts[len(m.parts)-1].Start, m.parts[0].End) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, m.index[a.Start.UnixNano()])
	}
	slices.Reverse(recorded)
	if !slices.Equal(got, recorded) {
		t.Fatalf("Latest yields partitions %v; want %v", got, recorded)
	}
	m.checkRevisionIn(t)
	m.checkRecentSuccesses(t)
}

// checkRevisionIn holds RevisionIn of a range of partitions after a
// revision to the histories: the highest revision there above it, or 0.
func (m *ledgerMachine) checkRevisionIn(t *rapid.T) {
	hi := rapid.IntRange(0, len(m.parts)-1).Draw(t, "newest")
	lo := rapid.IntRange(hi, len(m.parts)-1).Draw(t, "oldest")
	after := rapid.Int64Range(0, m.revision).Draw(t, "after")
	var want int64
	for _, p := range m.parts[hi : lo+1] {
		h, err := m.ledger.History(t.Context(), smDAG, p.Start)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range h {
			if a.Revision > after {
				want = max(want, a.Revision)
			}
		}
	}
	got, err := m.ledger.RevisionIn(t.Context(), smDAG, m.parts[lo].Start, m.parts[hi].End, after)
	if err != nil || got != want {
		t.Fatalf("RevisionIn(%s to %s, after %d) = %d, %v; want %d", m.parts[lo].Key(), m.parts[hi].Key(), after, got, err, want)
	}
}

// checkRecentSuccesses holds RecentSuccesses to the histories: the
// successes by revision, then by start, latest first.
func (m *ledgerMachine) checkRecentSuccesses(t *rapid.T) {
	var all []ledger.Attempt
	for _, p := range m.parts {
		h, err := m.ledger.History(t.Context(), smDAG, p.Start)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range h {
			if a.State == ledger.StateSucceeded {
				all = append(all, a)
			}
		}
	}
	slices.SortFunc(all, func(a, b ledger.Attempt) int {
		if a.Revision != b.Revision {
			return int(b.Revision - a.Revision)
		}
		return b.Start.Compare(a.Start)
	})
	n := rapid.IntRange(0, 8).Draw(t, "successes")
	got, err := m.ledger.RecentSuccesses(t.Context(), smDAG, n)
	if err != nil {
		t.Fatal(err)
	}
	want := all[:min(n, len(all))]
	if len(got) != len(want) {
		t.Fatalf("RecentSuccesses(%d) = %d attempts; want %d", n, len(got), len(want))
	}
	for i := range want {
		if !got[i].Start.Equal(want[i].Start) || got[i].Number != want[i].Number || got[i].Revision != want[i].Revision {
			t.Fatalf("RecentSuccesses(%d)[%d] = %s attempt %d at revision %d; want %s attempt %d at revision %d",
				n, i, got[i].Key, got[i].Number, got[i].Revision, want[i].Key, want[i].Number, want[i].Revision)
		}
	}
}

// drain stops the faults: every worker finishes what it holds honestly,
// then the workers claim, run and finish until every partition succeeded,
// waiting out the leases of crashed workers.
func (m *ledgerMachine) drain(t *rapid.T) {
	for len(m.leases) > 0 {
		l := m.leases[0]
		if !l.executed && !m.fenced(l.lease) {
			m.run(l)
		}
		outcomes := make([]ledger.Outcome, len(l.lease.Partitions))
		for k := range outcomes {
			outcomes[k] = ledger.Outcome{State: ledger.StateSucceeded, Rows: 1}
		}
		m.end(t, 0, outcomes)
		m.check(t)
	}
	for step, w := 0, 0; ; step, w = step+1, (w+1)%len(m.workers) {
		if step > 4*len(m.parts)+10 {
			t.Fatalf("honest workers did not finish the backfill in %d steps", step)
		}
		l := m.claimNext(t, w, 1)
		if l == nil {
			done := true
			for _, mp := range m.model {
				done = done && mp.succeeded
			}
			if done {
				break
			}
			m.clock.Advance(smLeaseFor) // wait for crashed workers' leases to expire
			continue
		}
		m.run(l)
		if err := m.ledger.Heartbeat(t.Context(), l.lease, smLeaseFor); err != nil {
			t.Fatalf("honest Heartbeat = %v", err)
		}
		m.end(t, len(m.leases)-1, []ledger.Outcome{{State: ledger.StateSucceeded, Rows: 1}})
		m.check(t)
	}
	for i, p := range m.parts {
		h, err := m.ledger.History(t.Context(), smDAG, p.Start)
		if err != nil {
			t.Fatal(err)
		}
		var wins []smWrite
		for _, a := range h {
			if a.State == ledger.StateSucceeded {
				wins = append(wins, smWrite{a.Worker, a.Number})
			}
		}
		if len(wins) != 1 {
			t.Fatalf("%s: %d successes; want exactly one:\n%v", p.Key(), len(wins), h)
		}
		if !slices.Contains(m.executed[p.Key()], wins[0]) {
			t.Fatalf("%s succeeded by attempt %d of %s, which never ran it", p.Key(), wins[0].attempt, wins[0].worker)
		}
		if _, ok := m.dest[p.Key()]; !ok || m.model[i].runs == 0 {
			t.Fatalf("%s: nothing in the destination after %d runs", p.Key(), m.model[i].runs)
		}
	}
}

func smKeys(ps []tranche.TimePartition) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Key()
	}
	return out
}

func smNumbers(h []ledger.Attempt) []int {
	out := make([]int, len(h))
	for i, a := range h {
		out[i] = a.Number
	}
	return out
}
