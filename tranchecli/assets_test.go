package tranchecli_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/internal/assettest"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/memledger"
)

// TestMixedGranularities plans and runs a backfill of a DAG of several
// granularities (internal/assettest) from the command line: the plan
// shows each asset's partitions and why they run or wait, the run lands
// them, and ls and status show each asset's backfill by its name.
func TestMixedGranularities(t *testing.T) {
	h := newHarness(t)
	p := assettest.New(t, func(_ testing.TB, now func() time.Time) ledger.Ledger { return memledger.New(now) })
	h.l = p.Ledger().(*memledger.Ledger)
	h.p.Ledger, h.p.Runner = h.l, p.Runner()
	h.p.DAGs["platform"] = p.DAG()
	span := []string{"--from", "2026-03-08", "--to", "2026-03-09"}
	out := h.must(0, append([]string{"plan", "platform"}, span...)...)
	for _, want := range []string{
		"asset       events (hour,", "): 47 partitions: run 47,", // March 8 has 23 hours, March 9 24
		"asset       rollup (day,", "asset       model (day,", "asset       report (month,",
		"events  2026-03-08T05:00-04:00  run  [pending]",
		"rollup  2026-03-08  run  [pending; after events 2026-03-08T00:00-05:00]",
		"model  2026-03-09  skip: blocked  [needs rollup 2026-03-02 (never run; outside the window); after rollup 2026-03-08]",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("plan does not say %q:\n%s", want, out)
		}
	}
	js := h.must(0, append([]string{"plan", "platform", "--format", "json"}, span...)...)
	// docs/json.md lists every field written, those of a DAG of several
	// granularities too.
	schemas := readSchemas(t)
	for _, v := range decodeAll(t, js) {
		checkJSON(t, schemas, "{plan}", v, "$")
	}
	if !strings.Contains(js, `"key":"2026-03-09","start":"2026-03-09T00:00:00-04:00","end":"2026-03-10T00:00:00-04:00","action":"skip: blocked","asset":"model","reason":"needs rollup 2026-03-02 (never run; outside the window); after rollup 2026-03-08"}`) {
		t.Errorf("plan as JSON lacks the model day blocked:\n%s", js)
	}
	if strings.Contains(out, "report  2026-03") {
		t.Errorf("plan holds the month, which is not inside the window:\n%s", out)
	}
	out = h.must(0, append([]string{"run", "platform", "--yes"}, span...)...)
	if !strings.Contains(out, "49 succeeded here") || !strings.Contains(out, "2 not run") {
		t.Errorf("run: 47 hours and 2 rollup days should succeed, the model days wait for days outside the window:\n%s", out)
	}
	out = h.must(0, "ls")
	for _, name := range []string{"platform/events", "platform/rollup"} {
		if !strings.Contains(out, name) {
			t.Errorf("ls does not show %s:\n%s", name, out)
		}
	}
	out = h.must(0, "status", "platform/rollup", "--color", "never")
	if !strings.Contains(out, "succeeded") {
		t.Errorf("status platform/rollup:\n%s", out)
	}
	// Three hours of March 8 reloaded: status counts the day stale.
	hours := append([]string{"run", "platform", "--yes", "--rerun", "all"}, "--from", "2026-03-08T05:00", "--to", "2026-03-08T08:00")
	if out := h.must(0, hours...); !strings.Contains(out, "3 succeeded here") {
		t.Errorf("reload of 3 hours:\n%s", out)
	}
	out = h.must(0, "status", "platform")
	for _, want := range []string{
		"    events (hour, platform/events): 47 partitions: succeeded 47, failed 0, running 0, pending 0; blocked 0; stale 0\n",
		"    rollup (day, platform/rollup): 2 partitions: succeeded 2, failed 0, running 0, pending 0; blocked 0; stale 1\n",
		"    model (day, platform/model): 2 partitions: succeeded 0, failed 0, running 0, pending 2; blocked 2; stale 0\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status platform lacks %q:\n%s", want, out)
		}
	}
	out = h.must(0, "status", "platform", "--format", "json")
	for _, v := range decodeAll(t, out) {
		checkJSON(t, schemas, "{dag_status}", v, "$")
	}
	if !strings.Contains(out, `"asset":"rollup","granularity":"day"`) || !strings.Contains(out, `"stale":1`) {
		t.Errorf("status platform as JSON:\n%s", out)
	}
}

