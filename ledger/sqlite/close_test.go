package sqlite_test

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/tranche-dev/tranche/ledger/sqlite"
)

// TestCloseAfterFailedOpen is the first lines a user copies, with the
// Close deferred before the error is checked: the failed Open's error is
// what the caller sees, not a nil-pointer panic.
func TestCloseAfterFailedOpen(t *testing.T) {
	open := func() (err error) {
		lg, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "missing", "ledger.db"), nil)
		//lint:ignore SA5001 the trap the test checks: Close deferred before the error is
		defer lg.Close()
		return err
	}
	if err := open(); !errors.Is(err, sqlite.ErrNoFolder) {
		t.Fatalf("Open in a missing folder = %v; want an error matching sqlite.ErrNoFolder", err)
	}
	var nilLedger *sqlite.Ledger
	if err := nilLedger.Close(); err != nil {
		t.Errorf("Close of a nil ledger = %v; want nil", err)
	}
}

// TestClose closes an opened ledger once without error.
func TestClose(t *testing.T) {
	lg, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "ledger.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := lg.Close(); err != nil {
		t.Errorf("Close = %v", err)
	}
}
