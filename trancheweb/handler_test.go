package trancheweb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/internal/pagetest"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/memledger"
)

// get requests path from h and returns the status and body.
func get(t *testing.T, h http.Handler, path string, header ...string) (int, string, http.Header) {
	t.Helper()
	r := httptest.NewRequest(http.MethodGet, path, nil)
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	body, _ := io.ReadAll(w.Result().Body)
	return w.Code, string(body), w.Result().Header
}

func TestPages(t *testing.T) {
	l := memledger.New(nil)
	f := pagetest.New(t, l)
	h := NewHandler(l, &Options{Names: map[string]string{f.DAG: "events <daily>"}})
	base := "/backfills/" + url.PathEscape(f.ID)
	start := func(d int) string { return url.QueryEscape(instant(pagetest.Day(d).Start)) }
	tests := []struct {
		path   string
		status int
		want   []string // in the body
	}{
		{"/", 200, []string{"events &lt;daily&gt;", f.DAG, f.ID, "day 2026-01-01..2026-01-14 UTC", ">14<"}},
		// A partition finished just now: the held one is running, not
		// stuck; the failures lead the page.
		{base, 200, []string{"events &lt;daily&gt;", "28.6% succeeded", `id="grid"`, `<h2>Running</h2>`, "held by worker worker-2",
			`<h2>3 partitions failed</h2>`, `<code class="failed-key">2026-01-04</code>`, `<code class="failed-key">2026-01-05</code>`, `<code class="failed-key">2026-01-10</code>`}},
		{base + "/live", 200, []string{`id="grid"`}},
		{base + "/partition?start=" + start(10), 200, []string{"Partition <code>2026-01-10</code>", "2 attempts", "second try: &lt;b&gt;boom", "worker-&lt;i&gt;1&lt;/i&gt;", `<td class="trigger">backfill</td>`}},
		{base + "/partition?start=" + start(9), 200, []string{"1 attempts", "lease until"}},
		{base + "/partition?start=" + start(2), 200, []string{"No attempt yet"}},
		{base + "/partition?start=2026-01-02T12:00:00Z", 400, []string{"no partition of day starts at 2026-01-02T12:00:00Z"}},
		{base + "/partition?start=" + start(20), 400, []string{"partition 2026-01-20 is not in backfill"}},
		{base + "/partition?start=yesterday", 400, []string{"query start=&#34;yesterday&#34;"}},
		{base + "/partition", 400, []string{"want an RFC 3339 time"}},
		{base + "/span?from=" + start(8) + "&to=" + start(12), 200, []string{"4 partitions", "2026-01-11", "2026-01-08"}},
		{base + "/span?from=" + start(12) + "&to=" + start(8), 400, []string{"is empty"}},
		{base + "/span?from=2025-01-01T00:00:00Z&to=2025-02-01T00:00:00Z", 200, []string{"no partition in this span"}},
		{"/backfills/nope", 404, []string{"unknown backfill"}},
		{"/backfills/nope/partition?start=" + start(1), 404, nil},
		{"/nowhere", 404, nil},
		{"/assets/style.css", 200, []string{".c63{grid-column:64}"}},
		{"/assets/page.js", 200, []string{"X-Tranche-Fragment"}},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			status, body, hd := get(t, h, tt.path)
			if tt.path == base && strings.Contains(body, "Not progressing") {
				t.Errorf("the page of a backfill that progresses says it is not:\n%s", body)
			}
			if status != tt.status {
				t.Fatalf("status %d; want %d\n%s", status, tt.status, body)
			}
			for _, s := range tt.want {
				if !strings.Contains(body, s) {
					t.Errorf("the body lacks %q:\n%s", s, body)
				}
			}
			if got := hd.Get("Content-Security-Policy"); !strings.Contains(got, "script-src 'self'") {
				t.Errorf("Content-Security-Policy %q; want script-src 'self'", got)
			}
		})
	}
}

