package trancheweb

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/internal/pagetest"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/memledger"
)

// rowRE finds the DAG page's backfills.
var rowRE = regexp.MustCompile(`<tr data-id="([^"]*)" data-state="(\w+)">`)

// dagCells returns the state of each cell of body's grid by key.
func dagCells(body string) map[string]ledger.State {
	out := map[string]ledger.State{}
	for _, c := range cellRE.FindAllStringSubmatch(body, -1) {
		out[c[4]] = ledger.State(c[5])
	}
	return out
}

func TestDAGPage(t *testing.T) {
	l := memledger.New(nil)
	f := pagetest.NewDAG(t, l)
	h := NewHandler(l, &Options{Names: map[string]string{f.DAG: "sessions <daily>"}})
	base := "/dags/" + url.PathEscape(f.DAG)
	day := func(d int) string { return url.QueryEscape(instant(pagetest.Day(d).Start)) }
	states := func(first, last int) map[string]ledger.State {
		out := map[string]ledger.State{}
		for d := first; d <= last; d++ {
			out[pagetest.Day(d).Key()] = f.States[pagetest.Day(d).Key()]
		}
		return out
	}
	tests := []struct {
		name   string
		path   string
		status int
		want   []string                // in the body
		cells  map[string]ledger.State // the grid, when not nil
	}{
		{"the index links the DAG", "/", 200, []string{`href="` + base + `"`, "sessions &lt;daily&gt;"}, nil},
		{"every backfill's span", base, 200, []string{"sessions &lt;daily&gt;", "day 2026-01-01..2026-01-12 UTC", "12 partitions", "33.3% succeeded",
			`<tr data-state="missing"><td><span class="state s-missing"><span class="swatch s-missing"></span>missing</span></td><td class="num count">4</td>`,
			`<tr data-id="` + f.First + `" data-state="failed">`, `<tr data-id="` + f.Second + `" data-state="running">`,
			`href="/backfills/` + f.First + `"`, `data-refresh="5000" data-done="false"`}, states(1, 12)},
		{"narrowed by dates, the to day included", base + "?from=2026-01-05&to=2026-01-07", 200, []string{"day 2026-01-05..2026-01-07 UTC", "3 partitions",
			`/live?from=2026-01-05&amp;to=2026-01-07`, `value="2026-01-05"`}, states(5, 7)},
		{"narrowed by RFC 3339 from alone", base + "?from=" + day(11), 200, []string{"day 2026-01-11..2026-01-12 UTC"}, states(11, 12)},
		{"narrowed to an instant inside a day", base + "?from=2026-01-02T12:00:00Z&to=2026-01-04T00:00:00%2B00:00", 200, []string{"day 2026-01-03..2026-01-03 UTC"}, states(3, 3)},
		{"narrowed beyond the span", base + "?from=2026-01-10&to=2026-03-01", 200, []string{"day 2026-01-10..2026-01-12 UTC"}, states(10, 12)},
		{"narrowed outside the span", base + "?from=2025-01-01&to=2025-02-01", 200, []string{"no partition of its backfills from"}, map[string]ledger.State{}},
		{"the live part", base + "/live", 200, []string{`id="grid"`, `id="backfills"`}, states(1, 12)},
		{"a bound that is no time", base + "?from=yesterday", 400, []string{`query from=&#34;yesterday&#34;`, "relative words"}, nil},
		{"a date out of range", base + "?to=2026-02-30", 400, []string{`to=&#34;2026-02-30&#34;`}, nil},
		{"from after to", base + "?from=2026-01-05&to=2026-01-04", 400, []string{"is not before to"}, nil},
		{"one day", base + "?from=2026-01-05&to=2026-01-05", 200, []string{"day 2026-01-05..2026-01-05 UTC"}, states(5, 5)},
		{"an unknown DAG", "/dags/nope", 404, []string{"the ledger records no backfill of DAG &#34;nope&#34;"}, nil},
		{"an unknown DAG holding HTML", "/dags/" + url.PathEscape("<b>x</b>"), 404, []string{"DAG &#34;&lt;b&gt;x&lt;/b&gt;&#34;"}, nil},
		{"an unknown DAG's status", "/dags/nope/status.json", 404, []string{`"error"`}, nil},
		{"a failed day's history", base + "/partition?start=" + day(6), 200, []string{"Partition <code>2026-01-06</code>", "2 attempts",
			`href="/backfills/` + f.Second + `"`, `href="/backfills/` + f.First + `"`, "sessions of 2026-01-06: &lt;b&gt;boom", `href="` + base + `"`}, nil},
		{"a missing day's history", base + "/partition?start=" + day(8), 200, []string{"0 attempts", "the partition is missing"}, nil},
		{"a day outside the span's history", base + "/partition?start=" + day(20), 200, []string{"0 attempts"}, nil},
		{"no partition starts there", base + "/partition?start=2026-01-02T12:00:00Z", 400, []string{"no partition of day starts at 2026-01-02T12:00:00Z"}, nil},
		{"a history without start", base + "/partition", 400, []string{"want an RFC 3339 time"}, nil},
		{"a span", base + "/span?from=" + day(5) + "&to=" + day(9), 200, []string{"4 partitions", `data-state="missing"`, base + "/partition?start="}, nil},
		{"an inverted span", base + "/span?from=" + day(9) + "&to=" + day(5), 400, []string{"is empty"}, nil},
		{"a span outside", base + "/span?from=2025-01-01T00:00:00Z&to=2025-02-01T00:00:00Z", 200, []string{"cover no partition in this span"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body, hd := get(t, h, tt.path)
			if status != tt.status {
				t.Fatalf("status %d; want %d\n%s", status, tt.status, body)
			}
			for _, s := range tt.want {
				if !strings.Contains(body, s) {
					t.Errorf("the body lacks %q:\n%s", s, body)
				}
			}
			if got := hd.Get("Content-Security-Policy"); got != csp {
				t.Errorf("Content-Security-Policy %q; want %q", got, csp)
			}
			if tt.cells != nil {
				if got := dagCells(body); fmt.Sprint(got) != fmt.Sprint(tt.cells) {
					t.Errorf("cells %v; want %v", got, tt.cells)
				}
			}
		})
	}

	// The backfills, newest first, with their states.
	_, body, _ := get(t, h, base)
	rows := rowRE.FindAllStringSubmatch(body, -1)
	if len(rows) != 2 || rows[0][1] != f.Second || rows[1][1] != f.First {
		t.Fatalf("backfills %v; want %s then %s", rows, f.Second, f.First)
	}
	for _, r := range rows {
		if want := f.Backfills[r[1]]; ledger.State(r[2]) != want {
			t.Errorf("backfill %s: %s; want %s", r[1], r[2], want)
		}
	}
}

