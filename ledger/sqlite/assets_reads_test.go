package sqlite_test

import (
	"database/sql"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/tranche-dev/tranche/internal/proctest"
)

// TestAssetsReads measures the reads of a DAG of several granularities
// (proctest.AssetsDAG: hourly events, daily rollup and 7-day model,
// monthly report, in New York) whose assets' partitions over
// TRANCHE_ASSETS_YEARS years (9,502 a year: 105 years are a million)
// are recorded by bulk inserts, a tenth failed and some stale
// (proctest.SeedAssets): backfill.AssetsOf, the whole DAG's status with
// its blocked and stale partitions, beside the status of each asset's
// backfill and the grid of the hourly one (proctest.MeasureAssetsReads).
// TRANCHE_ASSETS_DB names a file to keep, seeded only when new;
// TRANCHE_ASSETS_EVERY=1 measures AssetsOf through every latest attempt
// whole too, and checks that it agrees:
//
//	TRANCHE_ASSETS_YEARS=105 TRANCHE_ASSETS_DB=/tmp/assets.db go test -count=1 -run 'TestAssetsReads$' -v ./ledger/sqlite
func TestAssetsReads(t *testing.T) {
	years, _ := strconv.Atoi(os.Getenv("TRANCHE_ASSETS_YEARS"))
	if years < 1 {
		t.Skip("set TRANCHE_ASSETS_YEARS to measure the reads of a DAG of several granularities over that many years")
	}
	path, seed := os.Getenv("TRANCHE_ASSETS_DB"), true
	if path == "" {
		path = filepath.Join(t.TempDir(), "assets.db")
	} else if _, err := os.Stat(path); err == nil {
		seed = false
	}
	l := openLedgerAt(t, path, nil)
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	al := proctest.SeedAssets(t, l, db, "", years, seed)
	proctest.MeasureAssetsReads(t, l, al, os.Getenv("TRANCHE_ASSETS_EVERY") != "")
}
