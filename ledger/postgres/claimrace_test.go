package postgres_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/ledger"
)

// TestClaimRaceAfterCommit has workers take one partition over from each
// other as fast as they can, each claim finding the last one's lease of
// a millisecond expired. A claim whose statement's snapshot predates
// another claim's commit, and which locks the partition's row after it,
// reads the partition's new latest attempt number but not that attempt
// (it is not in its snapshot): it must count the partition as being
// claimed, not start an attempt beside the new one. No attempt but the
// latest may be left running: each claim takes the one before it over.
func TestClaimRaceAfterCommit(t *testing.T) {
	l := openFresh(t, serverURL(t), nil)
	p := tranche.PartitionOf(tranche.Day, time.Date(2025, 5, 1, 0, 0, 0, 0, time.UTC))
	const workers, claims = 6, 150
	var wg sync.WaitGroup
	var mu sync.Mutex
	won := 0
	for w := range workers {
		wg.Go(func() {
			for range claims {
				_, err := l.Claim(t.Context(), ledger.ClaimRequest{DAG: "race", Backfill: "bf", Worker: string(rune('a' + w)), RunID: "r",
					Partitions: []tranche.TimePartition{p}, Lease: time.Millisecond, Policy: ledger.RerunFailed})
				switch {
				case err == nil:
					mu.Lock()
					won++
					mu.Unlock()
				case !errors.Is(err, ledger.ErrNotClaimable):
					t.Error(err)
					return
				}
				time.Sleep(time.Millisecond)
			}
		})
	}
	wg.Wait()
	h, err := l.History(t.Context(), "race", p.Start)
	if err != nil {
		t.Fatal(err)
	}
	running := 0
	for _, a := range h[:len(h)-1] {
		if a.State == ledger.StateRunning {
			running++
		}
	}
	if running > 0 || len(h) != won {
		t.Errorf("%d claims won, %d attempts, %d attempts left running beside a newer one; want one attempt per claim, each taken over by the next", won, len(h), running)
	}
	t.Logf("%d claims won of %d", won, workers*claims)
}
