package sqlite_test

import (
	"path/filepath"
	"sync"
	"testing"

	"github.com/tranche-dev/tranche/ledger/sqlite"
)

// TestOpenAtOnce opens one new file from several connections pools at
// once, as workers started together do: the first creates the schema and
// turns WAL on, the others wait for it rather than fail.
func TestOpenAtOnce(t *testing.T) {
	for round := range 10 {
		path := filepath.Join(t.TempDir(), "ledger.db")
		var wg sync.WaitGroup
		for range 6 {
			wg.Go(func() {
				l, err := sqlite.Open(t.Context(), path, nil)
				if err != nil {
					t.Errorf("round %d: Open = %v", round, err)
					return
				}
				l.Close()
			})
		}
		wg.Wait()
		if t.Failed() {
			return
		}
	}
}
