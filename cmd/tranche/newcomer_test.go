package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/ledger/sqlite"
	"github.com/tranche-dev/tranche/tranchecli"
)

// docCommands returns the commands docs/command.md and
// docs/operating.md give, in their order: each line of their sh blocks
// that runs tranche or examples/cli (a "$ " prompt dropped, a "#"
// comment cut), and each inline code span that runs tranche or names a
// subcommand with its ID or DAG.
func docCommands(t *testing.T) []string {
	t.Helper()
	var cmds []string
	block := regexp.MustCompile("(?s)```sh\n(.*?)```")
	inline := regexp.MustCompile("`([^`]+)`")
	named := regexp.MustCompile(`^(status|history|cancel|resume) (ID|DAG)\b`)
	for _, doc := range []string{"command.md", "operating.md"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "docs", doc))
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		for _, m := range block.FindAllStringSubmatch(text, -1) {
			for _, line := range strings.Split(m[1], "\n") {
				line = strings.TrimPrefix(strings.TrimSpace(line), "$ ")
				if i := strings.Index(line, " #"); i >= 0 {
					line = strings.TrimSpace(line[:i])
				}
				if strings.HasPrefix(line, "tranche ") || strings.HasPrefix(line, "go run ./examples/cli ") {
					cmds = append(cmds, line)
				}
			}
		}
		prose := regexp.MustCompile("(?s)```.*?```").ReplaceAllString(text, "")
		for _, m := range inline.FindAllStringSubmatch(strings.ReplaceAll(prose, "\n", " "), -1) {
			span := m[1]
			switch {
			case strings.HasPrefix(span, "tranche "):
				cmds = append(cmds, span)
			case named.MatchString(span):
				cmds = append(cmds, "tranche "+span)
			}
		}
	}
	return cmds
}

// TestNewcomer runs every command docs/command.md and docs/operating.md
// give, as a newcomer copies them, on a SQLite ledger holding a month of
// a DAG named events with a failed day: the tranche command's, and
// examples/cli's through a tranchecli program registering events. None
// answers "unknown DAG" or bad usage (but for what the docs say is
// refused), and no line shows the DAG's identity without its name.
func TestNewcomer(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ledger.db")
	t.Setenv(tranchecli.LedgerEnv, "sqlite:"+path)
	t.Setenv("NO_COLOR", "1")
	dag, err := tranche.NewDAG(tranche.Asset{Name: "events", Partitioning: tranche.Partitioning{Granularity: tranche.Day},
		Materialize: func(_ context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
			if p, _ := m.Partition(); p.Key() == "2026-11-15" {
				return nil, errors.New("the source has no file for 2026-11-15")
			}
			return nil, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	program := func(out *bytes.Buffer) *tranchecli.Program {
		return &tranchecli.Program{Name: "cli", OpenLedger: sqlite.OpenLedger, DAGs: map[string]*tranche.DAG{"events": dag},
			Stdin: strings.NewReader(""), Stdout: out, Stderr: out}
	}
	var setup bytes.Buffer
	if code := program(&setup).Main(t.Context(), []string{"run", "events", "--yes", "--on-failure", "continue", "--from", "2026-11-01", "--to", "2026-11-30"}); code != 1 {
		t.Fatalf("the month's run: exit %d:\n%s", code, setup.String())
	}
	l, err := sqlite.Open(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	records, err := l.Backfills(t.Context())
	l.Close()
	if err != nil || len(records) != 1 {
		t.Fatalf("the ledger's backfills: %v, %v", records, err)
	}
	month, identity := records[0].ID, records[0].DAG
	var latest string // the id of the backfill the docs' own example made

	// refused are the commands the docs give as refused.
	refused := map[string]string{"tranche cancel 7": "too short a start of an id"}
	var ran int
	for _, line := range docCommands(t) {
		args := strings.Fields(line)
		cli := args[0] == "go"
		if cli {
			args = args[3:]
		} else {
			args = args[1:]
		}
		var expanded []string
		for _, a := range args {
			switch {
			case a == "ID":
				a = month
			case a == "DAG":
				a = "events"
			case a == "KEY":
				a = "2026-11-15"
			case a == "IDENTITY=NAME":
				a = identity + "=events"
			case a == "7a8f083a6c96" && latest != "":
				a = latest
			case a == "7a8f" && latest != "":
				a = latest[:4]
			case strings.HasPrefix(a, "[") && strings.HasSuffix(a, "]"):
				continue // an option: the command runs without it, and with it below
			}
			expanded = append(expanded, a)
		}
		variants := [][]string{expanded}
		for _, a := range args {
			if strings.HasPrefix(a, "[") && strings.HasSuffix(a, "]") {
				variants = append(variants, append(append([]string{}, expanded...), strings.Fields(strings.Trim(a, "[]"))...))
			}
		}
		for _, v := range variants {
			if len(v) > 0 && v[0] == "run" && !strings.Contains(strings.Join(v, " "), "--yes") {
				v = append(v, "--yes") // the docs answer y at the prompt; a test has no terminal
			}
			if len(v) > 0 && v[0] == "serve" {
				v = append(v, "--addr", "127.0.0.1:0")
			}
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			if len(v) > 0 && v[0] == "serve" {
				ctx, cancel = context.WithTimeout(t.Context(), 500*time.Millisecond) // served, then stopped
			}
			var out bytes.Buffer
			var code int
			if cli {
				code = program(&out).Main(ctx, v)
			} else {
				code = run(ctx, v, strings.NewReader(""), &out, &out)
			}
			cancel()
			ran++
			t.Logf("%s: exit %d", strings.Join(v, " "), code)
			text := out.String()
			what := line + " → " + strings.Join(v, " ")
			if want, ok := refused[line]; ok {
				if code == 0 || !strings.Contains(text, want) {
					t.Errorf("%s: exit %d; want it refused, %q:\n%s", what, code, want, text)
				}
				continue
			}
			watch := strings.Contains(strings.Join(v, " "), "--watch") // exits 1 once the failed month ended
			if code == 2 || code == 1 && !watch || strings.Contains(text, "unknown DAG") || strings.Contains(text, "unknown command") {
				t.Errorf("%s: exit %d:\n%s", what, code, text)
			}
			bare := strings.Count(text, identity) - strings.Count(text, "events ("+identity+")") - strings.Count(text, `"dag": "`+identity+`"`) -
				strings.Count(text, `"dag":"`+identity+`"`) - strings.Count(text, identity+"=events")
			if bare > 0 {
				t.Errorf("%s shows the DAG's identity without its name %d times:\n%s", what, bare, text)
			}
			if cli && len(v) > 0 && v[0] == "run" {
				if m := regexp.MustCompile(`backfill ([0-9a-f]{12})`).FindStringSubmatch(text); m != nil {
					latest = m[1]
				}
			}
		}
	}
	if ran < 15 {
		t.Errorf("ran %d commands of the docs; want them all (15 or more)", ran)
	}
	t.Logf("ran %d commands of docs/command.md and docs/operating.md", ran)
}
