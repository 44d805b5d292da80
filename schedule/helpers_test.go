package schedule_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/schedule"
)

// work is a one-asset DAG whose materializer records each call: the
// slot's key and when, by the scheduler's clock, it ran.
type work struct {
	t     testing.TB
	dag   *tranche.DAG
	clock func() time.Time

	mu    sync.Mutex
	calls []call
	// take, when set, is how long a slot's run takes (slept on the
	// system's clock, which synctest fakes); nil means no time.
	take func(key string) time.Duration
	fail func(key string) error
}

type call struct {
	key string
	at  time.Time
}

func newWork(t testing.TB, g tranche.TimeGranularity, loc *time.Location, clock func() time.Time) *work {
	t.Helper()
	w := &work{t: t, clock: clock}
	dag, err := tranche.NewDAG(tranche.Asset{
		Name:         "events",
		Partitioning: tranche.Partitioning{Granularity: g, Location: loc},
		Materialize:  w.materialize,
	})
	if err != nil {
		t.Fatal(err)
	}
	w.dag = dag
	return w
}

func (w *work) materialize(ctx context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
	p, err := m.Partition()
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	w.calls = append(w.calls, call{key: p.Key(), at: w.clock()})
	take, fail := w.take, w.fail
	w.mu.Unlock()
	if take != nil {
		select {
		case <-time.After(take(p.Key())):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if fail != nil {
		if err := fail(p.Key()); err != nil {
			return nil, err
		}
	}
	return nil, nil
}

// keys returns the keys of the calls, in order.
func (w *work) keys() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	keys := make([]string, len(w.calls))
	for i, c := range w.calls {
		keys[i] = c.key
	}
	return keys
}

func (w *work) callList() []call {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.calls)
}

// events records a scheduler's events.
type events struct {
	mu  sync.Mutex
	all []tranche.Event
}

func (r *events) hook(_ context.Context, e tranche.Event) {
	r.mu.Lock()
	r.all = append(r.all, e)
	r.mu.Unlock()
}

// of returns the targets of the events of kind k, in order, each with its
// trigger when it has one ("KEY live").
func (r *events) of(k tranche.Kind) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.all {
		if e.Kind != k {
			continue
		}
		s := e.Target
		if tr := schedule.TriggerOf(e); tr != "" {
			s += " " + string(tr)
		}
		out = append(out, s)
	}
	return out
}

func (r *events) list() []tranche.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.all)
}

// offsetClock returns a clock that reads base when called first, and
// runs at the system's pace (synctest's fake one) after.
func offsetClock(base time.Time) func() time.Time {
	t0 := time.Now()
	return func() time.Time { return base.Add(time.Since(t0)).In(base.Location()) }
}

// runFor runs s for d of the system's clock (synctest's), then stops it
// and waits for Run to return.
func runFor(t *testing.T, s *schedule.Scheduler, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() { errc <- s.Run(ctx) }()
	time.Sleep(d)
	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// start runs s until the returned function is called, which waits for
// Run to return.
func start(t *testing.T, s *schedule.Scheduler) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() { errc <- s.Run(ctx) }()
	return func() {
		t.Helper()
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("Run: %v", err)
		}
	}
}

func mustLoad(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func mustCron(t testing.TB, expr string, excluded ...string) tranche.TimeGranularity {
	t.Helper()
	g, err := tranche.ParseCron(expr, excluded...)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func mustTime(t testing.TB, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// history returns, for each slot of w's DAG starting in [from, to), its
// attempts' states and workers, as "succeeded" or "failed,succeeded".
func history(t testing.TB, l ledger.Ledger, dag *tranche.DAG, g tranche.TimeGranularity, loc *time.Location, from, to time.Time) map[string]string {
	t.Helper()
	id := backfill.DAGIdentity(dag, g, loc)
	out := map[string]string{}
	for a, err := range l.Latest(context.Background(), id, from, to) {
		if err != nil {
			t.Fatal(err)
		}
		h, err := l.History(context.Background(), id, a.Start)
		if err != nil {
			t.Fatal(err)
		}
		var states []string
		for _, at := range h {
			states = append(states, string(at.State))
			if at.Trigger != ledger.TriggerLive && at.Trigger != ledger.TriggerCatchUp && at.Backfill == "" {
				t.Errorf("attempt %d at slot %s of trigger %q; want the scheduler's, live or catch-up", at.Number, at.Key, at.Trigger)
			}
		}
		out[a.Key] = fmt.Sprint(states)
	}
	return out
}
