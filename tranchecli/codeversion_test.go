package tranchecli_test

import (
	"context"
	"strings"
	"testing"

	"github.com/tranche-dev/tranche"
)

// TestTwoProgramsCodeVersions runs two programs over one ledger whose
// DAGs have the same asset names and granularity but not the same code:
// the second's plan warns that it would skip what the first wrote; its
// status counts those partitions stale; run --rerun stale runs them
// again under its own code; and history shows each attempt's version.
func TestTwoProgramsCodeVersions(t *testing.T) {
	first := newHarness(t)
	versioned := func(version string) *tranche.DAG {
		d, err := tranche.NewDAG(tranche.Asset{Name: "events", CodeVersion: version, Partitioning: tranche.Partitioning{Granularity: tranche.Day},
			Materialize: func(context.Context, *tranche.Materialization) ([]tranche.Row, error) { return nil, nil }})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	first.p.DAGs["events"] = versioned("a1")
	first.must(0, append([]string{"run", "events", "--yes"}, week...)...)
	id := first.only()

	second := newHarness(t)
	second.l = first.l
	second.p.Ledger = first.l
	second.p.DAGs["events"] = versioned("b1")
	out := second.must(0, append([]string{"plan", "events"}, week...)...)
	if !strings.Contains(out, `7 partitions skipped as succeeded ran other code (code version "events=a1"; this DAG's is "events=b1")`) {
		t.Errorf("the second program's plan does not warn of the first's code:\n%s", out)
	}
	out = second.must(0, "status", id, "--color", "never")
	if !strings.Contains(out, `  stale       7 partitions ran other code than "events=b1"; '--rerun stale' runs them again`) ||
		!strings.Contains(out, "2026-01  ~ ~ ~ ~ ~ ~ ~\n") || !strings.Contains(out, "~ stale 7") {
		t.Errorf("status in the second program:\n%s", out)
	}
	// The tranche command has no DAGs: it judges by the newest success.
	first.p.DAGs = nil
	if out := first.must(0, "status", id, "--format", "json"); !strings.Contains(out, `"stale":0,"code_version":"events=a1"`) {
		t.Errorf("status without the DAG, before the rerun:\n%s", out)
	}
	if out := second.must(0, append([]string{"run", "events", "--yes", "--rerun", "stale"}, week...)...); !strings.Contains(out, "7 succeeded here") {
		t.Errorf("run --rerun stale:\n%s", out)
	}
	if out := second.must(0, "status", id); strings.Contains(out, "stale") {
		t.Errorf("status after the rerun:\n%s", out)
	}
	if out := first.must(0, "status", id, "--format", "json"); !strings.Contains(out, `"stale":0,"code_version":"events=b1"`) {
		t.Errorf("status without the DAG, after the rerun:\n%s", out)
	}
	out = second.must(0, "history", id, "2026-01-03")
	if !strings.Contains(out, "CODE") || !strings.Contains(out, "events=a1") || !strings.Contains(out, "events=b1") {
		t.Errorf("history does not show the code versions:\n%s", out)
	}
}
