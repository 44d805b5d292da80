package backfill

import (
	"context"
	"fmt"
	"sync"
)

// A Budget bounds how many runs the backfills and schedulers of one
// process that share it run at once, and puts live runs first: a run
// that asks with [Budget.AcquireFirst] (a scheduler's slot that just
// closed) takes the next free place ahead of every backfill partition
// waiting in [Budget.Acquire], so that a live slot waits only for the
// runs already going when the budget is full, never for a backfill's
// queue. Within each kind, places go in the order they were asked for.
//
// A Budget is safe for concurrent use. Create it with [NewBudget].
type Budget struct {
	mu    sync.Mutex
	free  int
	first []chan struct{} // waiting in AcquireFirst, oldest first
	rest  []chan struct{} // waiting in Acquire, oldest first
}

// NewBudget returns a budget of n runs at once. It panics if n < 1, as
// make does for a negative length.
func NewBudget(n int) *Budget {
	if n < 1 {
		panic(fmt.Sprintf("tranche: NewBudget(%d): a budget needs at least 1 run", n))
	}
	return &Budget{free: n}
}

// Acquire waits for a place in the budget, behind every AcquireFirst
// waiting, and takes it; or returns ctx's error, taking nothing. Each
// place taken must be given back with Release.
func (b *Budget) Acquire(ctx context.Context) error { return b.acquire(ctx, &b.rest) }

// AcquireFirst is Acquire ahead of every Acquire waiting.
func (b *Budget) AcquireFirst(ctx context.Context) error { return b.acquire(ctx, &b.first) }

func (b *Budget) acquire(ctx context.Context, queue *[]chan struct{}) error {
	b.mu.Lock()
	if b.free > 0 && len(b.first) == 0 && (queue == &b.first || len(b.rest) == 0) {
		b.free--
		b.mu.Unlock()
		return nil
	}
	ready := make(chan struct{})
	*queue = append(*queue, ready)
	b.mu.Unlock()
	select {
	case <-ready:
		return nil
	case <-ctx.Done():
		b.mu.Lock()
		defer b.mu.Unlock()
		for i, c := range *queue {
			if c == ready {
				*queue = append((*queue)[:i], (*queue)[i+1:]...)
				return ctx.Err()
			}
		}
		// Handed a place as ctx ended: give it on.
		b.handOn()
		return ctx.Err()
	}
}

// Release gives back a place taken by Acquire or AcquireFirst.
func (b *Budget) Release() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.handOn()
}

// handOn gives a freed place to the first waiter, live ones first, or
// keeps it. Called under mu.
func (b *Budget) handOn() {
	for _, queue := range []*[]chan struct{}{&b.first, &b.rest} {
		if len(*queue) > 0 {
			close((*queue)[0])
			*queue = (*queue)[1:]
			return
		}
	}
	b.free++
}
