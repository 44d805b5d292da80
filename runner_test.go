package tranche_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/tranchetest"
)

var (
	ctxT = context.Background()
	jan1 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
)

func day(d int) tranche.TimePartition {
	return tranche.PartitionOf(tranche.Day, jan1.AddDate(0, 0, d-1))
}

func january(t testing.TB) tranche.TimePartitionWindow {
	t.Helper()
	w, err := tranche.NewTimePartitionWindow(tranche.Day, jan1, time.Date(2026, 1, 31, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// sleeper returns an asset that sleeps d, or until its context ends.
func sleeper(name string, d time.Duration, deps ...string) tranche.Asset {
	return tranchetest.Func(name, func(ctx context.Context, _ *tranche.Materialization) ([]tranche.Row, error) {
		select {
		case <-time.After(d):
			return nil, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}, deps...)
}

func TestRunDependencyOrderAndInputs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var order []string
		mk := func(name string, deps ...string) tranche.Asset {
			return tranchetest.Func(name, func(_ context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
				n := 1
				for _, dep := range deps {
					rows, err := m.Input(dep)
					if err != nil {
						return nil, err
					}
					n += rows[0]["n"].(int)
				}
				mu.Lock()
				order = append(order, name)
				mu.Unlock()
				return []tranche.Row{{"n": n}}, nil
			}, deps...)
		}
		// a diamond and a tail: a -> b, a -> c, (b, c) -> d -> e
		dag := tranchetest.NewDAG(t, mk("e", "d"), mk("d", "b", "c"), mk("c", "a"), mk("b", "a"), mk("a"))
		for _, conc := range []int{1, 2, 8} {
			order = nil
			rec := new(tranchetest.Recorder)
			r := tranche.Runner{MaxConcurrentAssets: conc, OnEvent: rec.OnEvent}
			res, err := r.Run(ctxT, dag, nil)
			tranchetest.RequireSucceeded(t, res, err)
			pos := map[string]int{}
			for i, n := range order {
				pos[n] = i
			}
			if !(pos["a"] < pos["b"] && pos["a"] < pos["c"] && pos["b"] < pos["d"] && pos["c"] < pos["d"] && pos["d"] < pos["e"]) {
				t.Errorf("concurrency %d: order %v breaks a dependency", conc, order)
			}
			if got, want := res.Succeeded, []string{"a", "b", "c", "d", "e"}; !slices.Equal(got, want) {
				t.Errorf("Succeeded = %v, want %v", got, want)
			}
			// e sees d = b + c + 1 = (a+1) + (a+1) + 1 = 5, so e = 6.
			if o := assetResult(res, "e"); o.Rows != 1 {
				t.Errorf("e wrote %d rows, want 1", o.Rows)
			}
			tranchetest.RequireKinds(t, rec, "", tranche.KindRunStarted, tranche.KindRunSucceeded)
			tranchetest.RequireKinds(t, rec, "d", tranche.KindAssetStarted, tranche.KindAssetSucceeded)
			if evs := rec.Events(); evs[0].Kind != tranche.KindRunStarted || evs[len(evs)-1].Kind != tranche.KindRunSucceeded {
				t.Errorf("run events do not bracket the run: first %s, last %s", evs[0].Kind, evs[len(evs)-1].Kind)
			}
		}
	})
}

func TestRunInputValues(t *testing.T) {
	var got int
	dag := tranchetest.NewDAG(t,
		tranchetest.Rows("a", []tranche.Row{{"n": 2}, {"n": 3}}),
		tranchetest.Func("b", func(_ context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
			rows, err := m.Input("a")
			for _, r := range rows {
				got += r["n"].(int)
			}
			if _, err := m.Input("zzz"); err == nil || !strings.Contains(err.Error(), `"zzz"`) {
				t.Errorf("Input(zzz) = %v, want an error naming it", err)
			}
			return nil, err
		}, "a"))
	res, err := new(tranche.Runner).Run(ctxT, dag, nil)
	tranchetest.RequireSucceeded(t, res, err)
	if got != 5 {
		t.Errorf("b summed %d from a's rows, want 5", got)
	}
}

func TestRunConcurrencyLimit(t *testing.T) {
	for _, tc := range []struct {
		concurrency, assets, wantMax int
		wantTook                     time.Duration
	}{
		{concurrency: 1, assets: 6, wantMax: 1, wantTook: 6 * time.Second},
		{concurrency: 2, assets: 6, wantMax: 2, wantTook: 3 * time.Second},
		{concurrency: 4, assets: 6, wantMax: 4, wantTook: 2 * time.Second},
		{concurrency: 10, assets: 6, wantMax: 6, wantTook: time.Second},
		{concurrency: -3, assets: 3, wantMax: 1, wantTook: 3 * time.Second},
	} {
		t.Run(fmt.Sprintf("%d of %d", tc.concurrency, tc.assets), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var running, peak atomic.Int64
				var assets []tranche.Asset
				for i := range tc.assets {
					assets = append(assets, tranchetest.Func(fmt.Sprintf("a%d", i), func(ctx context.Context, _ *tranche.Materialization) ([]tranche.Row, error) {
						n := running.Add(1)
						for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
						}
						time.Sleep(time.Second)
						running.Add(-1)
						return nil, nil
					}))
				}
				dag := tranchetest.NewDAG(t, assets...)
				start := time.Now()
				res, err := (&tranche.Runner{MaxConcurrentAssets: tc.concurrency}).Run(ctxT, dag, nil)
				tranchetest.RequireSucceeded(t, res, err)
				if got := int(peak.Load()); got != tc.wantMax {
					t.Errorf("peak concurrency %d, want %d", got, tc.wantMax)
				}
				if took := time.Since(start); took != tc.wantTook {
					t.Errorf("run took %v, want %v", took, tc.wantTook)
				}
			})
		})
	}
}

