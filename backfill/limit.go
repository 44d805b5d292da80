package backfill

import (
	"context"
	"fmt"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/internal/wait"
	"github.com/tranche-dev/tranche/ledger"
)

// maxLimitPoll bounds how long a run held back by its DAG's limit
// ([ledger.Limiter]) waits before it claims again: a claim costs one
// transaction, and a run that polls too seldom leaves the limit's room
// unused once a live slot has taken its turn.
const maxLimitPoll = 250 * time.Millisecond

// awaitLimit waits, after a claim that the DAG's limit refused with err,
// until the next claim, sending KindLimited when the run starts to wait.
// It reports false when ctx ended.
func (x *execution) awaitLimit(ctx context.Context, err error) bool {
	if !x.limited.Swap(true) {
		x.emit(ctx, tranche.Event{Kind: KindLimited, Err: err})
	}
	return wait.Sleep(ctx, min(x.cfg.heartbeat/4, maxLimitPoll)) == nil
}

// limitWarning is the plan's warning of the DAG's limit lim, for a
// backfill of the concurrency given: "" for none.
func limitWarning(lim ledger.Limit, concurrency int) string {
	if lim.Max <= 0 {
		return ""
	}
	w := fmt.Sprintf("the DAG's limit allows %s at once across every process, live slots first", plural(lim.Max, "1 run", fmt.Sprintf("%d runs", lim.Max)))
	if concurrency > lim.Max {
		w += fmt.Sprintf(", fewer than this backfill's concurrency (%d)", concurrency)
	}
	if lim.Running >= lim.Max || lim.Waiting > 0 {
		w += fmt.Sprintf("; %d running now, %s waiting: the backfill starts waiting for the DAG's limit", lim.Running, plural(lim.Waiting, "1 slot", fmt.Sprintf("%d slots", lim.Waiting)))
	}
	return w
}

// granted notes that a claim was granted: the next refusal for the limit
// starts a new wait, reported again.
func (x *execution) granted() { x.limited.Store(false) }
