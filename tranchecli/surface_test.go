package tranchecli_test

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/ledger/memledger"
	"github.com/tranche-dev/tranche/tranchecli"
)

// TestCommandSurface: a program without DAGs (as the tranche command)
// neither lists nor runs plan, run and schedule; version prints the
// build's versions; resume takes --yes, as run does; a flag that takes
// one value refuses a second; help gives every flag two dashes.
func TestCommandSurface(t *testing.T) {
	op := &tranchecli.Program{Name: "tranche", Ledger: memledger.New(nil)}
	run := func(p *tranchecli.Program, args ...string) (int, string) {
		var out, errs bytes.Buffer
		p.Stdout, p.Stderr = &out, &errs
		code := p.Main(context.Background(), args)
		return code, out.String() + errs.String()
	}
	_, usage := run(op, "help")
	for _, cmd := range []string{"plan", "run", "schedule"} {
		if regexp.MustCompile(`(?m)^  ` + cmd + ` `).MatchString(usage) {
			t.Errorf("a program without DAGs lists %s:\n%s", cmd, usage)
		}
		if code, out := run(op, cmd, "orders"); code != 2 || !strings.Contains(out, cmd+" needs the DAGs of a program") || strings.Contains(out, "unknown DAG") {
			t.Errorf("%s without DAGs: exit %d:\n%s", cmd, code, out)
		}
	}
	if code, out := run(op, "version"); code != 0 || !strings.HasPrefix(out, "tranche ") {
		t.Errorf("version: exit %d:\n%s", code, out)
	}

	h := newHarness(t)
	h.faults.set("2026-01-03")
	h.must(1, append([]string{"run", "events", "--yes"}, week...)...)
	h.faults.set()
	id := h.only()
	h.must(0, "cancel", id)
	if out := h.must(0, "resume", id, "--yes"); !strings.Contains(out, "Resuming backfill "+id) {
		t.Errorf("resume --yes:\n%s", out)
	}
	for _, args := range [][]string{
		{"ls", "--ledger", "sqlite:a.db", "--ledger", "sqlite:b.db"},
		{"status", id, "--format", "json", "--format", "text"},
		{"plan", "events", "--from", "2026-01-01", "--from", "2026-01-02", "--to", "2026-01-03"},
	} {
		p := &tranchecli.Program{Name: "tr", OpenLedger: nil, DAGs: h.p.DAGs}
		if args[1] != "--ledger" {
			p.Ledger = h.l
		}
		if code, out := run(p, args...); code != 2 || !strings.Contains(out, "given twice") {
			t.Errorf("%q: exit %d; want 2, given twice:\n%s", args, code, out)
		}
	}
	// --slot is repeatable.
	if code, out := run(h.p, "plan", "nightly", "--slot", "2026-01-05T02:00:00Z", "--slot", "2026-01-06T02:00:00Z"); code != 0 {
		t.Errorf("two --slot: exit %d:\n%s", code, out)
	}
	for _, cmd := range []string{"status", "run", "resume", "serve", "schedule"} {
		_, help := run(h.p, "help", cmd)
		if regexp.MustCompile(`(?m)^  -[a-z]`).MatchString(help) || !strings.Contains(help, "\n  --") {
			t.Errorf("help %s gives flags one dash:\n%s", cmd, help)
		}
	}
}

// TestStatusRunningNotBlocked: a backfill whose worker holds a partition
// while others finished moments ago progresses: status lists the held
// partition as running, not blocked, and gives the time left at the pace
// of its successes, as status --watch does.
func TestStatusRunningNotBlocked(t *testing.T) {
	h := newHarness(t)
	release := make(chan struct{})
	held := make(chan struct{})
	dag, err := tranche.NewDAG(tranche.Asset{Name: "slow", Partitioning: tranche.Partitioning{Granularity: tranche.Day},
		Materialize: func(ctx context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
			if p, _ := m.Partition(); p.Key() == "2026-01-03" {
				close(held)
				select {
				case <-release:
				case <-ctx.Done():
				}
			}
			return nil, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	runner := &tranchecli.Program{Name: "tr", Ledger: h.l, DAGs: map[string]*tranche.DAG{"slow": dag}, Stdin: strings.NewReader(""),
		Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}}
	// An earlier month, run to its end: the DAG's pace.
	if code := runner.Main(context.Background(), []string{"run", "slow", "--yes", "--from", "2025-12-01", "--to", "2025-12-05"}); code != 0 {
		t.Fatalf("the earlier run: exit %d", code)
	}
	done := make(chan int, 1)
	go func() {
		done <- runner.Main(context.Background(), []string{"run", "slow", "--yes", "--order", "oldest-first", "--from", "2026-01-01", "--to", "2026-01-05"})
	}()
	defer func() {
		close(release)
		if code := <-done; code != 0 {
			t.Errorf("the run: exit %d", code)
		}
	}()
	select {
	case <-held:
	case <-time.After(20 * time.Second):
		t.Fatal("the third day never started")
	}
	var id string
	if records, _ := h.l.Backfills(context.Background()); len(records) == 2 {
		id = records[1].ID
	}
	out := h.must(0, "status", id, "--color", "never")
	if strings.Contains(out, "blocked") || !regexp.MustCompile(`running +partition 2026-01-0\d held by worker`).MatchString(out) || !strings.Contains(out, "partition 2026-01-03 held by worker") {
		t.Errorf("the status of a backfill that progresses:\n%s", out)
	}
	if !regexp.MustCompile(`eta +about \S+ left`).MatchString(out) {
		t.Errorf("the status gives no time left:\n%s", out)
	}
	out = h.must(0, "status", id, "--format", "json")
	if !strings.Contains(out, `"blocked":[]`) || !strings.Contains(out, `"running":["partition 2026-01-0`) || !strings.Contains(out, `"eta_ms":`) {
		t.Errorf("the JSON status of a backfill that progresses:\n%s", out)
	}
}