// TestPagesOnReader serves the pages from a reader alone, with no method
// that writes, as sqlite.OpenReader opens one: every page answers, a
// write is refused as from a read-only server, and asking for writes of
// a reader is a program's mistake NewHandler panics on.
func TestPagesOnReader(t *testing.T) {
	l := memledger.New(nil)
	f := pagetest.New(t, l)
	type readerOnly struct{ ledger.Reader }
	h := NewHandler(readerOnly{l}, nil)
	base := "/backfills/" + url.PathEscape(f.ID)
	start := url.QueryEscape(instant(pagetest.Day(10).Start))
	for _, path := range []string{"/", base, base + "/live", base + "/status.json", base + "/partition?start=" + start,
		base + "/span?from=" + start + "&to=" + url.QueryEscape(instant(pagetest.Day(12).Start)), "/dags/" + url.PathEscape(f.DAG)} {
		if status, body, _ := get(t, h, path); status != http.StatusOK {
			t.Errorf("GET %s from a reader alone: %d; want 200\n%s", path, status, body)
		}
	}
	if status, _ := post(t, h, base+"/cancel", url.Values{"token": {"whatever"}}); status != http.StatusForbidden {
		t.Errorf("POST cancel to a reader's pages: %d; want 403", status)
	}
	defer func() {
		if recover() == nil {
			t.Error("NewHandler of a reader alone with a WriteToken did not panic")
		}
	}()
	NewHandler(readerOnly{l}, &Options{WriteToken: strings.Repeat("x", 32)})
}

// TestTriage: a backfill whose held partition runs while nothing
// finished for longer than a lease is not progressing, and the page says
// why; the index lists each backfill's state, progress and age, the
// failed first.
func TestTriage(t *testing.T) {
	l := memledger.New(nil)
	// An older backfill of another DAG, which failed: listed first.
	other, err := tranche.NewDAG(tranche.Asset{Name: "other", Partitioning: tranche.Partitioning{Granularity: tranche.Day},
		Materialize: func(context.Context, *tranche.Materialization) ([]tranche.Row, error) { return nil, errors.New("down") }})
	if err != nil {
		t.Fatal(err)
	}
	failed := &backfill.Backfill{DAG: other, Window: pagetest.NewDays(t, 1, 3), Ledger: l}
	if _, err := failed.Run(t.Context()); err == nil {
		t.Fatal("the failing backfill succeeded")
	}
	failedID, _ := failed.ID()
	f := pagetest.New(t, l)
	later := time.Now().Add(10 * time.Minute) // the 9th's lease (an hour) holds
	h := NewHandler(l, &Options{Now: func() time.Time { return later }})
	_, body, _ := get(t, h, "/backfills/"+url.PathEscape(f.ID))
	for _, want := range []string{"<h2>Not progressing</h2>", "no partition finished in the last 30s while 1 are held", "held by worker worker-2",
		`The newest failure, <code>2026-01-04</code>`, `<pre class="error" id="newest-error">context canceled</pre>`} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, "<h2>Running</h2>") {
		t.Errorf("a stuck backfill listed as running:\n%s", body)
	}

	_, body, _ = get(t, h, "/")
	rows := regexp.MustCompile(`<tr class="bf-row" data-state="(\w+)">\s*<td><a class="backfill" href="/backfills/(\w+)"`).FindAllStringSubmatch(body, -1)
	if len(rows) != 2 || rows[0][1] != "failed" || rows[0][2] != failedID || rows[1][1] != "running" || rows[1][2] != f.ID {
		t.Errorf("index rows %v; want the failed backfill %s first, then %s running", rows, failedID, f.ID)
	}
	for _, want := range []string{"4/14", "3 failed", `class="bf-age">10m<`, "0/3, <span class=\"s-failed-text\">1 failed</span>"} {
		if !strings.Contains(body, want) {
			t.Errorf("the index lacks %q:\n%s", want, body)
		}
	}
}

// cellRE finds the grid's cells.
var cellRE = regexp.MustCompile(`<a class="cell s-(\w+) c(\d+) js-detail" href="([^"]*)" data-key="([^"]*)" data-state="(\w+)"`)

func TestGridCells(t *testing.T) {
	l := memledger.New(nil)
	f := pagetest.New(t, l)
	_, body, _ := get(t, NewHandler(l, nil), "/backfills/"+f.ID)
	cells := cellRE.FindAllStringSubmatch(body, -1)
	if len(cells) != len(f.States) {
		t.Fatalf("%d cells; want %d", len(cells), len(f.States))
	}
	for _, c := range cells {
		key, state := c[4], ledger.State(c[5])
		if want := f.States[key]; state != want || c[1] != string(want) {
			t.Errorf("cell %s: %s (class %s); want %s", key, state, c[1], want)
		}
		// A day in a month's row: its column is its day of the month.
		p, err := tranche.ParsePartitionKey(tranche.Day, key, time.UTC)
		if err != nil {
			t.Fatal(err)
		}
		if c[2] != fmt.Sprint(p.Start.Day()-1) {
			t.Errorf("cell %s in column %s; want %d", key, c[2], p.Start.Day()-1)
		}
		if want := "/backfills/" + f.ID + "/partition?start=" + url.QueryEscape(instant(p.Start)); strings.ReplaceAll(c[3], "&amp;", "&") != want {
			t.Errorf("cell %s links to %s; want %s", key, c[3], want)
		}
	}
	if !strings.Contains(body, `<span class="rowkey">2026-01</span>`) {
		t.Errorf("no row keyed 2026-01:\n%s", body)
	}
}

