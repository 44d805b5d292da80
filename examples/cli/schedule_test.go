package main

import (
	"bytes"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// lockedBuffer is a bytes.Buffer that a child's output goroutine writes
// while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestScheduleStopsOnSignal: schedule keeps the program's DAG current on
// its SQLite ledger until SIGTERM (what a service manager sends) or
// SIGINT, then exits 0 with its counts. Its first start waits for the
// next day to close, which no test waits for: the slots' runs are
// tranchecli's tests, under an accelerated clock.
func TestScheduleStopsOnSignal(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			e := newEnv(t)
			cmd := exec.Command(binary, "schedule", "--worker", "cli-1")
			cmd.Dir, cmd.Env = e.dir, e.environ()
			var out, errs lockedBuffer
			cmd.Stdout, cmd.Stderr = &out, &errs
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(30 * time.Second)
			for !strings.Contains(out.String(), "  events  scheduling day slots in UTC as cli-1 (delay 0s, catch-up 5, overlap queue, lease 30s): next ") {
				if time.Now().After(deadline) {
					cmd.Process.Kill()
					cmd.Wait()
					t.Fatalf("schedule never started:\n%s\nstderr:\n%s", out.String(), errs.String())
				}
				time.Sleep(10 * time.Millisecond)
			}
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			if err := cmd.Wait(); err != nil {
				t.Fatalf("schedule after %v: %v\n%s\nstderr:\n%s", sig, err, out.String(), errs.String())
			}
			want := "  events  stopped (" + sig.String() + " signal received): 0 succeeded, 0 failed, 0 interrupted, 0 missed, 0 skipped, 0 done elsewhere\n"
			if !strings.HasSuffix(out.String(), want) || errs.String() != "" {
				t.Errorf("stdout:\n%s\nstderr:\n%s\nwant it to end with %q", out.String(), errs.String(), want)
			}
			if got := e.must(0, "ls"); got != "No backfills.\n" {
				t.Errorf("ls after schedule: %q", got)
			}
		})
	}
}
