package trancheweb

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/ledger/memledger"
)

// postForm sends a form to h.
func postForm(t *testing.T, h http.Handler, path string, form url.Values) (int, string, http.Header) {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(form.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Code, w.Body.String(), w.Result().Header
}

// TestLaunch plans a backfill of a registered DAG on its page and starts
// that plan: a wrong token starts nothing (403), a plan whose partitions'
// history changed since its revision is refused with the new plan (409),
// and the new plan starts, runs in the process and succeeds.
func TestLaunch(t *testing.T) {
	l := memledger.New(nil)
	dag, err := tranche.NewDAG(tranche.Asset{Name: "events", Partitioning: tranche.Partitioning{Granularity: tranche.Day},
		Materialize: func(context.Context, *tranche.Materialization) ([]tranche.Row, error) { return nil, nil }})
	if err != nil {
		t.Fatal(err)
	}
	h := NewHandler(l, &Options{DAGs: map[string]*tranche.DAG{"events": dag}, WriteToken: "s3cret"})
	id := backfill.DAGIdentity(dag, tranche.Day, time.UTC)
	base := "/dags/" + url.PathEscape(id)

	// The index lists the registered DAG, with no backfill, and its form.
	if _, body, _ := get(t, h, "/"); !strings.Contains(body, ">events</a>") || !strings.Contains(body, base+"/plan") {
		t.Errorf("the index lacks the registered DAG and its plan link:\n%s", body)
	}
	if status, body, _ := get(t, h, base+"/plan"); status != 200 || !strings.Contains(body, `id="plan-form"`) || strings.Contains(body, `id="plan"`) {
		t.Fatalf("the empty form: %d\n%s", status, body)
	}
	query := url.Values{"from": {"2026-01-01"}, "to": {"2026-01-07"}, "rerun": {"failed"}, "on_failure": {"continue"}, "concurrency": {"2"}}
	status, body, _ := get(t, h, base+"/plan?"+query.Encode())
	revision := regexp.MustCompile(`<span id="plan-revision">(\d+)</span>`).FindStringSubmatch(body)
	if status != 200 || revision == nil || !strings.Contains(body, "<tr><td>run</td><td class=\"num\">7</td></tr>") || !strings.Contains(body, `id="start-form"`) {
		t.Fatalf("the plan of a week: %d\n%s", status, body)
	}
	for _, bad := range []url.Values{{"from": {"2026-01-08"}, "to": {"2026-01-01"}}, {"from": {"2026-01-01"}}, {"from": {"x"}, "to": {"y"}},
		{"from": {"2026-01-01"}, "to": {"2026-01-08"}, "concurrency": {"0"}}, {"from": {"2026-01-01"}, "to": {"2026-01-08"}, "rerun": {"some"}},
		{"slots": {"2026-01-01T00:00:00Z"}}} {
		if status, body, _ := get(t, h, base+"/plan?"+bad.Encode()); status != 400 || !strings.Contains(body, `class="error"`) {
			t.Errorf("plan of %v: %d; want 400 with the reason\n%s", bad, status, body)
		}
	}
	if status, _, _ := get(t, h, "/dags/nope/plan"); status != 404 {
		t.Errorf("plan of an unregistered DAG: %d; want 404", status)
	}

	form := url.Values{"revision": {revision[1]}}
	for k, v := range query {
		form[k] = v
	}
	for _, token := range []string{"", "wrong"} {
		form.Set("token", token)
		if status, _, _ := postForm(t, h, base+"/backfills", form); status != 403 {
			t.Errorf("start with token %q: %d; want 403", token, status)
		}
	}
	if bs, _ := l.Backfills(t.Context()); len(bs) != 0 {
		t.Fatalf("a refused start recorded %v", bs)
	}

	// A run of January 3rd since the plan: its history changed.
	if _, err := backfill.RunRecorded(t.Context(), l, nil, dag, tranche.PartitionOf(tranche.Day, time.Date(2026, 1, 3, 0, 0, 0, 0, time.UTC)), "by-hand"); err != nil {
		t.Fatal(err)
	}
	form.Set("token", "s3cret")
	status, body, _ = postForm(t, h, base+"/backfills", form)
	fresh := regexp.MustCompile(`<input type="hidden" name="revision" value="(\d+)">`).FindStringSubmatch(body)
	if status != http.StatusConflict || !strings.Contains(body, "changed since revision "+revision[1]) || fresh == nil || fresh[1] == revision[1] ||
		!strings.Contains(body, "<tr><td>run</td><td class=\"num\">6</td></tr>") {
		t.Fatalf("start of a stale plan: %d; want 409 with the new plan (6 to run, a new revision)\n%s", status, body)
	}
	if bs, _ := l.Backfills(t.Context()); len(bs) != 0 {
		t.Fatalf("a stale start recorded %v", bs)
	}

	form.Set("revision", fresh[1])
	status, _, hd := postForm(t, h, base+"/backfills", form)
	if status != http.StatusSeeOther || !strings.HasPrefix(hd.Get("Location"), "/backfills/") {
		t.Fatalf("start of the new plan: %d, Location %q; want 303 to the backfill's page", status, hd.Get("Location"))
	}
	bf := strings.TrimPrefix(hd.Get("Location"), "/backfills/")
	deadline := time.Now().Add(10 * time.Second)
	for {
		s, err := backfill.StatusOf(t.Context(), l, bf, time.Now())
		if err == nil && s.Done() {
			if s.Record.DAG != id || s.Window.Len() != 7 {
				t.Errorf("the backfill started: %v; want the week of DAG %s", s, id)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the backfill started from the page did not finish: %v, %v", s, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Its page names the registered DAG.
	if _, body, _ := get(t, h, "/backfills/"+bf); !strings.Contains(body, "<h1>events ") {
		t.Errorf("the started backfill's page does not name its DAG:\n%s", body)
	}
}
