package postgres_test

import (
	"testing"

	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/ledgertest"
	"github.com/tranche-dev/tranche/ledger/postgres"
)

// TestConformance runs the ledger conformance suite, each of its tests
// against a ledger in a fresh schema. The suite's tests run in parallel
// with each other (each has its schema and its clock), and only with
// each other: the tests that restart the server are not parallel, so
// they never run beside them. Most of a test's time is round trips to
// the server and its commits, which the other tests fill.
func TestConformance(t *testing.T) {
	url := serverURL(t)
	ledgertest.Run(t, func(t *testing.T, clock *ledgertest.Clock) ledger.Ledger {
		t.Parallel()
		return openFresh(t, url, &postgres.Options{Now: clock.Now})
	})
}
