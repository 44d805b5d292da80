// Package tranchetest helps test code that uses tranche: a hook that
// records events ([Recorder]), assets and DAGs built from plain functions
// ([Func], [Noop], [Rows], [Fail], [NewDAG]), assertions on results, events
// and the rows of a [tranche.MemoryDestination] ([RequireSucceeded],
// [RequireState], [RequireKinds], [RequireRows], [RequireKeys]),
// backfills on a settable [ledgertest.Clock] and an in-memory ledger ([RunBackfill])
// with a check that every partition succeeded exactly once
// ([CheckSucceededOnce], [RequireSucceededOnce]), the rows of a
// [github.com/tranche-dev/tranche/destination/files.Destination] read back ([FileRows], [FileKeys],
// [RequireFileRows]), and a conformance suite for [ledger.Ledger]
// implementations ([ledgertest.Run]).
//
// It imports only the standard library and tranche, so it adds nothing to
// a consuming module's dependencies, and, as a separate package, it links
// testing into test binaries only.
//
//	rec := new(tranchetest.Recorder)
//	dest := new(tranche.MemoryDestination)
//	dag := tranchetest.NewDAG(t,
//		tranchetest.Rows("raw", []tranche.Row{{"n": 1}}),
//		tranchetest.Func("sum", sum, "raw"),
//	)
//	runner := tranche.Runner{OnEvent: rec.OnEvent}
//	res, err := runner.Run(ctx, dag, nil)
//	tranchetest.RequireSucceeded(t, res, err)
//	tranchetest.RequireKinds(t, rec, "sum", tranche.KindAssetStarted, tranche.KindAssetSucceeded)
//
// A test of a backfill:
//
//	b := &backfill.Backfill{DAG: dag, Window: january}
//	report, err := tranchetest.RunBackfill(t.Context(), nil, b) // an in-memory ledger on a still clock
//	if err != nil {
//		t.Fatal(err)
//	}
//	tranchetest.RequireSucceededOnce(t, b)
//	tranchetest.RequireFileRows(t, files, "events", "day", "2026-01-01", []tranche.Row{{"day": "2026-01-01", "n": 1}})
package tranchetest

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/tranche-dev/tranche"
)

// Recorder is an event hook that keeps every event it is given. The zero
// value is ready to use; it is safe for concurrent use. Pass its OnEvent
// method as [tranche.Runner.OnEvent].
type Recorder struct {
	mu     sync.Mutex
	events []tranche.Event
}

// OnEvent records e.
func (r *Recorder) OnEvent(_ context.Context, e tranche.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

// Events returns a copy of the events recorded so far, in the order they
// arrived.
func (r *Recorder) Events() []tranche.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// Kinds returns the kinds of the recorded events of the named asset, in
// order; an empty asset selects the events that name no asset (run and
// backfill events).
func (r *Recorder) Kinds(asset string) []tranche.Kind {
	var kinds []tranche.Kind
	for _, e := range r.Events() {
		if e.Asset == asset {
			kinds = append(kinds, e.Kind)
		}
	}
	return kinds
}

// Reset forgets the recorded events.
func (r *Recorder) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = nil
}

// Func returns an unpartitioned asset named name, depending on deps, that
// calls fn. Set its Partitioning, Destinations, Timeout or Retry on the
// returned value as needed.
func Func(name string, fn func(ctx context.Context, m *tranche.Materialization) ([]tranche.Row, error), deps ...string) tranche.Asset {
	return tranche.Asset{Name: name, Deps: deps, Materialize: fn}
}

// Noop returns an asset that produces no rows.
func Noop(name string, deps ...string) tranche.Asset {
	return Func(name, func(context.Context, *tranche.Materialization) ([]tranche.Row, error) { return nil, nil }, deps...)
}

// Rows returns an asset that produces rows, the same on every call.
func Rows(name string, rows []tranche.Row, deps ...string) tranche.Asset {
	return Func(name, func(context.Context, *tranche.Materialization) ([]tranche.Row, error) { return rows, nil }, deps...)
}

// Fail returns an asset that fails with err on every call.
func Fail(name string, err error, deps ...string) tranche.Asset {
	return Func(name, func(context.Context, *tranche.Materialization) ([]tranche.Row, error) { return nil, err }, deps...)
}

// NewDAG returns tranche.NewDAG(assets...), and fails the test if the
// assets do not form a valid DAG.
func NewDAG(tb testing.TB, assets ...tranche.Asset) *tranche.DAG {
	tb.Helper()
	return newDAG(tb, assets...)
}

func newDAG(t testingT, assets ...tranche.Asset) *tranche.DAG {
	t.Helper()
	dag, err := tranche.NewDAG(assets...)
	if err != nil {
		t.Fatalf("tranche.NewDAG: %v", err)
		return nil
	}
	return dag
}

