package tranchecli_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

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

// TestMixedLimit limits a DAG of several granularities by its name:
// its backfills claim each asset's partitions under the asset's own
// identity, which a limit of the whole DAG would not hold, so the
// command refuses it and names the identities to limit, and limits one
// of them.
func TestMixedLimit(t *testing.T) {
	h := newHarness(t)
	p := assettest.New(t, func(_ testing.TB, now func() time.Time) ledger.Ledger { return memledger.New(now) })
	h.l = p.Ledger().(*memledger.Ledger)
	h.p.Ledger, h.p.Runner = h.l, p.Runner()
	h.p.DAGs["platform"] = p.DAG()
	h.must(0, "run", "platform", "--yes", "--from", "2026-03-08", "--to", "2026-03-08")
	code, out, errs := h.run("limit", "platform", "2")
	if code == 0 || !strings.Contains(errs, "platform/events") {
		t.Errorf("limit platform 2: exit %d; want a refusal naming platform/events\nstdout:\n%s\nstderr:\n%s", code, out, errs)
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