func TestRunZeroConcurrencyIsGOMAXPROCS(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var running, peak atomic.Int64
		var assets []tranche.Asset
		n := runtime.GOMAXPROCS(0) + 3
		for i := range n {
			assets = append(assets, tranchetest.Func(fmt.Sprintf("a%03d", i), func(context.Context, *tranche.Materialization) ([]tranche.Row, error) {
				v := running.Add(1)
				for p := peak.Load(); v > p && !peak.CompareAndSwap(p, v); p = peak.Load() {
				}
				time.Sleep(time.Second)
				running.Add(-1)
				return nil, nil
			}))
		}
		res, err := new(tranche.Runner).Run(ctxT, tranchetest.NewDAG(t, assets...), nil)
		tranchetest.RequireSucceeded(t, res, err)
		if got, want := int(peak.Load()), runtime.GOMAXPROCS(0); got != want {
			t.Errorf("peak concurrency %d, want GOMAXPROCS = %d", got, want)
		}
	})
}

var errBoom = errors.New("boom")

// failureDAG: "bad" fails at 1s; "slow" (independent) takes 10s; "after"
// depends on bad; "side" depends on slow; "quick" completes at once.
func failureDAG(t *testing.T) *tranche.DAG {
	return tranchetest.NewDAG(t,
		tranchetest.Func("bad", func(context.Context, *tranche.Materialization) ([]tranche.Row, error) {
			time.Sleep(time.Second)
			return nil, errBoom
		}),
		sleeper("slow", 10*time.Second),
		tranchetest.Noop("after", "bad"),
		tranchetest.Noop("side", "slow"),
		tranchetest.Noop("quick"),
	)
}

func TestRunFailurePolicies(t *testing.T) {
	for _, tc := range []struct {
		policy                      tranche.FailurePolicy
		succeeded, failed, canceled []string
		took                        time.Duration
		terminal                    map[string]tranche.Kind
	}{
		{
			policy:    tranche.FailStop,
			succeeded: []string{"quick"}, failed: []string{"bad"}, canceled: []string{"slow", "after", "side"},
			took: time.Second,
			terminal: map[string]tranche.Kind{"bad": tranche.KindAssetFailed, "slow": tranche.KindAssetCanceled,
				"after": tranche.KindAssetCanceled, "side": tranche.KindAssetCanceled, "quick": tranche.KindAssetSucceeded},
		},
		{
			policy:    tranche.FailContinue,
			succeeded: []string{"slow", "quick", "side"}, failed: []string{"bad"}, canceled: []string{"after"},
			took: 10 * time.Second,
			terminal: map[string]tranche.Kind{"bad": tranche.KindAssetFailed, "slow": tranche.KindAssetSucceeded,
				"after": tranche.KindAssetCanceled, "side": tranche.KindAssetSucceeded, "quick": tranche.KindAssetSucceeded},
		},
	} {
		t.Run(string(tc.policy), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rec := new(tranchetest.Recorder)
				r := tranche.Runner{MaxConcurrentAssets: 8, OnFailure: tc.policy, OnEvent: rec.OnEvent}
				start := time.Now()
				res, err := r.Run(ctxT, failureDAG(t), nil)
				if took := time.Since(start); took != tc.took {
					t.Errorf("run took %v, want %v", took, tc.took)
				}
				tranchetest.RequireState(t, res, tranche.StateFailed, "bad=failed")
				if ae, ok := errors.AsType[*tranche.AssetError](err); !ok || ae.Asset != "bad" || !errors.Is(err, errBoom) {
					t.Errorf("Run error = %v, want an *AssetError for bad wrapping errBoom", err)
				}
				sorted := func(s []string) []string { return slices.Sorted(slices.Values(s)) }
				if diff := cmp.Diff(sorted(tc.succeeded), sorted(res.Succeeded)); diff != "" {
					t.Errorf("Succeeded mismatch (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(tc.failed, res.Failed); diff != "" {
					t.Errorf("Failed mismatch (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(sorted(tc.canceled), sorted(res.Canceled)); diff != "" {
					t.Errorf("Canceled mismatch (-want +got):\n%s", diff)
				}
				for name, want := range tc.terminal {
					kinds := rec.Kinds(name)
					if len(kinds) == 0 || kinds[len(kinds)-1] != want {
						t.Errorf("events of %s = %v, want them to end with %s", name, kinds, want)
					}
					o := assetResult(res, name)
					if (o.State == tranche.StateCanceled) != (o.Err != nil && o.State != tranche.StateFailed) && o.State != tranche.StateSucceeded {
						t.Errorf("%s: status %s with error %v", name, o.State, o.Err)
					}
				}
				if o := assetResult(res, "after"); !strings.Contains(fmt.Sprint(o.Err), `"bad"`) {
					t.Errorf("after's error %v does not name bad", o.Err)
				}
				tranchetest.RequireKinds(t, rec, "", tranche.KindRunStarted, tranche.KindRunFailed)
			})
		})
	}
}

