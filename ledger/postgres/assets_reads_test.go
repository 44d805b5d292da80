package postgres_test

import (
	"os"
	"strconv"
	"testing"

	"github.com/tranche-dev/tranche/internal/proctest"
	"github.com/tranche-dev/tranche/ledger/postgres"
)

// TestAssetsReads is the SQLite ledger's test of the same name on
// PostgreSQL: the reads of the DAG of proctest.AssetsDAG over
// TRANCHE_ASSETS_YEARS years (105 years are a million asset partitions)
// recorded by bulk inserts; TRANCHE_ASSETS_SCHEMA names a schema to
// keep, seeded only when new; TRANCHE_ASSETS_EVERY=1 measures AssetsOf
// through every latest attempt whole too:
//
//	TRANCHE_ASSETS_YEARS=105 TRANCHE_ASSETS_SCHEMA=assets go test -count=1 -run 'TestAssetsReads$' -v ./ledger/postgres
func TestAssetsReads(t *testing.T) {
	years, _ := strconv.Atoi(os.Getenv("TRANCHE_ASSETS_YEARS"))
	if years < 1 {
		t.Skip("set TRANCHE_ASSETS_YEARS to measure the reads of a DAG of several granularities over that many years")
	}
	url := serverURL(t)
	db := admin(t, url)
	schema, seed := os.Getenv("TRANCHE_ASSETS_SCHEMA"), true
	if schema == "" {
		schema = freshSchema(t, url)
	} else {
		var exists bool
		if err := db.QueryRowContext(t.Context(), "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", schema).Scan(&exists); err != nil {
			t.Fatal(err)
		}
		if seed = !exists; seed {
			if _, err := db.ExecContext(t.Context(), "CREATE SCHEMA "+schema); err != nil {
				t.Fatal(err)
			}
		}
	}
	l, err := postgres.Open(t.Context(), url, &postgres.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	al := proctest.SeedAssets(t, l, db, schema+".", years, seed)
	if seed {
		if _, err := db.ExecContext(t.Context(), "ANALYZE "+schema+".tranche_attempts"); err != nil {
			t.Fatal(err)
		}
	}
	proctest.MeasureAssetsReads(t, l, al, os.Getenv("TRANCHE_ASSETS_EVERY") != "")
}
