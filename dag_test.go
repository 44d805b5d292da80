package tranche_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/tranchetest"
)

func partitioned(a tranche.Asset, p tranche.Partitioning) tranche.Asset {
	a.Partitioning = p
	return a
}

func TestNewDAGRefuses(t *testing.T) {
	noop := tranchetest.Noop
	dest := new(tranche.MemoryDestination)
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	daily := tranche.Partitioning{Granularity: tranche.Day}
	for _, tc := range []struct {
		name   string
		assets []tranche.Asset
		want   []string // substrings of the error
	}{
		{"empty name", []tranche.Asset{noop("a"), noop("")}, []string{"asset #1 (counting from 0) has an empty name"}},
		{"nil Materialize", []tranche.Asset{{Name: "a"}}, []string{`asset "a" has a nil Materialize`}},
		{"nil function", []tranche.Asset{{Name: "a", Materialize: nil}}, []string{`asset "a" has a nil Materialize`}},
		{"duplicate", []tranche.Asset{noop("a"), noop("b"), noop("a")}, []string{`duplicate asset name "a" (assets #0 and #2)`}},
		{"missing dependency", []tranche.Asset{noop("a", "ghost")}, []string{`asset "a" depends on "ghost", which is not in the DAG`}},
		{"dependency twice", []tranche.Asset{noop("a"), noop("b", "a", "a")}, []string{`asset "b" lists dependency "a" twice`}},
		{"self cycle", []tranche.Asset{noop("a", "a")}, []string{"dependency cycle (each asset feeds the next): a -> a"}},
		{"cycle", []tranche.Asset{noop("root"), noop("c", "b"), noop("b", "a"), noop("a", "c", "root"), noop("tail", "c")},
			[]string{"dependency cycle (each asset feeds the next): a -> b -> c -> a"}},
		{"partitioned feeds unpartitioned", []tranche.Asset{partitioned(noop("p"), daily), noop("u", "p")},
			[]string{`partitioned asset "p" (day) feeds unpartitioned asset "u"`}},
		{"granularities differ", []tranche.Asset{partitioned(noop("d"), daily), partitioned(noop("h", "d"), tranche.Partitioning{Granularity: tranche.Hour})},
			[]string{`asset "h" (hour) depends on asset "d" (day): each hour partition reads the day partition holding it, which has not closed when it does; declare Mappings["d"] = Mapping{Open: true}`}},
		{"locations differ", []tranche.Asset{partitioned(noop("d"), tranche.Partitioning{Granularity: tranche.Day, Location: time.UTC}),
			partitioned(noop("e", "d"), tranche.Partitioning{Granularity: tranche.Day, Location: ny})},
			[]string{`asset "e" (in America/New_York) depends on asset "d" (in UTC)`}},
		{"partitioning without granularity", []tranche.Asset{partitioned(noop("a"), tranche.Partitioning{Column: "day"})},
			[]string{`asset "a" sets Partitioning fields but no Granularity`}},
		{"destination without column", []tranche.Asset{{Name: "a", Materialize: noop("a").Materialize, Partitioning: daily, Destinations: []tranche.Destination{dest}}},
			[]string{`partitioned asset "a" has destinations but no Partitioning.Column`}},
		{"nil destination", []tranche.Asset{{Name: "a", Materialize: noop("a").Materialize, Destinations: []tranche.Destination{nil}}},
			[]string{`asset "a": destination #0 is nil`}},
		{"negative timeout", []tranche.Asset{{Name: "a", Materialize: noop("a").Materialize, Timeout: -time.Second}},
			[]string{`asset "a": negative Timeout -1s`}},
		{"negative retry", []tranche.Asset{{Name: "a", Materialize: noop("a").Materialize, Retry: tranche.Retry{Attempts: -1}}},
			[]string{`asset "a": negative Retry setting`}},
		{"several at once", []tranche.Asset{{Name: "a"}, noop("b", "x"), noop("")},
			[]string{`asset "a" has a nil Materialize`, `asset "b" depends on "x"`, "empty name"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dag, err := tranche.NewDAG(tc.assets...)
			if err == nil {
				t.Fatalf("NewDAG = %v, want an error", dag)
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("NewDAG error:\n%v\nwant it to contain %q", err, want)
				}
			}
		})
	}
}