// TestEscaping checks that what the ledger holds stays text on every
// page: the fixture's error texts and worker name hold tags.
func TestEscaping(t *testing.T) {
	l := memledger.New(nil)
	f := pagetest.New(t, l)
	h := NewHandler(l, &Options{WriteToken: "a-token-of-the-operator", Names: map[string]string{f.DAG: `<script>alert(1)</script>`}})
	base := "/backfills/" + f.ID
	for _, path := range []string{"/", base, base + "/live",
		base + "/partition?start=" + url.QueryEscape(instant(pagetest.Day(10).Start)),
		base + "/partition?start=" + url.QueryEscape(instant(pagetest.Day(5).Start)),
		base + "/span?from=" + url.QueryEscape(instant(pagetest.Day(1).Start)) + "&to=" + url.QueryEscape(instant(pagetest.Day(15).Start)),
	} {
		for _, frag := range []string{"0", "1"} {
			status, body, _ := get(t, h, path, "X-Tranche-Fragment", frag)
			if status != 200 {
				t.Fatalf("%s: status %d", path, status)
			}
			for _, raw := range []string{"<b>", "<i>", "<script>document", "<script>alert", "<img"} {
				if strings.Contains(body, raw) {
					t.Errorf("%s (fragment %s) holds %q unescaped:\n%s", path, frag, raw, body)
				}
			}
			if frag == "1" && (strings.Contains(path, "/partition") || strings.Contains(path, "/span") || strings.HasSuffix(path, "/live")) && strings.Contains(body, "<html") {
				t.Errorf("%s as a fragment holds the whole page", path)
			}
		}
	}
	_, body, _ := get(t, h, base+"/partition?start="+url.QueryEscape(instant(pagetest.Day(5).Start)))
	if want := `&lt;b&gt;boom&lt;/b&gt;&lt;script&gt;document.title=&#34;pwned&#34;&lt;/script&gt;`; !strings.Contains(body, want) {
		t.Errorf("the partition page lacks the escaped error text %s:\n%s", want, body)
	}
}

func TestStatusJSON(t *testing.T) {
	l := memledger.New(nil)
	f := pagetest.New(t, l)
	h := NewHandler(l, nil)
	status, body, hd := get(t, h, "/backfills/"+f.ID+"/status.json")
	if status != 200 || hd.Get("Content-Type") != "application/json" {
		t.Fatalf("status %d, %s: %s", status, hd.Get("Content-Type"), body)
	}
	var doc statusDoc
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"succeeded": 4, "failed": 2, "running": 1, "canceled": 1, "pending": 6}
	if doc.ID != f.ID || doc.DAG != f.DAG || doc.Total != 14 || doc.Done || doc.Canceled || fmt.Sprint(doc.Counts) != fmt.Sprint(want) || len(doc.Blocked) == 0 {
		t.Errorf("status %+v; want counts %v of 14, not done, blocked", doc, want)
	}
	if err := l.CancelBackfill(context.Background(), f.ID, ledger.CancelOptions{}); err != nil {
		t.Fatal(err)
	}
	_, body2, _ := get(t, h, "/backfills/"+f.ID+"/status.json")
	var doc2 statusDoc
	if err := json.Unmarshal([]byte(body2), &doc2); err != nil {
		t.Fatal(err)
	}
	if !doc2.Canceled || doc2.Signature == doc.Signature {
		t.Errorf("after cancel: canceled %t, signature %q (before %q); want canceled and a new signature", doc2.Canceled, doc2.Signature, doc.Signature)
	}
	if status, body, _ := get(t, h, "/backfills/nope/status.json"); status != 404 || !strings.Contains(body, `"error"`) {
		t.Errorf("unknown backfill: %d %s; want 404 with an error", status, body)
	}
}