// testingT is the part of testing.TB the assertions use, so that their
// failures can be tested.
type testingT interface {
	Helper()
	Fatalf(format string, args ...any)
}

// RequireSucceeded fails the test unless the run succeeded: err is nil,
// the status is [tranche.StateSucceeded], and no hook panicked. The
// message lists every asset that did not complete, with its error.
func RequireSucceeded(tb testing.TB, res *tranche.Result, err error) {
	tb.Helper()
	requireSucceeded(tb, res, err)
}

func requireSucceeded(t testingT, res *tranche.Result, err error) {
	t.Helper()
	switch {
	case res == nil:
		t.Fatalf("run did not start: %v", err)
	case err != nil || res.State != tranche.StateSucceeded:
		t.Fatalf("run %s %s, want succeeded: %v%s", res.RunID, res.State, err, outcomes(res))
	case res.HookErr != nil:
		t.Fatalf("run %s succeeded, but a hook panicked: %v", res.RunID, res.HookErr)
	}
}

// RequireState fails the test unless the run ended with status want, and
// each asset named in assets (as "name=status", for instance
// "load=failed") ended with the status given.
func RequireState(tb testing.TB, res *tranche.Result, want tranche.State, assets ...string) {
	tb.Helper()
	requireState(tb, res, want, assets...)
}

func requireState(t testingT, res *tranche.Result, want tranche.State, assets ...string) {
	t.Helper()
	if res == nil {
		t.Fatalf("run did not start (nil Result), want status %s", want)
		return
	}
	if res.State != want {
		t.Fatalf("run %s %s, want %s%s", res.RunID, res.State, want, outcomes(res))
		return
	}
	for _, spec := range assets {
		name, status, ok := strings.Cut(spec, "=")
		if !ok {
			t.Fatalf("RequireState: %q is not name=state", spec)
			return
		}
		i := slices.IndexFunc(res.Assets, func(o tranche.AssetResult) bool { return o.Asset == name })
		switch {
		case i < 0:
			t.Fatalf("run %s has no asset %q", res.RunID, name)
			return
		case string(res.Assets[i].State) != status:
			t.Fatalf("asset %q %s, want %s%s", name, res.Assets[i].State, status, outcomes(res))
			return
		}
	}
}

func outcomes(res *tranche.Result) string {
	var b strings.Builder
	for _, o := range res.Assets {
		fmt.Fprintf(&b, "\n\t%s: %s", o.Asset, o.State)
		if o.Err != nil {
			fmt.Fprintf(&b, ": %v", o.Err)
		}
	}
	return b.String()
}

// RequireKinds fails the test unless the kinds of the recorded events of
// the named asset ("" for run events), in order, are want.
func RequireKinds(tb testing.TB, rec *Recorder, asset string, want ...tranche.Kind) {
	tb.Helper()
	requireKinds(tb, rec, asset, want...)
}

func requireKinds(t testingT, rec *Recorder, asset string, want ...tranche.Kind) {
	t.Helper()
	if got := rec.Kinds(asset); !slices.Equal(got, want) {
		what := "run events"
		if asset != "" {
			what = fmt.Sprintf("events of asset %q", asset)
		}
		t.Fatalf("%s:\n\tgot  %v\n\twant %v", what, got, want)
	}
}

// RequireRows fails the test unless the destination holds exactly want,
// in order, for the asset's partition with the given key ("" for an
// unpartitioned asset). An empty want requires the partition to have been
// written with no rows. Values are compared with reflect.DeepEqual.
func RequireRows(tb testing.TB, dest *tranche.MemoryDestination, asset, key string, want []tranche.Row) {
	tb.Helper()
	requireRows(tb, dest, asset, key, want)
}

func requireRows(t testingT, dest *tranche.MemoryDestination, asset, key string, want []tranche.Row) {
	t.Helper()
	got, ok := dest.Rows(asset, key)
	switch {
	case !ok:
		t.Fatalf("asset %q, partition %q: never written; written partitions: %q", asset, key, dest.Keys(asset))
	case len(got) != len(want) || len(want) > 0 && !reflect.DeepEqual(got, want):
		t.Fatalf("asset %q, partition %q: rows differ\n\tgot  %v\n\twant %v", asset, key, got, want)
	}
}

// RequireKeys fails the test unless the keys of the asset's written
// partitions, sorted, are want.
func RequireKeys(tb testing.TB, dest *tranche.MemoryDestination, asset string, want ...string) {
	tb.Helper()
	requireKeys(tb, dest, asset, want...)
}

func requireKeys(t testingT, dest *tranche.MemoryDestination, asset string, want ...string) {
	t.Helper()
	want = slices.Sorted(slices.Values(want))
	if got := dest.Keys(asset); !slices.Equal(got, want) {
		t.Fatalf("asset %q: partitions written:\n\tgot  %q\n\twant %q", asset, got, want)
	}
}
