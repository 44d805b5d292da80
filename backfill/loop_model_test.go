package backfill_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"pgregory.net/rapid"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/memledger"
)

// TestLoopModel drives the real claim → run → finish loop of several
// worker processes sharing one backfill over memledger, in a synctest
// bubble, through random interleavings: workers that join late, of
// several concurrencies and budgets, partitions of random lengths
// (claimed ahead when short), finishes that are slow or fail, an
// operator's cancel at a random moment, and process deaths (a worker
// whose every later ledger call fails and whose runs stop: its memory
// is gone, its leases are left to expire). It checks what happened
// against the rules a sequential model of the loop states:
//
//   - no partition starts later than one partition's run after the
//     ledger records a cancel;
//   - a partition.succeeded event comes after the ledger holds the
//     success;
//   - each worker starts partitions in the order it claimed them;
//   - a partition runs again only after the worker that ran it died
//     (at most its Concurrency partitions for each death: those in
//     flight) or failed to record it;
//   - once the faults stop and the leases expire, one more run leaves
//     every partition succeeded exactly once.
func TestLoopModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		sc := drawScenario(rt)
		var failures []string
		synctest.Test(t, func(t *testing.T) { failures = sc.run(t) })
		if len(failures) > 0 {
			rt.Fatalf("%s\n%s", sc, strings.Join(failures, "\n"))
		}
	})
}

const (
	modelLease = 3 * time.Second
	modelRun   = 400 * time.Millisecond // the longest partition's run
)

// scenario is one drawn interleaving.
type scenario struct {
	days     int
	order    backfill.Order
	procs    []procPlan
	cancelAt time.Duration // 0: never
	runs     []time.Duration
}

// procPlan is one worker process of a scenario.
type procPlan struct {
	concurrency, budget int           // budget 0: none
	joinAt              time.Duration // when it starts
	dieAt               time.Duration // 0: never
	finishDelay         []time.Duration
	finishFails         []bool
}

func drawScenario(rt *rapid.T) *scenario {
	sc := &scenario{days: rapid.IntRange(4, 24).Draw(rt, "days")}
	if rapid.Bool().Draw(rt, "oldestFirst") {
		sc.order = backfill.OldestFirst
	}
	for i := range sc.days {
		sc.runs = append(sc.runs, time.Duration(rapid.IntRange(1, int(modelRun/time.Millisecond)).Draw(rt, fmt.Sprintf("run%d", i)))*time.Millisecond)
	}
	for i := range rapid.IntRange(1, 3).Draw(rt, "procs") {
		p := procPlan{concurrency: rapid.IntRange(1, 4).Draw(rt, fmt.Sprintf("p%d.concurrency", i))}
		p.budget = rapid.IntRange(0, p.concurrency).Draw(rt, fmt.Sprintf("p%d.budget", i))
		p.joinAt = time.Duration(rapid.IntRange(0, 2000).Draw(rt, fmt.Sprintf("p%d.join", i))) * time.Millisecond
		if rapid.IntRange(0, 3).Draw(rt, fmt.Sprintf("p%d.dies", i)) == 0 {
			p.dieAt = p.joinAt + time.Duration(rapid.IntRange(1, 3000).Draw(rt, fmt.Sprintf("p%d.die", i)))*time.Millisecond
		}
		for j := range 8 {
			p.finishDelay = append(p.finishDelay, time.Duration(rapid.IntRange(0, 50).Draw(rt, fmt.Sprintf("p%d.finishDelay%d", i, j)))*time.Millisecond)
			p.finishFails = append(p.finishFails, rapid.IntRange(0, 9).Draw(rt, fmt.Sprintf("p%d.finishFails%d", i, j)) == 0)
		}
		sc.procs = append(sc.procs, p)
	}
	if rapid.Bool().Draw(rt, "cancel") {
		sc.cancelAt = time.Duration(rapid.IntRange(1, 4000).Draw(rt, "cancelAt")) * time.Millisecond
	}
	return sc
}

func (sc *scenario) String() string {
	return fmt.Sprintf("%d days %v, cancel at %v, processes %+v", sc.days, sc.order, sc.cancelAt, sc.procs)
}

// modelRun is one partition's run, as its asset saw it.
type runRecord struct {
	key  string
	proc int
	at   time.Time
}

// world is the shared state of one scenario's run.
type modelWorld struct {
	sc    *scenario
	l     *memledger.Ledger
	dag   *tranche.DAG
	id    string // the DAG's identity
	start time.Time

	mu         sync.Mutex
	failures   []string
	runs       []runRecord
	canceledAt time.Time
	// unrecorded are the partitions whose success a failed finish left
	// unrecorded, by process: they may run again.
	unrecorded map[string]bool
	dead       []*atomic.Bool
	// claimed and started are each process's claimed and started
	// partitions, in event order, per Run.
	claimed, started [][]string
}

func (w *modelWorld) fail(format string, args ...any) {
	w.mu.Lock()
	w.failures = append(w.failures, fmt.Sprintf(format, args...))
	w.mu.Unlock()
}

