package trancheweb

import (
	"encoding/json"
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