func TestRunFailContinueJoinsFailures(t *testing.T) {
	errA, errB := errors.New("a broke"), errors.New("b broke")
	dag := tranchetest.NewDAG(t, tranchetest.Fail("a", errA), tranchetest.Fail("b", errB), tranchetest.Noop("c"))
	res, err := (&tranche.Runner{OnFailure: tranche.FailContinue}).Run(ctxT, dag, nil)
	tranchetest.RequireState(t, res, tranche.StateFailed, "a=failed", "b=failed", "c=succeeded")
	if !errors.Is(err, errA) || !errors.Is(err, errB) {
		t.Errorf("Run error = %v, want both failures", err)
	}
}

// An OnFailure the runner does not know fails the run before any asset
// starts, naming the value and what is accepted.
func TestRunUnknownFailurePolicy(t *testing.T) {
	rec := new(tranchetest.Recorder)
	dag := tranchetest.NewDAG(t, tranchetest.Noop("a"))
	res, err := (&tranche.Runner{OnFailure: "halt", OnEvent: rec.OnEvent}).Run(ctxT, dag, nil)
	if err == nil || res != nil || !strings.Contains(err.Error(), `"halt"`) || !strings.Contains(err.Error(), "stop, continue") {
		t.Errorf("Run with OnFailure halt = %v, %v; want no result and an error naming halt and the accepted values", res, err)
	}
	if kinds := rec.Kinds(""); len(kinds) != 0 {
		t.Errorf("events %v; want none", kinds)
	}
}

func TestRunPanicIsAssetFailure(t *testing.T) {
	dag := tranchetest.NewDAG(t,
		tranchetest.Func("p", func(context.Context, *tranche.Materialization) ([]tranche.Row, error) {
			var m map[string]int
			//lint:ignore SA5000 the panic of a nil-map write, a runtime error, is what the test runs
			m["x"] = 1
			return nil, nil
		}),
		tranchetest.Func("q", func(context.Context, *tranche.Materialization) ([]tranche.Row, error) {
			panic("plain value")
		}),
	)
	res, err := (&tranche.Runner{OnFailure: tranche.FailContinue}).Run(ctxT, dag, nil)
	tranchetest.RequireState(t, res, tranche.StateFailed, "p=failed", "q=failed")
	for _, name := range []string{"p", "q"} {
		o := assetResult(res, name)
		pe, ok := errors.AsType[*tranche.PanicError](o.Err)
		if !ok {
			t.Fatalf("%s: error %v is not a *PanicError", name, o.Err)
		}
		if !strings.Contains(string(pe.Stack), "runner_test.go") {
			t.Errorf("%s: stack does not show the panicking function:\n%s", name, pe.Stack)
		}
		if !strings.Contains(pe.Error(), name) {
			t.Errorf("%s: %q does not name the asset", name, pe.Error())
		}
	}
	var re runtime.Error
	if !errors.As(err, &re) {
		t.Errorf("a runtime.Error panic should be found by errors.As through the PanicError: %v", err)
	}
}