func TestNewDAGAccepts(t *testing.T) {
	daily := tranche.Partitioning{Granularity: tranche.Day}
	for _, tc := range []struct {
		name   string
		assets []tranche.Asset
	}{
		{"empty", nil},
		{"unpartitioned feeds partitioned", []tranche.Asset{tranchetest.Noop("dim"), partitioned(tranchetest.Noop("fact", "dim"), daily)}},
		{"one location set", []tranche.Asset{partitioned(tranchetest.Noop("a"), daily),
			partitioned(tranchetest.Noop("b", "a"), tranche.Partitioning{Granularity: tranche.Day, Location: time.UTC})}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tranche.NewDAG(tc.assets...); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestDAGOrder(t *testing.T) {
	assets := []tranche.Asset{
		tranchetest.Noop("zeta"), tranchetest.Noop("alpha", "zeta"), tranchetest.Noop("beta"),
		tranchetest.Noop("gamma", "alpha", "beta"), tranchetest.Noop("aardvark"),
	}
	want := []string{"aardvark", "beta", "zeta", "alpha", "gamma"}
	for i := range assets {
		// every rotation of the input gives the same order
		in := append(slices.Clone(assets[i:]), assets[:i]...)
		dag, err := tranche.NewDAG(in...)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for a := range dag.Assets() {
			got = append(got, a.Name)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("rotation %d: Assets() order mismatch (-want +got):\n%s", i, diff)
		}
	}
}

func TestDAGIsACopy(t *testing.T) {
	a := tranchetest.Noop("a")
	b := tranchetest.Noop("b", "a")
	dag, err := tranche.NewDAG(a, b)
	if err != nil {
		t.Fatal(err)
	}
	b.Deps[0] = "changed"
	got, ok := dag.Asset("b")
	if !ok || got.Deps[0] != "a" {
		t.Fatalf("Asset(b) = %+v, %v; changing the input changed the DAG", got, ok)
	}
	got.Deps[0] = "again"
	if again, _ := dag.Asset("b"); again.Deps[0] != "a" {
		t.Error("changing a returned Asset changed the DAG")
	}
	if _, ok := dag.Asset("nope"); ok {
		t.Error(`Asset("nope") found an asset`)
	}
	if n := len(slices.Collect(dag.Assets())); n != 2 {
		t.Errorf("Assets() holds %d assets, want 2", n)
	}
	for range dag.Assets() {
		break // stopping early is fine
	}
}

func TestRetryable(t *testing.T) {
	base := errors.New("transient")
	err := tranche.Retryable(base)
	if !tranche.IsRetryable(err) || !errors.Is(err, base) || err.Error() != "transient" {
		t.Errorf("Retryable(%v) = %v", base, err)
	}
	if wrapped := errors.Join(errors.New("x"), err); !tranche.IsRetryable(wrapped) {
		t.Error("IsRetryable does not see through wrapping")
	}
	if tranche.IsRetryable(base) || tranche.Retryable(nil) != nil {
		t.Error("a plain error is retryable, or Retryable(nil) is not nil")
	}
}

// TestNewDAGReportsEveryProblem: one call names every problem, a
// duplicate's own problems and every cycle included.
func TestNewDAGReportsEveryProblem(t *testing.T) {
	noop := tranchetest.Noop
	_, err := tranche.NewDAG(
		noop("a"),
		tranche.Asset{Name: "a", Deps: []string{"ghost"}}, // a duplicate, with a nil Materialize and a missing dependency
		noop("self", "self"),
		noop("u", "ghost", "a", "a"),
		noop("x", "y"), noop("y", "x"), // one cycle
		noop("p", "r"), noop("q", "p"), noop("r", "q"), // another
		noop("below", "p"), // behind a cycle, on none
		tranche.Asset{Materialize: noop("z").Materialize, Timeout: -time.Second},
	)
	if err == nil {
		t.Fatal("NewDAG succeeded")
	}
	joined, ok := err.(interface{ Unwrap() []error })
	if !ok {
		t.Fatalf("NewDAG error %T is not joined", err)
	}
	var got []string
	for _, e := range joined.Unwrap() {
		got = append(got, e.Error())
	}
	want := []string{
		`tranche: duplicate asset name "a" (assets #0 and #1)`,
		`tranche: asset "a" has a nil Materialize`,
		`tranche: asset #10 (counting from 0) has an empty name`,
		`tranche: asset #10 (counting from 0): negative Timeout -1s`,
		`tranche: asset "a" depends on "ghost", which is not in the DAG`,
		`tranche: asset "self" depends on itself: dependency cycle (each asset feeds the next): self -> self`,
		`tranche: asset "u" depends on "ghost", which is not in the DAG`,
		`tranche: asset "u" lists dependency "a" twice`,
		`tranche: dependency cycle (each asset feeds the next): p -> q -> r -> p`,
		`tranche: dependency cycle (each asset feeds the next): x -> y -> x`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("NewDAG errors (-want +got):\n%s", diff)
	}
}

// TestNewDAGEmpty: NewDAG() is the empty DAG, and a run of it completes
// at once, with a target or without.
func TestNewDAGEmpty(t *testing.T) {
	dag, err := tranche.NewDAG()
	if err != nil {
		t.Fatal(err)
	}
	if all := slices.Collect(dag.Assets()); all != nil {
		t.Fatalf("NewDAG() holds %d assets", len(all))
	}
	if _, ok := dag.Asset("a"); ok {
		t.Fatal("the empty DAG has an asset a")
	}
	var r tranche.Runner
	for _, target := range []tranche.Target{nil, day(2)} {
		res, err := r.Run(context.Background(), dag, target)
		if err != nil || res.State != tranche.StateSucceeded || len(res.Assets) != 0 {
			t.Errorf("Run(empty DAG, %v) = %+v, %v; want a succeeded run of nothing", target, res, err)
		}
	}
}

func TestDAGDefaultName(t *testing.T) {
	noop := func(context.Context, *tranche.Materialization) ([]tranche.Row, error) { return nil, nil }
	asset := func(name string, deps ...string) tranche.Asset {
		return tranche.Asset{Name: name, Deps: deps, Materialize: noop}
	}
	for _, tt := range []struct {
		assets []tranche.Asset
		want   string
	}{
		{nil, ""},
		{[]tranche.Asset{asset("events")}, "events"},
		{[]tranche.Asset{asset("daily_totals", "orders"), asset("orders")}, "daily_totals"},
		{[]tranche.Asset{asset("orders"), asset("clicks"), asset("raw")}, "clicks+orders+raw"},
		{[]tranche.Asset{asset("a"), asset("b"), asset("c"), asset("d"), asset("e")}, "a+b+c+2 more"},
	} {
		d, err := tranche.NewDAG(tt.assets...)
		if err != nil {
			t.Fatal(err)
		}
		if d.Name != tt.want {
			t.Errorf("NewDAG(%d assets).Name = %q; want %q", len(tt.assets), d.Name, tt.want)
		}
	}
}
