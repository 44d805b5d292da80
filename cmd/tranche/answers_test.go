package main

import (
	"bufio"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/sqlite"
)

// TestHonestAnswers checks what the command answers to ids and to
// cancels and resumes with nothing to do: an unknown id is refused in
// one prefix, with what lists the backfills; a start of an id is taken;
// resume of a backfill not canceled, and cancel of one canceled, say so
// and exit 3, changing nothing.
func TestHonestAnswers(t *testing.T) {
	path, f := newLedgerFile(t)
	t.Setenv("TRANCHE_LEDGER", "sqlite:"+path)
	code, _, errs := runTranche(t, "status", "nope")
	if want := "tranche status: no backfill or DAG \"nope\" in the ledger; 'tranche ls' lists them\n"; code != 1 || errs != want {
		t.Errorf("status nope: exit %d, stderr %q; want 1 and %q", code, errs, want)
	}
	if code, out, errs := runTranche(t, "status", f.ID[:5]); code != 0 || !strings.Contains(out, "backfill "+f.ID+"\n") {
		t.Errorf("status %s: exit %d\n%s%s", f.ID[:5], code, out, errs)
	}
	if code, out, _ := runTranche(t, "resume", f.ID); code != 3 || !strings.Contains(out, "is not canceled: nothing to resume; nothing was changed") {
		t.Errorf("resume of a backfill not canceled: exit %d\n%s", code, out)
	}
	if code, out, _ := runTranche(t, "cancel", f.ID[:6]); code != 0 || !strings.Contains(out, "Canceled backfill "+f.ID) {
		t.Errorf("cancel: exit %d\n%s", code, out)
	}
	if code, out, _ := runTranche(t, "cancel", f.ID); code != 3 || !strings.Contains(out, "was canceled already at ") {
		t.Errorf("cancel of a canceled backfill: exit %d\n%s", code, out)
	}
	if code, out, _ := runTranche(t, "resume", f.ID); code != 0 || !strings.Contains(out, "Resumed backfill "+f.ID) {
		t.Errorf("resume: exit %d\n%s", code, out)
	}
}

// TestWatchPrintsChanges watches a backfill while its running partition
// finishes: the watch prints the new counts within a second or so of
// the change (it checks once a second; 2 s are allowed for a loaded
// machine), not several checks later.
func TestWatchPrintsChanges(t *testing.T) {
	path, f := newLedgerFile(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"status", f.ID, "--watch", "--ledger", "sqlite:" + path}, strings.NewReader(""), pw, io.Discard)
		pw.Close()
	}()
	lines := bufio.NewScanner(pr)
	if !lines.Scan() || !strings.Contains(lines.Text(), "1 running") {
		t.Fatalf("the watch's first line: %q", lines.Text())
	}
	time.Sleep(1500 * time.Millisecond) // a few checks that find nothing changed
	l, err := sqlite.Open(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.Finish(t.Context(), f.Running, []ledger.Outcome{{State: ledger.StateSucceeded}}); err != nil {
		t.Fatal(err)
	}
	finished := time.Now()
	if !lines.Scan() {
		t.Fatal("the watch ended without printing the change")
	}
	took := time.Since(finished)
	if !strings.Contains(lines.Text(), "0 running") {
		t.Errorf("the watch's line after the change: %q", lines.Text())
	}
	if took > 2*time.Second {
		t.Errorf("the watch printed the change %v after it; want within about a second", took)
	}
	t.Logf("printed %v after the change", took)
	cancel()
	go io.Copy(io.Discard, pr)
	<-done
}
