package memledger_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/memledger"
)

// BenchmarkMemoryLedger measures the ledger's overhead per partition of a
// backfill: a claim, a heartbeat and a finish (goal: under 5 µs). Each
// iteration lands a new minute partition, so the ledger grows as in a real
// backfill, up to backfills of 10,000 partitions (then a fresh ledger, so
// that the heap stays the size of one backfill). Run with -benchmem.
func BenchmarkMemoryLedger(b *testing.B) {
	first := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	chunk := func(i, n int) []tranche.TimePartition {
		ps := make([]tranche.TimePartition, n)
		for k := range ps {
			start := first.Add(time.Duration(i*n+k) * time.Minute)
			ps[k] = tranche.TimePartition{Start: start, End: start.Add(time.Minute), Granularity: tranche.Minute}
		}
		return ps
	}
	land := func(b *testing.B, l ledger.Ledger, worker string, ps []tranche.TimePartition, outcomes []ledger.Outcome) {
		ctx := b.Context()
		lease, err := l.Claim(ctx, ledger.ClaimRequest{
			DAG: "dag", Backfill: "backfill", Worker: worker, RunID: "run",
			Partitions: ps, Lease: time.Minute, Policy: ledger.RerunFailed,
		})
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Heartbeat(ctx, lease, time.Minute); err != nil {
			b.Fatal(err)
		}
		if err := l.Finish(ctx, lease, outcomes); err != nil {
			b.Fatal(err)
		}
	}
	one := []ledger.Outcome{{State: ledger.StateSucceeded, Rows: 1}}
	const backfill = 10_000 // partitions per ledger

	b.Run("Partition", func(b *testing.B) {
		var l ledger.Ledger
		for i := 0; b.Loop(); i++ {
			if i%backfill == 0 {
				l = memledger.New(nil)
			}
			land(b, l, "worker", chunk(i%backfill, 1), one)
		}
	})
	b.Run("Chunk16", func(b *testing.B) {
		outcomes := make([]ledger.Outcome, 16)
		for k := range outcomes {
			outcomes[k] = one[0]
		}
		var l ledger.Ledger
		for i := 0; b.Loop(); i++ {
			if i%(backfill/16) == 0 {
				l = memledger.New(nil)
			}
			land(b, l, "worker", chunk(i%(backfill/16), 16), outcomes)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*16), "ns/partition")
	})
	b.Run("Grow", func(b *testing.B) { // one ledger that grows without bound
		l := memledger.New(nil)
		for i := 0; b.Loop(); i++ {
			land(b, l, "worker", chunk(i, 1), one)
		}
	})
	b.Run("Parallel", func(b *testing.B) { // workers sharing one ledger
		l := memledger.New(nil)
		var next atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				land(b, l, "worker", chunk(int(next.Add(1)), 1), one)
			}
		})
	})
}
