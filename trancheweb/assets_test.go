package trancheweb

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/internal/assettest"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/memledger"
)

// TestMixedGranularities serves a program's DAG of several granularities
// (internal/assettest) after two days were backfilled and three hours of
// the first reloaded: the index lists each asset with its partitions by
// state, blocked and stale ones, each linked to its own DAG page, which
// draws its partitions; the DAG's plan form plans it asset by asset,
// each partition with its asset and why.
func TestMixedGranularities(t *testing.T) {
	p := assettest.New(t, func(_ testing.TB, now func() time.Time) ledger.Ledger { return memledger.New(now) })
	ctx := context.Background()
	days, err := tranche.NewTimePartitionWindow(tranche.Day, time.Date(2026, 3, 8, 0, 0, 0, 0, p.NY), time.Date(2026, 3, 9, 0, 0, 0, 0, p.NY))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Backfill(days, "").Run(ctx); err != nil {
		t.Fatal(err)
	}
	hours, err := tranche.NewTimePartitionWindow(tranche.Hour, time.Date(2026, 3, 8, 5, 0, 0, 0, p.NY), time.Date(2026, 3, 8, 7, 0, 0, 0, p.NY))
	if err != nil {
		t.Fatal(err)
	}
	if rep, err := p.Backfill(hours, ledger.RerunAll).Run(ctx); err != nil || rep.Succeeded != 3 {
		t.Fatalf("reload: %v, %v", rep, err)
	}
	h := NewHandler(p.Ledger(), &Options{DAGs: map[string]*tranche.DAG{"platform": p.DAG()}, Backfill: &backfill.Backfill{Runner: p.Runner()}})
	_, body, _ := get(t, h, "/")
	row := func(asset string) string {
		m := regexp.MustCompile(`(?s)<tr class="asset-row" data-asset="` + asset + `">(.*?)</tr>`).FindStringSubmatch(body)
		if m == nil {
			return ""
		}
		return regexp.MustCompile(`<[^>]+>|\s+`).ReplaceAllString(m[1], " ")
	}
	for asset, want := range map[string]string{
		"events": "events hour 47 47 0 0 0 0 0",
		"rollup": "rollup day 2 2 0 0 0 0 1",
		"model":  "model day 2 0 0 0 2 2 0",
	} {
		if got := strings.Join(strings.Fields(row(asset)), " "); got != want {
			t.Errorf("index row of %s: %q, want %q\n%s", asset, got, want, body)
		}
	}
	var rollup string
	plan, err := p.Backfill(days, "").Plan(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range plan.Assets {
		if a.Asset == "rollup" {
			rollup = a.DAG
		}
	}
	if !strings.Contains(body, `href="/dags/`+url.PathEscape(rollup)+`"`) {
		t.Errorf("the index does not link the rollup's page")
	}
	if status, page, _ := get(t, h, "/dags/"+url.PathEscape(rollup)); status != 200 || !strings.Contains(page, "2026-03-08") {
		t.Errorf("the rollup's page: %d\n%s", status, page)
	}
	id := backfill.DAGIdentity(p.DAG(), tranche.Hour, p.NY)
	q := url.Values{"from": {"2026-03-10"}, "to": {"2026-03-10"}, "rerun": {"failed"}, "on_failure": {"stop"}, "concurrency": {"1"}}
	if status, page, _ := get(t, h, "/dags/"+url.PathEscape(id)+"/plan?"+q.Encode()); status != 200 || !strings.Contains(page, `id="plan"`) ||
		!strings.Contains(page, `model <code>2026-03-10</code></td><td>skip: blocked <span class="muted reason">(needs rollup 2026-03-03 (never run; outside the window))</span>`) {
		t.Errorf("the plan of March 10: %d\n%s", status, page)
	}
}

// TestMixedPlanIDPages takes the id that the plan of a backfill of
// several granularities shows to the pages: its page is the index,
// which shows the DAG's assets, and the cancel and resume of it act on
// the backfills of its assets.
func TestMixedPlanIDPages(t *testing.T) {
	p := assettest.New(t, func(_ testing.TB, now func() time.Time) ledger.Ledger { return memledger.New(now) })
	ctx := context.Background()
	days, err := tranche.NewTimePartitionWindow(tranche.Day, time.Date(2026, 3, 8, 0, 0, 0, 0, p.NY), time.Date(2026, 3, 9, 0, 0, 0, 0, p.NY))
	if err != nil {
		t.Fatal(err)
	}
	b := p.Backfill(days, "")
	id, err := b.ID()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Run(ctx); err != nil {
		t.Fatal(err)
	}
	const token = "0123456789abcdef-the-token"
	h := NewHandler(p.Ledger(), &Options{WriteToken: token, DAGs: map[string]*tranche.DAG{"platform": p.DAG()}})
	if status, _, hd := get(t, h, "/backfills/"+id); status != http.StatusFound || hd.Get("Location") != "/" {
		t.Errorf("GET the page of %s: %d to %q; want 302 to the index", id, status, hd.Get("Location"))
	}
	canceled := func() (n int) {
		assets, err := backfill.AssetBackfills(ctx, p.Ledger(), id)
		if err != nil || len(assets) != 3 {
			t.Fatalf("AssetBackfills(%s) = %d, %v; want 3", id, len(assets), err)
		}
		for _, a := range assets {
			if a.Canceled {
				n++
			}
		}
		return n
	}
	if status, _ := post(t, h, "/backfills/"+id+"/cancel", url.Values{"token": {token}}); status != http.StatusSeeOther || canceled() != 3 {
		t.Errorf("POST cancel of %s: %d, %d of 3 asset backfills canceled; want 303, all", id, status, canceled())
	}
	if status, _ := post(t, h, "/backfills/"+id+"/resume", url.Values{"token": {token}}); status != http.StatusSeeOther || canceled() != 0 {
		t.Errorf("POST resume of %s: %d, %d of 3 asset backfills canceled; want 303, none", id, status, canceled())
	}
}
