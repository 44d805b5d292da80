// Package testskip records the tests that skip for want of a server this
// machine lacks (PostgreSQL, Chromium) and says, when the test binary
// ends, what was not tested and how to test it, without failing: a run
// of every package (go test github.com/tranche-dev/tranche/...) is
// otherwise silent about them. Under CI=true the tests fail instead, so
// that nothing is skipped there.
//
// A package whose tests skip this way calls [Main] from its TestMain.
package testskip

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
)

// Need is what a skipped test lacked, and how to provide it.
type Need struct {
	What string // "a PostgreSQL server"
	How  string // the commands or environment that provide it
}

// The needs of the repository's tests.
var (
	PostgreSQL = Need{"a PostgreSQL server (TRANCHE_POSTGRES_URL is not set)",
		`eval "$(ledger/postgres/testserver.sh start)" at the repository's root (it sets TRANCHE_POSTGRES_URL and TRANCHE_POSTGRES_DIR), then run go test again in that shell`}
	PostgreSQLDir = Need{"a PostgreSQL server that testserver.sh started (TRANCHE_POSTGRES_DIR is not set)",
		`eval "$(ledger/postgres/testserver.sh start)" at the repository's root, which sets TRANCHE_POSTGRES_DIR too`}
	Chromium = Need{"Chromium (no chromium, chromium-browser or google-chrome in PATH, and CHROMIUM is not set)",
		"apt-get install chromium, or set CHROMIUM to the path of a Chromium or Chrome binary"}
)

// skipped holds, for the one test binary, the tests each need skipped:
// TestMain, which reports them, has no other way to learn them.
var (
	mu      sync.Mutex
	skipped = map[Need][]string{}
)

// Skip records that t lacks n, then skips it with reason; under CI=true
// it fails t instead.
func Skip(t testing.TB, n Need, reason string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s under CI: %s", reason, n.How)
	}
	mu.Lock()
	skipped[n] = append(skipped[n], t.Name())
	mu.Unlock()
	t.Skip(reason)
}

// Main runs the tests of m, reports what was skipped (see [Report]) and
// returns m's exit code, which the skips leave as it was.
func Main(m *testing.M) int {
	code := m.Run()
	var b strings.Builder
	Report(&b)
	if b.Len() > 0 {
		os.Stdout.WriteString(b.String())
		// go test hides the output of a package that passed when it
		// tests several; the terminal of the person who ran it, when
		// there is one, still hears.
		if os.Getenv("TRANCHE_TESTSKIP_NO_TTY") != "" {
			return code // a child of a test, whose report its parent reads
		}
		if tty, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0); err == nil {
			tty.WriteString(b.String())
			tty.Close()
		}
	}
	return code
}

// Report writes what was skipped, by need, with how to provide it;
// nothing when nothing was.
func Report(w io.Writer) {
	mu.Lock()
	defer mu.Unlock()
	if len(skipped) == 0 {
		return
	}
	dir, _ := os.Getwd() // go test runs the binary in its package's folder
	needs := make([]Need, 0, len(skipped))
	total := 0
	for n, tests := range skipped {
		needs = append(needs, n)
		total += len(tests)
	}
	slices.SortFunc(needs, func(a, b Need) int { return strings.Compare(a.What, b.What) })
	fmt.Fprintf(w, "tranche: %d tests skipped, not failed, in %s:\n", total, dir)
	for _, n := range needs {
		tests := slices.Clone(skipped[n])
		slices.Sort(tests)
		tests = slices.Compact(tests)
		names := strings.Join(tests[:min(len(tests), 4)], ", ")
		if len(tests) > 4 {
			names += fmt.Sprintf(" and %d more", len(tests)-4)
		}
		fmt.Fprintf(w, "  %d for want of %s: %s\n    to run them: %s\n", len(skipped[n]), n.What, names, n.How)
	}
}
