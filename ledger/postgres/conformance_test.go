package postgres_test

import (
	"testing"

	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/ledgertest"
	"github.com/tranche-dev/tranche/ledger/postgres"
)

// TestConformance runs the ledger conformance suite, each of its tests
// against a ledger in a fresh schema.
func TestConformance(t *testing.T) {
	url := serverURL(t)
	ledgertest.Run(t, func(t *testing.T, clock *ledgertest.Clock) ledger.Ledger {
		return openFresh(t, url, &postgres.Options{Now: clock.Now})
	})
}
