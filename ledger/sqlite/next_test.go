package sqlite_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tranche-dev/tranche/internal/proctest"
	"github.com/tranche-dev/tranche/internal/schematest"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/ledgertest"
	"github.com/tranche-dev/tranche/ledger/sqlite"
)

// TestClaimNextConcurrent checks schematest.CheckClaimNextConcurrent:
// eight goroutines share one ledger, and so its one writing connection.
func TestClaimNextConcurrent(t *testing.T) {
	schematest.CheckClaimNextConcurrent(t, openTemp(t, nil), 8)
}

// TestRelease checks schematest.CheckRelease.
func TestRelease(t *testing.T) { schematest.CheckRelease(t, subject) }

// TestClaimNextSameAsMemoryLedger checks
// schematest.CheckNextSameAsMemory: ClaimNext, Release and the rest
// answer as the in-memory ledger does.
func TestClaimNextSameAsMemoryLedger(t *testing.T) {
	clock := ledgertest.NewClock(time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC))
	schematest.CheckNextSameAsMemory(t, openTemp(t, &sqlite.Options{Now: clock.Now}), clock)
}

// nextLedgerEnv names the file of the worker processes of
// TestClaimNextProcesses, beside schematest's environment.
const nextLedgerEnv = "TRANCHE_NEXT_LEDGER"

// runNextProcess is a worker process of TestClaimNextProcesses (see
// TestMain): schematest.RunNextProcess on the file its environment
// names.
func runNextProcess() int {
	return schematest.RunNextProcess(func(ctx context.Context) (ledger.Ledger, func() error, error) {
		l, err := sqlite.Open(ctx, os.Getenv(nextLedgerEnv), nil)
		if err != nil {
			return nil, nil, err
		}
		return l, l.Close, nil
	})
}

// TestClaimNextProcesses runs six worker processes on one file, each
// with its own writing connection, sharing a backfill through ClaimNext,
// with and without releases, in both orders; schematest.CheckNextReports
// checks that every job was handed to one of them and landed once.
func TestClaimNextProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes")
	}
	proctest.SkipRace(t)
	path := filepath.Join(t.TempDir(), "ledger.db")
	l, err := sqlite.Open(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	for _, descending := range []bool{false, true} {
		for _, release := range []bool{false, true} {
			t.Run(fmt.Sprintf("descending=%v/release=%v", descending, release), func(t *testing.T) {
				plan := schematest.NewNextPlan(t, l, fmt.Sprintf("dag-processes-%v-%v", descending, release), 600, descending)
				reports := schematest.StartNextWorkers(t, plan, 6, release, nextLedgerEnv+"="+path)
				schematest.CheckNextReports(t, l, plan, reports)
			})
		}
	}
}
