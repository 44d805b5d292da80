package postgres_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/postgres"
	"github.com/tranche-dev/tranche/ledger/sqlledger"
)

// TestFreshClaimSeesDeploy claims, for the old DAG's backfill, a fresh
// partition that another version of the DAG (one name, another
// identity) claims and lands just before the claim's statement runs:
// the ledger's clock, which the one-statement fresh claim reads first,
// lands it. The claim is refused as superseded
// (ledger.ClaimRequest.JudgeVersion): the statement tests the other
// versions itself, rather than trust a read made before it.
func TestFreshClaimSeesDeploy(t *testing.T) {
	url := serverURL(t)
	schema := freshSchema(t, url)
	newer, err := postgres.Open(t.Context(), url, &postgres.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer newer.Close()
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["search_path"] = schema
	db := stdlib.OpenDB(*cfg)
	defer db.Close()
	const (
		oldDAG, newDAG = "dag-v1", "dag-v2"
		name           = "events"
	)
	claim := func(dag, backfill, worker string, p tranche.TimePartition) ledger.ClaimRequest {
		return ledger.ClaimRequest{DAG: dag, Backfill: backfill, Worker: worker, RunID: "run-" + worker + "-" + p.Key(),
			Partitions: []tranche.TimePartition{p}, Lease: time.Minute, Policy: ledger.RerunFailed}
	}
	var armed atomic.Bool
	var landed error
	land := func() { // the new DAG claims and lands day(0)
		lease, err := newer.Claim(t.Context(), claim(newDAG, "bf-new", "new-worker", day(0)))
		if err == nil {
			err = newer.Finish(t.Context(), lease, []ledger.Outcome{{State: ledger.StateSucceeded}})
		}
		landed = err
	}
	old, err := sqlledger.Open(t.Context(), db, sqlledger.Options{Dialect: postgres.DialectFor(cfg, schema), Name: "old " + schema,
		Now: func() time.Time {
			if armed.CompareAndSwap(true, false) {
				land()
			}
			return time.Now()
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	for _, b := range []ledger.BackfillRecord{
		{ID: "bf-new", DAG: newDAG, DAGName: name, Window: "2026-01", Chunk: 1},
		{ID: "bf-old", DAG: oldDAG, DAGName: name, Window: "2026-01", Chunk: 1},
	} {
		if _, err := old.PutBackfill(t.Context(), b); err != nil {
			t.Fatal(err)
		}
	}
	// The old DAG has a row, so that its claims of fresh partitions take
	// the one-statement way.
	first, err := old.Claim(t.Context(), claim(oldDAG, "bf-old", "old-worker", day(9)))
	if err != nil {
		t.Fatal(err)
	}
	if err := old.Finish(t.Context(), first, []ledger.Outcome{{State: ledger.StateSucceeded}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond) // the landing is after bf-old's creation, by any clock read
	armed.Store(true)
	lease, err := old.Claim(t.Context(), claim(oldDAG, "bf-old", "old-worker", day(0)))
	if armed.Load() {
		t.Fatal("the claim did not read the ledger's clock; the test lands nothing")
	}
	if landed != nil {
		t.Fatalf("the new DAG's landing: %v", landed)
	}
	if !errors.Is(err, ledger.ErrSuperseded) {
		t.Fatalf("the old DAG's claim of a partition the new DAG landed just before = %v, %v; want an error matching ErrSuperseded", lease, err)
	}
}
