package proctest

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/tranche-dev/tranche"
)

// Events is the backfill the ledgers' worker processes run: one daily
// asset, "events", which writes Rows rows a partition ({day, n, worker,
// attempt}) into a files destination under Dest, and appends a line to
// Log when each execution starts and when it ends ("start KEY WORKER
// ATTEMPT", "done ..."), so that a test can count executions across
// processes killed at any point.
type Events struct {
	Worker string
	Dest   string
	Log    io.Writer // a file opened with O_APPEND, shared by the workers
	Rows   int

	// Work is the asset's work on a partition, between its two lines;
	// its error fails the execution.
	Work func(ctx context.Context, key string) error
}

// Backfill returns a backfill of the events asset over w.
func (e Events) Backfill(w tranche.TimePartitionWindow, l tranche.Ledger) (*tranche.Backfill, error) {
	var attempts sync.Map // run id -> the ledger's attempt number
	logLine := func(what, key string, attempt int) {
		// One write per line under O_APPEND: lines of several workers
		// never interleave.
		fmt.Fprintf(e.Log, "%s %s %s %d\n", what, key, e.Worker, attempt)
	}
	asset := tranche.Asset{
		Name:         "events",
		Partitioning: tranche.Partitioning{Granularity: tranche.Day, Location: time.UTC, Column: "day"},
		Destinations: []tranche.Destination{&tranche.FilesDestination{Dir: e.Dest}},
		Materializer: tranche.MaterializeFunc(func(ctx context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
			p, err := m.Partition()
			if err != nil {
				return nil, err
			}
			attempt := 0
			if v, ok := attempts.Load(m.RunID()); ok {
				attempt = v.(int)
			}
			key := p.Key()
			logLine("start", key, attempt)
			if err := e.Work(ctx, key); err != nil {
				return nil, err
			}
			out := make([]tranche.Row, e.Rows)
			for i := range out {
				out[i] = tranche.Row{"day": key, "n": i, "worker": e.Worker, "attempt": attempt}
			}
			logLine("done", key, attempt)
			return out, nil
		}),
	}
	dag, err := tranche.NewDAG(asset)
	if err != nil {
		return nil, err
	}
	return &tranche.Backfill{
		DAG: dag, Window: w, Ledger: l, Worker: e.Worker, OnFailure: tranche.FailContinue,
		Runner: &tranche.Runner{OnEvent: func(_ context.Context, ev tranche.Event) {
			if ev.Kind == tranche.KindRunStarted {
				attempts.Store(ev.RunID, ev.Attempt)
			}
		}},
	}, nil
}
