package backfill_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/ledger/memledger"
	"pgregory.net/rapid"
)

// A place freed goes to the live run waiting before any backfill
// partition waiting, however long that one has waited.
func TestBudgetLiveFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := backfill.NewBudget(1)
		ctx := t.Context()
		if err := b.Acquire(ctx); err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var order []string
		var wg sync.WaitGroup
		take := func(name string, first bool) {
			wg.Go(func() {
				acquire := b.Acquire
				if first {
					acquire = b.AcquireFirst
				}
				if err := acquire(ctx); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				order = append(order, name)
				mu.Unlock()
				b.Release()
			})
			synctest.Wait() // queued before the next asks
		}
		take("backfill 1", false)
		take("backfill 2", false)
		take("live", true)
		b.Release()
		wg.Wait()
		if want := []string{"live", "backfill 1", "backfill 2"}; !slices.Equal(order, want) {
			t.Errorf("order %v; want %v", order, want)
		}
	})
}

// A wait that ends with its context takes nothing: the place goes on.
func TestBudgetCanceledWait(t *testing.T) {
	b := backfill.NewBudget(1)
	if err := b.Acquire(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel()
	if err := b.AcquireFirst(ctx); err == nil {
		t.Fatal("AcquireFirst of a full budget returned before its context ended")
	}
	b.Release()
	ctx2, cancel2 := context.WithTimeout(t.Context(), time.Second)
	defer cancel2()
	if err := b.Acquire(ctx2); err != nil {
		t.Fatalf("Acquire after a canceled wait: %v; want the place released", err)
	}
}

// However the places are asked for, given back and given up, no more
// than n are held at once, and every place is accounted for at the end.
func TestBudgetProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(1, 4).Draw(rt, "n")
		workers := rapid.IntRange(1, 12).Draw(rt, "workers")
		first, giveUp := make([]bool, workers), make([]bool, workers)
		for i := range workers {
			first[i] = rapid.Bool().Draw(rt, "first")
			giveUp[i] = rapid.IntRange(0, 3).Draw(rt, "giveUp") == 0
		}
		var peak int
		var lost error
		synctest.Test(t, func(t *testing.T) {
			b := backfill.NewBudget(n)
			var mu sync.Mutex
			held := 0
			var wg sync.WaitGroup
			for i := range workers {
				wg.Go(func() {
					ctx := context.Background()
					if giveUp[i] {
						c, cancel := context.WithTimeout(ctx, time.Millisecond)
						defer cancel()
						ctx = c
					}
					acquire := b.Acquire
					if first[i] {
						acquire = b.AcquireFirst
					}
					if acquire(ctx) != nil {
						return
					}
					mu.Lock()
					held++
					peak = max(peak, held)
					mu.Unlock()
					time.Sleep(time.Millisecond)
					mu.Lock()
					held--
					mu.Unlock()
					b.Release()
				})
			}
			wg.Wait()
			for range n { // every place is free again
				c, cancel := context.WithTimeout(context.Background(), time.Second)
				err := b.Acquire(c)
				cancel()
				if err != nil {
					lost = err
					return
				}
			}
		})
		if peak > n {
			rt.Fatalf("%d places held at once of a budget of %d", peak, n)
		}
		if lost != nil {
			rt.Fatalf("budget of %d lost a place: %v", n, lost)
		}
	})
}

// A backfill given a budget takes a place for each partition it runs:
// a live run asking first, while a partition runs, starts before the
// backfill's next partition, which waits.
func TestBackfillBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		budget := backfill.NewBudget(1)
		var mu sync.Mutex
		var log []string
		var once sync.Once
		live := make(chan struct{})
		p := &bfProbe{hook: func(ctx context.Context, target string) error {
			mu.Lock()
			log = append(log, target)
			mu.Unlock()
			once.Do(func() {
				go func() {
					// A slot closes while the first partition runs.
					if err := budget.AcquireFirst(context.Background()); err != nil {
						t.Error(err)
					}
					mu.Lock()
					log = append(log, "live")
					mu.Unlock()
					budget.Release()
					close(live)
				}()
				time.Sleep(50 * time.Millisecond) // the live run waits for this one
			})
			return nil
		}}
		b := &backfill.Backfill{DAG: bfDAG(t, p, false), Window: bfDays(t, 1, 3), Ledger: memledger.New(nil), Concurrency: 3, Budget: budget}
		if _, err := b.Run(t.Context()); err != nil {
			t.Fatal(err)
		}
		<-live
		if len(log) != 4 || log[1] != "live" {
			t.Errorf("runs %v; want the live run second, after the partition it waited for and before the backfill's next", log)
		}
	})
}
