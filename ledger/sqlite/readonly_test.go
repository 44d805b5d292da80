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
	"github.com/tranche-dev/tranche/ledger/sqlite"
	"github.com/tranche-dev/tranche/ledger/sqlledger"
)

// TestReadOnly opens a ledger of mode 0444, as a backup copy or a file
// the operator may only read is: with ledger.AccessRead (Options.ReadOnly)
// its backfills are read and every write is refused, saying why, and the
// folder is left byte for byte as it was; AccessWrite refuses the file,
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

	addr, err := ledger.ParseAddress("sqlite:" + path)
	if err != nil {
		t.Fatal(err)
	}
	ro, err := sqlite.OpenLedger(t.Context(), addr, ledger.AccessRead)
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
	err = ro.CancelBackfill(t.Context(), "b1", ledger.CancelOptions{})
	if !errors.Is(err, sqlledger.ErrReadOnly) || !strings.Contains(err.Error(), "opened for reading only") {
		t.Errorf("CancelBackfill of a read-only ledger = %v; want an error matching ErrReadOnly saying why", err)
	}
	if err := ro.(interface{ Close() error }).Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if after := schematest.FileSnapshot(t, dir); !maps.Equal(before, after) {
		t.Errorf("reading the ledger changed its folder: before %v, after %v", before, after)
	}

	_, err = sqlite.OpenLedger(t.Context(), addr, ledger.AccessWrite)
	if !errors.Is(err, sqlledger.ErrReadOnly) || !strings.Contains(err.Error(), "mode -r--r--r--") {
		t.Errorf("OpenLedger(AccessWrite) of a file of mode 0444 = %v; want it refused as read-only", err)
	}
	if _, err := sqlite.OpenLedger(t.Context(), addr, ledger.AccessRead); err != nil {
		t.Errorf("OpenLedger(AccessRead) again: %v", err)
	}

	// Reading never creates a file.
	missing, _ := ledger.ParseAddress("sqlite:" + filepath.Join(dir, "missing.db"))
	if _, err := sqlite.OpenLedger(t.Context(), missing, ledger.AccessRead); !errors.Is(err, sqlledger.ErrNoLedger) {
		t.Errorf("OpenLedger(AccessRead) of a missing file = %v; want ErrNoLedger", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "missing.db")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("reading a missing ledger created it: %v", err)
	}
	pg, _ := ledger.ParseAddress("postgres://u@h/d")
	if _, err := sqlite.OpenLedger(t.Context(), pg, ledger.AccessRead); !errors.Is(err, ledger.ErrAddress) {
		t.Errorf("OpenLedger of a postgres address = %v; want ErrAddress", err)
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
