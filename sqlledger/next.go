package sqlledger

import (
	"context"
	"errors"
	"fmt"

	"github.com/tranche-dev/tranche/ledger"
)

// ClaimNext implements [ledger.Ledger].
//
// INTERIM (replaced by the cursor's transaction): it claims the jobs one
// at a time through Claim.
func (l *Ledger) ClaimNext(ctx context.Context, req ledger.NextRequest) ([]ledger.Grant, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	var grants []ledger.Grant
	claimed := 0
	for _, j := range req.Jobs {
		if claimed == req.Want {
			break
		}
		lease, err := l.Claim(ctx, req.Claim(j))
		switch {
		case err == nil:
			claimed++
		case !errors.Is(err, ledger.ErrNotClaimable) || errors.Is(err, ledger.ErrBackfillCanceled):
			for _, g := range grants {
				if g.Lease != nil {
					err = errors.Join(err, l.Release(context.WithoutCancel(ctx), g.Lease))
				}
			}
			return nil, err
		}
		grants = append(grants, ledger.Grant{Lease: lease, Err: err})
	}
	return grants, nil
}

// Release implements [ledger.Ledger].
//
// INTERIM: it does not keep the DAG's revision from falling.
func (l *Ledger) Release(ctx context.Context, lease *ledger.Lease) error {
	return fmt.Errorf("tranche: %s: Release is not implemented yet", l.name)
}
