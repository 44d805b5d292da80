package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/internal/pagetest"
	"github.com/tranche-dev/tranche/internal/testskip"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/sqlite"
)

var updateDocs = flag.Bool("update-docs", false, "write the screenshots docs/page.png, docs/dag-page.png and docs/terminal.png")

// browser starts a headless Chromium for the test: Debian's chromium,
// or $CHROMIUM. It skips when there is none, unless CI=true.
func browser(t *testing.T) context.Context {
	t.Helper()
	path := os.Getenv("CHROMIUM")
	if path == "" {
		for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
			if p, err := exec.LookPath(name); err == nil {
				path = p
				break
			}
		}
	}
	if path == "" {
		testskip.Skip(t, testskip.Chromium, "no chromium: apt-get install chromium, or set $CHROMIUM")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox, // as root, and in containers
		chromedp.DisableGPU,
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.Flag("force-device-scale-factor", "1"),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1360, 900),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(func() { cancelTimeout(); cancelCtx(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting %s: %v", path, err)
	}
	return ctx
}

// colours are the cells' colours by state, as the style sheet gives them.
var colours = map[ledger.State]string{
	ledger.StateSucceeded: "rgb(45, 164, 78)",
	ledger.StateFailed:    "rgb(207, 34, 46)",
	ledger.StateRunning:   "rgb(9, 105, 218)",
	ledger.StateCanceled:  "rgb(191, 135, 0)",
	ledger.StatePending:   "rgb(208, 215, 222)",
	"missing":             "rgb(255, 255, 255)",
}

type cellSeen struct {
	Key, State, Colour string
}

// do runs the browser's steps, failing the test at the first error.
func do(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// get runs one action that gives a value.
func get[T any](t *testing.T, ctx context.Context, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

type css = chromedp.CSS

// TestPageInChromium serves a SQLite ledger with tranche serve and uses
// its pages in a real headless Chromium as an operator would: it reads
// the grid's cells and their colours, clicks cells for their histories
// (an error text holding HTML stays text, creating no element), drills
// into an aggregated cell, watches the page redraw itself when a running
// partition finishes, and cancels the backfill with the token.
func TestPageInChromium(t *testing.T) {
	ctx := browser(t)
	path, f := newLedgerFile(t)
	l, err := sqlite.Open(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	hourly := hourlyBackfill(t, l)
	const token = "a-token-for-the-browser-test"
	t.Setenv(TokenEnv, token)
	base := startServe(t, "--ledger", "sqlite:"+path, "--allow-writes", "--refresh", "1s", "--max-cells", "100",
		"--name", f.DAG+"=events", "--name", hourly+"=hourly_rollup")
	page := base + "/backfills/" + f.ID

	// The grid: one cell per day, coloured by its state.
	do(t, ctx, "the backfill's page", chromedp.Navigate(page), chromedp.WaitVisible(css("#grid")))
	cells := get(t, ctx, chromedp.Evaluate[[]cellSeen](`Array.from(document.querySelectorAll("#grid a.cell")).map(a => ({Key: a.dataset.key, State: a.dataset.state, Colour: getComputedStyle(a).backgroundColor}))`))
	if len(cells) != len(f.States) {
		t.Fatalf("%d cells; want %d: %v", len(cells), len(f.States), cells)
	}
	for _, c := range cells {
		want := f.States[c.Key]
		if ledger.State(c.State) != want || c.Colour != colours[want] {
			t.Errorf("cell %s: %s in %s; want %s in %s", c.Key, c.State, c.Colour, want, colours[want])
		}
	}

	// The page leads with the failures; the held day runs, so it is not
	// called stuck.
	failure := get(t, ctx, chromedp.Text(css("#failure")))
	if !strings.Contains(failure, "3 partitions failed") || !strings.Contains(failure, "2026-01-10") || !strings.Contains(failure, "2026-01-05") {
		t.Errorf("the failure summary:\n%s\nwant 3 failed, the 5th and the 10th among them", failure)
	}
	if n := get(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("#blocked").length`)); n != 0 {
		t.Errorf("a backfill whose partitions just finished shows 'Not progressing'")
	}

	// The same backfill as tranche status draws it on a terminal, for
	// the terminal's screenshot when docs/terminal-status.ansi is absent.
	var term bytes.Buffer
	if code := run(t.Context(), []string{"status", f.ID, "--color", "always", "--ledger", "sqlite:" + path}, nil, &term, io.Discard); code != 0 {
		t.Fatalf("tranche status exited %d:\n%s", code, term.String())
	}

	// A failed day's history: its error texts stay text.
	do(t, ctx, "a failed day's history", chromedp.Click(css(`a.cell[data-key="2026-01-10"]`)),
		chromedp.WaitVisible(css(`#detail #history[data-key="2026-01-10"]`)))
	text := get(t, ctx, chromedp.Text(css("#detail")))
	elements := get(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("b, i, img, em, #detail script").length`))
	title := get(t, ctx, chromedp.Title())
	for _, s := range []string{"Partition 2026-01-10", "2 attempts", "second try: " + pagetest.Evil, "worker-2", "worker-<i>1</i>"} {
		if !strings.Contains(text, s) {
			t.Errorf("the history lacks %q:\n%s", s, text)
		}
	}
	if elements != 0 || strings.Contains(title, "pwned") {
		t.Errorf("the error text made %d elements, and the title is %q: it ran as HTML", elements, title)
	}
	if *updateDocs {
		screenshot(t, ctx, filepath.Join("..", "..", "docs", "page.png"))
	}

	// The running day's history, then a pending one.
	for _, tt := range []struct{ key, want string }{{"2026-01-09", "lease until"}, {"2026-01-02", "No attempt yet"}} {
		do(t, ctx, "the history of "+tt.key, chromedp.Click(css(fmt.Sprintf(`a.cell[data-key=%q]`, tt.key))),
			chromedp.WaitVisible(css(fmt.Sprintf(`#detail #history[data-key=%q]`, tt.key))))
		if text := get(t, ctx, chromedp.Text(css("#detail"))); !strings.Contains(text, tt.want) {
			t.Errorf("the history of %s lacks %q:\n%s", tt.key, tt.want, text)
		}
	}

	// The page redraws itself when the running day finishes.
	if err := l.Finish(t.Context(), f.Running, []ledger.Outcome{{State: ledger.StateSucceeded, Rows: 1}}); err != nil {
		t.Fatal(err)
	}
	do(t, ctx, "the redraw of the finished day", chromedp.WaitVisible(css(`a.cell[data-key="2026-01-09"][data-state="succeeded"]`)))
	if n := get(t, ctx, chromedp.Text(css(`#counts tr[data-state="succeeded"] .count`))); n != "5" {
		t.Errorf("%s succeeded after the redraw; want 5", n)
	}

	// An aggregated cell lists its partitions; one of them its history.
	do(t, ctx, "an aggregated cell", chromedp.Navigate(base+"/backfills/"+hourlyID), chromedp.WaitVisible(css("#grid")),
		chromedp.Click(css(`a.cell[data-key="2026-02-03"]`)), chromedp.WaitVisible(css(`#detail #span`)))
	listed := get(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("#detail a.part").length`))
	do(t, ctx, "a partition of the aggregated cell", chromedp.Click(css(`#detail a.part[data-key="2026-02-03T07:00Z"]`)),
		chromedp.WaitVisible(css(`#detail #history[data-key="2026-02-03T07:00Z"]`)))
	text = get(t, ctx, chromedp.Text(css("#detail")))
	if listed != 24 || !strings.Contains(text, "failed") || !strings.Contains(text, "hour <em>07</em> of the source is missing") {
		t.Errorf("the aggregated day listed %d partitions (want 24); the hour's history:\n%s", listed, text)
	}

	// Cancel from the page, with the token and stopping running work.
	do(t, ctx, "cancel", chromedp.Navigate(page), chromedp.WaitVisible(css("#cancel-form")),
		chromedp.SendKeys(css(`#cancel-form input[name="token"]`), token),
		chromedp.Click(css(`#cancel-form input[name="stop_running"]`)),
		chromedp.Click(css(`#cancel-form button`)),
		chromedp.WaitVisible(css(`.s-canceled-text`)))
	text = get(t, ctx, chromedp.Text(css(".meta")))
	rec, err := l.Backfill(t.Context(), f.ID)
	if err != nil || !rec.Canceled || !rec.StopRunning || !strings.Contains(text, "stopping its running partitions") {
		t.Errorf("after the page's cancel: %+v, %v, the page says %q", rec, err, text)
	}

	if *updateDocs {
		terminalScreenshot(t, ctx, term.Bytes())
	}
}

// TestDAGPageInChromium serves a SQLite ledger holding two backfills of
// one DAG over overlapping windows (pagetest.NewDAG) and reads the DAG's
// page in a real headless Chromium: each cell's state and colour across
// both backfills (the later attempt wins; days never attempted are
// missing), a day's history on a click (every attempt whatever backfill
// made it, error texts staying text), the backfills listed with their
// states and links, and the redraw when the running day finishes.
func TestDAGPageInChromium(t *testing.T) {
	ctx := browser(t)
	path := filepath.Join(t.TempDir(), "ledger.db")
	l, err := sqlite.Open(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	f := pagetest.NewDAG(t, l)
	base := startServe(t, "--ledger", "sqlite:"+path, "--refresh", "1s", "--name", f.DAG+"=sessions")

	// The index lists each backfill's state; it links the DAG's page,
	// which says its latest backfill and that no scheduler runs it.
	do(t, ctx, "the index", chromedp.Navigate(base), chromedp.WaitVisible(css("a.dag")))
	states := get(t, ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("tr.bf-row")).map(r => r.dataset.state)`))
	if len(states) != 2 {
		t.Errorf("the index lists backfills in states %v; want 2", states)
	}
	do(t, ctx, "the DAG's page", chromedp.Click(css("a.dag")), chromedp.WaitVisible(css("#dag #grid")))
	if text := get(t, ctx, chromedp.Text(css("#scheduler"))); !strings.Contains(text, "Latest backfill:") || !strings.Contains(text, "Scheduler: none seen") {
		t.Errorf("the DAG's scheduler section:\n%s", text)
	}
	if loc := get(t, ctx, chromedp.Location()); loc != base+"/dags/"+f.DAG {
		t.Errorf("the index's link led to %s; want the DAG's page", loc)
	}
	cells := get(t, ctx, chromedp.Evaluate[[]cellSeen](`Array.from(document.querySelectorAll("#grid a.cell")).map(a => ({Key: a.dataset.key, State: a.dataset.state, Colour: getComputedStyle(a).backgroundColor}))`))
	if len(cells) != len(f.States) {
		t.Fatalf("%d cells; want %d: %v", len(cells), len(f.States), cells)
	}
	for _, c := range cells {
		want := f.States[c.Key]
		if ledger.State(c.State) != want || c.Colour != colours[want] {
			t.Errorf("cell %s: %s in %s; want %s in %s", c.Key, c.State, c.Colour, want, colours[want])
		}
	}
	type row struct{ ID, State, Href string }
	rows := get(t, ctx, chromedp.Evaluate[[]row](`Array.from(document.querySelectorAll("#backfills tbody tr")).map(r => ({ID: r.dataset.id, State: r.dataset.state, Href: r.querySelector("a.backfill").href}))`))
	if len(rows) != 2 {
		t.Fatalf("%d backfills listed; want 2: %v", len(rows), rows)
	}
	for _, r := range rows {
		if ledger.State(r.State) != f.Backfills[r.ID] || r.Href != base+"/backfills/"+r.ID {
			t.Errorf("backfill %s listed %s, linking %s; want %s, linking its page", r.ID, r.State, r.Href, f.Backfills[r.ID])
		}
	}

	if *updateDocs {
		screenshot(t, ctx, filepath.Join("..", "..", "docs", "dag-page.png"))
	}

	// The 6th: the second backfill's failure over the first's success.
	do(t, ctx, "the 6th's history", chromedp.Click(css(`a.cell[data-key="2026-01-06"]`)),
		chromedp.WaitVisible(css(`#detail #history[data-key="2026-01-06"]`)))
	text := get(t, ctx, chromedp.Text(css("#detail")))
	for _, s := range []string{"Partition 2026-01-06", "2 attempts", "sessions of 2026-01-06: " + pagetest.Evil, f.First, f.Second, "worker-<i>a</i>", "worker-b"} {
		if !strings.Contains(text, s) {
			t.Errorf("the history lacks %q:\n%s", s, text)
		}
	}
	newest := get(t, ctx, chromedp.Evaluate[string](`document.querySelector("#detail tr.attempt").dataset.state`))
	elements := get(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("b, i, img, em, #detail script").length`))
	if title := get(t, ctx, chromedp.Title()); elements != 0 || strings.Contains(title, "pwned") || newest != "failed" {
		t.Errorf("the newest attempt is %s (want failed); the error text made %d elements, and the title is %q", newest, elements, title)
	}
	do(t, ctx, "a missing day's history", chromedp.Click(css(`a.cell[data-key="2026-01-08"]`)),
		chromedp.WaitVisible(css(`#detail #history[data-key="2026-01-08"]`)))
	if text := get(t, ctx, chromedp.Text(css("#detail"))); !strings.Contains(text, "the partition is missing") {
		t.Errorf("the missing day's history:\n%s", text)
	}

	// The page redraws itself when the running day finishes.
	if err := l.Finish(t.Context(), f.Running, []ledger.Outcome{{State: ledger.StateSucceeded, Rows: 1}}); err != nil {
		t.Fatal(err)
	}
	do(t, ctx, "the redraw of the finished day", chromedp.WaitVisible(css(`a.cell[data-key="2026-01-10"][data-state="succeeded"]`)))
	if n := get(t, ctx, chromedp.Text(css(`#counts tr[data-state="succeeded"] .count`))); n != "5" {
		t.Errorf("%s succeeded after the redraw; want 5", n)
	}
	if st := get(t, ctx, chromedp.Evaluate[string](`document.querySelector("#backfills tr[data-id='`+f.Second+`']").dataset.state`)); st != "failed" {
		t.Errorf("the second backfill is %s after the redraw; want failed", st)
	}

	// Narrowed by dates typed into the page's form.
	do(t, ctx, "a narrower span", chromedp.SendKeys(css(`#span-form input[name="from"]`), "2026-01-05"),
		chromedp.SendKeys(css(`#span-form input[name="to"]`), "2026-01-07"),
		chromedp.Click(css(`#span-form button`)), chromedp.WaitVisible(css(`#grid[data-cells="3"]`)))
	if n := get(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("#grid a.cell").length`)); n != 3 {
		t.Errorf("%d cells from the 5th through the 7th; want 3", n)
	}

	// A paused schedule: the page says so, by whom, since when and why,
	// the note as text.
	p, err := l.SetSchedulePause(t.Context(), f.DAG, ledger.SchedulePause{Paused: true, By: "alice", Note: pagetest.Evil})
	if err != nil {
		t.Fatal(err)
	}
	do(t, ctx, "the paused DAG's page", chromedp.Navigate(base+"/dags/"+f.DAG), chromedp.WaitVisible(css("#scheduler.paused #paused")))
	text = get(t, ctx, chromedp.Text(css("#paused")))
	if !strings.Contains(text, "Paused by alice since "+p.Since.UTC().Format("2006-01-02 15:04:05")) || !strings.Contains(text, pagetest.Evil) {
		t.Errorf("the pause's line: %q", text)
	}
	elements = get(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("#scheduler b, #scheduler img, #scheduler script").length`))
	if title := get(t, ctx, chromedp.Title()); elements != 0 || strings.Contains(title, "pwned") {
		t.Errorf("the note made %d elements, and the title is %q", elements, title)
	}
}

// hourlyID is the id of hourlyBackfill's backfill.
var hourlyID string

// hourlyBackfill backfills ten days of hours in l, the hours of February
// 3rd from 6 to 9 failing, and returns the DAG's identity.
func hourlyBackfill(t *testing.T, l ledger.Ledger) string {
	t.Helper()
	first := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	w, err := tranche.NewTimePartitionWindow(tranche.Hour, first, first.Add(239*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	hourly := tranche.Partitioning{Granularity: tranche.Hour, Location: time.UTC, Column: "hour"}
	dag, err := tranche.NewDAG(tranche.Asset{Name: "rollup", Partitioning: hourly,
		Materialize: func(_ context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
			p, err := m.Partition()
			if err != nil {
				return nil, err
			}
			if p.Start.Day() == 3 && p.Start.Hour() >= 6 && p.Start.Hour() <= 9 {
				return nil, fmt.Errorf("hour <em>%02d</em> of the source is missing", p.Start.Hour())
			}
			return nil, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	b := &backfill.Backfill{DAG: dag, Window: w, Ledger: l, Concurrency: 4, OnFailure: tranche.FailContinue, Worker: "hourly-1"}
	if res, err := b.Run(t.Context()); res == nil || res.Failed != 4 {
		t.Fatalf("the hourly backfill: %+v, %v; want 4 failures", res, err)
	}
	if hourlyID, err = b.ID(); err != nil {
		t.Fatal(err)
	}
	return backfill.DAGIdentity(dag, tranche.Hour, time.UTC)
}

// screenshot writes the page as it shows now to file, as a PNG.
func screenshot(t *testing.T, ctx context.Context, file string) {
	t.Helper()
	png := get(t, ctx, chromedp.CaptureScreenshot())
	if err := os.WriteFile(file, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s (%d bytes)", file, len(png))
}

// terminalScreenshot renders docs/terminal-status.ansi, the terminal
// grid as tranche status draws it on a terminal, or else fallback, as a
// terminal window and writes docs/terminal.png.
func terminalScreenshot(t *testing.T, ctx context.Context, fallback []byte) {
	t.Helper()
	ansi, err := os.ReadFile(filepath.Join("..", "..", "docs", "terminal-status.ansi"))
	if errors.Is(err, fs.ErrNotExist) {
		t.Log("no docs/terminal-status.ansi: rendering this test's tranche status")
		ansi, err = fallback, nil
	}
	if err != nil {
		t.Fatal(err)
	}
	htmlFile := filepath.Join(t.TempDir(), "terminal.html")
	if err := os.WriteFile(htmlFile, []byte(terminalPage(ansiToHTML(string(ansi)))), 0o644); err != nil {
		t.Fatal(err)
	}
	do(t, ctx, "the terminal page", chromedp.Navigate("file://"+htmlFile), chromedp.WaitVisible(css("#term")))
	png := get(t, ctx, chromedp.Screenshot(css(".window")))
	file := filepath.Join("..", "..", "docs", "terminal.png")
	if err := os.WriteFile(file, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s (%d bytes)", file, len(png))
}

// TestMain says, once the tests ran, which skipped for want of a
// PostgreSQL server or Chromium, and how to run them.
func TestMain(m *testing.M) { os.Exit(testskip.Main(m)) }
