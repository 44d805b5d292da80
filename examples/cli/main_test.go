package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
)

var updateDocs = flag.Bool("update-docs", false, "save the terminal output of status into ../../docs/terminal-status.ansi")

// binary is the example built once for every test.
var binary string

func TestMain(m *testing.M) {
	flag.Parse()
	dir, err := os.MkdirTemp("", "tranche-cli-")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "events")
	build := exec.Command("go", "build", "-o", binary, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		os.RemoveAll(dir)
		panic("building the example: " + err.Error())
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// env is a ledger in a folder of its own, and the environment the
// example runs in there.
type env struct {
	t      *testing.T
	dir    string
	ledger string
	extra  []string
}

func newEnv(t *testing.T) *env {
	dir := t.TempDir()
	return &env{t: t, dir: dir, ledger: filepath.Join(dir, "events.db")}
}

func (e *env) environ(extra ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "NO_COLOR", "TRANCHE_LEDGER", "COLUMNS", "EVENTS_FAIL":
		default:
			out = append(out, kv)
		}
	}
	out = append(out, "TRANCHE_LEDGER=sqlite:"+e.ledger, "COLUMNS=100")
	return append(append(out, e.extra...), extra...)
}

// run runs the example without a terminal and returns its exit code,
// stdout and stderr.
func (e *env) run(args ...string) (int, string, string) {
	e.t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Dir, cmd.Env = e.dir, e.environ()
	var out, errs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errs
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, out.String(), errs.String()
	case errors.As(err, &exit):
		return exit.ExitCode(), out.String(), errs.String()
	}
	e.t.Fatalf("events %s: %v", strings.Join(args, " "), err)
	return 0, "", ""
}

func (e *env) must(want int, args ...string) string {
	e.t.Helper()
	code, out, errs := e.run(args...)
	if code != want {
		e.t.Fatalf("events %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, want, out, errs)
	}
	return out
}

// session is the example running on a pseudo-terminal.
type session struct {
	t    *testing.T
	cmd  *exec.Cmd
	tty  *os.File
	mu   sync.Mutex
	out  bytes.Buffer
	done chan struct{}
}

// onTerminal starts the example with a pseudo-terminal of 100 columns
// as its standard input, output and error.
func (e *env) onTerminal(extra []string, args ...string) *session {
	e.t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Dir, cmd.Env = e.dir, e.environ(extra...)
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 40, Cols: 100})
	if err != nil {
		e.t.Fatal(err)
	}
	s := &session{t: e.t, cmd: cmd, tty: tty, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		buf := make([]byte, 4096)
		for {
			n, err := tty.Read(buf)
			s.mu.Lock()
			s.out.Write(buf[:n])
			s.mu.Unlock()
			if err != nil {
				return // EIO once the child has closed its side
			}
		}
	}()
	return s
}

func (s *session) output() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.out.String()
}

