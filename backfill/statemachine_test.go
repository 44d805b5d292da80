package backfill_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/ledgertest"
	"github.com/tranche-dev/tranche/ledger/memledger"
)

// TestBackfillStateMachine runs random interleavings of workers sharing
// one backfill and one ledger: runs that end cleanly, at a failing
// partition or at a cancellation; two workers at once; workers that crash
// mid-partition; leases that expire. After every step it checks:
//
//   - every report adds up, and the partitions reported succeeded are the
//     ones the ledger newly holds succeeded;
//   - each partition's history numbers its attempts 1, 2, ... under the
//     partition's run id, holds at most one succeeded attempt and at most
//     one running attempt, the latest;
//   - no succeeded partition is lost: once succeeded, always succeeded;
//   - the destination holds a partition exactly when its latest attempt
//     succeeded, written once;
//   - the backfill's status counts agree with the ledger.
//
// Once faults stop and leases expire, one clean run leaves every partition
// succeeded exactly once.
func TestBackfillStateMachine(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		m := newBfMachine(rt)
		rt.Repeat(map[string]func(*rapid.T){
			"run":    m.run,
			"race":   m.race,
			"crash":  m.crash,
			"expire": m.expire,
			"":       m.check,
		})
		m.finish(rt)
	})
}

// bfFault is what the asset does on one partition during a step.
type bfFault struct {
	key    string             // the partition; "" for none
	cancel context.CancelFunc // cancels the run's context instead of failing
}

type bfMachine struct {
	clock   *ledgertest.Clock
	ledger  *memledger.Ledger
	window  tranche.TimePartitionWindow
	workers []*backfill.Backfill
	id      string
	keys    []string
	parts   map[string]tranche.TimePartition

	mu     sync.Mutex
	fault  bfFault
	writes map[string]int // successful writes by partition key

	succeeded map[string]bool // partitions seen succeeded
	reported  int             // partitions reports counted succeeded, in all
	crashes   int
	runs      int // calls of Run
}

const bfMachineLease = time.Minute

func newBfMachine(rt *rapid.T) *bfMachine {
	days := rapid.IntRange(5, 20).Draw(rt, "days")
	m := &bfMachine{
		clock:     ledgertest.NewClock(bfT0),
		writes:    map[string]int{},
		succeeded: map[string]bool{},
		parts:     map[string]tranche.TimePartition{},
	}
	m.ledger = memledger.New(m.clock.Now)
	w, err := tranche.NewTimePartitionWindow(tranche.Day, bfDay(1).Start, bfDay(days).Start)
	if err != nil {
		rt.Fatal(err)
	}
	m.window = w
	for p := range w.All() {
		m.keys = append(m.keys, p.Key())
		m.parts[p.Key()] = p
	}
	dag, err := tranche.NewDAG(tranche.Asset{
		Name:         "raw",
		Partitioning: tranche.Partitioning{Granularity: tranche.Day, Location: time.UTC},
		Materialize:  m.materialize,
	})
	if err != nil {
		rt.Fatal(err)
	}
	for i := range rapid.IntRange(2, 3).Draw(rt, "workers") {
		m.workers = append(m.workers, &backfill.Backfill{
			DAG: dag, Window: w, Ledger: m.ledger, Worker: fmt.Sprint("w", i), Concurrency: 1,
			Lease: bfMachineLease, Heartbeat: bfMachineLease / 3, Now: m.clock.Now,
			// The machine's clock moves only at its expire step: a run
			// that waited for a crashed worker's lease would wait for ever.
			ReturnHeld: true,
		})
	}
	if m.id, err = m.workers[0].ID(); err != nil {
		rt.Fatal(err)
	}
	return m
}

// materialize is the asset: it fails, or cancels its run, on the fault's
// partition, and otherwise replaces the partition in the destination.
func (m *bfMachine) materialize(ctx context.Context, mat *tranche.Materialization) ([]tranche.Row, error) {
	p, err := mat.Partition()
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if f := m.fault; f.key == p.Key() {
		if f.cancel == nil {
			return nil, fmt.Errorf("fault on %s", p.Key())
		}
		f.cancel()
		return nil, ctx.Err()
	}
	m.writes[p.Key()]++
	return nil, nil
}

// drawFault chooses the step's fault.
func (m *bfMachine) drawFault(rt *rapid.T, cancelable bool) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	f := bfFault{}
	kinds := []string{"none", "fail"}
	if cancelable {
		kinds = append(kinds, "cancel")
	}
	switch rapid.SampledFrom(kinds).Draw(rt, "fault") {
	case "fail":
		f.key = rapid.SampledFrom(m.keys).Draw(rt, "fault partition")
	case "cancel":
		f.key = rapid.SampledFrom(m.keys).Draw(rt, "cancel partition")
		f.cancel = cancel
	}
	m.mu.Lock()
	m.fault = f
	m.mu.Unlock()
	return ctx, cancel
}

