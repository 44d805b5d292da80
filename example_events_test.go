package tranche_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/tranche-dev/tranche"
)

// A window run calls each asset once with the whole window; the
// destination gets one batch per partition, empty ones included.
func ExampleRunner_Run_window() {
	dest := new(tranche.MemoryDestination)
	dag, _ := tranche.NewDAG(tranche.Asset{
		Name:         "events",
		Partitioning: tranche.Partitioning{Granularity: tranche.Day, Column: "day", AllowWindow: true},
		Destinations: []tranche.Destination{dest},
		Materialize: func(_ context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
			w := m.Window()
			fmt.Println("called once for", w)
			return []tranche.Row{{"day": w.Oldest().Key()}, {"day": w.Newest().Key()}, {"day": w.Newest().Key()}}, nil
		},
	})
	w, _ := tranche.NewTimePartitionWindow(tranche.Day,
		time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 1, 3, 0, 0, 0, 0, time.UTC))
	res, err := new(tranche.Runner).Run(context.Background(), dag, w)
	if err != nil {
		fmt.Println(err)
		return
	}
	o := res.Assets[0] // one per asset, in the DAG's order
	fmt.Println(res.State, o.RowsByPartition)
	// Output:
	// called once for day 2026-01-01..2026-01-03 UTC
	// succeeded map[2026-01-01:1 2026-01-02:0 2026-01-03:2]
}

// NewDAG refuses a cycle, showing it.
func ExampleNewDAG_cycle() {
	noop := func(context.Context, *tranche.Materialization) ([]tranche.Row, error) { return nil, nil }
	_, err := tranche.NewDAG(
		tranche.Asset{Name: "a", Deps: []string{"c"}, Materialize: noop},
		tranche.Asset{Name: "b", Deps: []string{"a"}, Materialize: noop},
		tranche.Asset{Name: "c", Deps: []string{"b"}, Materialize: noop},
	)
	fmt.Println(err)
	// Output:
	// tranche: dependency cycle (each asset feeds the next): a -> b -> c -> a
}

// SlogHook logs events: failures at ERROR, the lifecycle at INFO.
func ExampleSlogHook() {
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey || a.Key == "id" || a.Key == "run" || a.Key == "duration" {
				return slog.Attr{} // left out to keep the output stable
			}
			return a
		},
	}))
	dag, _ := tranche.NewDAG(tranche.Asset{
		Name: "load",
		Materialize: func(_ context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
			m.Logger().Info("connecting", "host", "db1")
			return nil, errors.New("connection refused")
		},
	})
	runner := tranche.Runner{OnEvent: tranche.SlogHook(logger)}
	_, err := runner.Run(context.Background(), dag, nil)
	fmt.Println("error:", err)
	// Output:
	// level=INFO msg=run.started attempt=1
	// level=INFO msg=asset.started asset=load attempt=1
	// level=INFO msg=connecting kind=log asset=load attempt=1 host=db1
	// level=ERROR msg=asset.failed asset=load attempt=1 err="tranche: asset \"load\" failed: connection refused"
	// level=ERROR msg=run.failed attempt=1 err="tranche: asset \"load\" failed: connection refused"
	// error: tranche: asset "load" failed: connection refused
}

// An asset marks transient errors with Retryable; the runner retries them
// with backoff, as its Retry policy allows.
func ExampleRetryable() {
	calls := 0
	dag, _ := tranche.NewDAG(tranche.Asset{
		Name:  "fetch",
		Retry: tranche.Retry{Attempts: 3, Backoff: time.Millisecond},
		Materialize: func(context.Context, *tranche.Materialization) ([]tranche.Row, error) {
			if calls++; calls < 3 {
				return nil, tranche.Retryable(errors.New("503 from upstream"))
			}
			return nil, nil
		},
	})
	res, err := new(tranche.Runner).Run(context.Background(), dag, nil)
	o := res.Assets[0]
	fmt.Println(res.State, o.Attempts, err)
	// Output:
	// succeeded 3 <nil>
}
