package postgres_test

import (
	"testing"
	"time"

	"github.com/tranche-dev/tranche/internal/assettest"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/postgres"
)

// TestMixedGranularities runs the backfills of a DAG of several
// granularities (internal/assettest) on PostgreSQL: each asset's
// partitions recorded under its identity, run once, in dependency
// order, blocked and rerun when what they read failed, rerun when it was
// materialized again.
func TestMixedGranularities(t *testing.T) {
	url := serverURL(t)
	assettest.Run(t, func(t testing.TB, now func() time.Time) ledger.Ledger {
		return openFresh(t, url, &postgres.Options{Now: now})
	})
}