// deadLedger is one process's view of the ledger: once the process has
// died, every call that would write fails, as the calls of a process
// killed never arrive.
type deadLedger struct {
	*memledger.Ledger
	w    *modelWorld
	proc int

	mu     sync.Mutex
	finish int // finishes called, which index the plan's delays and failures
}

var errDead = errors.New("model: the process died")

func (d *deadLedger) isDead() bool { return d.w.dead[d.proc].Load() }

func (d *deadLedger) Claim(ctx context.Context, req ledger.ClaimRequest) (*ledger.Lease, error) {
	if d.isDead() {
		return nil, errDead
	}
	return d.Ledger.Claim(ctx, req)
}

func (d *deadLedger) ClaimNext(ctx context.Context, req ledger.NextRequest) ([]ledger.Grant, error) {
	if d.isDead() {
		return nil, errDead
	}
	return d.Ledger.ClaimNext(ctx, req)
}

func (d *deadLedger) Heartbeat(ctx context.Context, lease *ledger.Lease, dur time.Duration) error {
	if d.isDead() {
		return errDead
	}
	return d.Ledger.Heartbeat(ctx, lease, dur)
}

func (d *deadLedger) Release(ctx context.Context, lease *ledger.Lease) error {
	if d.isDead() {
		return errDead
	}
	return d.Ledger.Release(ctx, lease)
}

func (d *deadLedger) Finish(ctx context.Context, lease *ledger.Lease, outcomes []ledger.Outcome) error {
	return d.FinishBatch(ctx, []ledger.Finish{{Lease: lease, Outcomes: outcomes}})[0]
}

// FinishBatch waits the plan's delay before the call reaches the ledger
// (the request's way there), and fails the batch when the plan says so,
// recording nothing.
func (d *deadLedger) FinishBatch(ctx context.Context, batch []ledger.Finish) []error {
	d.mu.Lock()
	plan := d.w.sc.procs[d.proc]
	i := d.finish % len(plan.finishDelay)
	d.finish++
	d.mu.Unlock()
	time.Sleep(plan.finishDelay[i])
	errs := make([]error, len(batch))
	if d.isDead() || plan.finishFails[i] {
		d.w.mu.Lock()
		for k, f := range batch {
			errs[k] = errDead
			for _, p := range f.Lease.Partitions {
				d.w.unrecorded[p.Key()] = true
			}
		}
		d.w.mu.Unlock()
		return errs
	}
	return d.Ledger.FinishBatch(ctx, batch)
}

