package backfill_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/memledger"
)

// TestCodeVersions runs two programs over one ledger whose DAGs have the
// same asset names, granularity and zone, and so one identity, but not
// the same code: the second's plan warns that it would skip the
// partitions the first wrote, naming both versions; rerun policy stale
// runs them again under its own version, after which nothing is stale.
func TestCodeVersions(t *testing.T) {
	l := memledger.New(nil)
	dagOf := func(version string) *tranche.DAG {
		d, err := tranche.NewDAG(tranche.Asset{Name: "events", CodeVersion: version, Partitioning: tranche.Partitioning{Granularity: tranche.Day, Location: time.UTC},
			Materialize: func(context.Context, *tranche.Materialization) ([]tranche.Row, error) { return nil, nil }})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	w, err := tranche.NewTimePartitionWindow(tranche.Day, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 1, 30, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	first, second := dagOf("a1"), dagOf("b1")
	id := backfill.DAGIdentity(first, tranche.Day, time.UTC)
	if id != backfill.DAGIdentity(second, tranche.Day, time.UTC) || backfill.DAGIdentity(dagOf(""), tranche.Day, time.UTC) != id {
		t.Fatal("a code version changed the DAG's identity")
	}
	if got := backfill.CodeVersion(second); got != "events=b1" {
		t.Errorf("CodeVersion = %q; want events=b1", got)
	}
	if _, err := (&backfill.Backfill{DAG: first, Window: w, Ledger: l}).Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	plan := func(d *tranche.DAG, rerun ledger.RerunPolicy) *backfill.Plan {
		t.Helper()
		p, err := (&backfill.Backfill{DAG: d, Window: w, Ledger: l, Rerun: rerun}).Plan(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	warned := func(p *backfill.Plan, want string) bool {
		for _, w := range p.Warnings {
			if strings.Contains(w, want) {
				return true
			}
		}
		return false
	}
	const want = `30 partitions skipped as succeeded ran other code (code version "events=a1"; this DAG's is "events=b1"): another program with the same asset names, granularity and zone may have written them; --rerun stale runs them again`
	if p := plan(second, ""); p.Counts.SkipSucceeded != 30 || !warned(p, want) {
		t.Errorf("the second program's plan: %+v, warnings %q; want 30 skipped and the warning %q", p.Counts, p.Warnings, want)
	}
	if p := plan(first, ""); warned(p, "other code") {
		t.Errorf("the first program's plan warns: %q", p.Warnings)
	}
	if p := plan(dagOf(""), ""); !warned(p, `(code version "events=a1"; this DAG's is none declared)`) {
		t.Errorf("a program declaring no version: warnings %q", p.Warnings)
	}
	if p := plan(second, ledger.RerunStale); p.Counts.Run != 30 || warned(p, "other code") {
		t.Errorf("rerun stale: %+v, warnings %q; want the 30 stale partitions run", p.Counts, p.Warnings)
	}
	res, err := (&backfill.Backfill{DAG: second, Window: w, Ledger: l, Rerun: ledger.RerunStale}).Run(t.Context())
	if err != nil || res.Succeeded != 30 {
		t.Fatalf("rerun stale: %+v, %v", res, err)
	}
	h, err := l.History(t.Context(), id, w.Start())
	if err != nil || len(h) != 2 || h[0].CodeVersion != "events=a1" || h[1].CodeVersion != "events=b1" {
		t.Errorf("History = %+v, %v; want the first program's attempt, then the second's", h, err)
	}
	if p := plan(second, ledger.RerunStale); p.Counts.Run != 0 || p.Counts.SkipSucceeded != 30 {
		t.Errorf("after the rerun, rerun stale plans %+v; want nothing stale", p.Counts)
	}
	if p := plan(first, ""); !warned(p, `(code version "events=b1"; this DAG's is "events=a1")`) {
		t.Errorf("the first program's plan after the second's rerun: warnings %q", p.Warnings)
	}
}
