package memledger_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/ledgertest"
	"github.com/tranche-dev/tranche/ledger/memledger"
)

func TestMemoryLedger(t *testing.T) {
	ledgertest.Run(t, func(t *testing.T, clock *ledgertest.Clock) ledger.Ledger {
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

// stuckRevision is a memory ledger whose Revision never moves: a broken
// ledger for the error form of the suite to catch.
type stuckRevision struct{ *memledger.Ledger }

func (stuckRevision) Revision(context.Context, string) (int64, error) { return 0, nil }

// TestConformanceErrorForm runs the suite outside a test, as
// ledgertest.TestLedger does: nil for the memory ledger, and for a broken
// one an error that names the check that failed.
func TestConformanceErrorForm(t *testing.T) {
	err := ledgertest.TestLedger(t.Context(), func(c *ledgertest.Clock) (ledger.Ledger, error) {
		return memledger.New(c.Now), nil
	})
	if err != nil {
		t.Fatalf("ledgertest.TestLedger of the memory ledger: %v", err)
	}
	err = ledgertest.TestLedger(t.Context(), func(c *ledgertest.Clock) (ledger.Ledger, error) {
		return stuckRevision{memledger.New(c.Now)}, nil
	})
	if err == nil || !strings.Contains(err.Error(), "ledgertest: Revision: ") {
		t.Fatalf("ledgertest.TestLedger of a ledger whose Revision never moves: %v; want a failure of the Revision check", err)
	}
	err = ledgertest.TestLedger(t.Context(), func(*ledgertest.Clock) (ledger.Ledger, error) {
		return nil, errors.New("no database")
	})
	if err == nil || !strings.Contains(err.Error(), "no database") {
		t.Fatalf("ledgertest.TestLedger with a failing newLedger: %v; want its error", err)
	}
}
