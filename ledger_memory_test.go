package tranche_test

import (
	"errors"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/memledger"
	"github.com/tranche-dev/tranche/tranchetest"
)

func TestMemoryLedger(t *testing.T) {
	tranchetest.TestLedger(t, func(t *testing.T, clock *tranchetest.Clock) ledger.Ledger {
		return memledger.New(clock.Now)
	})
}

// A nil clock is the wall clock.
func TestMemoryLedgerWallClock(t *testing.T) {
	l := memledger.New(nil)
	p := tranche.PartitionOf(tranche.Day, time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC))
	before := time.Now()
	lease, err := l.Claim(t.Context(), ledger.ClaimRequest{
		DAG: "dag", Worker: "w", Partitions: []tranche.TimePartition{p}, Lease: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	if after := time.Now(); lease.Until.Before(before.Add(time.Hour)) || lease.Until.After(after.Add(time.Hour)) {
		t.Errorf("lease.Until = %v; want an hour after a time in [%v, %v]", lease.Until, before, after)
	}
	b, err := l.PutBackfill(t.Context(), ledger.BackfillRecord{ID: "b"})
	if err != nil || b.Created.Before(before) {
		t.Errorf("PutBackfill = %+v, %v; want Created from the wall clock", b, err)
	}
}

// The ledger keys partitions by Unix nanoseconds, so it refuses a
// partition it cannot key rather than let two of them collide.
func TestMemoryLedgerOutOfRange(t *testing.T) {
	l := memledger.New(nil)
	for _, year := range []int{1600, 2300} {
		p := tranche.PartitionOf(tranche.Year, time.Date(year, 6, 1, 0, 0, 0, 0, time.UTC))
		_, err := l.Claim(t.Context(), ledger.ClaimRequest{
			DAG: "dag", Worker: "w", Partitions: []tranche.TimePartition{p}, Lease: time.Hour,
		})
		if err == nil || errors.Is(err, ledger.ErrNotClaimable) {
			t.Errorf("Claim of %v = %v; want a refusal of the request", p, err)
		}
	}
	if r, _ := l.Revision(t.Context(), "dag"); r != 0 {
		t.Errorf("Revision = %d after refused claims; want 0", r)
	}
}