// TestDAGEscaping checks that what the ledger holds stays text on the
// DAG's pages, and that a DAG's identity holding HTML and slashes is
// escaped in the paths and the page.
func TestDAGEscaping(t *testing.T) {
	ctx := context.Background()
	l := memledger.New(nil)
	f := pagetest.NewDAG(t, l)
	odd := `<b>dag</b>/"x"?&`
	w, err := tranche.NewTimePartitionWindow(tranche.Day, pagetest.Day(1).Start, pagetest.Day(3).Start)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.PutBackfill(ctx, ledger.BackfillRecord{ID: `<i>id</i>`, DAG: odd, Window: w.String(), Chunk: 1, Created: time.Now()}); err != nil {
		t.Fatal(err)
	}
	lease, err := l.Claim(ctx, ledger.ClaimRequest{DAG: odd, Backfill: `<i>id</i>`, Worker: `<img src=x>`, RunID: "r",
		Partitions: []tranche.TimePartition{pagetest.Day(2)}, Lease: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Finish(ctx, lease, []ledger.Outcome{{State: ledger.StateFailed, Err: pagetest.Evil}}); err != nil {
		t.Fatal(err)
	}
	h := NewHandler(l, &Options{Names: map[string]string{f.DAG: `<script>alert(1)</script>`}})
	base := "/dags/" + url.PathEscape(f.DAG)
	oddBase := "/dags/" + url.PathEscape(odd)
	for _, path := range []string{"/", base, base + "/live", base + "?from=2026-01-02&to=2026-01-09",
		base + "/partition?start=" + url.QueryEscape(instant(pagetest.Day(3).Start)),
		base + "/span?from=" + url.QueryEscape(instant(pagetest.Day(1).Start)) + "&to=" + url.QueryEscape(instant(pagetest.Day(13).Start)),
		oddBase, oddBase + "/partition?start=" + url.QueryEscape(instant(pagetest.Day(2).Start)),
		base + "?from=" + url.QueryEscape(`<b>x</b>`),
	} {
		for _, frag := range []string{"0", "1"} {
			status, body, _ := get(t, h, path, "X-Tranche-Fragment", frag)
			if status != 200 && status != 400 {
				t.Fatalf("%s: status %d\n%s", path, status, body)
			}
			for _, raw := range []string{"<b>", "<i>", "<script>document", "<script>alert", "<img"} {
				if strings.Contains(body, raw) {
					t.Errorf("%s (fragment %s) holds %q unescaped:\n%s", path, frag, raw, body)
				}
			}
		}
	}
	_, body, _ := get(t, h, oddBase)
	if !strings.Contains(body, `href="`+oddBase+`/partition?start=`) && !strings.Contains(body, `href="/dags/%3Cb%3Edag%3C%2Fb%3E%2F%22x%22%3F&amp;/partition?start=`) {
		t.Errorf("the odd DAG's cells do not link under its escaped path %s:\n%s", oddBase, body)
	}
	if got := dagCells(body); got["2026-01-02"] != ledger.StateFailed || got["2026-01-01"] != stateMissing {
		t.Errorf("the odd DAG's cells %v; want the 2nd failed, the 1st missing", got)
	}
}

// TestDAGDisagreeing reports a ledger whose backfills of one DAG differ
// in granularity or zone, which DAGIdentity never names alike.
func TestDAGDisagreeing(t *testing.T) {
	ctx := context.Background()
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Fatal(err)
	}
	days, err := tranche.NewTimePartitionWindow(tranche.Day, pagetest.Day(1).Start, pagetest.Day(3).Start)
	if err != nil {
		t.Fatal(err)
	}
	hours, err := tranche.NewTimePartitionWindow(tranche.Hour, pagetest.Day(1).Start, pagetest.Day(1).Start.Add(5*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	parisDays, err := tranche.NewTimePartitionWindow(tranche.Day, time.Date(2026, 1, 1, 0, 0, 0, 0, paris), time.Date(2026, 1, 3, 0, 0, 0, 0, paris))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name  string
		other tranche.TimePartitionWindow
		want  string
	}{
		{"granularity", hours, "its backfill old is in granularity day, its newest backfill new in hour"},
		{"zone", parisDays, "its backfill old is in zone UTC, its newest backfill new in Europe/Paris"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l := memledger.New(nil)
			for _, r := range []ledger.BackfillRecord{
				{ID: "old", DAG: "d", Window: days.String(), Chunk: 1, Created: time.Unix(1, 0)},
				{ID: "new", DAG: "d", Window: tt.other.String(), Chunk: 1, Created: time.Unix(2, 0)},
			} {
				if _, err := l.PutBackfill(ctx, r); err != nil {
					t.Fatal(err)
				}
			}
			status, body, _ := get(t, NewHandler(l, nil), "/dags/d")
			if status != 500 || !strings.Contains(body, tt.want) {
				t.Errorf("status %d; want 500 saying %q:\n%s", status, tt.want, body)
			}
		})
	}
}

// TestDAGMovedSchedule draws a daily schedule moved from 02:00 to 01:00,
// which keeps the DAG's identity, in the newest backfill's slots; the
// former slots' attempts match them by their fire's day.
func TestDAGMovedSchedule(t *testing.T) {
	ctx := context.Background()
	l := memledger.New(nil)
	at2, err := tranche.ParseCron("0 2 * * *")
	if err != nil {
		t.Fatal(err)
	}
	at1, err := tranche.ParseCron("0 1 * * *")
	if err != nil {
		t.Fatal(err)
	}
	slots := func(g tranche.TimeGranularity, first, last int) tranche.TimePartitionWindow {
		w, err := tranche.NewTimePartitionWindow(g, tranche.PartitionOf(g, pagetest.Day(first).Start.Add(3*time.Hour)).Start,
			tranche.PartitionOf(g, pagetest.Day(last).Start.Add(3*time.Hour)).Start)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	old, moved := slots(at2, 1, 3), slots(at1, 3, 5)
	for _, r := range []ledger.BackfillRecord{
		{ID: "old", DAG: "d", Window: old.String(), Chunk: 1, Created: time.Unix(1, 0)},
		{ID: "new", DAG: "d", Window: moved.String(), Chunk: 1, Created: time.Unix(2, 0)},
	} {
		if _, err := l.PutBackfill(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	p := old.Oldest() // the former slot fired on January 2nd at 02:00
	lease, err := l.Claim(ctx, ledger.ClaimRequest{DAG: "d", Backfill: "old", Worker: "w", RunID: "r", Partitions: []tranche.TimePartition{p}, Lease: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Finish(ctx, lease, []ledger.Outcome{{State: ledger.StateSucceeded}}); err != nil {
		t.Fatal(err)
	}
	status, body, _ := get(t, NewHandler(l, nil), "/dags/d")
	if status != 200 {
		t.Fatalf("status %d:\n%s", status, body)
	}
	cells := cellRE.FindAllStringSubmatch(body, -1)
	if len(cells) == 0 || !strings.Contains(body, "cron(0 1 * * *") {
		t.Fatalf("no grid in the moved schedule:\n%s", body)
	}
	if cells[0][5] != "succeeded" {
		t.Errorf("the first slot %s is %s; want succeeded, the former slot of its day", cells[0][4], cells[0][5])
	}
	for _, c := range cells[1:] {
		if c[5] != "missing" {
			t.Errorf("slot %s is %s; want missing", c[4], c[5])
		}
	}
}

// TestDAGStatusJSON polls the DAG's status: its counts, its backfills'
// states, and a new signature when a partition finishes or a backfill is
// canceled; an unchanged DAG is not read again.
func TestDAGStatusJSON(t *testing.T) {
	ctx := context.Background()
	mem := memledger.New(nil)
	f := pagetest.NewDAG(t, mem)
	l := &countingLedger{Ledger: mem}
	h := NewHandler(l, nil)
	path := "/dags/" + url.PathEscape(f.DAG) + "/status.json"
	poll := func() dagStatusDoc {
		t.Helper()
		status, body, hd := get(t, h, path)
		if status != 200 || hd.Get("Content-Type") != "application/json" {
			t.Fatalf("status %d, %s: %s", status, hd.Get("Content-Type"), body)
		}
		var doc dagStatusDoc
		if err := json.Unmarshal([]byte(body), &doc); err != nil {
			t.Fatal(err)
		}
		return doc
	}
	doc := poll()
	want := map[string]int{"succeeded": 4, "failed": 2, "running": 1, "canceled": 1, "missing": 4}
	if doc.DAG != f.DAG || doc.Total != 12 || !doc.Running || fmt.Sprint(doc.Counts) != fmt.Sprint(want) ||
		doc.Backfills[f.First] != "failed" || doc.Backfills[f.Second] != "running" {
		t.Errorf("status %+v; want counts %v of 12, running, backfills %v", doc, want, f.Backfills)
	}
	read := l.latest.Load()
	if again := poll(); l.latest.Load() != read || again.Signature != doc.Signature {
		t.Errorf("an unchanged DAG was read again (%d reads, then %d)", read, l.latest.Load())
	}
	if err := mem.Finish(ctx, f.Running, []ledger.Outcome{{State: ledger.StateSucceeded}}); err != nil {
		t.Fatal(err)
	}
	finished := poll()
	if finished.Counts["succeeded"] != 5 || finished.Counts["running"] != 0 || finished.Signature == doc.Signature || finished.Backfills[f.Second] != "failed" {
		t.Errorf("after the running day succeeded: %+v", finished)
	}
	// Every backfill either canceled or failed: still polling, as a
	// backfill's page polls until it is done.
	if !finished.Running {
		t.Errorf("with failed backfills not done: running %t; want true", finished.Running)
	}
	for _, id := range []string{f.First, f.Second} {
		if err := mem.CancelBackfill(ctx, id, ledger.CancelOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	canceled := poll()
	if canceled.Running || canceled.Signature == finished.Signature || canceled.Backfills[f.First] != "canceled" {
		t.Errorf("with every backfill canceled and nothing running: %+v; want not running", canceled)
	}
	if status, body, _ := get(t, h, path+"?from=nonsense"); status != 400 || !strings.Contains(body, `"error"`) {
		t.Errorf("a bad bound: %d %s; want 400 with an error", status, body)
	}
}

// TestDAGChosenPartitions widens the DAG's span with a backfill of
// chosen partitions, which covers the span of its partitions, not its
// whole recorded window; the days between are missing, and the backfill,
// which no cell counts alone, is read with its own status.
func TestDAGChosenPartitions(t *testing.T) {
	ctx := context.Background()
	l := memledger.New(nil)
	f := pagetest.NewDAG(t, l)
	w, err := tranche.NewTimePartitionWindow(tranche.Day, pagetest.Day(1).Start, pagetest.Day(31).Start)
	if err != nil {
		t.Fatal(err)
	}
	chosen := ledger.BackfillRecord{ID: "chosen", DAG: f.DAG, Window: w.String(), Chunk: 1, Created: time.Now(),
		Partitions: []time.Time{pagetest.Day(14).Start, pagetest.Day(16).Start}}
	if _, err := l.PutBackfill(ctx, chosen); err != nil {
		t.Fatal(err)
	}
	_, body, _ := get(t, NewHandler(l, nil), "/dags/"+url.PathEscape(f.DAG))
	want := map[string]ledger.State{}
	for d := 1; d <= 16; d++ {
		want[pagetest.Day(d).Key()] = stateMissing
	}
	for k, st := range f.States {
		want[k] = st
	}
	if got := dagCells(body); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("cells %v; want %v", got, want)
	}
	if !strings.Contains(body, "day 2026-01-01..2026-01-16 UTC") || !strings.Contains(body, `<tr data-id="chosen" data-state="pending">`) ||
		!strings.Contains(body, "2 pending") {
		t.Errorf("the page lacks the span to the 16th or the chosen backfill, pending:\n%s", body)
	}
}
