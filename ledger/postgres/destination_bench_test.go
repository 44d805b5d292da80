package postgres_test

import (
	"strconv"
	"testing"

	"github.com/tranche-dev/tranche/destination/sqldest"
	"github.com/tranche-dev/tranche/internal/sqldesttest"
	"github.com/tranche-dev/tranche/ledger/postgres"
)

// Benchmarks of the PostgreSQL destination, against the test server; run
// them with
//
//	go test -run '^$' -bench 'DestinationWrite|DestinationBackfill' -count 5 ./ledger/postgres
//
// BENCHMARKS.md holds the medians and the ratios.

// benchLedger opens a ledger in a fresh schema with a destination
// sharing it, of the given tables, created.
func benchLedger(b testing.TB, tables ...sqldest.Table) (*postgres.Ledger, *postgres.Destination, string) {
	url := serverURL(b)
	schema := freshSchema(b, url)
	l, err := postgres.Open(b.Context(), url, &postgres.Options{Schema: schema})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	d, err := postgres.NewDestination(b.Context(), l, tables...)
	if err != nil {
		b.Fatal(err)
	}
	if err := d.CreateTables(b.Context()); err != nil {
		b.Fatal(err)
	}
	return l, d, schema
}

// BenchmarkDestinationWrite writes partitions of 1,000 rows through the
// destination (COPY), beside a loop of prepared INSERTs in one
// transaction on the same pool (sqldesttest.BenchWrite).
func BenchmarkDestinationWrite(b *testing.B) {
	l, _, _ := benchLedger(b, sqldesttest.BenchTable("bench"), sqldesttest.BenchTable("loop"))
	// Token-fenced writes under no lease of the ledger are refused by a
	// destination sharing it: write through one that does not, on the
	// ledger's own pool.
	own, err := sqldest.New(b.Context(), l.Ledger.DB(), sqldest.Options{Dialect: postgres.DestinationDialect(), Name: "bench"}, sqldesttest.BenchTable("bench"))
	if err != nil {
		b.Fatal(err)
	}
	sqldesttest.BenchWrite(b, l.Ledger.DB(), own, "loop", func(i int) string { return "$" + strconv.Itoa(i) }, 1000)
}

// BenchmarkDestinationBackfill runs backfills of 100 partitions of 100
// rows, one partition at a time, through a destination sharing the
// ledger's transactions and through one committing on its own
// connections, in the same schema (sqldesttest.BenchBackfill).
func BenchmarkDestinationBackfill(b *testing.B) {
	l, shared, schema := benchLedger(b, sqldesttest.BenchTable("bench"))
	separate, err := postgres.OpenDestination(b.Context(), serverURL(b), &postgres.Options{Schema: schema}, sqldesttest.BenchTable("bench_separate"))
	if err != nil {
		b.Fatal(err)
	}
	defer separate.Close()
	if err := separate.CreateTables(b.Context()); err != nil {
		b.Fatal(err)
	}
	sqldesttest.BenchBackfill(b, l, shared.Destination, separate.Destination, 100, 100, 1)
}