// expect waits until the terminal shows want.
func (s *session) expect(want string) {
	s.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(s.output(), want) {
		if time.Now().After(deadline) {
			s.t.Fatalf("the terminal never showed %q:\n%s", want, s.output())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// wait waits for the example to exit and returns its exit code and all
// it wrote.
func (s *session) wait() (int, string) {
	s.t.Helper()
	err := s.cmd.Wait()
	<-s.done
	s.tty.Close()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, s.output()
	case errors.As(err, &exit):
		return exit.ExitCode(), s.output()
	}
	s.t.Fatal(err)
	return 0, ""
}

var week = []string{"--from", "2026-01-01T00:00:00Z", "--to", "2026-01-08T00:00:00Z"}

// backfills returns the ledger's backfills, read with ls --format json.
func (e *env) backfills() []map[string]any {
	e.t.Helper()
	var bs []map[string]any
	if err := json.Unmarshal([]byte(e.must(0, "ls", "--format", "json")), &bs); err != nil {
		e.t.Fatal(err)
	}
	return bs
}

func TestConfirmOnTerminal(t *testing.T) {
	t.Run("yes", func(t *testing.T) {
		e := newEnv(t)
		s := e.onTerminal(nil, append([]string{"run", "events"}, week...)...)
		s.expect("Run 7 partitions? [y/N] ")
		io.WriteString(s.tty, "y\n")
		code, out := s.wait()
		if code != 0 || !strings.Contains(out, "succeeded: 7/7 done") {
			t.Fatalf("exit %d:\n%s", code, out)
		}
		bs := e.backfills()
		if len(bs) != 1 {
			t.Fatalf("%d backfills after the run", len(bs))
		}
		if out := e.must(0, "status", bs[0]["id"].(string)); !strings.Contains(out, "7 succeeded, 0 running") {
			t.Errorf("status:\n%s", out)
		}
	})
	t.Run("no", func(t *testing.T) {
		e := newEnv(t)
		s := e.onTerminal(nil, append([]string{"run", "events"}, week...)...)
		s.expect("Run 7 partitions? [y/N] ")
		io.WriteString(s.tty, "n\n")
		code, out := s.wait()
		if code != 1 || !strings.Contains(out, "Not run: nothing was written") {
			t.Fatalf("exit %d:\n%s", code, out)
		}
		if bs := e.backfills(); len(bs) != 0 {
			t.Errorf("answered n, and %d backfills recorded", len(bs))
		}
	})
}

func TestWithoutTerminal(t *testing.T) {
	e := newEnv(t)
	code, _, errs := e.run(append([]string{"run", "events"}, week...)...)
	if code != 2 || !strings.Contains(errs, "give --yes") {
		t.Fatalf("run without a terminal: exit %d\n%s", code, errs)
	}
	if _, err := os.Stat(e.ledger); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused run opened the ledger: %v", err)
	}
	out := e.must(0, append([]string{"run", "events", "--yes"}, week...)...)
	if !strings.Contains(out, "7 succeeded here") {
		t.Errorf("run --yes:\n%s", out)
	}
	if strings.Contains(out, "\x1b[") {
		t.Errorf("output without a terminal holds escapes:\n%q", out)
	}
}

func TestBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"run", "events", "--yes", "--frm", "2026-01-01T00:00:00Z"}, "flag provided but not defined: -frm"},
		{[]string{"run", "events", "--yes", "--from", "2026-01-08", "--to", "2026-01-01"}, "is not before to"},
		{append([]string{"run", "events", "--yes", "--rerun", "some"}, week...), `invalid value "some" for flag -rerun`},
		{append([]string{"run", "events", "--yes", "--on-failure", "retry"}, week...), `invalid value "retry" for flag -on-failure`},
		{append([]string{"run", "events", "--yes", "--max-concurrency", "0"}, week...), "--max-concurrency 0"},
		{[]string{"run", "events", "--yes", "--slot", "2026-01-05T00:00:00Z"}, `--slot names fire times of a cron schedule, and DAG "events" is partitioned by day`},
		{append([]string{"run", "nosuch", "--yes"}, week...), `unknown DAG "nosuch"`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			e := newEnv(t)
			code, _, errs := e.run(tc.args...)
			if code != 2 || !strings.Contains(errs, tc.want) || !strings.Contains(errs, "usage: events") {
				t.Errorf("exit %d, want 2 with %q and the usage:\n%s", code, tc.want, errs)
			}
			if _, err := os.Stat(e.ledger); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("bad usage opened the ledger: %v", err)
			}
		})
	}
}

// failedMonth makes a backfill of 2026-01-01 to 2026-02-15, oldest first,
// that stops at the failure of 2026-01-09, runs again without rerunning
// it to stop at 2026-01-25, and leaves the rest pending; it returns the
// backfill's id.
func failedMonth(t *testing.T, e *env) string {
	t.Helper()
	e.extra = []string{"EVENTS_FAIL=2026-01-09,2026-01-25"}
	args := []string{"run", "events", "--yes", "--order", "oldest-first", "--from", "2026-01-01T00:00:00Z", "--to", "2026-02-16T00:00:00Z"}
	e.must(1, args...)
	e.must(1, append(args, "--rerun", "none")...)
	e.extra = nil
	bs := e.backfills()
	if len(bs) != 1 {
		t.Fatalf("%d backfills", len(bs))
	}
	return bs[0]["id"].(string)
}

