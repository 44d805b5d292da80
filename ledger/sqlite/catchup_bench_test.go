package sqlite_test

import (
	"testing"

	"github.com/tranche-dev/tranche/internal/proctest"
	"github.com/tranche-dev/tranche/ledger"
)

// BenchmarkCatchUp10k is proctest.BenchCatchUp10k on SQLite, each
// iteration on a new file; run it with
//
//	go test -run '^$' -bench CatchUp10k -benchtime 3x -count 5 ./ledger/sqlite
//
// BENCHMARKS.md, "Live scheduler", holds the medians.
func BenchmarkCatchUp10k(b *testing.B) {
	proctest.BenchCatchUp10k(b, func(b *testing.B) ledger.Ledger { return openTemp(b, nil) })
}