// post sends a form to h.
func post(t *testing.T, h http.Handler, path string, form url.Values) (int, http.Header) {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(form.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Code, w.Result().Header
}

func TestWrites(t *testing.T) {
	const token = "0123456789abcdef-the-token"
	ctx := context.Background()
	tests := []struct {
		name        string
		writeToken  string
		method, op  string
		form        url.Values
		status      int
		canceled    bool
		stopRunning bool
	}{
		{"read-only cancel", "", "POST", "cancel", url.Values{"token": {""}}, 403, false, false},
		{"read-only cancel with a token", "", "POST", "cancel", url.Values{"token": {token}}, 403, false, false},
		{"no token", token, "POST", "cancel", nil, 403, false, false},
		{"empty token", token, "POST", "cancel", url.Values{"token": {""}}, 403, false, false},
		{"wrong token", token, "POST", "cancel", url.Values{"token": {token[:len(token)-1] + "X"}}, 403, false, false},
		{"a prefix of the token", token, "POST", "cancel", url.Values{"token": {token[:8]}}, 403, false, false},
		{"the token in the query", token, "POST", "cancel?token=" + token, nil, 403, false, false},
		{"GET cancel", token, "GET", "cancel?token=" + token, nil, 405, false, false},
		{"cancel", token, "POST", "cancel", url.Values{"token": {token}}, 303, true, false},
		{"cancel stopping running", token, "POST", "cancel", url.Values{"token": {token}, "stop_running": {"on"}}, 303, true, true},
		{"resume without token", token, "POST", "resume", nil, 403, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := memledger.New(nil)
			f := pagetest.New(t, l)
			h := NewHandler(l, &Options{WriteToken: tt.writeToken})
			path := "/backfills/" + f.ID + "/" + tt.op
			var status int
			var hd http.Header
			if tt.method == "GET" {
				status, _, hd = get(t, h, path)
			} else {
				status, hd = post(t, h, path, tt.form)
			}
			if status != tt.status {
				t.Fatalf("status %d; want %d", status, tt.status)
			}
			if status == 303 && hd.Get("Location") != "/backfills/"+f.ID {
				t.Errorf("redirect to %q; want the backfill's page", hd.Get("Location"))
			}
			rec, err := l.Backfill(ctx, f.ID)
			if err != nil {
				t.Fatal(err)
			}
			if rec.Canceled != tt.canceled || rec.StopRunning != tt.stopRunning {
				t.Errorf("canceled %t, stop running %t; want %t, %t", rec.Canceled, rec.StopRunning, tt.canceled, tt.stopRunning)
			}
		})
	}

	t.Run("resume", func(t *testing.T) {
		l := memledger.New(nil)
		f := pagetest.New(t, l)
		if err := l.CancelBackfill(ctx, f.ID, ledger.CancelOptions{StopRunning: true}); err != nil {
			t.Fatal(err)
		}
		h := NewHandler(l, &Options{WriteToken: token})
		if status, _ := post(t, h, "/backfills/"+f.ID+"/resume", url.Values{"token": {token}}); status != 303 {
			t.Fatalf("status %d; want 303", status)
		}
		rec, err := l.Backfill(ctx, f.ID)
		if err != nil || rec.Canceled || rec.StopRunning {
			t.Errorf("after resume: %+v, %v; want not canceled", rec, err)
		}
		if status, _ := post(t, h, "/backfills/nope/resume", url.Values{"token": {token}}); status != 404 {
			t.Errorf("resume of an unknown backfill: status %d; want 404", status)
		}
	})

	t.Run("schedule pause", func(t *testing.T) {
		l := memledger.New(nil)
		f := pagetest.NewDAG(t, l)
		for _, tc := range []struct {
			writeToken, op string
			form           url.Values
			status         int
			paused         bool
			by             string
		}{
			{"", "pause", url.Values{"token": {token}}, 403, false, ""},
			{token, "pause", url.Values{"token": {token[:8]}}, 403, false, ""},
			{token, "pause", url.Values{"token": {token}, "by": {"alice"}, "note": {"source down"}}, 303, true, "alice"},
			{token, "resume", nil, 403, true, "alice"},
			{token, "resume", url.Values{"token": {token}}, 303, false, "the pages"},
		} {
			h := NewHandler(l, &Options{WriteToken: tc.writeToken})
			status, hd := post(t, h, "/dags/"+f.DAG+"/"+tc.op, tc.form)
			if status != tc.status || (status == 303 && hd.Get("Location") != "/dags/"+f.DAG) {
				t.Errorf("%s with %v: status %d to %q; want %d", tc.op, tc.form, status, hd.Get("Location"), tc.status)
			}
			p, err := l.SchedulePause(ctx, f.DAG)
			if err != nil || p.Paused != tc.paused || p.By != tc.by {
				t.Errorf("%s with %v: the ledger's pause %+v, %v; want paused %t by %q", tc.op, tc.form, p, err, tc.paused, tc.by)
			}
		}
		for _, tok := range []string{"", token} {
			_, body, _ := get(t, NewHandler(l, &Options{WriteToken: tok}), "/dags/"+f.DAG)
			if got := strings.Contains(body, `id="pause-form"`) && strings.Contains(body, `id="schedule-resume-form"`); got != (tok != "") {
				t.Errorf("with token %q the DAG's page offers the pause forms: %t", tok, got)
			}
		}
	})

	t.Run("forms only with writes", func(t *testing.T) {
		l := memledger.New(nil)
		f := pagetest.New(t, l)
		for _, tok := range []string{"", token} {
			_, body, _ := get(t, NewHandler(l, &Options{WriteToken: tok}), "/backfills/"+f.ID)
			if got := strings.Contains(body, `id="cancel-form"`) && strings.Contains(body, `id="resume-form"`) && strings.Contains(body, `name="stop_running"`); got != (tok != "") {
				t.Errorf("with token %q the page offers the forms: %t", tok, got)
			}
			if strings.Contains(body, token) {
				t.Errorf("the page holds the token")
			}
		}
	})
}

