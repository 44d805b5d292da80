package tranche

import "context"

// RunWithID is Runner.run, for tests that need a known run id, attempt
// or backfill.
func RunWithID(r *Runner, ctx context.Context, dag *DAG, tg Target, runID string, attempt int, backfill string) (*Result, error) {
	return r.run(ctx, dag, tg, runOptions{id: runID, attempt: attempt, backfill: backfill})
}

// RunWithTokens is Runner.run with fencing tokens for the target's
// partitions, oldest first, as a backfill's lease gives them.
func RunWithTokens(r *Runner, ctx context.Context, dag *DAG, tg Target, runID string, tokens []int64) (*Result, error) {
	return r.run(ctx, dag, tg, runOptions{id: runID, attempt: 1, tokens: tokens})
}

// RunWithFence is Runner.run with fencing tokens and a fence checked
// before each write, as a backfill runs a partition under a lease.
func RunWithFence(r *Runner, ctx context.Context, dag *DAG, tg Target, tokens []int64, fence func() error) (*Result, error) {
	return r.run(ctx, dag, tg, runOptions{id: "fenced", attempt: 1, tokens: tokens, dag: "dag", fence: fence})
}
