package postgres_test

import (
	"testing"

	"github.com/tranche-dev/tranche/internal/proctest"
	"github.com/tranche-dev/tranche/ledger"
)

// BenchmarkCatchUp10k is proctest.BenchCatchUp10k on PostgreSQL, each
// iteration in a new schema; run it against a test server with
//
//	eval "$(ledger/postgres/testserver.sh start)"
//	go test -run '^$' -bench CatchUp10k -benchtime 3x -count 5 ./ledger/postgres
//
// BENCHMARKS.md, "Live scheduler", holds the medians.
func BenchmarkCatchUp10k(b *testing.B) {
	proctest.BenchCatchUp10k(b, func(b *testing.B) ledger.Ledger { return openFresh(b, serverURL(b), nil) })
}
