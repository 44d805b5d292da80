package sqlite_test

import (
	"path/filepath"
	"testing"

	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/ledgertest"
	"github.com/tranche-dev/tranche/ledger/sqlite"
)

// openTemp opens a ledger in a new file of a test's temporary folder,
// closed when the test ends.
func openTemp(t testing.TB, opts *sqlite.Options) *sqlite.Ledger {
	t.Helper()
	l, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "ledger.db"), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("Close = %v", err)
		}
	})
	return l
}

// TestConformance runs the ledger conformance suite, each of its tests
// against a ledger in a file of its own. The suite's tests run in
// parallel with each other (each has its file and its clock), and with
// no test outside the suite: the package's top-level tests are not
// parallel.
func TestConformance(t *testing.T) {
	ledgertest.Run(t, func(t *testing.T, clock *ledgertest.Clock) ledger.Ledger {
		t.Parallel()
		return openTemp(t, &sqlite.Options{Now: clock.Now})
	})
}
