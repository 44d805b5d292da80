package sqlite_test

import (
	"slices"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/ledger"
)

// TestLatestPaging crosses the pages Latest and LatestBriefs read (4,096
// attempts each): a partition whose attempts straddle a page's end, and
// a partition with more attempts than a page holds. The conformance
// suite's ledgers are smaller than a page.
func TestLatestPaging(t *testing.T) {
	if testing.Short() {
		t.Skip("records thousands of attempts")
	}
	l := openTemp(t, nil)
	ctx := t.Context()
	first := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	part := func(i int) tranche.TimePartition {
		return tranche.PartitionOf(tranche.Hour, first.Add(time.Duration(i)*time.Hour))
	}
	run := func(dag string, ps []tranche.TimePartition, state ledger.State) {
		t.Helper()
		for chunk := range slices.Chunk(ps, 500) {
			lease, err := l.Claim(ctx, ledger.ClaimRequest{DAG: dag, Worker: "w", RunID: "r", Partitions: chunk,
				Lease: time.Minute, Policy: ledger.RerunFailed})
			if err != nil {
				t.Fatal(err)
			}
			outcomes := make([]ledger.Outcome, len(chunk))
			for i := range outcomes {
				outcomes[i] = ledger.Outcome{State: state}
			}
			if err := l.Finish(ctx, lease, outcomes); err != nil {
				t.Fatal(err)
			}
		}
	}
	const n = 4100
	var all []tranche.TimePartition
	for i := range n {
		all = append(all, part(i))
	}
	want := make([]int, n)
	run("paging", all, ledger.StateFailed) // attempt 1 everywhere
	for i := range want {
		want[i] = 1
	}
	// Partition 4095's attempts are rows 4096 to 4098 in key order: the
	// first page ends inside them.
	for range 2 {
		run("paging", all[4095:4096], ledger.StateFailed)
	}
	want[4095] = 3
	run("paging", all[10:20], ledger.StateSucceeded)
	for i := 10; i < 20; i++ {
		want[i] = 2
	}
	i := 0
	for a, err := range l.Latest(ctx, "paging", first, part(n).Start) {
		if err != nil {
			t.Fatal(err)
		}
		if i >= n || !a.Start.Equal(part(i).Start) || a.Number != want[i] {
			t.Fatalf("Latest[%d] = %s attempt %d; want %s attempt %d", i, a.Key, a.Number, part(min(i, n-1)).Key(), want[min(i, n-1)])
		}
		i++
	}
	if i != n {
		t.Fatalf("Latest yielded %d attempts; want %d", i, n)
	}
	briefs := func(dag string, to time.Time) {
		t.Helper()
		var want, got []ledger.Brief
		for a, err := range l.Latest(ctx, dag, first, to) {
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, ledger.BriefOf(a))
		}
		for b, err := range l.LatestBriefs(ctx, dag, first, to) {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, b)
		}
		if !slices.Equal(got, want) {
			t.Errorf("LatestBriefs of %s differ from the briefs of Latest's %d attempts (%d briefs)", dag, len(want), len(got))
		}
	}
	briefs("paging", part(n).Start)

	// One partition with more attempts than a page, between two others.
	run("paging-one", []tranche.TimePartition{part(0), part(1), part(2)}, ledger.StateFailed)
	for range 4097 {
		run("paging-one", all[1:2], ledger.StateFailed)
	}
	var got []int
	for a, err := range l.Latest(ctx, "paging-one", first, part(3).Start) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, a.Number)
	}
	if !slices.Equal(got, []int{1, 4098, 1}) {
		t.Errorf("Latest attempt numbers %v; want [1 4098 1]", got)
	}
	briefs("paging-one", part(3).Start)
}
