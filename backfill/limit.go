package backfill

import (
	"context"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/internal/wait"
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

// granted notes that a claim was granted: the next refusal for the limit
// starts a new wait, reported again.
func (x *execution) granted() { x.limited.Store(false) }
