package sqlite_test

import (
	"testing"

	"github.com/tranche-dev/tranche/destination/sqldest"
	"github.com/tranche-dev/tranche/internal/sqldesttest"
	"github.com/tranche-dev/tranche/ledger/sqlite"
)

// Benchmarks of the SQLite destination; run them with
//
//	go test -run '^$' -bench 'DestinationWrite|DestinationBackfill' -count 5 ./ledger/sqlite
//
// BENCHMARKS.md holds the medians and the ratios.

// BenchmarkDestinationWrite writes partitions of 1,000 rows through the
// destination, beside a loop of prepared INSERTs in one transaction on
// the same connection (sqldesttest.BenchWrite).
func BenchmarkDestinationWrite(b *testing.B) {
	l := openTemp(b, nil)
	d, err := sqlite.NewDestination(b.Context(), l, sqldesttest.BenchTable("bench"), sqldesttest.BenchTable("loop"))
	if err != nil {
		b.Fatal(err)
	}
	if err := d.CreateTables(b.Context()); err != nil {
		b.Fatal(err)
	}
	// Token-fenced writes under no lease of the ledger are refused by a
	// destination sharing it: write through one that does not, on the
	// ledger's own connection.
	own, err := sqldest.New(b.Context(), l.Writer(), sqldest.Options{Dialect: &sqldest.SQLite, Name: "bench"}, sqldesttest.BenchTable("bench"))
	if err != nil {
		b.Fatal(err)
	}
	sqldesttest.BenchWrite(b, l.Writer(), own, "loop", func(int) string { return "?" }, 1000)
}

// BenchmarkDestinationBackfill runs backfills of 100 partitions of 100
// rows, one partition at a time, through a destination sharing the
// ledger's transactions and through one committing on its own, in the
// same file (sqldesttest.BenchBackfill).
func BenchmarkDestinationBackfill(b *testing.B) {
	l := openTemp(b, nil)
	shared, err := sqlite.NewDestination(b.Context(), l, sqldesttest.BenchTable("bench"))
	if err != nil {
		b.Fatal(err)
	}
	separate, err := sqlite.OpenDestination(b.Context(), l.Path(), nil, sqldesttest.BenchTable("bench_separate"))
	if err != nil {
		b.Fatal(err)
	}
	defer separate.Close()
	for _, d := range []*sqlite.Destination{shared, separate} {
		if err := d.CreateTables(b.Context()); err != nil {
			b.Fatal(err)
		}
	}
	sqldesttest.BenchBackfill(b, l, shared.Destination, separate.Destination, 100, 100, 1)
}