func (sc *scenario) run(t *testing.T) []string {
	w := &modelWorld{sc: sc, l: memledger.New(nil), start: time.Now(), unrecorded: map[string]bool{}}
	runOf := map[string]time.Duration{}
	for i := range sc.days {
		runOf[bfDay(i+1).Key()] = sc.runs[i]
	}
	procOf := func(ctx context.Context) int { return ctx.Value(procKey{}).(int) }
	dag, err := tranche.NewDAG(tranche.Asset{Name: "raw",
		Partitioning: tranche.Partitioning{Granularity: tranche.Day, Location: time.UTC, Column: "day"},
		Materialize: func(ctx context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
			part, _ := m.Partition()
			proc := procOf(ctx)
			if w.dead[proc].Load() {
				return nil, errDead // a dead process runs nothing
			}
			w.mu.Lock()
			w.runs = append(w.runs, runRecord{part.Key(), proc, time.Now()})
			w.mu.Unlock()
			time.Sleep(runOf[part.Key()])
			return []tranche.Row{{"day": part.Key()}}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	dag.Name = "model"
	w.dag = dag
	w.id = backfill.DAGIdentity(dag, tranche.Day, time.UTC)
	window := bfDays(t, 1, sc.days)
	w.dead = make([]*atomic.Bool, len(sc.procs))
	w.claimed, w.started = make([][]string, len(sc.procs)), make([][]string, len(sc.procs))
	for i := range w.dead {
		w.dead[i] = new(atomic.Bool)
	}
	newBackfill := func(proc int, l ledger.Ledger) *backfill.Backfill {
		p := sc.procs[proc]
		b := &backfill.Backfill{DAG: dag, Window: window, Ledger: l, Worker: fmt.Sprintf("p%d", proc), Concurrency: p.concurrency,
			Order: sc.order, OnFailure: tranche.FailContinue, Lease: modelLease, WaitForOthers: true,
			Runner: &tranche.Runner{}}
		if p.budget > 0 {
			b.Budget = backfill.NewBudget(p.budget)
		}
		b.OnEvent = func(ctx context.Context, e tranche.Event) { w.event(proc, e) }
		return b
	}
	id, err := newBackfill(0, w.l).ID()
	if err != nil {
		t.Fatal(err)
	}

	var wg sync.WaitGroup
	if sc.cancelAt > 0 {
		wg.Go(func() {
			time.Sleep(sc.cancelAt)
			// Recorded once the backfill is: a cancel of a backfill not
			// yet recorded is no cancel.
			if err := w.l.CancelBackfill(context.Background(), id, ledger.CancelOptions{}); err == nil {
				w.mu.Lock()
				w.canceledAt = time.Now()
				w.mu.Unlock()
			}
		})
	}
	for i, p := range sc.procs {
		wg.Go(func() {
			time.Sleep(p.joinAt)
			ctx, cancel := context.WithCancel(context.WithValue(context.Background(), procKey{}, i))
			defer cancel()
			if p.dieAt > 0 {
				timer := time.AfterFunc(p.dieAt-p.joinAt, func() {
					w.dead[i].Store(true)
					cancel()
				})
				defer timer.Stop()
			}
			b := newBackfill(i, &deadLedger{Ledger: w.l, w: w, proc: i})
			_, err := b.Run(ctx)
			if err != nil && !w.dead[i].Load() && !errors.Is(err, backfill.ErrBackfillCanceled) && !strings.Contains(err.Error(), errDead.Error()) {
				w.fail("process %d: Run: %v", i, err)
			}
		})
	}
	wg.Wait()
	w.check()

	// The faults stop: once the leases expire, one run finishes the
	// backfill, every partition succeeded exactly once.
	time.Sleep(modelLease)
	last := len(sc.procs)
	w.dead = append(w.dead, new(atomic.Bool))
	w.claimed, w.started = append(w.claimed, nil), append(w.started, nil)
	sc.procs = append(sc.procs, procPlan{concurrency: 2, finishDelay: []time.Duration{0}, finishFails: []bool{false}})
	w.mu.Lock()
	w.canceledAt = time.Time{} // resumed
	w.mu.Unlock()
	b := newBackfill(last, w.l)
	if _, err := b.Resume(context.WithValue(context.Background(), procKey{}, last)); err != nil {
		w.fail("the last run: %v", err)
	}
	sc.procs = sc.procs[:last]
	for i := range sc.days {
		p := bfDay(i + 1)
		h, err := w.l.History(context.Background(), w.id, p.Start)
		if err != nil {
			t.Fatal(err)
		}
		succeeded := 0
		for _, a := range h {
			if a.State == ledger.StateSucceeded {
				succeeded++
			}
		}
		if succeeded != 1 || h[len(h)-1].State != ledger.StateSucceeded {
			w.fail("partition %s: %d successes, the latest attempt %s; want exactly one, the latest", p.Key(), succeeded, h[len(h)-1].State)
		}
	}
	return w.failures
}

type procKey struct{}

// event checks each event as it is sent.
func (w *modelWorld) event(proc int, e tranche.Event) {
	switch e.Kind {
	case backfill.KindPartitionClaimed:
		w.mu.Lock()
		w.claimed[proc] = append(w.claimed[proc], e.Partition.Key())
		w.mu.Unlock()
	case backfill.KindPartitionStarted:
		w.mu.Lock()
		w.started[proc] = append(w.started[proc], e.Partition.Key())
		canceled := w.canceledAt
		w.mu.Unlock()
		if !canceled.IsZero() && time.Since(canceled) > modelRun {
			w.fail("process %d started %s %v after the cancel; want none later than one partition's run (%v)", proc, e.Partition.Key(), time.Since(canceled), modelRun)
		}
	case backfill.KindPartitionSucceeded:
		h, err := w.l.History(context.Background(), w.id, e.Partition.Start)
		if err != nil || len(h) == 0 || h[len(h)-1].State != ledger.StateSucceeded || h[len(h)-1].Worker != fmt.Sprintf("p%d", proc) {
			w.fail("process %d: partition.succeeded of %s sent while the ledger holds %v (%v); want its success recorded first", proc, e.Partition.Key(), h, err)
		}
	}
}

// check checks the runs and the orders once every process has ended.
func (w *modelWorld) check() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for proc := range w.sc.procs {
		// Started is claimed with the jobs never started left out.
		rest := w.claimed[proc]
		for _, key := range w.started[proc] {
			i := slices.Index(rest, key)
			if i < 0 {
				w.failures = append(w.failures, fmt.Sprintf("process %d started %s out of the order of its claims: claimed %v, started %v", proc, key, w.claimed[proc], w.started[proc]))
				break
			}
			rest = rest[i+1:]
		}
	}
	// A partition runs again only after its last run's process died or
	// failed to record it; at most Concurrency of a death's.
	byKey := map[string][]runRecord{}
	rerunAfterDeath := make([]int, len(w.sc.procs))
	for _, r := range w.runs {
		if prev := byKey[r.key]; len(prev) > 0 {
			last := prev[len(prev)-1]
			switch {
			case w.unrecorded[r.key]:
			case w.dead[last.proc].Load():
				rerunAfterDeath[last.proc]++
			default:
				w.failures = append(w.failures, fmt.Sprintf("partition %s ran again (process %d at %v) after process %d ran it at %v, which neither died nor failed to record it",
					r.key, r.proc, r.at.Sub(w.start), last.proc, last.at.Sub(w.start)))
			}
		}
		byKey[r.key] = append(byKey[r.key], r)
	}
	for proc, n := range rerunAfterDeath {
		if c := w.sc.procs[proc].concurrency; n > c {
			w.failures = append(w.failures, fmt.Sprintf("%d partitions of process %d ran again after it died; want at most its concurrency, %d", n, proc, c))
		}
	}
}
