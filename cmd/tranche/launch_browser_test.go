package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/ledger/sqlite"
	"github.com/tranche-dev/tranche/tranchecli"
)

// TestLaunchInChromium runs the serve subcommand of a tranchecli program
// that registers a DAG, on a SQLite ledger, and uses its pages in a real
// headless Chromium as an operator would: the index lists the DAG with
// no backfill yet; its form plans a week; a run of one of its days by
// hand changes the history before the plan is started, so the start is
// refused (409) with the new plan; the new plan starts, runs in the
// program, fails on one day, and its page leads with the failure, which
// the index lists first.
func TestLaunchInChromium(t *testing.T) {
	ctx := browser(t)
	path := filepath.Join(t.TempDir(), "ledger.db")
	l, err := sqlite.Open(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	dag, err := tranche.NewDAG(tranche.Asset{Name: "events", Partitioning: tranche.Partitioning{Granularity: tranche.Day, Column: "day"},
		Materialize: func(_ context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
			p, err := m.Partition()
			if err != nil {
				return nil, err
			}
			if p.Key() == "2026-01-03" {
				return nil, errors.New("the source has no file for 2026-01-03")
			}
			return []tranche.Row{{"day": p.Key()}}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	const token = "a-token-for-the-launch-test"
	t.Setenv(tranchecli.TokenEnv, token)
	pr, pw := io.Pipe()
	p := &tranchecli.Program{Name: "events-cli", Ledger: l, DAGs: map[string]*tranche.DAG{"events": dag}, Worker: "page-worker",
		Stdout: io.Discard, Stderr: pw}
	sctx, cancel := context.WithCancel(context.Background())
	exited := make(chan int, 1)
	go func() {
		exited <- p.Main(sctx, []string{"serve", "--addr", "127.0.0.1:0", "--allow-writes"})
		pw.Close()
	}()
	var rest bytes.Buffer // what serve printed after its first line
	copied := make(chan struct{})
	t.Cleanup(func() {
		cancel()
		if code := <-exited; code != 0 {
			<-copied
			t.Errorf("serve exited %d:\n%s", code, rest.String())
		}
	})
	lines := bufio.NewScanner(pr)
	if !lines.Scan() {
		t.Fatal("serve printed nothing")
	}
	go func() {
		defer close(copied)
		for lines.Scan() {
			rest.WriteString(lines.Text() + "\n")
		}
	}()
	m := regexp.MustCompile(`(http://\S+)/ `).FindStringSubmatch(lines.Text())
	if m == nil {
		t.Fatalf("serve's first line %q names no address", lines.Text())
	}
	base := m[1]

	do(t, ctx, "the index", chromedp.Navigate(base), chromedp.WaitVisible(css("a.plan")))
	if text := get(t, ctx, chromedp.Text(css("main"))); !strings.Contains(text, "events") || !strings.Contains(text, "No backfill yet") {
		t.Errorf("the index of a registered DAG without backfills:\n%s", text)
	}
	do(t, ctx, "the plan of a week", chromedp.Click(css("a.plan")), chromedp.WaitVisible(css("#plan-form")),
		chromedp.SendKeys(css(`#plan-form input[name="from"]`), "2026-01-01"),
		chromedp.SendKeys(css(`#plan-form input[name="to"]`), "2026-01-07"),
		chromedp.SetValue(css(`#plan-form select[name="on_failure"]`), "continue"),
		chromedp.SetValue(css(`#plan-form input[name="concurrency"]`), "2"),
		chromedp.Click(css(`#plan-form button`)), chromedp.WaitVisible(css("#plan")))
	counts := get(t, ctx, chromedp.Text(css("#plan-counts")))
	revision := get(t, ctx, chromedp.Text(css("#plan-revision")))
	if !strings.Contains(counts, "run\t7") && !strings.Contains(counts, "run 7") {
		t.Errorf("the plan's counts %q; want 7 to run", counts)
	}

	// A run of January 5th by hand: the plan is stale.
	if _, err := backfill.RunRecorded(t.Context(), l, nil, dag, tranche.PartitionOf(tranche.Day, time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)), "by-hand"); err != nil {
		t.Fatal(err)
	}
	do(t, ctx, "the start of a stale plan", chromedp.SendKeys(css(`#start-form input[name="token"]`), token),
		chromedp.Click(css(`#start-form button`)), chromedp.WaitVisible(css("#plan-message")))
	message := get(t, ctx, chromedp.Text(css("#plan-message")))
	counts = get(t, ctx, chromedp.Text(css("#plan-counts")))
	if !strings.Contains(message, "changed since revision "+revision) || !(strings.Contains(counts, "run\t6") || strings.Contains(counts, "run 6")) {
		t.Errorf("after a stale start: %q, counts %q; want the refusal and the new plan, 6 to run", message, counts)
	}
	if bs, _ := l.Backfills(t.Context()); len(bs) != 0 {
		t.Fatalf("a stale start recorded %v", bs)
	}

	// The new plan starts; the backfill's page leads with its failure.
	do(t, ctx, "the start of the new plan", chromedp.SendKeys(css(`#start-form input[name="token"]`), token),
		chromedp.Click(css(`#start-form button`)), chromedp.WaitVisible(css("#backfill")))
	deadline := time.Now().Add(20 * time.Second)
	for {
		state := get(t, ctx, chromedp.Evaluate[string](`(document.querySelector("#failure") ? "failure " : "") + (document.querySelector("#state") || {}).textContent`))
		if strings.Contains(state, "failure") && strings.Contains(state, "failed") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the started backfill's page shows %q; want its failure", state)
		}
		do(t, ctx, "reload", chromedp.Reload(), chromedp.WaitVisible(css("#backfill")))
	}
	failure := get(t, ctx, chromedp.Text(css("#failure")))
	for _, want := range []string{"1 partition failed", "2026-01-03", "the source has no file for 2026-01-03"} {
		if !strings.Contains(failure, want) {
			t.Errorf("the failure summary lacks %q:\n%s", want, failure)
		}
	}
	if elements := get(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("#blocked").length`)); elements != 1 {
		t.Errorf("a failed backfill with nothing running shows %d 'Not progressing' sections; want 1", elements)
	}

	do(t, ctx, "the index after", chromedp.Navigate(base), chromedp.WaitVisible(css("tr.bf-row")))
	row := get(t, ctx, chromedp.Evaluate[string](`document.querySelector("tr.bf-row").dataset.state + " " + document.querySelector("tr.bf-row .bf-progress").textContent`))
	if !strings.HasPrefix(row, "failed") || !strings.Contains(row, "6/7, 1 failed") {
		t.Errorf("the index's row %q; want failed, 6/7 succeeded (the 5th by hand), 1 failed", row)
	}

	// The DAG's page pauses its schedule in the ledger, by whom and why,
	// and resumes it.
	id := backfill.DAGIdentity(dag, tranche.Day, time.UTC)
	do(t, ctx, "the pause", chromedp.Navigate(base+"/dags/"+id), chromedp.WaitVisible(css("#pause-form")),
		chromedp.SendKeys(css(`#pause-form input[name="token"]`), token),
		chromedp.SendKeys(css(`#pause-form input[name="by"]`), "alice"),
		chromedp.SendKeys(css(`#pause-form input[name="note"]`), "source down"),
		chromedp.Click(css(`#pause-form button`)), chromedp.WaitVisible(css("#paused")))
	if text := get(t, ctx, chromedp.Text(css("#paused"))); !strings.Contains(text, "Paused by alice since ") || !strings.Contains(text, "source down") {
		t.Errorf("the paused DAG's line: %q", text)
	}
	if pz, err := l.SchedulePause(t.Context(), id); err != nil || !pz.Paused || pz.By != "alice" || pz.Note != "source down" {
		t.Errorf("the ledger's pause after the page's: %+v, %v", pz, err)
	}
	do(t, ctx, "the resume", chromedp.SendKeys(css(`#schedule-resume-form input[name="token"]`), token),
		chromedp.Click(css(`#schedule-resume-form button`)), chromedp.WaitNotPresent(css("#paused")), chromedp.WaitVisible(css("#pause-form")))
	if pz, err := l.SchedulePause(t.Context(), id); err != nil || pz.Paused || pz.By != "the pages" {
		t.Errorf("the ledger's pause after the page's resume: %+v, %v", pz, err)
	}
}
