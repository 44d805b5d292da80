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
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/ledger/address"
	"github.com/tranche-dev/tranche/ledger/sqlite"
	"github.com/tranche-dev/tranche/tranchecli"
)

// serveProgram runs p's serve subcommand with args until the test ends,
// and returns the address it serves.
func serveProgram(t *testing.T, p *tranchecli.Program, args ...string) string {
	t.Helper()
	pr, pw := io.Pipe()
	p.Stdout, p.Stderr = io.Discard, pw
	sctx, cancel := context.WithCancel(context.Background())
	exited := make(chan int, 1)
	go func() {
		exited <- p.Main(sctx, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...))
		pw.Close()
	}()
	var rest bytes.Buffer
	copied := make(chan struct{})
	lines := bufio.NewScanner(pr)
	if !lines.Scan() {
		cancel()
		t.Fatalf("serve printed nothing; exit %d", <-exited)
	}
	first := lines.Text()
	go func() {
		defer close(copied)
		for lines.Scan() {
			rest.WriteString(lines.Text() + "\n")
		}
	}()
	t.Cleanup(func() {
		cancel()
		if code := <-exited; code != 0 {
			<-copied
			t.Errorf("serve exited %d:\n%s", code, rest.String())
		}
	})
	m := regexp.MustCompile(`(http://\S+)/ `).FindStringSubmatch(first)
	if m == nil {
		t.Fatalf("serve's first line %q names no address", first)
	}
	return m[1]
}

// TestProgramPagesWrite runs the serve subcommand of a tranchecli program
// that opens its ledger from its address (Program.OpenLedger, as
// docs/pages.md has it), with --allow-writes, and operates a backfill
// from its pages in a real headless Chromium: a week is launched and
// fails on one day, which the page leads with; it is canceled, then
// resumed (which runs it here again and fails the day again); once the
// source is fixed, "Retry the failed partitions" runs that day and the
// backfill is done. No page, its error pages included, says
// "read-only" while writes are on.
func TestProgramPagesWrite(t *testing.T) {
	ctx := browser(t)
	path := filepath.Join(t.TempDir(), "ledger.db")
	// The ledger exists, as a worker made it: serve must write it.
	made, err := sqlite.Open(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	made.Close()
	var broken atomic.Bool
	broken.Store(true)
	dag, err := tranche.NewDAG(tranche.Asset{Name: "orders", Partitioning: tranche.Partitioning{Granularity: tranche.Day, Column: "day"},
		Materialize: func(_ context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
			p, err := m.Partition()
			if err != nil {
				return nil, err
			}
			if p.Key() == "2026-01-03" && broken.Load() {
				return nil, errors.New("the source has no file for 2026-01-03")
			}
			return []tranche.Row{{"day": p.Key()}}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	const token = "a-token-for-the-program-pages"
	t.Setenv(tranchecli.TokenEnv, token)
	p := &tranchecli.Program{Name: "orders-cli", OpenLedger: sqlite.OpenLedger, DAGs: map[string]*tranche.DAG{"orders": dag}, Worker: "pages"}
	base := serveProgram(t, p, "--ledger", "sqlite:"+path, "--allow-writes")

	badge := func(what string) {
		t.Helper()
		text := get(t, ctx, chromedp.Text(css("header.top")))
		if strings.Contains(text, "read-only") || !strings.Contains(text, "writes enabled") {
			t.Errorf("%s: the header says %q while writes are on", what, text)
		}
	}
	// state reads the backfill's page until cond holds of its state line
	// and failure section, reloading it.
	state := func(what string, cond func(string) bool) string {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			s := get(t, ctx, chromedp.Evaluate[string](`(document.querySelector("#failure") ? "failure " : "") + (document.querySelector("#done") ? "done " : "") + (document.querySelector("#state") || {}).textContent + " " + (document.querySelector(".meta") || {}).textContent`))
			if cond(s) {
				return s
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the backfill's page shows %q", what, s)
			}
			time.Sleep(200 * time.Millisecond) // a real page in a real browser, polled
			do(t, ctx, "reload", chromedp.Reload(), chromedp.WaitVisible(css("#backfill")))
		}
	}

	// submit types the token into a form and submits it, and waits for
	// the page it answers with.
	submit := func(what, form string) {
		t.Helper()
		do(t, ctx, what, chromedp.WaitVisible(css(form)), chromedp.SendKeys(css(form+` input[name="token"]`), token),
			chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
				_, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.submitted = true`))
				return err
			}), chromedp.Click(css(form+` button`)))
		deadline := time.Now().Add(20 * time.Second)
		for {
			v, err := chromedp.Run(ctx, chromedp.Evaluate[string](`window.submitted ? "" : document.readyState`))
			if err == nil && v == "complete" {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: no page answered: %q, %v", what, v, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	do(t, ctx, "the index", chromedp.Navigate(base), chromedp.WaitVisible(css("a.plan")))
	badge("the index")
	do(t, ctx, "the plan of a week", chromedp.Click(css("a.plan")), chromedp.WaitVisible(css("#plan-form")),
		chromedp.SendKeys(css(`#plan-form input[name="from"]`), "2026-01-01"),
		chromedp.SendKeys(css(`#plan-form input[name="to"]`), "2026-01-07"),
		chromedp.SetValue(css(`#plan-form select[name="on_failure"]`), "continue"),
		chromedp.Click(css(`#plan-form button`)), chromedp.WaitVisible(css("#start-form")))
	submit("the launch", "#start-form")
	if title := get(t, ctx, chromedp.Title()); !strings.HasPrefix(title, "Backfill ") {
		t.Fatalf("the launch answered %q: %s", title, get(t, ctx, chromedp.Text(css("main"))))
	}
	badge("the backfill's page")
	state("the launch", func(s string) bool { return strings.Contains(s, "failure") && strings.Contains(s, "failed") })

	submit("the cancel", "#cancel-form")
	state("the cancel", func(s string) bool { return strings.Contains(s, "canceled") })

	submit("the resume", "#resume-form")
	state("the resume", func(s string) bool {
		return strings.Contains(s, "failure") && strings.Contains(s, "resumed") && !strings.Contains(s, "running")
	})
	l, err := sqlite.OpenLedger(t.Context(), address.Address{Scheme: address.SchemeSQLite, Path: path}, address.AccessRead)
	if err != nil {
		t.Fatal(err)
	}
	defer l.(io.Closer).Close()
	records, err := l.Backfills(t.Context())
	if err != nil || len(records) != 1 {
		t.Fatalf("the ledger's backfills: %v, %v; want the one launched", records, err)
	}
	attempts, err := l.History(t.Context(), records[0].DAG, time.Date(2026, 1, 3, 0, 0, 0, 0, time.UTC))
	if err != nil || len(attempts) != 2 {
		t.Fatalf("the failing day's attempts after the resume: %d, %v; want 2, the resume's run here", len(attempts), err)
	}

	broken.Store(false)
	submit("the retry", "#retry-form")
	state("the retry", func(s string) bool { return strings.Contains(s, "done") && strings.Contains(s, "succeeded") })

	do(t, ctx, "an error page", chromedp.Navigate(base+"/backfills/no-such-backfill"), chromedp.WaitVisible(css("#error")))
	badge("an error page")
}