func (m *bfMachine) drawWorker(rt *rapid.T, label string) *backfill.Backfill {
	b := *m.workers[rapid.IntRange(0, len(m.workers)-1).Draw(rt, label)]
	b.Order = rapid.SampledFrom([]backfill.Order{backfill.NewestFirst, backfill.OldestFirst}).Draw(rt, label+" order")
	b.OnFailure = rapid.SampledFrom([]tranche.FailurePolicy{tranche.FailStop, tranche.FailContinue}).Draw(rt, label+" on failure")
	return &b
}

// checkRun checks one worker's report against the fault of its step.
func (m *bfMachine) checkRun(rt *rapid.T, rep *backfill.Report, err error, f bfFault) {
	if rep == nil {
		rt.Fatalf("Run returned no report: %v", err)
	}
	if sum := rep.Succeeded + rep.Failed + rep.Skipped + rep.Elsewhere + rep.Held + rep.NotRun + rep.Unclaimed; sum != rep.Total || rep.Total != m.window.Len() {
		rt.Fatalf("report does not add up: %s", rep)
	}
	if len(rep.Failures) != rep.Failed || rep.Failed > 1 {
		rt.Fatalf("%d failures listed for %d failed: %s", len(rep.Failures), rep.Failed, rep)
	}
	for _, pf := range rep.Failures {
		if pf.Key != f.key {
			rt.Fatalf("partition %s failed without a fault: %v", pf.Key, pf.Err)
		}
	}
	switch {
	case rep.Unclaimed != 0:
		rt.Fatalf("claims failed on a ledger that cannot fail: %s", rep)
	case rep.Held > 0 && rep.Done():
		rt.Fatalf("%d partitions held elsewhere, and the report says done", rep.Held)
	case f.key == "" && (err != nil || rep.NotRun != 0):
		rt.Fatalf("a run without faults: %v; %s", err, rep)
	case f.cancel != nil && rep.Failed == 1 && !errors.Is(err, context.Canceled):
		rt.Fatalf("a canceled run: %v; want context.Canceled", err)
	case f.cancel != nil && rep.Failed == 1 && !strings.Contains(rep.Failures[0].Err.Error(), "canceled"):
		rt.Fatalf("the canceled partition failed with %v", rep.Failures[0].Err)
	case f.key != "" && f.cancel == nil && rep.Failed == 1 && (err == nil || !strings.Contains(err.Error(), "fault on "+f.key)):
		rt.Fatalf("a failed run: %v", err)
	case rep.Failed == 0 && rep.NotRun == 0 && rep.Held == 0 && err != nil:
		rt.Fatalf("nothing failed, yet: %v", err)
	}
	m.reported += rep.Succeeded
	m.runs++
}

// run has one worker run the backfill, to completion or to a fault.
func (m *bfMachine) run(rt *rapid.T) {
	b := m.drawWorker(rt, "worker")
	ctx, cancel := m.drawFault(rt, true)
	defer cancel()
	m.mu.Lock()
	f := m.fault
	m.mu.Unlock()
	rep, err := b.Run(ctx)
	m.checkRun(rt, rep, err, f)
}

// race has two workers run the backfill at once.
func (m *bfMachine) race(rt *rapid.T) {
	a, b := m.drawWorker(rt, "first worker"), m.drawWorker(rt, "second worker")
	if a.Worker == b.Worker {
		b.Worker += "'"
	}
	ctx, cancel := m.drawFault(rt, false)
	defer cancel()
	m.mu.Lock()
	f := m.fault
	m.mu.Unlock()
	type result struct {
		rep *backfill.Report
		err error
	}
	results := make([]result, 2)
	var wg sync.WaitGroup
	for i, w := range []*backfill.Backfill{a, b} {
		wg.Go(func() {
			rep, err := w.Run(ctx)
			results[i] = result{rep, err}
		})
	}
	wg.Wait()
	// Each may fail the faulty partition once: the second to reach it
	// retries what the first failed.
	for _, r := range results {
		m.checkRun(rt, r.rep, r.err, f)
	}
}

