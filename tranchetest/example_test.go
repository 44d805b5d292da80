package tranchetest_test

import (
	"context"
	"fmt"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/tranchetest"
)

// A Recorder keeps every event of a run; Kinds lists those of one asset.
func ExampleRecorder() {
	dag, err := tranche.NewDAG(
		tranchetest.Rows("raw", []tranche.Row{{"n": 1}, {"n": 2}}),
		tranchetest.Func("sum", func(_ context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
			rows, err := m.Input("raw")
			total := 0
			for _, r := range rows {
				total += r["n"].(int)
			}
			return []tranche.Row{{"total": total}}, err
		}, "raw"),
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	rec := new(tranchetest.Recorder)
	res, err := (&tranche.Runner{OnEvent: rec.OnEvent}).Run(context.Background(), dag, nil)
	fmt.Println(res.Status, err)
	fmt.Println(rec.Kinds(""))
	fmt.Println(rec.Kinds("sum"))
	// Output:
	// completed <nil>
	// [run.started run.completed]
	// [asset.started asset.completed]
}
