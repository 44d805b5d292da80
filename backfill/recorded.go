package backfill

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tranche-dev/tranche"
	leases "github.com/tranche-dev/tranche/internal/lease"
	"github.com/tranche-dev/tranche/internal/wait"
	"github.com/tranche-dev/tranche/ledger"
)

// RunRecorded runs dag for partition p with r and records the run in l
// like a backfill's partition: claimed under a lease, then finished. A
// scheduled job that runs through RunRecorded shares its history with
// later backfills of the same DAG, which skip what it landed. It always
// runs the partition (rerun policy all) unless another worker holds it,
// which fails with [ledger.ErrNotClaimable]; worker "" means host-pid.
// Under the DAG's limit ([ledger.Limiter]) it waits, until ctx ends, for
// fewer runs than the limit to hold leases, as a scheduler's slot does.
func RunRecorded(ctx context.Context, l ledger.Ledger, r *tranche.Runner, dag *tranche.DAG, p tranche.TimePartition, worker string) (*tranche.Result, error) {
	if r == nil {
		r = &tranche.Runner{}
	}
	if worker == "" {
		worker = defaultWorker()
	}
	id := DAGIdentity(dag, p.Granularity, p.Start.Location())
	revision, err := l.Revision(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("tranche: reading ledger revision: %w", err)
	}
	runID := RunID(id, p.Start, p.End)
	keeper := leases.NewKeeper(ctx, l, DefaultLease/3, DefaultLease, nil)
	var lease *ledger.Lease
	var claimed time.Duration
	for {
		claimed = keeper.Now()
		lease, err = l.Claim(ctx, ledger.ClaimRequest{DAG: id, Worker: worker, RunID: runID, Partitions: []tranche.TimePartition{p},
			Lease: DefaultLease, Policy: ledger.RerunAll, Revision: revision, Trigger: ledger.TriggerManual})
		if !errors.Is(err, ledger.ErrLimited) {
			break
		}
		if werr := wait.Sleep(ctx, maxLimitPoll); werr != nil {
			keeper.Close()
			return nil, errors.Join(err, werr)
		}
	}
	if err != nil {
		keeper.Close()
		return nil, err
	}
	kept, runCtx := keeper.Keep(lease, claimed, nil)
	kept.Opts.RunID, kept.Opts.Attempt = runID, lease.Attempts[0]
	res, runErr := r.RunWith(runCtx, dag, p, &kept.Opts)
	failure, lost := kept.Verdict(res, runErr, "")
	kept.Release()
	keeper.Close()
	if runErr == nil && res.State == tranche.StateSucceeded {
		runErr = failure // nil, unless the lease stopped holding
	}
	if lost {
		// A newer attempt holds the partition: its outcome counts.
		return res, runErr
	}
	outcome := ledger.Outcome{State: ledger.StateFailed}
	if failure != nil {
		outcome.Err = failure.Error()
	} else {
		outcome = ledger.Outcome{State: ledger.StateSucceeded, Rows: int64(rowsByPartition(res)[p.Key()])}
	}
	finishCtx, done := leases.FinishContext(ctx) // as a backfill records after its context ends
	defer done()
	if err := l.Finish(finishCtx, lease, []ledger.Outcome{outcome}); err != nil {
		return res, errors.Join(runErr, fmt.Errorf("tranche: recording run %s: %w", runID, err))
	}
	return res, runErr
}
