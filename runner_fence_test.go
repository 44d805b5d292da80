package tranche_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/tranchetest"
)

// A retry gets its own Materialization: a goroutine the first attempt
// left behind keeps logging as attempt 1 while the second runs (and,
// under -race, without a data race on the attempt number).
func TestRetryGetsItsOwnMaterialization(t *testing.T) {
	stop := make(chan struct{})
	var left sync.WaitGroup
	var logged atomic.Int64 // records the leftover goroutine logged
	var calls atomic.Int64
	a := tranchetest.Func("a", func(ctx context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
		if calls.Add(1) == 1 {
			left.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					m.Logger().Info("still here")
					logged.Add(1)
					time.Sleep(100 * time.Microsecond)
				}
			})
			return nil, tranche.Retryable(errors.New("flaky"))
		}
		// Overlap with the leftover goroutine for a while.
		for n := logged.Load(); logged.Load() < n+20; {
			time.Sleep(100 * time.Microsecond)
		}
		m.Logger().Info("second")
		return nil, nil
	})
	a.Retry = tranche.Retry{Attempts: 2, Backoff: time.Millisecond}
	rec := new(tranchetest.Recorder)
	res, err := (&tranche.Runner{OnEvent: rec.OnEvent}).Run(ctxT, tranchetest.NewDAG(t, a), nil)
	close(stop)
	left.Wait()
	tranchetest.RequireSucceeded(t, res, err)
	var first, second int
	for _, e := range rec.Events() {
		if e.Kind != tranche.KindLog {
			continue
		}
		switch {
		case e.Message == "still here" && e.Attempt == 1:
			first++
		case e.Message == "second" && e.Attempt == 2:
			second++
		default:
			t.Errorf("log %q of attempt %d", e.Message, e.Attempt)
		}
	}
	if first < 20 || second != 1 {
		t.Errorf("%d logs of the first attempt, %d of the second; want at least 20, and 1", first, second)
	}
}

// fencedContext is a run's context whose Err checks a fence, as a
// backfill's lease context checks its lease by the worker's clock: once
// the fence fails, the context is canceled with it.
type fencedContext struct {
	context.Context
	cancel context.CancelCauseFunc
	fence  func() error
}

func newFencedContext(fence func() error) *fencedContext {
	ctx, cancel := context.WithCancelCause(ctxT)
	return &fencedContext{Context: ctx, cancel: cancel, fence: fence}
}

func (c *fencedContext) Err() error {
	if err := c.fence(); err != nil {
		c.cancel(err)
	}
	return c.Context.Err()
}

// The runner checks a fenced run's context right before each write: a
// fence that fails after the asset returned, as a lease lapses while its
// worker is paused at write.started, fails the write, matching
// ErrFenced, before the destination is called, though no timer canceled
// the context.
func TestRunnerFencesWrites(t *testing.T) {
	dest := new(batchRecorder)
	dag := tranchetest.NewDAG(t, dailyAsset("a", fixed(tranche.Row{"day": "2026-01-01"}), dest))
	var fence error
	ctx := newFencedContext(func() error { return fence })
	res, err := tranche.RunWithFence(new(tranche.Runner), ctx, dag, day(1), []int64{7})
	tranchetest.RequireSucceeded(t, res, err)
	if got := dest.take(); len(got) != 1 || got[0].Token != 7 || got[0].DAG != "dag" {
		t.Fatalf("batches %+v; want one batch of token 7 of dag", got)
	}
	ctx = newFencedContext(func() error { return fence })
	rec := new(tranchetest.Recorder)
	hook := func(ctx context.Context, e tranche.Event) {
		rec.OnEvent(ctx, e)
		if e.Kind == tranche.KindWriteStarted { // the lease lapses here
			fence = fmt.Errorf("lease lapsed: %w", tranche.ErrFenced)
		}
	}
	res, err = tranche.RunWithFence(&tranche.Runner{OnEvent: hook}, ctx, dag, day(1), []int64{7})
	// The failed check canceled the run's context, as a lapsed lease
	// cancels its job's: the run is canceled, for that cause.
	if !errors.Is(err, tranche.ErrFenced) || res.State != tranche.StateCanceled {
		t.Errorf("Run with a failing fence: %v, %s; want canceled, matching ErrFenced", err, res.State)
	}
	for _, e := range rec.Events() {
		if e.Kind == tranche.KindWriteFailed && !errors.Is(e.Err, tranche.ErrFenced) {
			t.Errorf("write.failed: %v; want the write refused, matching ErrFenced", e.Err)
		}
	}
	if got := dest.take(); len(got) != 0 {
		t.Errorf("the destination got %d batches past a failing fence", len(got))
	}
	if kinds := rec.Kinds("a"); !slices.Contains(kinds, tranche.KindWriteFailed) {
		t.Errorf("events %v; want write.failed", kinds)
	}

	// A run that is not fenced writes whatever its context says then.
	fence = nil
	ctx = newFencedContext(func() error { return fence })
	hooked := &tranche.Runner{OnEvent: func(_ context.Context, e tranche.Event) {
		if e.Kind == tranche.KindWriteStarted {
			fence = fmt.Errorf("lease lapsed: %w", tranche.ErrFenced)
		}
	}}
	res, err = hooked.Run(ctx, dag, day(1))
	tranchetest.RequireSucceeded(t, res, err)
	if got := dest.take(); len(got) != 1 || got[0].Token != 0 {
		t.Errorf("batches %+v of a run that is not fenced; want one batch of token 0", got)
	}
}

// An unpartitioned asset's batch carries no token: the tokens of the
// partition a run is for do not order its writes.
func TestUnpartitionedBatchNotFenced(t *testing.T) {
	dest := new(batchRecorder)
	dim := tranchetest.Rows("dim", []tranche.Row{{"k": 1}})
	dim.Destinations = []tranche.Destination{dest}
	dag := tranchetest.NewDAG(t, dim, dailyAsset("a", fixed(), dest))
	res, err := tranche.RunWithFence(new(tranche.Runner), ctxT, dag, day(1), []int64{4})
	tranchetest.RequireSucceeded(t, res, err)
	for _, b := range dest.take() {
		if want := map[string]int64{"dim": 0, "a": 4}[b.Asset]; b.Token != want || (b.DAG == "") != (want == 0) {
			t.Errorf("batch of %s: token %d, DAG %q; want token %d", b.Asset, b.Token, b.DAG, want)
		}
	}
}
