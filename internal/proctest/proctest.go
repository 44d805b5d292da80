// Package proctest holds what the ledgers' real-process tests share:
// building a worker binary once per test binary, a logged random seed a
// failing run can replay, and a repetition count to run scenarios more
// often.
package proctest

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

// Binary builds the Go package Pkg (a path relative to the test's folder,
// "./internal/crashworker") once, on first use.
type Binary struct {
	Pkg string

	once sync.Once
	dir  string
	path string
	err  error
}

// Path returns the built binary, building it on first use. It skips the
// test under -short: process tests are the slow ones. It skips it under
// -race too: the worker is built without the race detector, so the code
// under test runs in processes it does not watch, and what it would
// watch, the test's orchestration and checks, is sequential; the plain
// go test runs the test.
func (b *Binary) Path(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs worker processes")
	}
	if Race {
		t.Skip("runs worker processes built without -race, which the race detector does not watch: the plain go test runs it")
	}
	b.once.Do(func() {
		name := filepath.Base(b.Pkg)
		if b.dir, b.err = os.MkdirTemp("", name); b.err != nil {
			return
		}
		b.path = filepath.Join(b.dir, name)
		if out, err := exec.Command("go", "build", "-o", b.path, b.Pkg).CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build %s: %v\n%s", b.Pkg, err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// SkipRace skips a process test under the race detector (go test
// -race): its workers are built without it, and the test's own process
// only starts them, waits and reads what they left, so that the run
// would repeat the plain one at its cost. The longer fault tests call
// it, to keep CI's two runs of the suite within their time.
func SkipRace(t testing.TB) {
	t.Helper()
	if Race {
		t.Skip("a process test: its workers are built without the race detector, and the plain run covers it")
	}
}

// Remove deletes the built binary; call it from TestMain after m.Run.
func (b *Binary) Remove() {
	if b.dir != "" {
		os.RemoveAll(b.dir)
	}
}

// Rand returns a random source seeded from the environment variable
// PREFIX_SEED, or the clock, and logs the seed so that a failure can be
// replayed.
func Rand(t testing.TB, prefix string) *rand.Rand {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv(prefix + "_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("%s_SEED=%d", prefix, seed)
	return rand.New(rand.NewPCG(seed, 0))
}

// Repeat returns n times PREFIX_REPEAT (default 1).
func Repeat(prefix string, n int) int {
	if k, err := strconv.Atoi(os.Getenv(prefix + "_REPEAT")); err == nil && k > 0 {
		return n * k
	}
	return n
}
