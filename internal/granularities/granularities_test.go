package granularities_test

import (
	"context"
	"testing"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/internal/granularities"
)

func TestSeveral(t *testing.T) {
	day, hour := tranche.Partitioning{Granularity: tranche.Day}, tranche.Partitioning{Granularity: tranche.Hour}
	cases := []struct {
		name   string
		assets []tranche.Asset
		want   bool
	}{
		{"one asset", []tranche.Asset{{Name: "a", Partitioning: day}}, false},
		{"one granularity", []tranche.Asset{{Name: "a", Partitioning: day}, {Name: "b", Partitioning: day, Deps: []string{"a"}}}, false},
		{"unpartitioned beside one", []tranche.Asset{{Name: "ref"}, {Name: "a", Partitioning: day}, {Name: "b", Partitioning: day, Deps: []string{"a"}}}, false},
		{"unpartitioned alone", []tranche.Asset{{Name: "ref"}}, false},
		{"hour into day", []tranche.Asset{{Name: "h", Partitioning: hour}, {Name: "d", Partitioning: day, Deps: []string{"h"}}}, true},
		{"unpartitioned between", []tranche.Asset{{Name: "h", Partitioning: hour}, {Name: "ref"}, {Name: "d", Partitioning: day, Deps: []string{"h"}}}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for i := range c.assets {
				c.assets[i].Materialize = func(context.Context, *tranche.Materialization) ([]tranche.Row, error) { return nil, nil }
			}
			dag, err := tranche.NewDAG(c.assets...)
			if err != nil {
				t.Fatal(err)
			}
			if got := granularities.Several(dag); got != c.want {
				t.Errorf("Several = %v, want %v", got, c.want)
			}
		})
	}
}