// TestAggregatedGrid draws 3 days of hours in at most 10 cells: a cell a
// day, whose span page lists its 24 hours; the hours of the first day
// failed.
func TestAggregatedGrid(t *testing.T) {
	ctx := context.Background()
	l := memledger.New(nil)
	first := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	hourly := tranche.Partitioning{Granularity: tranche.Hour, Location: time.UTC, Column: "hour"}
	dag, err := tranche.NewDAG(tranche.Asset{Name: "hours", Partitioning: hourly,
		Materialize: func(_ context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
			if p, _ := m.Partition(); p.Start.Day() == 1 {
				return nil, fmt.Errorf("hour %s: <em>down</em>", p.Key())
			}
			return nil, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	w, err := tranche.NewTimePartitionWindow(tranche.Hour, first, first.Add(71*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	b := &backfill.Backfill{DAG: dag, Window: w, Ledger: l, OnFailure: tranche.FailContinue, Concurrency: 4}
	if res, err := b.Run(ctx); res == nil || res.Succeeded != 48 || res.Failed != 24 {
		t.Fatalf("%+v, %v; want 48 succeeded, 24 failed", res, err)
	}
	id, _ := b.ID()
	h := NewHandler(l, &Options{MaxCells: 10})
	_, body, _ := get(t, h, "/backfills/"+id)
	cells := cellRE.FindAllStringSubmatch(body, -1)
	want := []struct{ key, state string }{{"2026-03-01", "failed"}, {"2026-03-02", "succeeded"}, {"2026-03-03", "succeeded"}}
	if len(cells) != len(want) {
		t.Fatalf("%d cells; want %d:\n%s", len(cells), len(want), body)
	}
	for i, c := range cells {
		if c[4] != want[i].key || c[5] != want[i].state {
			t.Errorf("cell %d: %s %s; want %s %s", i, c[4], c[5], want[i].key, want[i].state)
		}
	}
	if !strings.Contains(body, "Each cell is a hour of partitions") && !strings.Contains(body, "Each cell is a day of partitions") {
		t.Errorf("the page does not say cells aggregate:\n%s", body)
	}
	href := strings.ReplaceAll(cells[0][3], "&amp;", "&")
	if want := "/backfills/" + id + "/span?from=2026-03-01T00%3A00%3A00Z&to=2026-03-02T00%3A00%3A00Z"; href != want {
		t.Errorf("the first cell links to %s; want %s", href, want)
	}
	status, span, _ := get(t, h, href)
	if status != 200 {
		t.Fatalf("span: %d %s", status, span)
	}
	rows := regexp.MustCompile(`<a class="part js-detail" href="([^"]*)" data-key="([^"]*)">`).FindAllStringSubmatch(span, -1)
	if len(rows) != 24 || rows[0][2] != "2026-03-01T23:00Z" || rows[23][2] != "2026-03-01T00:00Z" {
		t.Fatalf("the span lists %d partitions, %v; want the 24 hours of March 1, newest first:\n%s", len(rows), rows, span)
	}
	if !strings.Contains(span, "hour 2026-03-01T05:00Z: &lt;em&gt;down&lt;/em&gt;") || strings.Contains(span, "<em>") {
		t.Errorf("the span page does not show the escaped error:\n%s", span)
	}
	status, hist, _ := get(t, h, strings.ReplaceAll(rows[0][1], "&amp;", "&"))
	if status != 200 || !strings.Contains(hist, "Partition <code>2026-03-01T23:00Z</code>") || !strings.Contains(hist, "1 attempts") {
		t.Errorf("a listed partition's history: %d\n%s", status, hist)
	}
}

// TestLargeGrid draws a backfill of 100,000 minutes in at most
// DefaultMaxCells cells: the page's work is per cell.
func TestLargeGrid(t *testing.T) {
	ctx := context.Background()
	l := memledger.New(nil)
	first := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	w, err := tranche.NewTimePartitionWindow(tranche.Minute, first, first.Add(99_999*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	rec := ledger.BackfillRecord{ID: "large", DAG: "dag-of-minutes", Window: w.String(), Chunk: 1, Created: first}
	if _, err := l.PutBackfill(ctx, rec); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	status, body, _ := get(t, NewHandler(l, nil), "/backfills/large")
	took := time.Since(start)
	if status != 200 {
		t.Fatalf("status %d: %s", status, body)
	}
	cells := cellRE.FindAllStringSubmatch(body, -1)
	// 100,000 minutes are 1667 hours, fewer than the cells: a cell an hour.
	if len(cells) != 1667 || len(cells) > DefaultMaxCells {
		t.Errorf("%d cells; want 1667, a cell an hour", len(cells))
	}
	for _, c := range cells {
		if c[5] != "pending" {
			t.Fatalf("cell %s %s; want pending", c[4], c[5])
		}
	}
	t.Logf("the page of 100,000 partitions: %v, %d bytes, %d cells", took, len(body), len(cells))
}

// countingLedger counts the reads of latest attempts that a status
// counts with, hiding any faster interface of the ledger beneath.
type countingLedger struct {
	ledger.Ledger
	latest atomic.Int64
}

func (c *countingLedger) Latest(ctx context.Context, dag string, from, to time.Time) iter.Seq2[ledger.Attempt, error] {
	c.latest.Add(1)
	return c.Ledger.Latest(ctx, dag, from, to)
}

// TestStatusPolling checks that polling an unchanged backfill does not
// count its partitions again, and that a change, a cancel or the age of
// the last count does.
func TestStatusPolling(t *testing.T) {
	ctx := context.Background()
	mem := memledger.New(nil)
	f := pagetest.New(t, mem)
	l := &countingLedger{Ledger: mem}
	now := time.Now()
	h := NewHandler(l, &Options{Now: func() time.Time { return now }})
	poll := func() statusDoc {
		t.Helper()
		status, body, _ := get(t, h, "/backfills/"+f.ID+"/status.json")
		if status != 200 {
			t.Fatalf("status %d: %s", status, body)
		}
		var doc statusDoc
		if err := json.Unmarshal([]byte(body), &doc); err != nil {
			t.Fatal(err)
		}
		return doc
	}
	first := poll()
	counted := l.latest.Load()
	if counted == 0 {
		t.Fatal("the first poll read no attempt")
	}
	if again := poll(); l.latest.Load() != counted || again.Signature != first.Signature {
		t.Errorf("an unchanged backfill was counted again (%d reads, then %d)", counted, l.latest.Load())
	}

	// A partition finishes behind the page: the next poll sees it.
	p := pagetest.Day(2)
	lease, err := mem.Claim(ctx, ledger.ClaimRequest{DAG: f.DAG, Backfill: f.ID, Worker: "w", RunID: "r",
		Partitions: []tranche.TimePartition{p}, Lease: time.Hour, Policy: ledger.RerunFailed})
	if err != nil {
		t.Fatal(err)
	}
	if err := mem.Finish(ctx, lease, []ledger.Outcome{{State: ledger.StateSucceeded}}); err != nil {
		t.Fatal(err)
	}
	changed := poll()
	if changed.Counts["succeeded"] != first.Counts["succeeded"]+1 || changed.Signature == first.Signature {
		t.Errorf("after a success: %v; want one more succeeded than %v", changed.Counts, first.Counts)
	}
	counted = l.latest.Load()
	poll()
	if l.latest.Load() != counted {
		t.Error("counted again without a change")
	}
	// The Blocked texts judge leases at a time: an old count is redone.
	now = now.Add(polledAge)
	poll()
	if l.latest.Load() == counted {
		t.Errorf("a count %v old was served again", polledAge)
	}
}

// latestCounting counts the calls of a ledger.LatestReader's counts.
type latestCounting struct {
	ledger.Ledger
	lr     ledger.LatestReader
	counts atomic.Int64
}

func (c *latestCounting) CountLatest(ctx context.Context, req ledger.CountRequest) ([]ledger.LatestCount, error) {
	c.counts.Add(1)
	return c.lr.CountLatest(ctx, req)
}

func (c *latestCounting) FindLatest(ctx context.Context, req ledger.FindRequest) iter.Seq2[ledger.Attempt, error] {
	return c.lr.FindLatest(ctx, req)
}

func (c *latestCounting) ChangedIn(ctx context.Context, dag string, from, to time.Time, after int64) ([]time.Time, error) {
	return c.lr.ChangedIn(ctx, dag, from, to, after)
}

// TestPageCountsOnce checks that a backfill's page counts its partitions
// once, in its grid, and shows what backfill.StatusOf and the status
// endpoint give: the counts, their signature and why it is blocked, with
// the lease held and once it expired, from a ledger that counts and one
// that does not, in cells of a partition and aggregated.
func TestPageCountsOnce(t *testing.T) {
	ctx := context.Background()
	mem := memledger.New(nil)
	f := pagetest.New(t, mem)
	counting := &latestCounting{Ledger: mem, lr: mem}
	for _, l := range []ledger.Ledger{counting, &countingLedger{Ledger: mem}} {
		for _, cells := range []int{DefaultMaxCells, 1} {
			for _, later := range []time.Duration{0, 2 * time.Hour} {
				now := time.Now().Add(later)
				h := NewHandler(l, &Options{MaxCells: cells, Now: func() time.Time { return now }}).(*handler)
				name := fmt.Sprintf("%T/cells=%d/later=%v", l, cells, later)
				before := counting.counts.Load()
				live, err := h.liveOf(ctx, f.ID)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				// A grid of a cell per partition reads their latest
				// attempts; one of aggregated cells counts them.
				want := int64(0)
				if cells < 14 {
					want = 1
				}
				if n := counting.counts.Load() - before; l == counting && n != want {
					t.Errorf("%s: the page counted %d times; want %d", name, n, want)
				}
				s, err := backfill.StatusOf(ctx, mem, f.ID, now)
				if err != nil {
					t.Fatal(err)
				}
				doc, err := h.statusDocOf(ctx, f.ID)
				if err != nil {
					t.Fatal(err)
				}
				if got, want := fmt.Sprint(live.Counts), fmt.Sprint(counts(s.Counts, 14)); got != want || live.Total != 14 {
					t.Errorf("%s: counts %s of %d; want %s of 14", name, got, live.Total, want)
				}
				// A backfill that progresses lists its held partitions as
				// running, not as blocked.
				if got, want := fmt.Sprint(append(live.Blocked, live.Running...)), fmt.Sprint(s.Blocked); got != want || len(s.Blocked) == 0 {
					t.Errorf("%s: blocked %s; want %s", name, got, want)
				}
				if live.Signature != doc.Signature || live.Done {
					t.Errorf("%s: signature %q, done %t; the status endpoint's %q, not done", name, live.Signature, live.Done, doc.Signature)
				}
			}
		}
	}
}

// TestNamesFromTheLedger: without Options.Names, the pages name a DAG by
// the name its newest backfill recorded, as the command's serve does, so
// that a backfill recorded after the handler was made shows it too.
func TestNamesFromTheLedger(t *testing.T) {
	l := memledger.New(nil)
	f := pagetest.New(t, l)
	h := NewHandler(l, nil)
	rec, err := l.Backfill(t.Context(), f.ID)
	if err != nil {
		t.Fatal(err)
	}
	rec.DAGName = "page_views_renamed"
	if _, err := l.PutBackfill(t.Context(), rec); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/", "/backfills/" + url.PathEscape(f.ID), "/dags/" + url.PathEscape(f.DAG)} {
		status, body, _ := get(t, h, path)
		if status != 200 || !strings.Contains(body, "page_views_renamed") {
			t.Errorf("GET %s: status %d, the body lacks the recorded name:\n%s", path, status, body)
		}
	}
}

// TestWritesCrossOrigin posts every write with the right token from a
// page of another site, as a browser marks it (Sec-Fetch-Site, or only
// Origin in an older browser): each is refused with 403 and changes
// nothing. The same posts from the pages' own origin, and from a program
// that sets neither header (curl), write.
func TestWritesCrossOrigin(t *testing.T) {
	const token = "0123456789abcdef-the-token"
	ctx := context.Background()
	dag, err := tranche.NewDAG(tranche.Asset{Name: "events", Partitioning: tranche.Partitioning{Granularity: tranche.Day},
		Materialize: func(context.Context, *tranche.Materialization) ([]tranche.Row, error) { return nil, nil }})
	if err != nil {
		t.Fatal(err)
	}
	dagID := backfill.DAGIdentity(dag, tranche.Day, time.UTC)
	launch := url.Values{"token": {token}, "from": {"2026-01-01"}, "to": {"2026-01-03"}, "rerun": {"failed"}, "on_failure": {"continue"}, "concurrency": {"1"}}
	origins := []struct {
		name    string
		headers map[string]string
		allowed bool
	}{
		{"another site", map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"}, false},
		{"a sibling subdomain", map[string]string{"Sec-Fetch-Site": "same-site", "Origin": "http://other.example.com"}, false},
		{"another origin without Sec-Fetch-Site", map[string]string{"Origin": "https://evil.example"}, false},
		{"the pages' own origin", map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": "http://example.com"}, true},
		{"the own origin without Sec-Fetch-Site", map[string]string{"Origin": "http://example.com"}, true},
		{"a program (no browser headers)", nil, true},
	}
	for _, o := range origins {
		t.Run(o.name, func(t *testing.T) {
			send := func(h http.Handler, path string, form url.Values) (int, string) {
				t.Helper()
				r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(form.Encode()))
				r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				for k, v := range o.headers {
					r.Header.Set(k, v)
				}
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				return w.Code, w.Body.String()
			}
			want := http.StatusForbidden
			if o.allowed {
				want = http.StatusSeeOther
			}
			check := func(what string, status int, body string) {
				t.Helper()
				if status != want {
					t.Errorf("%s: status %d; want %d", what, status, want)
				}
				if !o.allowed && !strings.Contains(body, "not of this server") {
					t.Errorf("%s: the refusal does not say why:\n%s", what, body)
				}
			}

			l := memledger.New(nil)
			f := pagetest.New(t, l)
			h := NewHandler(l, &Options{WriteToken: token, DAGs: map[string]*tranche.DAG{"events": dag}})
			status, body := send(h, "/backfills/"+f.ID+"/cancel", url.Values{"token": {token}, "stop_running": {"on"}})
			check("cancel", status, body)
			if rec, err := l.Backfill(ctx, f.ID); err != nil || rec.Canceled != o.allowed {
				t.Errorf("after the cancel: canceled %t, %v; want %t", rec.Canceled, err, o.allowed)
			}
			if err := l.CancelBackfill(ctx, f.ID, ledger.CancelOptions{}); err != nil {
				t.Fatal(err)
			}
			status, body = send(h, "/backfills/"+f.ID+"/resume", url.Values{"token": {token}})
			check("resume", status, body)
			if rec, err := l.Backfill(ctx, f.ID); err != nil || rec.Canceled == o.allowed {
				t.Errorf("after the resume: canceled %t, %v; want %t", rec.Canceled, err, !o.allowed)
			}

			d := pagetest.NewDAG(t, l)
			status, body = send(h, "/dags/"+d.DAG+"/pause", url.Values{"token": {token}})
			check("pause", status, body)
			if p, err := l.SchedulePause(ctx, d.DAG); err != nil || p.Paused != o.allowed {
				t.Errorf("after the pause: paused %t, %v; want %t", p.Paused, err, o.allowed)
			}

			before, err := l.Backfills(ctx)
			if err != nil {
				t.Fatal(err)
			}
			_, plan, _ := get(t, h, "/dags/"+dagID+"/plan?"+launch.Encode())
			revision := regexp.MustCompile(`<span id="plan-revision">(\d+)</span>`).FindStringSubmatch(plan)
			if revision == nil {
				t.Fatalf("the plan page has no revision:\n%s", plan)
			}
			launch.Set("revision", revision[1])
			status, body = send(h, "/dags/"+dagID+"/backfills", launch)
			check("start", status, body)
			if after, err := l.Backfills(ctx); err != nil || (len(after) > len(before)) != o.allowed {
				t.Errorf("after the start: %d backfills, %v; had %d", len(after), err, len(before))
			}
		})
	}
}