// crash has a worker record the backfill and claim a partition, as Run
// does, and die holding it.
func (m *bfMachine) crash(rt *rapid.T) {
	key := rapid.SampledFrom(m.keys).Draw(rt, "crash partition")
	p := m.parts[key]
	dag := m.workers[0].DAG
	dagID := backfill.DAGIdentity(dag, tranche.Day, time.UTC)
	// Recorded first, as a worker records a backfill before its first
	// claim: a ledger holds no attempt of a backfill it has no record of.
	// The record is the one Run writes, from what m.id is made of (the
	// DAG, the whole window, one partition a run); the first written is
	// kept, and a record unlike Run's would show in check's status.
	if _, err := m.ledger.PutBackfill(context.Background(), ledger.BackfillRecord{ID: m.id, DAG: dagID, Window: m.window.String(), Chunk: 1}); err != nil {
		rt.Fatalf("crash record of %s: %v", m.id, err)
	}
	_, err := m.ledger.Claim(context.Background(), ledger.ClaimRequest{
		DAG: dagID, Backfill: m.id, Worker: fmt.Sprint("crashed", m.crashes), RunID: backfill.RunID(dagID, p.Start, p.End),
		Partitions: []tranche.TimePartition{p}, Lease: bfMachineLease, Policy: ledger.RerunFailed,
	})
	switch {
	case err == nil:
		m.crashes++
	case !errors.Is(err, ledger.ErrNotClaimable):
		rt.Fatalf("crash claim of %s: %v", key, err)
	case !m.succeeded[key] && !strings.Contains(err.Error(), "held by"):
		rt.Fatalf("claim of %s, neither succeeded nor held, refused: %v", key, err)
	}
}

// expire moves the clock on, by less than a lease or past one.
func (m *bfMachine) expire(rt *rapid.T) {
	m.clock.Advance(time.Duration(rapid.IntRange(1, 90).Draw(rt, "seconds")) * time.Second)
}

// check checks the invariants.
func (m *bfMachine) check(rt *rapid.T) {
	ctx := context.Background()
	dagID := backfill.DAGIdentity(m.workers[0].DAG, tranche.Day, time.UTC)
	now := 0
	counts := map[ledger.State]int{}
	for _, key := range m.keys {
		p := m.parts[key]
		h, err := m.ledger.History(ctx, dagID, p.Start)
		if err != nil {
			rt.Fatal(err)
		}
		succeeded := 0
		for i, a := range h {
			if a.Number != i+1 || a.Key != key || a.RunID != backfill.RunID(dagID, p.Start, p.End) {
				rt.Fatalf("%s: attempt %d is %+v", key, i+1, a)
			}
			if a.State == ledger.StateSucceeded {
				succeeded++
			}
			if a.State == ledger.StateRunning && i != len(h)-1 {
				rt.Fatalf("%s: attempt %d running under a newer one", key, a.Number)
			}
		}
		if succeeded > 1 {
			rt.Fatalf("%s succeeded %d times", key, succeeded)
		}
		state := ledger.StatePending
		if len(h) > 0 {
			state = h[len(h)-1].State
		}
		counts[state]++
		if m.succeeded[key] && state != ledger.StateSucceeded {
			rt.Fatalf("%s was succeeded and is now %s", key, state)
		}
		m.mu.Lock()
		writes := m.writes[key]
		m.mu.Unlock()
		if want := map[bool]int{true: 1, false: 0}[state == ledger.StateSucceeded]; writes != want {
			rt.Fatalf("%s is %s and written %d times", key, state, writes)
		}
		if state == ledger.StateSucceeded {
			m.succeeded[key] = true
			now++
		}
	}
	if now != m.reported {
		rt.Fatalf("%d partitions succeeded; reports counted %d", now, m.reported)
	}
	st, err := backfill.StatusOf(ctx, m.ledger, m.id, m.clock.Now())
	switch {
	case errors.Is(err, ledger.ErrUnknownBackfill) && m.runs == 0:
		// No worker has run it yet.
	case err != nil:
		rt.Fatal(err)
	default:
		for s, n := range counts {
			if st.Counts[s] != n {
				rt.Fatalf("status counts %v; the ledger's %v", st.Counts, counts)
			}
		}
		if st.Done() != (now == len(m.keys)) {
			rt.Fatalf("status done %v with %d of %d succeeded", st.Done(), now, len(m.keys))
		}
	}
}

// finish stops the faults, lets every lease expire, and runs the
// backfill once more: every partition ends succeeded, once.
func (m *bfMachine) finish(rt *rapid.T) {
	m.mu.Lock()
	m.fault = bfFault{}
	m.mu.Unlock()
	m.clock.Advance(bfMachineLease)
	rep, err := m.workers[0].Run(context.Background())
	if err != nil {
		rt.Fatalf("clean run: %v", err)
	}
	m.checkRun(rt, rep, err, bfFault{})
	if rep.Succeeded+rep.Skipped != rep.Total {
		rt.Fatalf("clean run: %s", rep)
	}
	m.check(rt)
	if len(m.succeeded) != len(m.keys) {
		rt.Fatalf("%d of %d partitions succeeded after a clean run", len(m.succeeded), len(m.keys))
	}
}
