package sqlledger

import (
	"fmt"
	"math"
	"time"

	"github.com/tranche-dev/tranche"
)

// The claim and fencing rules below are those of tranche's in-memory
// ledger (ledger_memory.go), word for word in their messages: every ledger
// must answer alike, and the differential test in ledger/sqlite holds the
// two to it.

// validateClaim checks a request before the database sees it.
func validateClaim(req tranche.ClaimRequest) error {
	switch {
	case req.DAG == "":
		return fmt.Errorf("tranche: claim without a DAG identity")
	case req.Worker == "":
		return fmt.Errorf("tranche: claim without a worker name")
	case len(req.Partitions) == 0:
		return fmt.Errorf("tranche: claim of no partitions")
	case req.Lease <= 0:
		return fmt.Errorf("tranche: claim with lease %v; it must be positive", req.Lease)
	}
	if _, err := tranche.ParseRerunPolicy(string(req.Policy)); err != nil {
		return err
	}
	for i, p := range req.Partitions {
		switch {
		case !p.Granularity.IsValid() || !p.Start.Before(p.End):
			return fmt.Errorf("tranche: claim of partition %d, %v: not a partition", i, p)
		case p.Start.Before(minLedgerTime) || p.Start.After(maxLedgerTime):
			return fmt.Errorf("tranche: claim of partition %v: a ledger keeps partitions starting from %s to %s",
				p, minLedgerTime.Format(time.RFC3339), maxLedgerTime.Format(time.RFC3339))
		case p.Start.Nanosecond() != 0 || p.End.Nanosecond() != 0:
			return fmt.Errorf("tranche: claim of partition %v: a SQL ledger keeps partition bounds to the second", p)
		}
	}
	seen := make(map[int64]bool, len(req.Partitions))
	for _, p := range req.Partitions {
		if seen[p.Start.Unix()] {
			return fmt.Errorf("tranche: claim of partition %s twice", p.Key())
		}
		seen[p.Start.Unix()] = true
	}
	return nil
}

// The partition starts every ledger accepts: those the in-memory ledger
// can key by Unix nanoseconds.
var (
	minLedgerTime = time.Unix(0, math.MinInt64).UTC()
	maxLedgerTime = time.Unix(0, math.MaxInt64).UTC()
)

// validateFinish checks the outcomes before the database sees them.
func validateFinish(lease *tranche.Lease, outcomes []tranche.Outcome) error {
	if len(outcomes) != len(lease.Partitions) {
		return fmt.Errorf("tranche: Finish with %d outcomes for %d partitions", len(outcomes), len(lease.Partitions))
	}
	for _, o := range outcomes {
		if !o.State.Terminal() {
			return fmt.Errorf("tranche: Finish with state %q; want succeeded, failed or canceled", o.State)
		}
	}
	return nil
}

// claimable applies the claim rules of [tranche.Ledger.Claim] to one
// partition whose latest attempt is latest (nil if none).
func claimable(latest *tranche.Attempt, p tranche.TimePartition, req tranche.ClaimRequest, now time.Time) error {
	if latest == nil {
		return nil
	}
	policy := req.Policy
	if policy == "" {
		policy = tranche.RerunFailed
	}
	switch latest.State {
	case tranche.StateRunning:
		if now.Before(latest.LeaseUntil) {
			return fmt.Errorf("%w: %s is held by worker %s (attempt %d) until %s",
				tranche.ErrNotClaimable, p.Key(), latest.Worker, latest.Number, latest.LeaseUntil.Format(time.RFC3339Nano))
		}
		return nil // the holder's lease expired: take it over
	case tranche.StateSucceeded:
		if policy == tranche.RerunAll && latest.Revision <= req.Revision {
			return nil
		}
		return fmt.Errorf("%w: %s succeeded (attempt %d by worker %s)", tranche.ErrNotClaimable, p.Key(), latest.Number, latest.Worker)
	}
	if policy == tranche.RerunNone {
		return fmt.Errorf("%w: %s has a recorded run (%s) and the rerun policy is none", tranche.ErrNotClaimable, p.Key(), latest.State)
	}
	return nil
}

// fenced reports whether the lease no longer holds a partition's latest
// attempt: a newer attempt took it over, or it already finished.
func fenced(latest *tranche.Attempt, lease *tranche.Lease, i int) error {
	if latest == nil || latest.Number != lease.Attempts[i] || latest.Worker != lease.Worker || latest.State != tranche.StateRunning {
		return fmt.Errorf("%w: %s attempt %d of worker %s", tranche.ErrFenced, lease.Partitions[i].Key(), lease.Attempts[i], lease.Worker)
	}
	return nil
}

// takenOver is the error recorded on an attempt whose lease expired when
// worker took its partition over.
func takenOver(leaseUntil time.Time, worker string) string {
	return fmt.Sprintf("lease expired at %s; taken over by worker %s", leaseUntil.Format(time.RFC3339Nano), worker)
}
