// Cli is a program of its own with tranche's backfill commands and its
// scheduler: a daily DAG, "events", registered in a tranchecli.Program
// over a SQLite ledger (sqlite:events.db, or the ledger --ledger or
// $TRANCHE_LEDGER names, an address as the tranche command takes it:
// sqlite:PATH). Its read commands (ls, status, history, plan) open the
// ledger read-only, and create nothing.
//
//	go run ./examples/cli run events --from 2026-01-01T00:00:00Z --to 2026-01-08T00:00:00Z
//	go run ./examples/cli ls
//	go run ./examples/cli status ID [--watch] [--partitions]
//	go run ./examples/cli history ID 2026-01-03
//	go run ./examples/cli cancel ID; go run ./examples/cli resume ID
//	go run ./examples/cli schedule [--delay 2h]   # each day once it ends, until SIGINT or SIGTERM
//
// EVENTS_FAIL=2026-01-03,2026-01-05 makes those days fail, as a source
// that is down would; EVENTS_HANG=2026-01-03 makes that day's run hang,
// as a stuck source would, after creating the file $EVENTS_HANG_MARK
// when set; EVENTS_SLOW=300ms makes each day take that long.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/ledger/sqlite"
	"github.com/tranche-dev/tranche/tranchecli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	if os.Getenv(tranchecli.LedgerEnv) == "" {
		os.Setenv(tranchecli.LedgerEnv, "sqlite:events.db") // unless --ledger names another
	}
	events, err := tranche.NewDAG(tranche.Asset{Name: "events", Partitioning: tranche.Partitioning{Granularity: tranche.Day},
		Materialize: extract})
	if err != nil {
		panic(err)
	}
	p := &tranchecli.Program{
		// The ledger named by --ledger or $TRANCHE_LEDGER, opened for what
		// the command does once the command line is known to be good.
		OpenLedger: sqlite.OpenLedger,
		DAGs:       map[string]*tranche.DAG{"events": events},
	}
	code := p.Main(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}

// extract returns a day's events, or fails for the days $EVENTS_FAIL
// lists.
func extract(ctx context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
	p, err := m.Partition()
	if err != nil {
		return nil, err
	}
	if slices.Contains(strings.Split(os.Getenv("EVENTS_FAIL"), ","), p.Key()) {
		return nil, fmt.Errorf("the source of %s is down", p.Key())
	}
	if slow, err := time.ParseDuration(os.Getenv("EVENTS_SLOW")); err == nil {
		select {
		case <-time.After(slow):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if os.Getenv("EVENTS_HANG") == p.Key() {
		if mark := os.Getenv("EVENTS_HANG_MARK"); mark != "" {
			if err := os.WriteFile(mark, nil, 0o644); err != nil {
				return nil, err
			}
		}
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return []tranche.Row{{"day": p.Key(), "events": 100 + p.Start.Day()}}, nil
}
