//go:build unix

package parquet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/tranche-dev/tranche"
)

// fullChildEnv, when set to a lake, makes TestFullDisk the child that
// writes into it under a file-size limit.
const fullChildEnv = "TRANCHE_PARQUET_FULL_CHILD"

// fullLimit is the child's file-size limit: a part file of fullRows(1)
// fits in it, one of fullRows(2) does not.
const fullLimit = 16 << 10

// fullRows returns rows that compress poorly, 20 of them for size 1 and
// 2,000 for size 2.
func fullRows(p tranche.TimePartition, size int) []tranche.Row {
	r := rand.New(rand.NewPCG(uint64(size), 1))
	n := 20
	if size > 1 {
		n = 2000
	}
	rows := make([]tranche.Row, n)
	for i := range rows {
		rows[i] = tranche.Row{"n": int64(i), "pad": fmt.Sprintf("%016x%016x%016x", r.Uint64(), r.Uint64(), r.Uint64())}
	}
	return rows
}

func fullBatch(d, size int, token int64) tranche.Batch {
	p := day(d)
	return batch("a", p, token, fullRows(p, size)...)
}

// fullResult is what the child reports of each write.
type fullResult struct {
	Err       string
	EFBIG     bool // matches syscall.EFBIG
	NamesFull bool // the message says the disk is full
}

// TestFullDisk writes in a child process whose files cannot grow past
// 16 KiB (RLIMIT_FSIZE, with SIGXFSZ ignored so that the write past it
// fails with EFBIG rather than kill the process), as on a full disk: a
// partition that fits lands; a write of two partitions, one too big,
// fails as a whole, naming the full disk, and leaves both as they were;
// replacing a partition with rows too big leaves its old part file,
// readable. No temporary file is left. Without the limit (in the test's
// own process), the same writes land.
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
	d := &Destination{Dir: dir}
	rowsOf := func(p tranche.TimePartition) int {
		if _, err := os.Stat(d.Path("a", "day", p.Key())); errors.Is(err, fs.ErrNotExist) {
			return -1
		}
		rows, err := d.Rows("a", "day", p.Key())
		if err != nil {
			t.Fatalf("partition %s: %v", p.Key(), err)
		}
		return len(rows)
	}
	if n := rowsOf(day(1)); n != 20 {
		t.Errorf("partition 1: %d rows; want the first write's 20, which the refused replacement left", n)
	}
	for _, i := range []int{2, 3} {
		if n := rowsOf(day(i)); n != -1 {
			t.Errorf("partition %d: %d rows; want no part file: its write failed", i, n)
		}
	}
	fullNoTemp(t, dir)
	// Room again: the writes the limit refused land.
	if err := d.Write(t.Context(), []tranche.Batch{fullBatch(2, 1, 1), fullBatch(3, 2, 1)}); err != nil {
		t.Fatal(err)
	}
	if err := d.Write(t.Context(), []tranche.Batch{fullBatch(1, 2, 3)}); err != nil {
		t.Fatal(err)
	}
	for i, want := range map[int]int{1: 2000, 2: 20, 3: 2000} {
		if n := rowsOf(day(i)); n != want {
			t.Errorf("partition %d after the limit: %d rows; want %d", i, n, want)
		}
	}
	fullNoTemp(t, dir)
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
	d := &Destination{Dir: dir}
	var out []fullResult
	for _, bs := range [][]tranche.Batch{
		{fullBatch(1, 1, 1)},
		{fullBatch(2, 1, 1), fullBatch(3, 2, 1)},
		{fullBatch(1, 2, 2)},
	} {
		var r fullResult
		if err := d.Write(context.Background(), bs); err != nil {
			r = fullResult{Err: err.Error(), EFBIG: errors.Is(err, syscall.EFBIG), NamesFull: strings.Contains(err.Error(), "disk is full")}
		}
		out = append(out, r)
	}
	data, _ := json.Marshal(out)
	fmt.Println(string(data))
}

// fullNoTemp fails the test for every temporary file under dir.
func fullNoTemp(t *testing.T, dir string) {
	t.Helper()
	filepath.WalkDir(dir, func(path string, e os.DirEntry, err error) error {
		if err == nil && !e.IsDir() && strings.HasPrefix(e.Name(), ".") && e.Name() != fenceFile && e.Name() != lockFile {
			t.Errorf("temporary file left: %s", path)
		}
		return err
	})
}
