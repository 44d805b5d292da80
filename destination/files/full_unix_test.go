//go:build unix

package files_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/destination/files"
)

// fullChildEnv, when set to a folder, makes TestFullDisk the child that
// writes into it under a file-size limit.
const fullChildEnv = "TRANCHE_FILES_FULL_CHILD"

// fullLimit is the child's file-size limit: a partition of fullRows(1)
// fits in it, one of fullRows(2) does not.
const fullLimit = 4096

func fullRows(size int) []tranche.Row {
	rows := make([]tranche.Row, 40*size*size)
	for i := range rows {
		rows[i] = tranche.Row{"n": i, "pad": strings.Repeat("x", 40)}
	}
	return rows
}

func fullBatch(d, size int, token int64) tranche.Batch {
	return tranche.Batch{Asset: "a", Column: "day", Partition: day(d), Rows: fullRows(size), Token: token, DAG: "dag"}
}

// fullResult is what the child reports of each write.
type fullResult struct {
	Err       string
	ENOSPC    bool // matches syscall.ENOSPC
	EFBIG     bool // matches syscall.EFBIG
	NamesFull bool // the message says the disk is full
}

// TestFullDisk writes in a child process whose files cannot grow past
// 4 KiB (RLIMIT_FSIZE, with SIGXFSZ ignored so that the write past it
// fails with EFBIG rather than kill the process), as on a full disk: a
// partition that fits lands; a write of two partitions, one too big,
// fails as a whole, naming the full disk, and leaves both as they were
// (no file for the new one, the old file for the other); replacing a
// partition with rows too big leaves the old rows. No temporary file is
// left. Without the limit (in the test's own process), the same writes
// land.
func TestFullDisk(t *testing.T) {
	if dir := os.Getenv(fullChildEnv); dir != "" {
		fullChild(dir)
		return
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestFullDisk$")
	cmd.Env = append(os.Environ(), fullChildEnv+"="+dir)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	var got []fullResult
	if err := json.Unmarshal(out[:strings.LastIndexByte(string(out), ']')+1], &got); err != nil {
		t.Fatalf("child printed %q: %v", out, err)
	}
	if len(got) != 3 || got[0].Err != "" {
		t.Fatalf("child's writes: %+v; want the first to land", got)
	}
	for i, r := range got[1:] {
		if !r.EFBIG || !r.NamesFull {
			t.Errorf("write %d under the limit: %+v; want an error matching EFBIG that names the full disk", i+2, r)
		}
	}
	d := &files.Destination{Dir: dir}
	rowsOf := func(p tranche.TimePartition) int {
		data, err := os.ReadFile(d.Path("a", "day", p.Key()))
		if errors.Is(err, os.ErrNotExist) {
			return -1
		}
		if err != nil {
			t.Fatal(err)
		}
		return strings.Count(string(data), "\n")
	}
	if n := rowsOf(day(1)); n != len(fullRows(1)) {
		t.Errorf("partition 1: %d rows; want the first write's %d, which the refused replacement left", n, len(fullRows(1)))
	}
	if n := rowsOf(day(2)); n != -1 {
		t.Errorf("partition 2: %d rows; want no file: its write failed with the other's", n)
	}
	if n := rowsOf(day(3)); n != -1 {
		t.Errorf("partition 3: %d rows; want no file", n)
	}
	checkNoTemp(t, dir)
	// Room again: the writes the limit refused land.
	if err := d.Write(ctxT, []tranche.Batch{fullBatch(2, 1, 1), fullBatch(3, 2, 1)}); err != nil {
		t.Fatal(err)
	}
	if err := d.Write(ctxT, []tranche.Batch{fullBatch(1, 2, 3)}); err != nil {
		t.Fatal(err)
	}
	for d, size := range map[int]int{1: 2, 2: 1, 3: 2} {
		if n := rowsOf(day(d)); n != len(fullRows(size)) {
			t.Errorf("partition %d after the limit: %d rows; want %d", d, n, len(fullRows(size)))
		}
	}
	checkNoTemp(t, dir)
}

// fullChild is TestFullDisk's child: it limits its files to fullLimit
// bytes, makes the writes and prints their results as JSON.
func fullChild(dir string) {
	signal.Ignore(syscall.SIGXFSZ)
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		panic(err)
	}
	lim.Cur = fullLimit
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		panic(err)
	}
	d := &files.Destination{Dir: dir}
	var out []fullResult
	for _, bs := range [][]tranche.Batch{
		{fullBatch(1, 1, 1)},
		{fullBatch(2, 1, 1), fullBatch(3, 2, 1)},
		{fullBatch(1, 2, 2)},
	} {
		var r fullResult
		if err := d.Write(ctxT, bs); err != nil {
			r = fullResult{Err: err.Error(), ENOSPC: errors.Is(err, syscall.ENOSPC), EFBIG: errors.Is(err, syscall.EFBIG), NamesFull: strings.Contains(err.Error(), "disk is full")}
		}
		out = append(out, r)
	}
	data, _ := json.Marshal(out)
	fmt.Println(string(data))
}

// checkNoTemp fails the test for every temporary file under dir.
func checkNoTemp(t *testing.T, dir string) {
	t.Helper()
	filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(d.Name(), ".tmp") {
			t.Errorf("temporary file left: %s", path)
		}
		return err
	})
}
