package postgres_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/destination/files"
	"github.com/tranche-dev/tranche/ledger/postgres"
)

// Open the ledger shared by every worker of a backfill. The example has
// no output to check, since it needs a server: it is compiled by go test
// and go vet, not run (the package's tests run against a real server).
func ExampleOpen() {
	ctx := context.Background()
	lg, err := postgres.Open(ctx, os.Getenv("TRANCHE_POSTGRES_URL"), &postgres.Options{Schema: "tranche"})
	if err != nil {
		log.Fatal(err) // postgres.ErrConnect, ErrPermission, ...: what failed, never the password
	}
	defer lg.Close()

	dag, err := tranche.NewDAG(tranche.Asset{
		Name:         "events",
		Partitioning: tranche.Partitioning{Granularity: tranche.Day, Location: time.UTC, Column: "day"},
		Destinations: []tranche.Destination{&files.Destination{Dir: "warehouse"}},
		Materialize: func(_ context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
			p, err := m.Partition()
			return []tranche.Row{{"day": p.Key()}}, err
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	year, err := tranche.NewTimePartitionWindow(tranche.Day,
		time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2025, 12, 31, 0, 0, 0, 0, time.UTC))
	if err != nil {
		log.Fatal(err)
	}
	// Every replica runs the same backfill; each partition lands once.
	b := &backfill.Backfill{DAG: dag, Window: year, Ledger: lg, Concurrency: 4}
	report, err := b.Run(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(report)
}
