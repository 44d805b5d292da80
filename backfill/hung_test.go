package backfill_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/memledger"
)

// stuckLedger is the in-memory ledger with one call that, when stuck
// says so, blocks for an hour ignoring its context, as a ledger whose
// driver ignores it or a network that swallows packets does; every
// other call is the real ledger's.
type stuckLedger struct {
	*memledger.Ledger
	hang  time.Duration
	stuck func(call string, parts []tranche.TimePartition) bool
}

func (l *stuckLedger) block(ctx context.Context, call string, parts []tranche.TimePartition) (error, bool) {
	if !l.stuck(call, parts) {
		return nil, false
	}
	time.Sleep(l.hang)
	return errors.New("the stuck call returned at last"), true
}

func (l *stuckLedger) Finish(ctx context.Context, lease *ledger.Lease, outcomes []ledger.Outcome) error {
	if err, ok := l.block(ctx, "Finish", lease.Partitions); ok {
		return err
	}
	return l.Ledger.Finish(ctx, lease, outcomes)
}

func (l *stuckLedger) FinishBatch(ctx context.Context, batch []ledger.Finish) []error {
	var parts []tranche.TimePartition
	for _, f := range batch {
		parts = append(parts, f.Lease.Partitions...)
	}
	if err, ok := l.block(ctx, "FinishBatch", parts); ok {
		errs := make([]error, len(batch))
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	return l.Ledger.FinishBatch(ctx, batch)
}

func (l *stuckLedger) Release(ctx context.Context, lease *ledger.Lease) error {
	if err, ok := l.block(ctx, "Release", lease.Partitions); ok {
		return err
	}
	return l.Ledger.Release(ctx, lease)
}

func (l *stuckLedger) Claim(ctx context.Context, req ledger.ClaimRequest) (*ledger.Lease, error) {
	if err, ok := l.block(ctx, "Claim", req.Partitions); ok {
		return nil, err
	}
	return l.Ledger.Claim(ctx, req)
}

func (l *stuckLedger) ClaimNext(ctx context.Context, req ledger.NextRequest) ([]ledger.Grant, error) {
	if err, ok := l.block(ctx, "ClaimNext", nil); ok {
		return nil, err
	}
	return l.Ledger.ClaimNext(ctx, req)
}

// singleFinisher hides the ledger's FinishBatch: each success is
// recorded by a Finish of its own.
type singleFinisher struct{ ledger.Ledger }

// Whatever ledger call Run waits for hangs, ignoring its context, Run
// returns within the lease after its last partition ended, and its
// error and report name the call it left behind (an error matching
// ErrLeftBehind); the call, returning later, writes nothing into the
// report. (Run used to wait for a hung Finish, FinishBatch or Release
// as long as it hung: an hour here.)
func TestRunReturnsPastHungCall(t *testing.T) {
	const (
		hang      = time.Hour
		lease     = time.Second
		heartbeat = 100 * time.Millisecond
	)
	hungKey := bfDay(2).Key()
	has := func(parts []tranche.TimePartition, key string) bool {
		for _, p := range parts {
			if p.Key() == key {
				return true
			}
		}
		return false
	}
	tests := []struct {
		name string
		call string // named in the errors
		// stuck says which call hangs; n counts the calls made.
		stuck func(n *atomic.Int64, call string, parts []tranche.TimePartition) bool
		batch bool // the ledger finishes in batches
		fail  bool // hungKey's partition fails, under FailStop
		fast  bool // every partition takes a millisecond, so that jobs are claimed ahead
		// leftBehind is the partition the call left behind carries, ""
		// for a claim, which lists what it asked for.
		leftBehind string
		// heldElsewhere makes another worker hold hungKey's partition
		// under a lease that expires during the run, which then takes
		// it over by a Claim of its own.
		heldElsewhere bool
	}{
		{name: "Finish", call: "Finish of " + hungKey, leftBehind: hungKey,
			stuck: func(_ *atomic.Int64, call string, parts []tranche.TimePartition) bool {
				return call == "Finish" && has(parts, hungKey)
			}},
		{name: "FinishBatch", call: "FinishBatch of ", batch: true, leftBehind: hungKey,
			stuck: func(_ *atomic.Int64, call string, parts []tranche.TimePartition) bool {
				return call == "FinishBatch" && has(parts, hungKey)
			}},
		{name: "Finish of a failure", call: "Finish of " + hungKey, batch: true, fail: true, leftBehind: hungKey,
			stuck: func(_ *atomic.Int64, call string, parts []tranche.TimePartition) bool {
				return call == "Finish" && has(parts, hungKey)
			}},
		{name: "Release", call: "Release of ", batch: true, fail: true, fast: true,
			stuck: func(_ *atomic.Int64, call string, _ []tranche.TimePartition) bool { return call == "Release" }},
		{name: "ClaimNext", call: "ClaimNext of ", batch: true,
			stuck: func(n *atomic.Int64, call string, _ []tranche.TimePartition) bool {
				return call == "ClaimNext" && n.Add(1) == 2
			}},
		{name: "Claim", call: "Claim of " + hungKey, batch: true, heldElsewhere: true, leftBehind: hungKey,
			stuck: func(_ *atomic.Int64, call string, parts []tranche.TimePartition) bool {
				return call == "Claim" && has(parts, hungKey)
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var calls atomic.Int64
				stuck := &stuckLedger{Ledger: memledger.New(nil), hang: hang,
					stuck: func(call string, parts []tranche.TimePartition) bool { return tt.stuck(&calls, call, parts) }}
				var l ledger.Ledger = stuck
				if !tt.batch {
					l = singleFinisher{stuck}
				}
				var mu sync.Mutex
				var lastEnd time.Time
				dest := new(tranche.MemoryDestination)
				dag := leaseDAG(t, dest, func(ctx context.Context, key string) error {
					d := 100 * time.Millisecond
					switch {
					case tt.fast:
						d = time.Millisecond
					case key == hungKey:
						d = 300 * time.Millisecond // the last to end
					}
					err := sleepOrDone(ctx, d)
					mu.Lock()
					lastEnd = time.Now()
					mu.Unlock()
					if err == nil && tt.fail && (key == hungKey && !tt.fast || key == bfDay(6).Key() && tt.fast) {
						err = errors.New("boom")
					}
					return err
				})
				onFailure := tranche.FailContinue
				if tt.fail {
					onFailure = tranche.FailStop
				}
				b := &backfill.Backfill{DAG: dag, Window: bfDays(t, 1, 20), Ledger: l, Worker: "a", Concurrency: 2,
					Lease: lease, Heartbeat: heartbeat, OnFailure: onFailure}
				if tt.heldElsewhere {
					// Its lease expires while this run runs the others
					// (100 ms each, two at a time).
					_, err := stuck.Ledger.Claim(t.Context(), ledger.ClaimRequest{DAG: backfill.DAGIdentity(dag, tranche.Day, time.UTC),
						Worker: "b", RunID: "elsewhere", Partitions: []tranche.TimePartition{bfDay(2)}, Lease: 500 * time.Millisecond})
					if err != nil {
						t.Fatal(err)
					}
				}
				start := time.Now()
				res, err := b.Run(t.Context())
				returned := time.Now()
				mu.Lock()
				end := lastEnd
				mu.Unlock()
				t.Logf("Run returned after %v, %v after the last partition ended: %s: %v", returned.Sub(start), returned.Sub(end), res, err)
				if took := returned.Sub(start); took >= hang {
					t.Errorf("Run took %v, as long as the hung call", took)
				}
				if after := returned.Sub(end); after > lease {
					t.Errorf("Run returned %v after its last partition ended; want within the lease, %v, not the hung call's %v", after, lease, hang)
				}
				if !errors.Is(err, backfill.ErrLeftBehind) || !strings.Contains(err.Error(), tt.call) {
					t.Errorf("Run's error = %v; want one matching ErrLeftBehind naming %q", err, tt.call)
				}
				if res == nil {
					t.Fatal("no report")
				}
				if len(res.LeftBehind) == 0 || !errors.Is(res.LeftBehind[0].Err, backfill.ErrLeftBehind) ||
					!strings.Contains(res.LeftBehind[0].Err.Error(), tt.call) ||
					tt.leftBehind != "" && res.LeftBehind[0].Key != tt.leftBehind {
					t.Errorf("Report.LeftBehind = %v; want %s's call, %q", res.LeftBehind, tt.leftBehind, tt.call)
				}
				if got := res.RanHere() + res.Skipped + res.Elsewhere + res.Held + res.NotRun + res.Unclaimed; got != res.Total {
					t.Errorf("report counts %d partitions of %d: %s", got, res.Total, res)
				}
				// The call returns later and writes nothing into the
				// report (-race sees it if it does).
				snapshot := *res
				time.Sleep(2 * hang)
				if len(res.LeftBehind) != len(snapshot.LeftBehind) || res.Failed != snapshot.Failed || res.Succeeded != snapshot.Succeeded {
					t.Errorf("report changed after Run returned: %s, was %s", res, &snapshot)
				}
			})
		})
	}
}