func TestRunCanceledContext(t *testing.T) {
	for _, policy := range []tranche.FailurePolicy{tranche.FailStop, tranche.FailContinue} {
		t.Run(string(policy), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cause := errors.New("shutting down")
				ctx, cancel := context.WithCancelCause(ctxT)
				time.AfterFunc(3*time.Second, func() { cancel(cause) })
				rec := new(tranchetest.Recorder)
				dag := tranchetest.NewDAG(t,
					tranchetest.Noop("first"),
					sleeper("long", time.Hour, "first"),
					sleeper("long2", time.Hour, "first"),
					tranchetest.Noop("last", "long", "long2"),
				)
				start := time.Now()
				res, err := (&tranche.Runner{OnFailure: policy, OnEvent: rec.OnEvent}).Run(ctx, dag, nil)
				if took := time.Since(start); took != 3*time.Second {
					t.Errorf("run took %v after cancel at 3s", took)
				}
				if err != cause {
					t.Errorf("Run error = %v, want the cause %v", err, cause)
				}
				tranchetest.RequireState(t, res, tranche.StateCanceled, "first=succeeded", "long=canceled", "long2=canceled", "last=canceled")
				tranchetest.RequireKinds(t, rec, "", tranche.KindRunStarted, tranche.KindRunCanceled)
				tranchetest.RequireKinds(t, rec, "long", tranche.KindAssetStarted, tranche.KindAssetCanceled)
				tranchetest.RequireKinds(t, rec, "last", tranche.KindAssetCanceled)
				if o := assetResult(res, "last"); !errors.Is(o.Err, cause) && !strings.Contains(o.Err.Error(), "canceled") {
					t.Errorf("last: %v", o.Err)
				}
			})
		})
	}
}

func TestRunAlreadyCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(ctxT)
	cancel()
	called := false
	dag := tranchetest.NewDAG(t, tranchetest.Func("a", func(context.Context, *tranche.Materialization) ([]tranche.Row, error) {
		called = true
		return nil, nil
	}))
	res, err := new(tranche.Runner).Run(ctx, dag, nil)
	if !errors.Is(err, context.Canceled) || called {
		t.Errorf("Run = %v (called %v), want context.Canceled without calling the asset", err, called)
	}
	tranchetest.RequireState(t, res, tranche.StateCanceled, "a=canceled")
}

func TestRunTimeoutAndRetry(t *testing.T) {
	errFlaky := errors.New("flaky")
	for _, tc := range []struct {
		name       string
		retry      tranche.Retry
		timeout    time.Duration
		fails      int   // attempts that fail before one succeeds
		err        error // what a failing attempt returns; nil: it blocks until its context ends
		wantStatus tranche.State
		wantTries  int
		wantTook   time.Duration
		wantKinds  []tranche.Kind
	}{
		{
			name: "retryable then success", retry: tranche.Retry{Attempts: 3, Backoff: time.Second},
			fails: 2, err: tranche.Retryable(errFlaky), wantStatus: tranche.StateSucceeded, wantTries: 3,
			wantTook: 3 * time.Second, // waits 1s then 2s
			wantKinds: []tranche.Kind{tranche.KindAssetStarted, tranche.KindAssetRetrying, tranche.KindAssetStarted,
				tranche.KindAssetRetrying, tranche.KindAssetStarted, tranche.KindAssetSucceeded},
		},
		{
			name: "retries exhausted", retry: tranche.Retry{Attempts: 3, Backoff: time.Second, MaxBackoff: 1500 * time.Millisecond},
			fails: 5, err: tranche.Retryable(errFlaky), wantStatus: tranche.StateFailed, wantTries: 3,
			wantTook: 2500 * time.Millisecond, // 1s, then 2s capped to 1.5s
			wantKinds: []tranche.Kind{tranche.KindAssetStarted, tranche.KindAssetRetrying, tranche.KindAssetStarted,
				tranche.KindAssetRetrying, tranche.KindAssetStarted, tranche.KindAssetFailed},
		},
		{
			name: "not retryable", retry: tranche.Retry{Attempts: 3},
			fails: 1, err: errFlaky, wantStatus: tranche.StateFailed, wantTries: 1,
			wantKinds: []tranche.Kind{tranche.KindAssetStarted, tranche.KindAssetFailed},
		},
		{
			name: "default backoff is a second", retry: tranche.Retry{Attempts: 2},
			fails: 1, err: tranche.Retryable(errFlaky), wantStatus: tranche.StateSucceeded, wantTries: 2, wantTook: time.Second,
			wantKinds: []tranche.Kind{tranche.KindAssetStarted, tranche.KindAssetRetrying, tranche.KindAssetStarted, tranche.KindAssetSucceeded},
		},
		{
			name: "timeout", timeout: 5 * time.Second,
			fails: 1, wantStatus: tranche.StateFailed, wantTries: 1, wantTook: 5 * time.Second,
			wantKinds: []tranche.Kind{tranche.KindAssetStarted, tranche.KindAssetFailed},
		},
		{
			name: "timeout retried", timeout: 5 * time.Second, retry: tranche.Retry{Attempts: 2, Backoff: time.Minute},
			fails: 1, wantStatus: tranche.StateSucceeded, wantTries: 2, wantTook: 5*time.Second + time.Minute,
			wantKinds: []tranche.Kind{tranche.KindAssetStarted, tranche.KindAssetRetrying, tranche.KindAssetStarted, tranche.KindAssetSucceeded},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				calls := 0
				a := tranchetest.Func("a", func(ctx context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
					calls++
					if calls > tc.fails {
						return nil, nil
					}
					if tc.err == nil {
						<-ctx.Done()
						return nil, ctx.Err()
					}
					return nil, tc.err
				})
				a.Retry, a.Timeout = tc.retry, tc.timeout
				rec := new(tranchetest.Recorder)
				start := time.Now()
				res, err := (&tranche.Runner{OnEvent: rec.OnEvent}).Run(ctxT, tranchetest.NewDAG(t, a), nil)
				if took := time.Since(start); took != tc.wantTook {
					t.Errorf("run took %v, want %v", took, tc.wantTook)
				}
				tranchetest.RequireState(t, res, tc.wantStatus)
				tranchetest.RequireKinds(t, rec, "a", tc.wantKinds...)
				if o := res.Assets[0]; o.Attempts != tc.wantTries {
					t.Errorf("Attempts = %d, want %d", o.Attempts, tc.wantTries)
				}
				if tc.wantStatus == tranche.StateFailed {
					ae, ok := errors.AsType[*tranche.AssetError](err)
					if !ok || ae.Attempts != tc.wantTries {
						t.Errorf("Run error = %#v, want an *AssetError with %d attempts", err, tc.wantTries)
					}
					if tc.err == nil && !errors.Is(err, context.DeadlineExceeded) {
						t.Errorf("a timeout %v should match context.DeadlineExceeded", err)
					}
				}
			})
		})
	}
}

func TestRunCanceledDuringBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(ctxT, 10*time.Second)
		defer cancel()
		a := tranchetest.Fail("a", tranche.Retryable(errBoom))
		a.Retry = tranche.Retry{Attempts: 5, Backoff: time.Hour}
		rec := new(tranchetest.Recorder)
		start := time.Now()
		res, err := (&tranche.Runner{OnEvent: rec.OnEvent}).Run(ctx, tranchetest.NewDAG(t, a), nil)
		if took := time.Since(start); took != 10*time.Second {
			t.Errorf("run took %v, want 10s", took)
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Run error = %v", err)
		}
		tranchetest.RequireState(t, res, tranche.StateCanceled, "a=canceled")
		tranchetest.RequireKinds(t, rec, "a", tranche.KindAssetStarted, tranche.KindAssetRetrying, tranche.KindAssetCanceled)
	})
}

func TestRunSkip(t *testing.T) {
	dag := tranchetest.NewDAG(t,
		tranchetest.Fail("src", fmt.Errorf("no file for today: %w", tranche.ErrSkip)),
		tranchetest.Noop("stats", "src"),
		tranchetest.Noop("other"),
	)
	rec := new(tranchetest.Recorder)
	res, err := (&tranche.Runner{OnEvent: rec.OnEvent}).Run(ctxT, dag, nil)
	tranchetest.RequireSucceeded(t, res, err)
	if diff := cmp.Diff([]string{"src", "stats"}, res.Skipped); diff != "" {
		t.Errorf("Skipped mismatch (-want +got):\n%s", diff)
	}
	tranchetest.RequireKinds(t, rec, "src", tranche.KindAssetStarted, tranche.KindAssetSkipped)
	tranchetest.RequireKinds(t, rec, "stats", tranche.KindAssetSkipped)
}