func TestStatusOnTerminal(t *testing.T) {
	e := newEnv(t)
	id := failedMonth(t, e)
	s := e.onTerminal(nil, "status", id)
	code, out := s.wait()
	if code != 0 {
		t.Fatalf("status: exit %d\n%s", code, out)
	}
	green, red, grey := "\x1b[32m■\x1b[0m", "\x1b[31m■\x1b[0m", "\x1b[90m■\x1b[0m"
	jan := regexp.MustCompile(`2026-01  ((?:\x1b\[\d+m■\x1b\[0m ?)+)`).FindStringSubmatch(out)
	if jan == nil {
		t.Fatalf("no row for 2026-01 on the terminal:\n%q", out)
	}
	cells := strings.Split(strings.TrimSpace(jan[1]), " ")
	if len(cells) != 31 || cells[0] != green || cells[8] != red || cells[9] != green || cells[24] != red || cells[25] != grey {
		t.Errorf("the cells of 2026-01: %q", cells)
	}
	for _, want := range []string{"counts      23 succeeded, 0 running, 2 failed, 0 canceled, 21 pending", green + " succeeded 23", red + " failed 2", grey + " pending 21", "2026-02  " + grey} {
		if !strings.Contains(out, want) {
			t.Errorf("the terminal lacks %q:\n%q", want, out)
		}
	}
	if *updateDocs {
		if err := os.WriteFile(filepath.Join("..", "..", "docs", "terminal-status.ansi"), []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// NO_COLOR draws the grid in plain text, even on a terminal.
	s = e.onTerminal([]string{"NO_COLOR=1"}, "status", id)
	_, out = s.wait()
	if strings.Contains(out, "\x1b[") || !strings.Contains(out, "2026-01  # # # # # # # # X # # # # # # # # # # # # # # # X . . . . . .") {
		t.Errorf("status with NO_COLOR:\n%q", out)
	}
	// And --color always colours it without one.
	if out := e.must(0, "status", id, "--color", "always"); !strings.Contains(out, red) {
		t.Errorf("status --color always without a terminal:\n%q", out)
	}
}

func TestWatch(t *testing.T) {
	e := newEnv(t)
	e.must(0, append([]string{"run", "events", "--yes"}, week...)...)
	id := e.backfills()[0]["id"].(string)
	out := e.must(0, "status", id, "--watch")
	if !strings.Contains(out, "7/7 succeeded") || !strings.Contains(out, "Backfill "+id+" succeeded.") {
		t.Errorf("watch of a finished backfill:\n%s", out)
	}
}

func TestWatchFailed(t *testing.T) {
	e := newEnv(t)
	id := failedMonth(t, e)
	out := e.must(1, "status", id, "--watch", "--interval", "50ms")
	if !strings.Contains(out, "ended failed, not succeeded") {
		t.Errorf("watch of a stopped backfill:\n%s", out)
	}
}

func TestJSON(t *testing.T) {
	e := newEnv(t)
	id := failedMonth(t, e)
	var status struct {
		State  string         `json:"state"`
		Total  int            `json:"total"`
		Counts map[string]int `json:"counts"`
		Grid   struct {
			Cells []struct {
				Key, State string
			} `json:"cells"`
		} `json:"grid"`
		Partitions []struct {
			Key, State string
		} `json:"partitions"`
	}
	if err := json.Unmarshal([]byte(e.must(0, "status", id, "--format", "json", "--partitions")), &status); err != nil {
		t.Fatal(err)
	}
	if status.State != "failed" || status.Total != 46 || status.Counts["failed"] != 2 || len(status.Grid.Cells) != 46 || len(status.Partitions) != 46 ||
		status.Partitions[0].Key != "2026-02-15" || status.Grid.Cells[8].State != "failed" {
		t.Errorf("status: %+v", status)
	}
	var history struct {
		Attempts []struct {
			Number int    `json:"number"`
			State  string `json:"state"`
			Error  string `json:"error"`
		} `json:"attempts"`
	}
	if err := json.Unmarshal([]byte(e.must(0, "history", id, "2026-01-09", "--format", "json")), &history); err != nil {
		t.Fatal(err)
	}
	if len(history.Attempts) != 1 || history.Attempts[0].State != "failed" || !strings.Contains(history.Attempts[0].Error, "the source of 2026-01-09 is down") {
		t.Errorf("history: %+v", history)
	}
	var plan struct {
		Counts struct {
			Run           int `json:"run"`
			SkipSucceeded int `json:"skip_succeeded"`
		} `json:"counts"`
	}
	if err := json.Unmarshal([]byte(e.must(0, "plan", "events", "--format", "json", "--from", "2026-01-01T00:00:00Z", "--to", "2026-02-16T00:00:00Z")), &plan); err != nil {
		t.Fatal(err)
	}
	if plan.Counts.Run != 23 || plan.Counts.SkipSucceeded != 23 {
		t.Errorf("plan counts: %+v", plan.Counts)
	}
}

func TestCancelResume(t *testing.T) {
	e := newEnv(t)
	id := failedMonth(t, e)
	if out := e.must(0, "cancel", id, "--stop-running"); !strings.Contains(out, "Canceled backfill "+id) {
		t.Errorf("cancel:\n%s", out)
	}
	bs := e.backfills()
	if bs[0]["canceled"] != true || bs[0]["stop_running"] != true {
		t.Errorf("after cancel --stop-running: %v", bs[0])
	}
	if out := e.must(0, "status", id); !strings.Contains(out, "state       canceled") {
		t.Errorf("status:\n%s", out)
	}
	out := e.must(0, "resume", id)
	if !strings.Contains(out, "Resuming backfill "+id+" of DAG events") || !strings.Contains(out, "23 succeeded here") {
		t.Errorf("resume:\n%s", out)
	}
	if out := e.must(0, "status", id, "--watch"); !strings.Contains(out, "46/46 succeeded") {
		t.Errorf("status --watch after resume:\n%s", out)
	}
}

// TestLedgerAddress runs the program as the README sets it up
// (TRANCHE_LEDGER=sqlite:PATH): the read commands of a missing ledger
// create no file, neither PATH nor one named sqlite:PATH; run creates
// the ledger at PATH; a bare path is refused with the address it may
// have meant; and a ledger file of mode 0444 is listed and shown, while
// cancel is refused, saying the file is read-only, and changes nothing.
func TestLedgerAddress(t *testing.T) {
	e := newEnv(t)
	for _, args := range [][]string{{"ls"}, {"status", "abc"}, {"history", "abc", "2026-01-01"}, append([]string{"plan", "events"}, week...)} {
		if code, _, errs := e.run(args...); code != 1 || !strings.Contains(errs, "no such file") {
			t.Errorf("events %s of a missing ledger: exit %d, want 1 saying no such file:\n%s", strings.Join(args, " "), code, errs)
		}
	}
	if names, _ := filepath.Glob(filepath.Join(e.dir, "*")); len(names) != 0 {
		t.Errorf("read commands of a missing ledger left %v", names)
	}
	e.must(0, append([]string{"run", "events", "--yes"}, week...)...)
	if _, err := os.Stat(e.ledger); err != nil {
		t.Fatalf("run did not create the ledger at the address's path: %v", err)
	}
	if names, _ := filepath.Glob(filepath.Join(e.dir, "sqlite:*")); len(names) != 0 {
		t.Errorf("the address was taken as a file name: %v", names)
	}
	code, _, errs := e.run("ls", "--ledger", e.ledger)
	if code != 2 || !strings.Contains(errs, "did you mean sqlite:"+e.ledger+"?") {
		t.Errorf("ls --ledger PATH: exit %d, want 2 suggesting sqlite:PATH:\n%s", code, errs)
	}

	if err := os.Chmod(e.ledger, 0o444); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(e.ledger)
	if err != nil {
		t.Fatal(err)
	}
	bs := e.backfills()
	if len(bs) != 1 {
		t.Fatalf("ls of the read-only ledger: %d backfills", len(bs))
	}
	id := bs[0]["id"].(string)
	if out := e.must(0, "status", id); !strings.Contains(out, "7 succeeded") {
		t.Errorf("status of the read-only ledger:\n%s", out)
	}
	e.must(0, "history", id, "2026-01-03")
	e.must(0, append([]string{"plan", "events"}, week...)...)
	code, _, errs = e.run("cancel", id)
	if code != 1 || !strings.Contains(errs, "read-only (mode -r--r--r--)") {
		t.Errorf("cancel of a read-only ledger: exit %d, want 1 saying the file is read-only:\n%s", code, errs)
	}
	after, err := os.ReadFile(e.ledger)
	if err != nil || !bytes.Equal(before, after) {
		t.Errorf("the read-only ledger changed (%v)", err)
	}
	if names, _ := filepath.Glob(filepath.Join(e.dir, "events.db-*")); len(names) != 0 {
		t.Errorf("reading the read-only ledger left %v beside it", names)
	}
}

// TestRerunAfterKill kills the program with SIGKILL while the third of a
// week's days runs (newest first), and runs the same command again: the
// rerun waits for the dead process's lease (2 s) to lapse, saying so,
// takes the day over, runs the rest, and exits 0 within a lease and a
// moment of the kill; the two days that ran before the kill run once.
func TestRerunAfterKill(t *testing.T) {
	e := newEnv(t)
	mark := filepath.Join(e.dir, "hung")
	args := append([]string{"run", "events", "--yes", "--lease", "2s"}, week...)
	cmd := exec.Command(binary, args...)
	cmd.Dir, cmd.Env = e.dir, e.environ("EVENTS_HANG=2026-01-05", "EVENTS_HANG_MARK="+mark)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(mark); err == nil {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("the third day never started")
		}
	}
	cmd.Process.Kill()
	cmd.Wait()
	killed := time.Now()
	out := e.must(0, args...)
	if took := time.Since(killed); took > 5*time.Second {
		t.Errorf("the rerun exited %v after the kill; want within the lease (2s) and a moment", took)
	}
	if !strings.Contains(out, "5 succeeded here") || !strings.Contains(out, "2 skipped") {
		t.Errorf("rerun output:\n%s\nwant 5 succeeded here (the dead process's day among them), 2 skipped", out)
	}
	id, _ := e.backfills()[0]["id"].(string)
	for _, day := range []string{"2026-01-07", "2026-01-06"} {
		if h := e.must(0, "history", id, day); !strings.Contains(h, "  1  succeeded") || strings.Contains(h, "\n  2  ") {
			t.Errorf("history of %s, which ran before the kill:\n%s\nwant one attempt", day, h)
		}
	}
}

// TestCancelWhileRunning cancels a backfill of two months from another
// process while its run, one day at a time of 20 ms (short enough that
// it claims days ahead), is going: at most one day succeeds after the
// cancel (the one running), the run exits non-zero saying canceled, and
// the days not started are left pending, not failed; resume runs each of
// them once.
func TestCancelWhileRunning(t *testing.T) {
	e := newEnv(t)
	args := []string{"run", "events", "--yes", "--from", "2026-01-01", "--to", "2026-02-28"}
	cmd := exec.Command(binary, args...)
	cmd.Dir, cmd.Env = e.dir, e.environ("EVENTS_SLOW=20ms")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	type counts struct {
		Counts map[string]int `json:"counts"`
	}
	read := func(id string) (counts, bool) {
		var st counts
		code, status, _ := e.run("status", id, "--format", "json")
		return st, code == 0 && json.Unmarshal([]byte(status), &st) == nil
	}
	var id string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("the run did not get going:\n%s", out.String())
		}
		if id == "" {
			code, ls, _ := e.run("ls", "--format", "json")
			var bs []map[string]any
			if code == 0 && json.Unmarshal([]byte(ls), &bs) == nil && len(bs) == 1 {
				id, _ = bs[0]["id"].(string)
			}
			continue
		}
		if st, ok := read(id); ok && st.Counts["succeeded"] >= 3 {
			break
		}
	}
	e.must(0, "cancel", id)
	before, _ := read(id)
	err := cmd.Wait()
	if err == nil || !strings.Contains(out.String(), "canceled") {
		t.Errorf("the run after the cancel: %v\n%s\nwant a non-zero exit saying canceled", err, out.String())
	}
	after, _ := read(id)
	if n := after.Counts["succeeded"] - before.Counts["succeeded"]; n > 1 || after.Counts["failed"] != 0 || after.Counts["running"] != 0 {
		t.Errorf("after the cancel: %d more succeeded, %d failed, %d running (counts %v); want at most 1 (the day running), none failed or running",
			n, after.Counts["failed"], after.Counts["running"], after.Counts)
	}
	if out := e.must(0, "resume", id); !strings.Contains(out, "succeeded here") {
		t.Errorf("resume:\n%s", out)
	}
	if st, _ := read(id); st.Counts["succeeded"] != 59 {
		t.Errorf("after the resume: %v; want 59 succeeded", st.Counts)
	}
}
