package sqlite_test

import (
	"encoding/json"
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

// The full disk tests run crashworker processes whose files cannot grow:
// under a file-size limit (RLIMIT_FSIZE, -fsize: a write past it fails
// with EFBIG, SIGXFSZ ignored), or in a small file system (a tmpfs the
// test mounts, which needs root: the write fails with ENOSPC). The
// workers must say so, leave every partition failed, released or to be
// taken over, never lost, and nothing half-written; once the disk has
// room again, workers started without the limit complete the backfill,
// every partition exactly once.

// diskReport is what the full disk tests read of crashworker's report:
// its failures, and whether each names the full disk.
type diskReport struct {
	Failures, ClaimFailures []struct {
		Key              string
		Err              string
		Fenced, Full, IO bool
	}
	Err     string
	ErrFull bool `json:"err_full"`
}

// smallFS mounts a tmpfs of size bytes at dir, unmounted when the test
// ends, and returns a function that gives it room again (64 MiB). It
// skips the test where mounting is not allowed (not root).
func smallFS(t *testing.T, dir string, size int) (grow func()) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a small file system needs root")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d", size), "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("mount tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return func() {
		if out, err := exec.Command("mount", "-o", "remount,size=64m", dir).CombinedOutput(); err != nil {
			t.Fatalf("remount %s: %v: %s", dir, err, out)
		}
	}
}

// TestFullDisk fills the SQLite ledger's disk, or the files
// destination's, under three workers sharing a backfill of 1,000
// partitions:
//
//   - ledger-fsize: the workers' file-size limit stops the ledger's file
//     (and its write-ahead log) growing;
//   - ledger-enospc: the ledger's file lives in a small file system;
//   - files-enospc: the destination's folder does.
//
// Every error a worker reports, but for leases it knew it lost (fenced),
// names the full disk (sqlledger.ErrFull, ENOSPC or EFBIG); the ledger
// passes SQLite's integrity check and its tables agree; no partition
// file is half-written (each holds its rows whole, and no temporary file
// is left); then, with room again, workers without the limit complete
// the backfill: every partition succeeded exactly once, written by its
// success.
func TestFullDisk(t *testing.T) {
	proctest.SkipRace(t)
	for _, c := range []string{"ledger-fsize", "ledger-enospc", "files-enospc"} {
		for rep := range repeat(1) {
			t.Run(fmt.Sprintf("%s/%d", c, rep), func(t *testing.T) { fullDisk(t, c) })
		}
	}
}

