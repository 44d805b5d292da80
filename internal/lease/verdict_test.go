package lease_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tranche-dev/tranche"
	leases "github.com/tranche-dev/tranche/internal/lease"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/memledger"
)

// hungHeartbeats is a ledger whose heartbeats hang until their context
// ends: a worker cut off from its ledger, whose lease lapses by its own
// clock.
type hungHeartbeats struct{ ledger.Ledger }

func (h hungHeartbeats) Heartbeat(ctx context.Context, _ *ledger.Lease, _ time.Duration) error {
	<-ctx.Done()
	return ctx.Err()
}

// TestVerdict checks the one rule by which every loop (backfills,
// RunRecorded, the scheduler) judges a run under a lease.
func TestVerdict(t *testing.T) {
	boom := errors.New("boom")
	succeeded := &tranche.Result{State: tranche.StateSucceeded}
	failed := &tranche.Result{State: tranche.StateFailed, Assets: []tranche.AssetResult{{Asset: "a", State: tranche.StateFailed, Err: boom}}}
	const every, d = time.Second, 3 * time.Second
	tests := []struct {
		name     string
		hang     bool          // heartbeats hang: the lease lapses by the worker's clock
		takeOver bool          // the ledger's clock passes the lease and another worker claims
		wait     time.Duration // how long the run takes
		res      *tranche.Result
		runErr   error
		want     error // matched with errors.Is; nil for a success
		lost     bool
	}{
		{name: "succeeded", res: succeeded, wait: 10 * d},
		{name: "run error", runErr: boom, want: boom},
		{name: "failed asset", res: failed, want: boom},
		{name: "succeeded past the lease", hang: true, wait: d, res: succeeded, want: ledger.ErrFenced},
		{name: "stopped by the lapse", hang: true, wait: d, runErr: context.Canceled, want: ledger.ErrFenced},
		{name: "taken over", takeOver: true, wait: 2 * every, res: succeeded, want: ledger.ErrFenced, lost: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				skew := time.Duration(0)
				mem := memledger.New(func() time.Time { return time.Now().Add(skew) })
				var l ledger.Ledger = mem
				if tt.hang {
					l = hungHeartbeats{mem}
				}
				p := tranche.PartitionOf(tranche.Day, time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))
				req := ledger.ClaimRequest{DAG: "d", Worker: "w", RunID: "r", Partitions: []tranche.TimePartition{p}, Lease: d, Policy: ledger.RerunAll}
				keeper := leases.NewKeeper(t.Context(), l, every, d, nil)
				defer keeper.Close()
				claimed := keeper.Now()
				lease, err := mem.Claim(t.Context(), req)
				if err != nil {
					t.Fatal(err)
				}
				kept, _ := keeper.Keep(lease, claimed, nil)
				if tt.takeOver {
					skew = 2 * d
					req.Worker = "other"
					if _, err := mem.Claim(t.Context(), req); err != nil {
						t.Fatal(err)
					}
				}
				time.Sleep(tt.wait)
				failure, lost := kept.Verdict(tt.res, tt.runErr, "r")
				kept.Release()
				if lost != tt.lost {
					t.Errorf("lost = %v, want %v", lost, tt.lost)
				}
				switch {
				case tt.want == nil && failure != nil:
					t.Errorf("failure = %v, want none", failure)
				case tt.want != nil && !errors.Is(failure, tt.want):
					t.Errorf("failure = %v, want one matching %v", failure, tt.want)
				}
			})
		})
	}
}
