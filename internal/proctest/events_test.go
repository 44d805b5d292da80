package proctest

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/tranche-dev/tranche/ledger"
)

// recorder is a test whose failures are kept, not reported.
type recorder struct {
	*testing.T
	errs []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}
func (r *recorder) Helper() {}

// TestCheckWrites: an older token's write begun after a newer one
// returned is stale; one begun before it returned, its "wrote" line
// logged after (a worker stopped between its write and its line), is
// not; the newest token must be the success's.
func TestCheckWrites(t *testing.T) {
	hs := map[string][]ledger.Attempt{"k": {{Worker: "a", Number: 1}, {Worker: "b", Number: 2}}}
	for _, c := range []struct {
		name, log string
		stale     bool
	}{
		{"in order", "writing k a 1\nwrote k a 1\nwriting k b 2\nwrote k b 2\n", false},
		{"logged late", "writing k a 1\nwriting k b 2\nwrote k b 2\nwrote k a 1\n", false},
		{"stale", "writing k b 2\nwrote k b 2\nwriting k a 1\nwrote k a 1\n", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "audit.log")
			if err := os.WriteFile(path, []byte(c.log), 0o644); err != nil {
				t.Fatal(err)
			}
			r := &recorder{T: t}
			CheckWrites(r, hs, path)
			if got := len(r.errs) > 0; got != c.stale {
				t.Errorf("CheckWrites found %q; want a stale write: %v", r.errs, c.stale)
			}
		})
	}
}