func TestRunTargets(t *testing.T) {
	type seen struct {
		partition  string
		partErr    bool
		window     string
		runIDKnown bool
	}
	var mu sync.Mutex
	got := map[string]seen{}
	probe := func(name string, p tranche.Partitioning, deps ...string) tranche.Asset {
		a := tranchetest.Func(name, func(_ context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
			s := seen{window: m.Window().String(), runIDKnown: m.RunID() == "run-1"}
			if part, err := m.Partition(); err != nil {
				s.partErr = strings.Contains(err.Error(), name) && (strings.Contains(err.Error(), "unpartitioned") || strings.Contains(err.Error(), "use Window"))
			} else {
				s.partition = part.Key()
			}
			mu.Lock()
			got[name] = s
			mu.Unlock()
			return nil, nil
		}, deps...)
		a.Partitioning = p
		return a
	}
	dag := tranchetest.NewDAG(t,
		probe("dim", tranche.Partitioning{}),
		probe("daily", tranche.Partitioning{Granularity: tranche.Day, AllowWindow: true}, "dim"),
	)
	for _, tc := range []struct {
		name   string
		target tranche.Target
		want   map[string]seen
	}{
		{"partition", day(5), map[string]seen{
			"dim":   {partErr: true, window: "empty", runIDKnown: true},
			"daily": {partition: "2026-01-05", window: "day 2026-01-05..2026-01-05 UTC", runIDKnown: true},
		}},
		{"window", january(t), map[string]seen{
			"dim":   {partErr: true, window: "empty", runIDKnown: true},
			"daily": {partErr: true, window: "day 2026-01-01..2026-01-31 UTC", runIDKnown: true},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clear(got)
			res, err := tranche.RunWithID(new(tranche.Runner), ctxT, dag, tc.target, "run-1", 1, "")
			tranchetest.RequireSucceeded(t, res, err)
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(seen{})); diff != "" {
				t.Errorf("what assets saw mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRunWindowCallsOnce(t *testing.T) {
	calls := 0
	a := tranchetest.Func("a", func(_ context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
		calls++
		return nil, nil
	})
	a.Partitioning = tranche.Partitioning{Granularity: tranche.Day, AllowWindow: true}
	res, err := new(tranche.Runner).Run(ctxT, tranchetest.NewDAG(t, a), january(t))
	tranchetest.RequireSucceeded(t, res, err)
	if calls != 1 {
		t.Errorf("a window run called the asset %d times, want 1", calls)
	}
	if res.Target != "day 2026-01-01..2026-01-31 UTC" {
		t.Errorf("Target = %q", res.Target)
	}
}

func TestPreflight(t *testing.T) {
	daily := func(name string, p tranche.Partitioning) tranche.Asset {
		a := tranchetest.Noop(name)
		if p.Granularity == (tranche.TimeGranularity{}) {
			p.Granularity = tranche.Day
		}
		a.Partitioning = p
		return a
	}
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	hour := tranche.PartitionOf(tranche.Hour, jan1)
	for _, tc := range []struct {
		name   string
		assets []tranche.Asset
		target tranche.Target
		want   string // a substring of the error
		first  bool   // the error holds a *PartitionError
	}{
		{name: "no target", assets: []tranche.Asset{daily("b", tranche.Partitioning{}), daily("a", tranche.Partitioning{}), tranchetest.Noop("u")},
			target: nil, want: `run without a partition or window, but assets "a", "b" are partitioned`},
		{name: "window forbidden", assets: []tranche.Asset{daily("z", tranche.Partitioning{}), daily("ok", tranche.Partitioning{AllowWindow: true}), daily("m", tranche.Partitioning{})},
			target: january(t), want: `but assets "m", "z" do not allow windows`},
		{name: "one forbids", assets: []tranche.Asset{daily("z", tranche.Partitioning{})},
			target: january(t), want: `but asset "z" does not allow windows`},
		{name: "granularity", assets: []tranche.Asset{daily("a", tranche.Partitioning{})},
			target: hour, want: `asset "a" is partitioned by day, but the run's target 2026-01-01T00:00Z is by hour`},
		{name: "location", assets: []tranche.Asset{daily("a", tranche.Partitioning{Location: ny})},
			target: day(1), want: `asset "a" is partitioned in America/New_York, but the run's target 2026-01-01 is in UTC`},
		{name: "before first, partition", assets: []tranche.Asset{daily("a", tranche.Partitioning{First: jan1.AddDate(0, 0, 9)})},
			target: day(3), want: `partition 2026-01-03 is before its first partition 2026-01-10`, first: true},
		{name: "before first, window", assets: []tranche.Asset{daily("a", tranche.Partitioning{AllowWindow: true, First: jan1.Add(36 * time.Hour)})},
			target: january(t), want: `partition 2026-01-01 is before its first partition 2026-01-02`, first: true},
		{name: "zero partition", assets: []tranche.Asset{tranchetest.Noop("u")},
			target: tranche.TimePartition{}, want: "without a granularity"},
		{name: "empty window", assets: []tranche.Asset{tranchetest.Noop("u")},
			target: tranche.TimePartitionWindow{}, want: "empty TimePartitionWindow"},
		{name: "not a partition", assets: []tranche.Asset{daily("a", tranche.Partitioning{})},
			target: tranche.TimePartition{Start: jan1.Add(time.Hour), End: jan1.Add(25 * time.Hour), Granularity: tranche.Day},
			want:   "which is not a day partition"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := new(tranchetest.Recorder)
			res, err := (&tranche.Runner{OnEvent: rec.OnEvent}).Run(ctxT, tranchetest.NewDAG(t, tc.assets...), tc.target)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Run error = %v, want one containing %q", err, tc.want)
			}
			if res != nil || len(rec.Events()) > 0 {
				t.Errorf("a refused run returned %v and emitted %d events", res, len(rec.Events()))
			}
			pe, ok := errors.AsType[*tranche.PartitionError](err)
			if ok != tc.first {
				t.Errorf("errors.As(*PartitionError) = %v, want %v", ok, tc.first)
			}
			if ok && (pe.Asset != "a") {
				t.Errorf("PartitionError = %+v", pe)
			}
		})
	}
	if _, err := new(tranche.Runner).Run(ctxT, nil, nil); err == nil {
		t.Error("Run with a nil DAG succeeded")
	}
}

func TestRunPartitionWithinFirst(t *testing.T) {
	a := tranchetest.Noop("a")
	a.Partitioning = tranche.Partitioning{Granularity: tranche.Day, First: jan1.Add(5 * time.Hour)}
	res, err := new(tranche.Runner).Run(ctxT, tranchetest.NewDAG(t, a), day(1))
	tranchetest.RequireSucceeded(t, res, err)
}

func TestHookPanicIsReported(t *testing.T) {
	var logged strings.Builder
	var seen atomic.Int64
	hook := func(_ context.Context, e tranche.Event) {
		seen.Add(1)
		if e.Kind == tranche.KindAssetStarted {
			panic("hook bug")
		}
	}
	r := tranche.Runner{OnEvent: hook, Logger: slog.New(slog.NewTextHandler(&logged, nil))}
	res, err := r.Run(ctxT, tranchetest.NewDAG(t, tranchetest.Noop("a"), tranchetest.Noop("b")), nil)
	if err != nil || res.State != tranche.StateSucceeded {
		t.Fatalf("a panicking hook changed the run: %v, %v", res.State, err)
	}
	pe, ok := errors.AsType[*tranche.PanicError](res.HookErr)
	if !ok || pe.Value != "hook bug" || len(pe.Stack) == 0 || !strings.Contains(pe.Error(), "asset.started") {
		t.Errorf("HookErr = %v, want a *PanicError for asset.started", res.HookErr)
	}
	if n := strings.Count(res.HookErr.Error(), "hook bug"); n != 2 {
		t.Errorf("HookErr reports %d panics, want 2:\n%v", n, res.HookErr)
	}
	if seen.Load() != 6 {
		t.Errorf("the hook saw %d events, want all 6", seen.Load())
	}
	if !strings.Contains(logged.String(), "event hook panicked") {
		t.Errorf("the logger did not report the panic:\n%s", logged.String())
	}
}

func TestHooksAreSerializedWithinARun(t *testing.T) {
	var inside, overlaps atomic.Int64
	var count atomic.Int64
	hook := func(context.Context, tranche.Event) {
		if inside.Add(1) > 1 {
			overlaps.Add(1)
		}
		runtime.Gosched()
		count.Add(1)
		inside.Add(-1)
	}
	var assets []tranche.Asset
	for i := range 50 {
		assets = append(assets, tranchetest.Noop(fmt.Sprintf("a%02d", i)))
	}
	res, err := (&tranche.Runner{MaxConcurrentAssets: 16, OnEvent: hook}).Run(ctxT, tranchetest.NewDAG(t, assets...), nil)
	tranchetest.RequireSucceeded(t, res, err)
	if overlaps.Load() != 0 {
		t.Errorf("the hook was entered %d times while running", overlaps.Load())
	}
	if got := count.Load(); got != 2+2*50 {
		t.Errorf("%d events delivered by the time Run returned, want %d", got, 2+2*50)
	}
}

func TestEventIDsAreDeterministic(t *testing.T) {
	dag := tranchetest.NewDAG(t,
		tranchetest.Func("a", func(_ context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
			m.Logger().Info("one")
			m.Logger().Info("two")
			return nil, nil
		}),
		tranchetest.Noop("b", "a"))
	ids := func(runID string, attempt int) []string {
		rec := new(tranchetest.Recorder)
		res, err := tranche.RunWithID(&tranche.Runner{OnEvent: rec.OnEvent}, ctxT, dag, nil, runID, attempt, "")
		tranchetest.RequireSucceeded(t, res, err)
		var out []string
		for _, e := range rec.Events() {
			out = append(out, e.ID())
		}
		return out
	}
	first, again := ids("r1", 1), ids("r1", 1)
	if diff := cmp.Diff(first, again); diff != "" {
		t.Errorf("the same run gave other ids (-first +again):\n%s", diff)
	}
	if n := len(first); n != 8 || len(slices.Compact(slices.Sorted(slices.Values(first)))) != n {
		t.Errorf("ids of a run are not %d distinct ids: %v", 8, first)
	}
	for _, other := range [][]string{ids("r2", 1), ids("r1", 2)} {
		for i := range first {
			if first[i] == other[i] {
				t.Errorf("event %d has id %s in another run or attempt too", i, first[i])
			}
		}
	}
}

func TestRunLeavesNoGoroutine(t *testing.T) {
	before := runtime.NumGoroutine()
	dag := tranchetest.NewDAG(t, sleeper("a", time.Millisecond), sleeper("b", time.Hour), tranchetest.Fail("c", errBoom), tranchetest.Noop("d", "a"))
	for range 20 {
		ctx, cancel := context.WithTimeout(ctxT, 5*time.Millisecond)
		_, _ = (&tranche.Runner{OnFailure: tranche.FailContinue, MaxConcurrentAssets: 4}).Run(ctx, dag, nil)
		cancel()
		_, _ = (&tranche.Runner{}).Run(ctxT, dag, nil)
	}
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if after := runtime.NumGoroutine(); after > before {
		t.Errorf("%d goroutines before the runs, %d after", before, after)
	}
}

func TestAssetLoggerFromGoroutines(t *testing.T) {
	rec := new(tranchetest.Recorder)
	dag := tranchetest.NewDAG(t, tranchetest.Func("a", func(_ context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Go(func() { m.Logger().Info("part", "i", i) })
		}
		wg.Wait()
		return nil, nil
	}))
	res, err := (&tranche.Runner{OnEvent: rec.OnEvent}).Run(ctxT, dag, nil)
	tranchetest.RequireSucceeded(t, res, err)
	ids := map[string]bool{}
	for _, e := range rec.Events() {
		if e.Kind == tranche.KindLog {
			ids[e.ID()] = true
		}
	}
	if len(ids) != 8 {
		t.Errorf("%d distinct log event ids, want 8", len(ids))
	}
}

func TestEventIDsOfTwoDestinations(t *testing.T) {
	a := tranchetest.Rows("a", []tranche.Row{{"x": 1}})
	a.Destinations = []tranche.Destination{new(tranche.MemoryDestination), new(tranche.MemoryDestination)}
	rec := new(tranchetest.Recorder)
	res, err := (&tranche.Runner{OnEvent: rec.OnEvent}).Run(ctxT, tranchetest.NewDAG(t, a), nil)
	tranchetest.RequireSucceeded(t, res, err)
	seen := map[string]tranche.Kind{}
	for _, e := range rec.Events() {
		if k, dup := seen[e.ID()]; dup {
			t.Errorf("%s and %s share the id %s", k, e.Kind, e.ID())
		}
		seen[e.ID()] = e.Kind
	}
	tranchetest.RequireKinds(t, rec, "a", tranche.KindAssetStarted, tranche.KindWriteStarted, tranche.KindWriteSucceeded,
		tranche.KindWriteStarted, tranche.KindWriteSucceeded, tranche.KindAssetSucceeded)
}

func TestConcurrentRunsShareAHook(t *testing.T) {
	rec := new(tranchetest.Recorder)
	dag := tranchetest.NewDAG(t, tranchetest.Noop("a"), tranchetest.Noop("b", "a"), tranchetest.Noop("c", "a"))
	r := tranche.Runner{MaxConcurrentAssets: 2, OnEvent: rec.OnEvent}
	var wg sync.WaitGroup
	ids := make([]string, 8)
	for i := range ids {
		wg.Go(func() {
			res, err := tranche.RunWithID(&r, ctxT, dag, nil, fmt.Sprintf("run-%d", i), 1, "")
			if err != nil || res.State != tranche.StateSucceeded {
				t.Errorf("run %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	byRun := map[string][]tranche.Kind{}
	for _, e := range rec.Events() {
		byRun[e.RunID] = append(byRun[e.RunID], e.Kind)
	}
	for id, kinds := range byRun {
		if len(kinds) != 8 || kinds[0] != tranche.KindRunStarted || kinds[7] != tranche.KindRunSucceeded {
			t.Errorf("run %s: events %v out of order or missing", id, kinds)
		}
	}
	if len(byRun) != len(ids) {
		t.Errorf("%d runs reported, want %d", len(byRun), len(ids))
	}
}

// assetResult returns the result of the named asset of res, or the zero
// AssetResult.
func assetResult(res *tranche.Result, name string) tranche.AssetResult {
	for _, o := range res.Assets {
		if o.Asset == name {
			return o
		}
	}
	return tranche.AssetResult{}
}
