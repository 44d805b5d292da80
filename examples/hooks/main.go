// Hooks counts a backfill-like loop's progress with a custom event hook:
// a plain function, called synchronously with every event, that keeps
// counts and prints a line each time a day completes. It is combined with
// the JSON-lines writer through tranche.Hooks.
//
//	go run ./examples/hooks
package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log"
	"strings"
	"sync"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/eventlog"
)

// progress is a hook that counts events; it is safe for concurrent use,
// as hooks must be.
type progress struct {
	mu                   sync.Mutex
	total                int
	runsDone, runsFailed int
	assetsDone, retries  int
	rows                 int
}

func (p *progress) OnEvent(_ context.Context, e tranche.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch e.Kind {
	case tranche.KindAssetSucceeded:
		p.assetsDone++
	case tranche.KindAssetRetrying:
		p.retries++
	case tranche.KindRunSucceeded, tranche.KindRunFailed:
		if e.Kind == tranche.KindRunSucceeded {
			p.runsDone++
		} else {
			p.runsFailed++
		}
		p.rows += e.Rows
		fmt.Printf("[%2d/%d] %s %-13s rows so far %3d\n", p.runsDone+p.runsFailed, p.total, e.Target, e.Kind, p.rows)
	}
}

func main() {
	ctx := context.Background()
	days, err := tranche.NewTimePartitionWindow(tranche.Day,
		time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 5, 10, 0, 0, 0, 0, time.UTC))
	if err != nil {
		log.Fatal(err)
	}
	daily := tranche.Partitioning{Granularity: tranche.Day}
	flaky := 0
	dag, err := tranche.NewDAG(
		tranche.Asset{Name: "extract", Partitioning: daily, Retry: tranche.Retry{Attempts: 3, Backoff: time.Millisecond}, Materialize: func(ctx context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
			time.Sleep(2 * time.Millisecond)
			if flaky++; flaky%4 == 0 {
				return nil, tranche.Retryable(errors.New("source busy"))
			}
			return []tranche.Row{{"n": 1}, {"n": 2}}, nil
		}},
		tranche.Asset{Name: "load", Deps: []string{"extract"}, Partitioning: daily, Materialize: func(ctx context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
			return m.Input("extract")
		}},
	)
	if err != nil {
		log.Fatal(err)
	}
	p := &progress{total: days.Len()}
	var jsonl bytes.Buffer
	events := eventlog.NewWriter(&jsonl)
	runner := tranche.Runner{OnEvent: tranche.Hooks(p.OnEvent, events.OnEvent)}
	for day := range days.All() {
		if _, err := runner.Run(ctx, dag, day); err != nil {
			log.Fatal(err)
		}
	}
	if err := events.Err(); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("runs: %d completed, %d failed; assets completed: %d; retries: %d\n", p.runsDone, p.runsFailed, p.assetsDone, p.retries)
	lines := strings.Split(strings.TrimSpace(jsonl.String()), "\n")
	fmt.Printf("the JSON-lines writer kept %d events, one per line\n", len(lines))
}
