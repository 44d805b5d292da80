package trancheweb

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/internal/pagetest"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/memledger"
)

// TestDAGLatestRun: a DAG's page and its status endpoint name its latest
// run, a live slot rather than the newer backfill runs, its latest
// backfill, and the scheduler, waiting once the slot after the last live
// one is overdue.
func TestDAGLatestRun(t *testing.T) {
	clock := time.Date(2026, 1, 12, 0, 10, 0, 0, time.UTC)
	l := memledger.New(func() time.Time { return clock })
	f := pagetest.NewDAG(t, l)
	// A live slot: January 11th, run ten minutes after its close.
	p := tranche.PartitionOf(tranche.Day, time.Date(2026, 1, 11, 0, 0, 0, 0, time.UTC))
	lease, err := l.Claim(t.Context(), ledger.ClaimRequest{DAG: f.DAG, Worker: "sched", RunID: "live", Partitions: []tranche.TimePartition{p},
		Lease: time.Minute, Policy: ledger.RerunAll, Revision: 1 << 40, Trigger: ledger.TriggerLive})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Finish(t.Context(), lease, []ledger.Outcome{{State: ledger.StateSucceeded}}); err != nil {
		t.Fatal(err)
	}
	now := clock.Add(2 * 24 * time.Hour) // the 12th and the 13th came due, with no run
	h := NewHandler(l, &Options{Now: func() time.Time { return now }})
	_, body, _ := get(t, h, "/dags/"+f.DAG)
	for _, want := range []string{"Latest run: <code>2026-01-11</code>", "live, attempt 2 by sched", "Latest backfill: <a class=\"backfill\" href=\"/backfills/" + f.Second,
		"Scheduler: last slot 2026-01-11 succeeded (live)", "next slot 2026-01-12 due 2026-01-13 00:10:00 Z; 2 due since with no run",
		"Scheduler: waiting for scheduler: slot 2026-01-12 came due", `class="scheduler waiting"`} {
		if !strings.Contains(body, want) {
			t.Errorf("the DAG's page lacks %q:\n%s", want, body)
		}
	}
	_, body, _ = get(t, h, "/dags/"+f.DAG+"/partition?start="+url.QueryEscape(instant(p.Start)))
	if !strings.Contains(body, `<td class="trigger">live</td>`) || !strings.Contains(body, `<td class="trigger">backfill</td>`) {
		t.Errorf("the history of 2026-01-11 lacks its live and backfill triggers:\n%s", body)
	}
	_, body, _ = get(t, h, "/dags/"+f.DAG+"/status.json")
	var doc struct {
		LatestRun      struct{ Key, Trigger string } `json:"latest_run"`
		LatestBackfill string                        `json:"latest_backfill"`
		Waiting        bool
	}
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.LatestRun.Key != "2026-01-11" || doc.LatestRun.Trigger != "live" || doc.LatestBackfill != f.Second || !doc.Waiting {
		t.Errorf("status.json %s; want the live run of 2026-01-11, the latest backfill %s, waiting", body, f.Second)
	}
}

// TestDAGLimit: a DAG's page says its limit, who set it, what runs, the
// slots waiting, and that backfills wait for the limit, and the group
// whose runs it counts when it has one; without a limit it says nothing
// of one.
func TestDAGLimit(t *testing.T) {
	clock := time.Date(2026, 1, 12, 0, 10, 0, 0, time.UTC)
	l := memledger.New(func() time.Time { return clock })
	f := pagetest.NewDAG(t, l)
	h := NewHandler(l, &Options{Now: func() time.Time { return clock }})
	if _, body, _ := get(t, h, "/dags/"+f.DAG); strings.Contains(body, `id="limit"`) {
		t.Errorf("the page of a DAG without a limit says one:\n%s", body)
	}
	// The fixture's backfill runs a partition: the limit leaves room
	// for one more run.
	lim, err := l.SetLimit(t.Context(), f.DAG, ledger.Limit{Max: 100, By: "alice", Note: "small warehouse"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.SetLimit(t.Context(), f.DAG, ledger.Limit{Max: lim.Running + 1, By: "alice", Note: "small warehouse"}); err != nil {
		t.Fatal(err)
	}
	day := func(d int) []tranche.TimePartition {
		return []tranche.TimePartition{tranche.PartitionOf(tranche.Day, time.Date(2026, 1, d, 0, 0, 0, 0, time.UTC))}
	}
	if _, err := l.Claim(t.Context(), ledger.ClaimRequest{DAG: f.DAG, Worker: "w", RunID: "r", Partitions: day(20), Lease: time.Minute, Policy: ledger.RerunAll}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Claim(t.Context(), ledger.ClaimRequest{DAG: f.DAG, Worker: "sched", RunID: "s", Partitions: day(11), Lease: time.Minute,
		Policy: ledger.RerunAll, Trigger: ledger.TriggerLive}); !errors.Is(err, ledger.ErrLimited) {
		t.Fatalf("a live slot's claim at the limit = %v; want ErrLimited", err)
	}
	_, body, _ := get(t, h, "/dags/"+f.DAG)
	want := fmt.Sprintf(`<p id="limit">Limit: at most %d runs at once across every process, set by alice 2026-01-12 00:10:00 Z: small warehouse. %d running, 1 slot waiting to go first: backfills are waiting for the DAG's limit.</p>`,
		lim.Running+1, lim.Running+1)
	if !strings.Contains(body, want) {
		t.Errorf("the DAG's page lacks\n%s\n%s", want, body)
	}
	// In a group, the counts are the group's: the page says whose.
	if _, err := l.SetLimit(t.Context(), f.DAG, ledger.Limit{Max: lim.Running + 1, By: "alice", Group: "platform"}); err != nil {
		t.Fatal(err)
	}
	_, body, _ = get(t, h, "/dags/"+f.DAG)
	if want := fmt.Sprintf("at most %d runs at once across every process of the DAGs of group platform, set by alice", lim.Running+1); !strings.Contains(body, want) {
		t.Errorf("the page of a DAG limited in a group lacks\n%s\n%s", want, body)
	}
}
