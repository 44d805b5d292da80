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

// TestMixedGranularitiesProperty checks, for random failures of every
// asset's partitions, that a backfill of several granularities runs
// exactly what a model of the mappings says can land, and the rerun of
// failed partitions exactly the rest (internal/assettest.Property).
func TestMixedGranularitiesProperty(t *testing.T) {
	assettest.Property(t, func(_ testing.TB, now func() time.Time) ledger.Ledger { return memledger.New(now) })
}
