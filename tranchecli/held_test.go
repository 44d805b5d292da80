package tranchecli_test

import (
	"strings"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/ledger"
)

// TestRunHeldElsewhere runs a backfill while another worker holds one of
// its partitions under a live lease: the rest succeeding, the run reports
// the overlap and exits 4, not 1; with a failure too, it exits 1.
func TestRunHeldElsewhere(t *testing.T) {
	h := newHarness(t)
	dag := backfill.DAGIdentity(h.p.DAGs["events"], tranche.Day, time.UTC)
	p := tranche.PartitionOf(tranche.Day, time.Date(2026, 1, 3, 0, 0, 0, 0, time.UTC))
	rev, err := h.l.Revision(t.Context(), dag)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.l.Claim(t.Context(), ledger.ClaimRequest{DAG: dag, Worker: "other", RunID: backfill.RunID(dag, p.Start, p.End),
		Partitions: []tranche.TimePartition{p}, Lease: time.Hour, Policy: ledger.RerunAll, Revision: rev}); err != nil {
		t.Fatal(err)
	}
	code, out, errs := h.run(append([]string{"run", "events", "--yes"}, week...)...)
	if code != 4 {
		t.Fatalf("run: exit %d, want 4\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
	if want := "Not done yet: 1 partition is held by other workers"; !strings.Contains(out, want) {
		t.Errorf("run's output lacks %q:\n%s", want, out)
	}
	if errs != "" {
		t.Errorf("run reports the overlap as an error on stderr: %s", errs)
	}

	// A failure beside the overlap is a failure.
	h.faults.set("2026-01-05")
	h.must(1, append([]string{"run", "events", "--yes", "--rerun", "all"}, week...)...)
}
