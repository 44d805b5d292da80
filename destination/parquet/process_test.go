package parquet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	pq "github.com/parquet-go/parquet-go"

	"github.com/tranche-dev/tranche"
)

// childEnv, when set, makes the test binary a child process of these
// tests instead: its value names what the child does (see TestMain).
const childEnv = "TRANCHE_PARQUET_CHILD"

func TestMain(m *testing.M) {
	switch mode := os.Getenv(childEnv); mode {
	case "":
		code := m.Run()
		if binCopy.path != "" {
			os.RemoveAll(filepath.Dir(binCopy.path))
		}
		os.Exit(code)
	case "not-writable":
		// Args: the lake. Prints the write's error and whether it
		// matches fs.ErrPermission.
		d := &Destination{Dir: os.Args[len(os.Args)-1]}
		err := d.Write(context.Background(), []tranche.Batch{batch("a", day(0), 2, tranche.Row{"v": 2})})
		fmt.Printf("%v\nErrPermission=%v\n", err, errors.Is(err, fs.ErrPermission))
		os.Exit(0)
	case "racer":
		// Args: the lake, then the tokens to write, in order. Prints one
		// JSON outcome per write.
		args := os.Args[len(os.Args)-2:]
		d := &Destination{Dir: args[0]}
		enc := json.NewEncoder(os.Stdout)
		for _, s := range strings.Split(args[1], ",") {
			token, _ := strconv.ParseInt(s, 10, 64)
			enc.Encode(raceWrite(context.Background(), d, token))
		}
		os.Exit(0)
	default:
		fmt.Fprintf(os.Stderr, "unknown %s=%s\n", childEnv, mode)
		os.Exit(2)
	}
}

// outcome is one racing write's result.
type outcome struct {
	Token  int64
	Stale  bool  // refused with a *tranche.StaleWriteError
	Latest int64 // its Latest
	Err    string
}

// raceWrite writes the racers' partition at token: rows that each hold
// the token, so that the file shows which write it holds.
func raceWrite(ctx context.Context, d *Destination, token int64) outcome {
	rows := make([]tranche.Row, 50)
	for i := range rows {
		rows[i] = tranche.Row{"token": token, "i": i}
	}
	err := d.Write(ctx, []tranche.Batch{batch("race", day(0), token, rows...)})
	o := outcome{Token: token}
	var stale *tranche.StaleWriteError
	switch {
	case errors.As(err, &stale) && errors.Is(err, tranche.ErrFenced):
		o.Stale, o.Latest = true, stale.Latest
	case err != nil:
		o.Err = err.Error()
	}
	return o
}

// child returns a command that runs the test binary as a child in mode.
func child(t *testing.T, bin, mode string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), bin, append([]string{"-test.run=^$"}, args...)...)
	cmd.Env = append(os.Environ(), childEnv+"="+mode)
	return cmd
}

