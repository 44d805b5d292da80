package sqlite_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/internal/assettest"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/sqlite"
)

// TestMixedGranularities runs the backfills of a DAG of several
// granularities (internal/assettest) on SQLite: each asset's partitions
// recorded under its identity, run once, in dependency order, blocked
// and rerun when what they read failed, rerun when it was materialized
// again.
func TestMixedGranularities(t *testing.T) {
	assettest.Run(t, func(t testing.TB, now func() time.Time) ledger.Ledger {
		return openLedgerAt(t, filepath.Join(t.TempDir(), "ledger.db"), now)
	})
}

// TestMixedOnLedgerBeforeAssets opens a ledger written before backfills
// recorded each asset's partitions (testdata/ledger-before-assets.db: a
// backfill of three days of a one-asset DAG "old", written by commit
// 05aba78): it reads as it did, and a DAG of several granularities
// backfills on it, its assets' records beside the old ones, which stay.
func TestMixedOnLedgerBeforeAssets(t *testing.T) {
	ctx := context.Background()
	old, err := os.ReadFile("testdata/ledger-before-assets.db")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "ledger.db")
	if err := os.WriteFile(path, old, 0o644); err != nil {
		t.Fatal(err)
	}
	check := func(l ledger.Ledger) {
		t.Helper()
		records, err := l.Backfills(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var dag string
		for _, r := range records {
			if r.DAGName == "old" {
				dag = r.DAG
			}
		}
		if dag == "" {
			t.Fatalf("no backfill of DAG old among %v", records)
		}
		n := 0
		for a, err := range l.Latest(ctx, dag, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)) {
			if err != nil {
				t.Fatal(err)
			}
			if a.State != ledger.StateSucceeded || a.Worker != "old-worker" {
				t.Errorf("old attempt %s: %s by %s", a.Key, a.State, a.Worker)
			}
			n++
		}
		if n != 3 {
			t.Errorf("%d old partitions, want 3", n)
		}
	}
	var l ledger.Ledger
	p := assettest.New(t, func(t testing.TB, now func() time.Time) ledger.Ledger {
		l = openLedgerAt(t, path, now)
		return l
	})
	check(l)
	w, err := tranche.NewTimePartitionWindow(tranche.Day, time.Date(2026, 3, 1, 0, 0, 0, 0, p.NY), time.Date(2026, 3, 3, 0, 0, 0, 0, p.NY))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := p.Backfill(w, "").Run(ctx)
	if err != nil || rep.Succeeded != 3*24+3+3 {
		t.Fatalf("backfill: %v, %v: want 72 hours, 3 rollups and 3 model days", rep, err)
	}
	check(l)
}

// openLedgerAt opens the SQLite ledger at path with clock now, closed
// when the test ends.
func openLedgerAt(t testing.TB, path string, now func() time.Time) *sqlite.Ledger {
	t.Helper()
	l, err := sqlite.Open(t.Context(), path, &sqlite.Options{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}
