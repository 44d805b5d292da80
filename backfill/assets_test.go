package backfill_test

import (
	"testing"
	"time"

	"github.com/tranche-dev/tranche/internal/assettest"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/memledger"
)

// TestMixedGranularities runs the backfills of a DAG of several
// granularities (internal/assettest) on memledger: each asset's
// partitions once, in dependency order, blocked and rerun when what
// they read failed, rerun when it was materialized again.
func TestMixedGranularities(t *testing.T) {
	assettest.Run(t, func(_ testing.TB, now func() time.Time) ledger.Ledger { return memledger.New(now) })
}
