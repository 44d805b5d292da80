package tranche

import (
	"context"
	"log/slog"
)

// RunWithID is Runner.run, for tests that need a known run id, attempt
// or backfill.
func RunWithID(r *Runner, ctx context.Context, dag *DAG, tg Target, runID string, attempt int, backfill string) (*Result, error) {
	return r.RunWith(ctx, dag, tg, &RunOptions{RunID: runID, Attempt: attempt, Backfill: backfill})
}

// RunWithTokens is Runner.run with fencing tokens for the target's
// partitions, oldest first, as a backfill's lease gives them.
func RunWithTokens(r *Runner, ctx context.Context, dag *DAG, tg Target, runID string, tokens []int64) (*Result, error) {
	return r.RunWith(ctx, dag, tg, &RunOptions{RunID: runID, Attempt: 1, Tokens: tokens})
}

// RunWithFence is Runner.run with fencing tokens of DAG "dag", as a
// backfill runs a partition under a lease, whose ctx is checked before
// each write.
func RunWithFence(r *Runner, ctx context.Context, dag *DAG, tg Target, tokens []int64) (*Result, error) {
	return r.RunWith(ctx, dag, tg, &RunOptions{RunID: "fenced", Attempt: 1, Tokens: tokens, DAG: "dag"})
}

// IsRetryable reports whether err was marked with Retryable, as the
// runner asks before it retries an attempt.
var IsRetryable = isRetryable

// KindLevel is Kind.level, for TestKindLevels.
func KindLevel(k Kind) (slog.Level, bool) { return k.level() }
