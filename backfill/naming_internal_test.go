package backfill

import (
	"context"
	"testing"

	"github.com/tranche-dev/tranche"
)

// TestDefaultNameAsNewDAG holds defaultName to the name tranche.NewDAG
// gives: one leaf, several, more than three, and a chain.
func TestDefaultNameAsNewDAG(t *testing.T) {
	asset := func(name string, deps ...string) tranche.Asset {
		return tranche.Asset{Name: name, Deps: deps, Materialize: func(context.Context, *tranche.Materialization) ([]tranche.Row, error) { return nil, nil }}
	}
	for i, assets := range [][]tranche.Asset{
		{asset("events")},
		{asset("events"), asset("deploy_2")},
		{asset("raw"), asset("daily", "raw"), asset("weekly", "daily")},
		{asset("a"), asset("b"), asset("c"), asset("d"), asset("e")},
		{asset("src"), asset("x", "src"), asset("y", "src"), asset("z", "x", "y")},
	} {
		dag, err := tranche.NewDAG(assets...)
		if err != nil {
			t.Fatal(err)
		}
		if got := defaultName(dag); got != dag.Name {
			t.Errorf("case %d: defaultName = %q; NewDAG named it %q", i, got, dag.Name)
		}
		if !namesAssetsOf(dag.Name, dag) {
			t.Errorf("case %d: namesAssetsOf(%q) = false; want its own default name read as its assets", i, dag.Name)
		}
	}
}
