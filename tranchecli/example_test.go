package tranchecli_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/ledger/memledger"
	"github.com/tranche-dev/tranche/tranchecli"
)

// exampleProgram is a program with a daily DAG that fails on the 3rd,
// over an in-memory ledger whose clock stands still, so that the output
// is the same on every run.
func exampleProgram() *tranchecli.Program {
	events, err := tranche.NewDAG(tranche.Asset{
		Name:         "events",
		Partitioning: tranche.Partitioning{Granularity: tranche.Day},
		Materialize: func(ctx context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
			p, err := m.Partition()
			if err != nil {
				return nil, err
			}
			if p.Key() == "2026-01-03" {
				return nil, errors.New("the source timed out")
			}
			return []tranche.Row{{"day": p.Key()}}, nil
		},
	})
	if err != nil {
		panic(err)
	}
	now := time.Date(2026, 2, 1, 9, 0, 0, 0, time.UTC)
	return &tranchecli.Program{
		Name:   "events",
		Ledger: memledger.New(func() time.Time { return now }),
		DAGs:   map[string]*tranche.DAG{"events": events},
		Worker: "example",
	}
}

// A program registers its ledger and DAGs and hands its arguments to
// Main; os.Exit(p.Main(ctx, os.Args[1:])) is the whole of its main.
func Example() {
	p := exampleProgram()
	ctx := context.Background()
	week := []string{"--from", "2026-01-01T00:00:00Z", "--to", "2026-01-05T00:00:00Z"}

	p.Main(ctx, append([]string{"plan", "events"}, week...))

	p.Stdout, p.Stderr = io.Discard, io.Discard // the progress lines tell the time
	code := p.Main(ctx, append([]string{"run", "events", "--yes", "--on-failure", "continue"}, week...))
	fmt.Println("run: exit", code)

	p.Stdout, p.Stderr = os.Stdout, os.Stdout
	p.Main(ctx, []string{"status", "6aac6a7647ce", "--color", "never"})
	p.Main(ctx, []string{"history", "6aac6a7647ce", "2026-01-03"})
	// Output:
	// backfill 6aac6a7647ce
	//   window      day 2026-01-01..2026-01-04 UTC (4 partitions)
	//   dag         events (6506f89e85f073c8)
	//   order       newest-first, 1 at a time, 1 per run
	//   rerun       failed
	//   on failure  stop
	//   revision    0
	//   counts      run 4 (4 runs), skip: succeeded 0, skip: running elsewhere 0, skip: recorded 0
	//   warning     no successful run of this DAG recorded: no estimate
	//   2026-01-04  run
	//   2026-01-03  run
	//   2026-01-02  run
	//   2026-01-01  run
	// run: exit 1
	// backfill 6aac6a7647ce
	//   dag         events (6506f89e85f073c8)
	//   window      day 2026-01-01..2026-01-04 UTC (4 partitions, 1 per run)
	//   created     2026-02-01T09:00:00Z
	//   state       failed
	//   counts      3 succeeded, 0 running, 1 failed, 0 canceled, 0 pending
	//
	// cells: one per partition; rows: month
	// 2026-01  # # X #
	//
	// # succeeded 3   X failed 1   > running 0   - canceled 0   . pending 0
	// partition 2026-01-03 of backfill 6aac6a7647ce (DAG events (6506f89e85f073c8))
	//   #  STATE   WORKER   STARTED               FINISHED              TOOK  ROWS  BACKFILL      TRIGGER   ERROR
	//   1  failed  example  2026-02-01T09:00:00Z  2026-02-01T09:00:00Z  0s    0     6aac6a7647ce  backfill  tranche: asset "events" failed for 2026-01-03: the source timed out
}

// status --watch waits for a backfill to end: exit 0 when it succeeded,
// 1 when it stopped otherwise, so that a script can wait on it.
func ExampleProgram_Main_watch() {
	p := exampleProgram()
	p.Stdout, p.Stderr = io.Discard, io.Discard
	ctx := context.Background()
	for _, from := range []string{"2026-01-04T00:00:00Z", "2026-01-02T00:00:00Z"} {
		p.Main(ctx, []string{"run", "events", "--yes", "--from", from, "--to", "2026-01-06T00:00:00Z"})
	}
	backfills, err := p.Ledger.Backfills(ctx)
	if err != nil {
		panic(err)
	}
	for _, b := range backfills {
		code := p.Main(ctx, []string{"status", b.ID, "--watch", "--interval", "10ms"})
		fmt.Printf("%s: status --watch exits %d\n", b.Window, code)
	}
	// Output:
	// day 2026-01-04..2026-01-05 UTC: status --watch exits 0
	// day 2026-01-02..2026-01-05 UTC: status --watch exits 1
}
