package postgres_test

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tranche-dev/tranche/internal/proctest"
	"github.com/tranche-dev/tranche/ledger"
)

// TestFullDisk fills the files destination's disk under three workers
// sharing a backfill of 1,000 partitions on the PostgreSQL ledger: the
// destination's folder is a small tmpfs the test mounts (root only; the
// test skips otherwise), and writes fail with ENOSPC. The workers go on,
// running again what failed, and the test gives the file system room
// once every worker has met the full disk: they complete the backfill
// without a restart. Every failure they reported says the disk is full
// (or is a lease they knew they lost); every attempt before a
// partition's success failed so, or was taken over; each partition
// succeeded once, its file whole and written by its success, and no
// temporary file is left.
func TestFullDisk(t *testing.T) {
	proctest.SkipRace(t)
	for rep := range repeat(1) {
		t.Run(fmt.Sprint(rep), fullDisk)
	}
}

func fullDisk(t *testing.T) {
	const days = 1000
	w := newWorld(t, days, "-concurrency", "2", "-work", "5ms", "-lease", "2s", "-heartbeat", "500ms")
	if os.Geteuid() != 0 {
		t.Skip("mounting a small file system needs root")
	}
	if err := os.MkdirAll(w.dest, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", w.dest).CombinedOutput(); err != nil {
		t.Skipf("mount tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", w.dest).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", w.dest, err, out)
		}
	})
	ws := make([]skewed, 3)
	for i := range ws {
		ws[i] = w.startSkewed(fmt.Sprintf("w%d", i), 0)
	}
	start := time.Now()
	// Full once every worker has failed a partition for it.
	met := func() (int, bool) {
		n, all := 0, true
		for _, p := range ws {
			full := 0
			if _, err := os.Stat(p.runLog); err != nil {
				all = false
				continue
			}
			for _, e := range p.entries(t) {
				if e.Ev == "failure" && strings.Contains(e.Err, "no space left") {
					full++
				}
			}
			n += full
			all = all && full > 0
		}
		return n, all
	}
	for {
		if _, all := met(); all {
			break
		}
		if time.Since(start) > 60*time.Second {
			t.Fatalf("the workers did not all meet the full disk in 60 s (%d executions)", w.doneCount())
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond) // they run again what failed, and fail again
	failedBefore, _ := met()
	grewAt := time.Now()
	if out, err := exec.Command("mount", "-o", "remount,size=64m", w.dest).CombinedOutput(); err != nil {
		t.Fatalf("remount: %v: %s", err, out)
	}
	for _, p := range ws {
		p.report(t)
	}
	hs := w.histories()
	var fullAttempts int
	for i := range days {
		key := w.partition(i).Key()
		h := hs[key]
		if len(h) == 0 || h[len(h)-1].State != ledger.StateSucceeded {
			t.Errorf("partition %s: its latest attempt did not succeed:\n%s", key, formatHistory(h))
			continue
		}
		for _, a := range h[:len(h)-1] {
			switch {
			case a.State == ledger.StateFailed && strings.Contains(a.Err, "the disk is full") && strings.Contains(a.Err, "no space left"):
				fullAttempts++
			case a.State == ledger.StateFailed && (strings.Contains(a.Err, "taken over") || strings.Contains(a.Err, "lease not renewed")):
			default:
				t.Errorf("partition %s: attempt %d by %s %s %q; want it failed for the full disk, or taken over", key, a.Number, a.Worker, a.State, a.Err)
			}
		}
		last := h[len(h)-1]
		rows := w.rows(key)
		if len(rows) != 3 {
			t.Errorf("partition %s: %d rows; want 3", key, len(rows))
		}
		for _, r := range rows {
			if r.Worker != last.Worker || r.Attempt != last.Number {
				t.Errorf("partition %s: row %+v; want it written by the success, %s attempt %d", key, r, last.Worker, last.Number)
			}
		}
	}
	for _, p := range ws {
		for _, e := range p.entries(t) {
			if e.Ev == "failure" && !e.Fenced && !strings.Contains(e.Err, "no space left") {
				t.Errorf("worker %s: partition %s failed with %q; want the full disk named", p.name, e.Key, e.Err)
			}
		}
	}
	filepath.WalkDir(w.dest, func(path string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(d.Name(), ".tmp") {
			t.Errorf("temporary file left: %s", path)
		}
		return err
	})
	w.checkTables()
	if fullAttempts == 0 {
		t.Error("no attempt failed for the full disk")
	}
	t.Logf("the disk filled after %v; %d failures naming it before it grew, %d attempts recorded failed so; the same workers then succeeded the backfill in %v",
		grewAt.Sub(start).Round(time.Millisecond), failedBefore, fullAttempts, time.Since(grewAt).Round(time.Millisecond))
}