func fullDisk(t *testing.T, c string) {
	const days = 1000
	w := newWorld(t, days)
	args := []string{"-concurrency", "2", "-work", "5ms", "-lease", "2s", "-heartbeat", "500ms"}
	var limited []string
	grow := func() {}
	switch c {
	case "ledger-fsize":
		// Past the logs the workers append to, short of the ledger's
		// write-ahead log, which grows to about 4 MB between
		// checkpoints.
		limited = []string{"-fsize", fmt.Sprint(1 << 20)}
	case "ledger-enospc":
		dir := filepath.Join(w.dir, "ledgerfs")
		grow = smallFS(t, dir, 2<<20)
		w.ledger = filepath.Join(dir, "ledger.db")
	case "files-enospc":
		grow = smallFS(t, w.dest, 1<<20)
	}
	start := time.Now()
	ps := make([]*proc, 3)
	for i := range ps {
		ps[i] = w.start(fmt.Sprintf("w%d", i), append(args, limited...)...)
	}
	var named, fenced, failures int
	var sample string
	for _, p := range ps {
		if err := p.wait(); err != nil {
			// The ledger could not be opened, or the report not written:
			// say why, naming the disk.
			msg := strings.TrimSpace(p.stderr.String())
			if !strings.Contains(msg, "full") && !strings.Contains(msg, "file too large") && !strings.Contains(msg, "no space left") {
				t.Errorf("worker %s: %v: %s; want the full disk named", p.name, err, msg)
			}
			named++
			continue
		}
		p.report(t)
		var r diskReport
		if err := json.Unmarshal(p.stdout.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		for _, f := range append(r.Failures, r.ClaimFailures...) {
			failures++
			switch {
			case f.Full, c == "ledger-fsize" && f.IO && strings.Contains(f.Err, "size limit"):
				// SQLite names ENOSPC full, and EFBIG a failed write
				// (SQLITE_IOERR_WRITE), which the ledger explains.
				named++
				sample = f.Err
			case f.Fenced:
				fenced++
			default:
				t.Errorf("worker %s: partition %s failed with %q; want the full disk named", p.name, f.Key, f.Err)
			}
		}
		if r.Err != "" && !r.ErrFull && len(r.Failures)+len(r.ClaimFailures) == 0 {
			t.Errorf("worker %s: %s; want the full disk named", p.name, r.Err)
		}
	}
	if named == 0 {
		t.Fatalf("no worker met the full disk (%d failures)", failures)
	}
	faultAt := time.Now()
	grow()
	hs := w.histories()
	succeeded, running := 0, 0
	for _, h := range hs {
		if len(h) == 0 {
			continue
		}
		switch h[len(h)-1].State {
		case ledger.StateSucceeded:
			succeeded++
		case ledger.StateRunning:
			running++
		}
	}
	w.checkFiles()
	w.checkIntegrity()
	if succeeded == days {
		t.Fatalf("every partition succeeded before the disk filled; want the fault to stop the backfill partway")
	}
	// Room again: workers without the limit finish the backfill, taking
	// over the leases left running.
	for i := range ps {
		ps[i] = w.start(fmt.Sprintf("again%d", i), append(args, "-waitothers")...)
	}
	for _, p := range ps {
		if r := p.report(t); r.Err != "" || r.Failed != 0 {
			t.Errorf("worker %s after the disk had room again: %+v", p.name, r)
		}
	}
	w.checkLanded()
	w.checkFiles()
	w.checkIntegrity()
	t.Logf("%s: the disk filled after %v, %d partitions succeeded, %d left running (taken over after), %d failures naming the full disk (%d fenced), e.g. %q; "+
		"with room again the backfill succeeded in %v",
		c, faultAt.Sub(start).Round(time.Millisecond), succeeded, running, named, fenced, sample, time.Since(faultAt).Round(time.Millisecond))
}

// checkFiles checks that no partition file of the files destination is
// half-written: each holds its rows whole, and no temporary file is
// left behind.
func (w *world) checkFiles() {
	w.t.Helper()
	err := filepath.WalkDir(w.dest, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if strings.HasSuffix(d.Name(), ".tmp") {
			w.t.Errorf("temporary file left: %s", path)
		}
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		w.t.Fatal(err)
	}
	for i := range w.days {
		key := w.partition(i).Key()
		if rows := w.rows(key); len(rows) != 0 && len(rows) != 3 {
			w.t.Errorf("partition %s: %d rows in its file; want 3, or no file", key, len(rows))
		}
	}
}

// checkIntegrity checks the ledger's file with SQLite's integrity check,
// and that its tables agree: each partition's latest is its newest
// attempt, numbered 1 to n, and only the latest may be running.
func (w *world) checkIntegrity() {
	w.t.Helper()
	db := w.openFile()
	var ok string
	if err := db.QueryRowContext(w.t.Context(), "PRAGMA integrity_check").Scan(&ok); err != nil || ok != "ok" {
		w.t.Errorf("integrity check: %q, %v", ok, err)
	}
	for _, c := range []struct{ what, query string }{
		{"partitions whose latest is not their newest attempt",
			`SELECT count(*) FROM tranche_partitions p WHERE p.latest <>
				(SELECT COALESCE(max(attempt), 0) FROM tranche_attempts a WHERE a.dag_id = p.dag_id AND a.start_s = p.start_s)`},
		{"partitions whose attempts are not numbered 1 to n",
			`SELECT count(*) FROM (SELECT dag_id, start_s FROM tranche_attempts GROUP BY dag_id, start_s
				HAVING count(*) <> max(attempt) OR min(attempt) <> 1)`},
		{"running attempts that are not the latest",
			`SELECT count(*) FROM tranche_attempts a JOIN tranche_partitions p USING (dag_id, start_s)
				WHERE a.state = 'running' AND a.attempt <> p.latest`},
	} {
		var n int
		if err := db.QueryRowContext(w.t.Context(), c.query).Scan(&n); err != nil {
			w.t.Fatalf("%s: %v", c.what, err)
		}
		if n != 0 {
			w.t.Errorf("%d %s", n, c.what)
		}
	}
}
