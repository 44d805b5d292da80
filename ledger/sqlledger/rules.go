package sqlledger

import (
	"fmt"

	"github.com/tranche-dev/tranche/ledger"
)

// The claim and fencing rules are tranche's (ClaimRequest.Validate and
// Admits, Lease.Holds and CheckOutcomes), shared with the in-memory
// ledger word for word: every ledger must answer alike, and the
// differential test in ledger/sqlite holds the two to it.

// validateClaim checks a request before the database sees it: tranche's
// rules, and bounds to the second, as the tables keep them.
func validateClaim(req ledger.ClaimRequest) error {
	if err := req.Validate(); err != nil {
		return err
	}
	for _, p := range req.Partitions {
		if p.Start.Nanosecond() != 0 || p.End.Nanosecond() != 0 {
			return fmt.Errorf("tranche: claim of partition %v: a SQL ledger keeps partition bounds to the second", p)
		}
	}
	return nil
}