// TestMixedLimit limits a DAG of several granularities by its name: the
// limit is set on every asset's identity, in one group, so that the
// ledger counts the runs of all its assets against it; 0 removes it from
// them all. An asset's identity can still be limited alone.
func TestMixedLimit(t *testing.T) {
	h := newHarness(t)
	p := assettest.New(t, func(_ testing.TB, now func() time.Time) ledger.Ledger { return memledger.New(now) })
	h.l = p.Ledger().(*memledger.Ledger)
	h.p.Ledger, h.p.Runner = h.l, p.Runner()
	h.p.DAGs["platform"] = p.DAG()
	h.must(0, "run", "platform", "--yes", "--from", "2026-03-08", "--to", "2026-03-08")
	out := h.must(0, "limit", "platform", "2")
	if !strings.Contains(out, "Limited DAG platform") || !strings.Contains(out, "across every process and its 4 assets, each recorded under a DAG of its own (platform/events, platform/rollup, platform/model, platform/report)") {
		t.Errorf("limit platform 2:\n%s", out)
	}
	ctx := context.Background()
	march, err := tranche.NewTimePartitionWindow(tranche.Day, time.Date(2026, 3, 1, 0, 0, 0, 0, p.NY), time.Date(2026, 3, 31, 0, 0, 0, 0, p.NY))
	if err != nil {
		t.Fatal(err)
	}
	plan, err := p.Backfill(march, "").Plan(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range plan.Assets {
		if got, err := h.l.Limit(ctx, a.DAG); err != nil || got.Max != 2 || got.Group != "platform" {
			t.Errorf("limit of asset %s (%s) = %+v, %v; want 2 in group platform", a.Asset, a.DAG, got, err)
		}
	}
	// Two runs of two assets fill the DAG's limit: a third, of a third
	// asset, waits.
	claim := func(i int) error {
		a := plan.Assets[i]
		p := tranche.PartitionOf(a.Granularity, time.Date(2026, 3, 20, 0, 0, 0, 0, p.NY))
		_, err := h.l.Claim(ctx, ledger.ClaimRequest{DAG: a.DAG, Worker: "w", RunID: "run-" + a.Asset, Partitions: []tranche.TimePartition{p},
			Lease: time.Minute, Policy: ledger.RerunFailed})
		return err
	}
	if err := errors.Join(claim(0), claim(1)); err != nil {
		t.Fatal(err)
	}
	if err := claim(3); !errors.Is(err, ledger.ErrLimited) {
		t.Errorf("a third run of the DAG's assets under its limit of 2 = %v; want ErrLimited", err)
	}
	if out := h.must(0, "limit", "platform"); !strings.Contains(out, "at most 2 runs at once across every process") || !strings.Contains(out, "2 running") {
		t.Errorf("limit platform:\n%s", out)
	}
	if out := h.must(3, "limit", "platform", "2"); !strings.Contains(out, "nothing was changed") {
		t.Errorf("limit platform 2 again:\n%s", out)
	}
	if out := h.must(0, "limit", "platform", "0"); !strings.Contains(out, "Removed the limit of DAG platform") {
		t.Errorf("limit platform 0:\n%s", out)
	}
	for _, a := range plan.Assets {
		if got, err := h.l.Limit(ctx, a.DAG); err != nil || got.Max != 0 || got.Group != "" {
			t.Errorf("limit of asset %s after limit 0 = %+v, %v; want none", a.Asset, got, err)
		}
	}
	if out := h.must(0, "limit", "platform/events", "2"); !strings.Contains(out, "Limited DAG platform/events") {
		t.Errorf("limit platform/events 2:\n%s", out)
	}
}

// TestMixedPlanID takes the id that the plan of a backfill of several
// granularities shows, as an operator copies it, to status, cancel and
// resume: each acts on the backfills of its assets, which the ledger
// records under ids of their own.
func TestMixedPlanID(t *testing.T) {
	h := newHarness(t)
	p := assettest.New(t, func(_ testing.TB, now func() time.Time) ledger.Ledger { return memledger.New(now) })
	h.l = p.Ledger().(*memledger.Ledger)
	h.p.Ledger, h.p.Runner = h.l, p.Runner()
	h.p.DAGs["platform"] = p.DAG()
	span := []string{"--from", "2026-03-08", "--to", "2026-03-09"}
	js := h.must(0, append([]string{"plan", "platform", "--format", "json"}, span...)...)
	var plan struct {
		Backfill string `json:"backfill"`
	}
	if err := json.NewDecoder(strings.NewReader(js)).Decode(&plan); err != nil || plan.Backfill == "" {
		t.Fatalf("plan as JSON: %v, id %q:\n%s", err, plan.Backfill, js)
	}
	id := plan.Backfill
	if out := h.must(0, append([]string{"plan", "platform"}, span...)...); !strings.Contains(out, id) {
		t.Errorf("the plan does not show id %s:\n%s", id, out)
	}
	h.must(0, append([]string{"run", "platform", "--yes"}, span...)...)

	out := h.must(0, "status", id, "--color", "never")
	for _, want := range []string{"Backfill " + id + " runs each asset of its DAG as a backfill of its own (3):",
		"\nplatform/events (backfill ", "\nplatform/rollup (backfill ", "\nplatform/model (backfill "} {
		if !strings.Contains(out, want) {
			t.Errorf("status %s lacks %q:\n%s", id, want, out)
		}
	}
	js = h.must(0, "status", id, "--format", "json")
	var st struct {
		Backfill string            `json:"backfill"`
		Assets   []json.RawMessage `json:"assets"`
	}
	if err := json.Unmarshal([]byte(js), &st); err != nil || st.Backfill != id || len(st.Assets) != 3 {
		t.Errorf("status %s as JSON: %v, backfill %q, %d assets; want one object of its 3 assets:\n%s", id, err, st.Backfill, len(st.Assets), js)
	}

	// The model days wait for days outside the window: its backfill is
	// not finished, and the cancel reaches it; events and rollup are done.
	out = h.must(0, "cancel", id)
	if !strings.Contains(out, "Canceled backfill "+id+" through its assets' backfills (platform/model ") || strings.Contains(out, "platform/events") {
		t.Errorf("cancel %s:\n%s", id, out)
	}
	assets, err := backfill.AssetBackfills(context.Background(), h.l, id)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range assets {
		if a.Canceled != (a.DAGName == "platform/model") {
			t.Errorf("after cancel %s: %s canceled %v", id, a.DAGName, a.Canceled)
		}
	}
	if out := h.must(3, "cancel", id); !strings.Contains(out, "nothing was changed") {
		t.Errorf("cancel %s again:\n%s", id, out)
	}
	// Resumed here, where its DAG is registered.
	out = h.must(0, "resume", id)
	if !strings.Contains(out, "Resuming backfill "+id+" of DAG platform over") {
		t.Errorf("resume %s:\n%s", id, out)
	}
	if assets, err = backfill.AssetBackfills(context.Background(), h.l, id); err != nil {
		t.Fatal(err)
	}
	for _, a := range assets {
		if a.Canceled {
			t.Errorf("after resume %s: %s still canceled", id, a.DAGName)
		}
	}
	if out := h.must(3, "resume", id); !strings.Contains(out, "nothing to resume") {
		t.Errorf("resume %s again:\n%s", id, out)
	}
}