// runUnprivileged runs the test binary as a child in mode, as the user
// nobody when the tests run as root (whom file modes do not stop), and
// returns its output.
func runUnprivileged(t *testing.T, mode string, args ...string) string {
	t.Helper()
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := child(t, bin, mode, args...)
	if os.Geteuid() == 0 {
		// nobody must reach the binary and the lake: a copy of the
		// binary in a folder open to all, and the lake's parents opened.
		copied, err := openCopy(bin)
		if err != nil {
			t.Fatal(err)
		}
		for q := filepath.Dir(args[len(args)-1]); q != filepath.Dir(q) && strings.HasPrefix(q, os.TempDir()+string(filepath.Separator)); q = filepath.Dir(q) {
			if err := os.Chmod(q, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		cmd = child(t, copied, mode, args...)
		cmd.Dir = filepath.Dir(copied)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the child %s failed: %v\n%s", mode, err, out)
	}
	return string(out)
}

// binCopy is the copy of the test binary that unprivileged children run,
// made once per test process and removed by TestMain.
var binCopy struct {
	sync.Mutex
	path string
}

// openCopy returns a copy of the binary bin in a folder of its own that
// every user may enter, made on the first call.
func openCopy(bin string) (string, error) {
	binCopy.Lock()
	defer binCopy.Unlock()
	if binCopy.path != "" {
		return binCopy.path, nil
	}
	dir, err := os.MkdirTemp("", "tranche-parquet-bin-")
	if err != nil {
		return "", err
	}
	copied := filepath.Join(dir, "parquet.test")
	if err := copyFile(bin, copied); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	binCopy.path = copied
	return copied, nil
}

func copyFile(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}

// TestFenceRacingProcesses runs writer processes that write one partition
// at once, each with its own tokens (process i writes i, i+n, i+2n,
// ...), which only the folder's flock orders. Whatever the order, the
// partition ends with the rows of the highest token, the fence holds it,
// every write that was refused saw a newer token that was admitted, and
// no temporary file is left.
func TestFenceRacingProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts writer processes; skipped with -short")
	}
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	lake := t.TempDir()
	const procs, writes = 4, 12
	cmds := make([]*exec.Cmd, procs)
	outs := make([]strings.Builder, procs)
	for i := range procs {
		var tokens []string
		for k := range writes {
			tokens = append(tokens, strconv.Itoa(1+i+k*procs))
		}
		cmds[i] = child(t, bin, "racer", lake, strings.Join(tokens, ","))
		cmds[i].Stdout, cmds[i].Stderr = &outs[i], &outs[i]
		if err := cmds[i].Start(); err != nil {
			t.Fatal(err)
		}
	}
	var results []outcome
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("racer %d: %v\n%s", i, err, outs[i].String())
		}
		dec := json.NewDecoder(strings.NewReader(outs[i].String()))
		for dec.More() {
			var o outcome
			if err := dec.Decode(&o); err != nil {
				t.Fatalf("racer %d printed %q: %v", i, outs[i].String(), err)
			}
			results = append(results, o)
		}
	}
	checkRace(t, &Destination{Dir: lake}, results, procs*writes)
}

// TestFenceRacingGoroutines is TestFenceRacingProcesses within one
// process, where the race detector watches.
func TestFenceRacingGoroutines(t *testing.T) {
	lake := t.TempDir()
	const writers, writes = 4, 8
	results := make([][]outcome, writers)
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			d := &Destination{Dir: lake} // a value per writer, as processes have
			for k := range writes {
				results[i] = append(results[i], raceWrite(t.Context(), d, int64(1+i+k*writers)))
			}
		})
	}
	wg.Wait()
	checkRace(t, &Destination{Dir: lake}, slices.Concat(results...), writers*writes)
}

func checkRace(t *testing.T, d *Destination, results []outcome, top int64) {
	t.Helper()
	if len(results) != int(top) {
		t.Fatalf("%d outcomes; want %d", len(results), top)
	}
	admitted := map[int64]bool{}
	for _, o := range results {
		if o.Err != "" {
			t.Fatalf("the write of token %d failed: %s", o.Token, o.Err)
		}
		if !o.Stale {
			admitted[o.Token] = true
		}
	}
	for _, o := range results {
		if o.Stale && (o.Latest <= o.Token || !admitted[o.Latest]) {
			t.Errorf("the write of token %d was refused for token %d, which is not newer or was never admitted", o.Token, o.Latest)
		}
	}
	t.Logf("%d writes admitted, %d refused as stale", len(admitted), len(results)-len(admitted))
	if !admitted[top] {
		t.Errorf("the write of the highest token, %d, was refused", top)
	}
	rows, err := d.Rows("race", "day", day(0).Key())
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 50 {
		t.Fatalf("the partition holds %d rows; want 50", len(rows))
	}
	for _, r := range rows {
		if r["token"] != top {
			t.Fatalf("the partition holds a row of token %v; want every row of token %d", r["token"], top)
		}
	}
	if token := fileMeta(t, d.Path("race", "day", day(0).Key()), metaToken); token != strconv.FormatInt(top, 10) {
		t.Errorf("the part file's %s is %s; want %d", metaToken, token, top)
	}
	dir := filepath.Dir(d.Path("race", "day", day(0).Key()))
	if f, err := readFence(dir); err != nil || f.Token != top {
		t.Errorf("the fence is %d, %v; want %d", f.Token, err, top)
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := []string{lockFile, PartFile}; !slices.Equal(names, want) {
		t.Errorf("the partition's folder holds %q; want %q", names, want)
	}
}

// fileMeta returns the value of a key of a part file's metadata.
func fileMeta(t *testing.T, path, key string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	file, err := pq.OpenFile(f, info.Size())
	if err != nil {
		t.Fatal(err)
	}
	v, _ := file.Lookup(key)
	return v
}
