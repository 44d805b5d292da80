package sqlite_test

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tranche-dev/tranche/internal/schematest"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/address"
	"github.com/tranche-dev/tranche/ledger/sqlite"
	"github.com/tranche-dev/tranche/ledger/sqlledger"
)

// TestReadOnly opens a ledger of mode 0444, as a backup copy or a file
// the operator may only read is: with address.AccessRead (OpenReader)
// its backfills are read through a reader that has no method that writes,
// and the folder is left byte for byte as it was; AccessWrite refuses the file,
// saying it is read-only.
func TestReadOnly(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ledger.db")
	l, err := sqlite.Open(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := l.PutBackfill(t.Context(), ledger.BackfillRecord{ID: "b1", DAG: "d1", Window: "day 2026-01-01..2026-01-02 UTC", Chunk: 1, Created: created}); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o444); err != nil {
		t.Fatal(err)
	}
	before := schematest.FileSnapshot(t, dir)

	addr, err := address.Parse("sqlite:" + path)
	if err != nil {
		t.Fatal(err)
	}
	ro, err := sqlite.OpenLedger(t.Context(), addr, address.AccessRead)
	if err != nil {
		t.Fatalf("OpenLedger(AccessRead) of a file of mode 0444: %v", err)
	}
	bs, err := ro.Backfills(t.Context())
	if err != nil || len(bs) != 1 || bs[0].ID != "b1" {
		t.Errorf("Backfills = %v, %v; want b1", bs, err)
	}
	if _, err := ro.Revision(t.Context(), "d1"); err != nil {
		t.Errorf("Revision: %v", err)
	}
	if _, ok := ro.(ledger.Writer); ok {
		t.Errorf("OpenLedger(AccessRead) = %T, a ledger.Writer; want a reader alone", ro)
	}
	if _, ok := ro.(ledger.Leaser); ok {
		t.Errorf("OpenLedger(AccessRead) = %T, a ledger.Leaser; want a reader alone", ro)
	}
	if err := ro.(interface{ Close() error }).Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if after := schematest.FileSnapshot(t, dir); !maps.Equal(before, after) {
		t.Errorf("reading the ledger changed its folder: before %v, after %v", before, after)
	}

	_, err = sqlite.OpenLedger(t.Context(), addr, address.AccessWrite)
	if !errors.Is(err, sqlledger.ErrReadOnly) || !strings.Contains(err.Error(), "mode -r--r--r--") {
		t.Errorf("OpenLedger(AccessWrite) of a file of mode 0444 = %v; want it refused as read-only", err)
	}
	if _, err := sqlite.OpenLedger(t.Context(), addr, address.AccessRead); err != nil {
		t.Errorf("OpenLedger(AccessRead) again: %v", err)
	}

	// Reading never creates a file.
	missing, _ := address.Parse("sqlite:" + filepath.Join(dir, "missing.db"))
	if _, err := sqlite.OpenLedger(t.Context(), missing, address.AccessRead); !errors.Is(err, sqlledger.ErrNoLedger) {
		t.Errorf("OpenLedger(AccessRead) of a missing file = %v; want ErrNoLedger", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "missing.db")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("reading a missing ledger created it: %v", err)
	}
	pg, _ := address.Parse("postgres://u@h/d")
	if _, err := sqlite.OpenLedger(t.Context(), pg, address.AccessRead); !errors.Is(err, address.ErrInvalid) {
		t.Errorf("OpenLedger of a postgres address = %v; want ErrInvalid", err)
	}
}

// TestOpenAddressPath checks that Open reads a path given as a sqlite:
// address as the file it names, rather than creating a file so named.
func TestOpenAddressPath(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	l, err := sqlite.Open(t.Context(), "sqlite:x.db", nil)
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	if _, err := os.Stat(filepath.Join(dir, "x.db")); err != nil {
		t.Errorf("Open(sqlite:x.db) did not make x.db: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "sqlite:x.db")); err == nil {
		t.Error("Open(sqlite:x.db) made a file named sqlite:x.db")
	}
}
