package trancheotel_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/memledger"
	"github.com/tranche-dev/tranche/trancheotel"
	"github.com/tranche-dev/tranche/tranchetest"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// pipeline is a DAG of four daily assets: raw (1.5 s, one row per
// partition into a memory destination), stats after it (retried once
// after 30 s on a partition run, failing on a window), report after
// stats, and dim on its own.
func pipeline(t *testing.T, dest *tranche.MemoryDestination) *tranche.DAG {
	raw := tranchetest.Func("raw", func(_ context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
		time.Sleep(1500 * time.Millisecond)
		var rows []tranche.Row
		for p := range m.Window().OldestFirst() {
			rows = append(rows, tranche.Row{"day": p.Key(), "views": 10})
		}
		return rows, nil
	})
	raw.Partitioning = tranche.Partitioning{Granularity: tranche.Day, Column: "day", AllowWindow: true}
	raw.Destinations = []tranche.Destination{dest}
	var tries int
	stats := tranchetest.Func("stats", func(_ context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
		if m.Window().Len() > 1 {
			return nil, errors.New("no window support yet")
		}
		if tries++; tries == 1 {
			return nil, tranche.Retryable(errors.New("warehouse busy"))
		}
		return nil, nil
	}, "raw")
	stats.Partitioning = tranche.Partitioning{Granularity: tranche.Day, AllowWindow: true}
	stats.Retry = tranche.Retry{Attempts: 2, Backoff: 30 * time.Second}
	report := tranchetest.Noop("report", "stats")
	report.Partitioning = tranche.Partitioning{Granularity: tranche.Day, AllowWindow: true}
	return tranchetest.NewDAG(t, raw, stats, report, tranchetest.Noop("dim"))
}

// A partition run: a span for the run, one for each asset attempt under
// it, one for the write under its attempt, on the runner's clock; the
// retried attempt is an error with its error recorded.
func TestRunSpans(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tel := newTelemetry()
		hook, runs := tel.hook(trancheotel.WithDAG("daily"))
		r := tranche.Runner{MaxConcurrentAssets: 1, OnEvent: hook}
		t0 := time.Now()
		res, err := r.Run(t.Context(), pipeline(t, new(tranche.MemoryDestination)), day(2))
		if err != nil {
			t.Fatal(err)
		}
		if n := runs(); n != 0 {
			t.Errorf("the hook holds %d runs after the run ended", n)
		}
		want := `run daily succeeded
  asset dim succeeded
  asset raw succeeded
    write memory succeeded
  asset stats retrying ERROR
  asset stats succeeded
  asset report succeeded
`
		if diff := cmp.Diff(want, tree(t, tel)); diff != "" {
			t.Errorf("span tree (-want +got):\n%s", diff)
		}

		run := named(tel, "run daily")[0]
		wantRun := map[string]string{
			"tranche.run.id": res.RunID, "tranche.run.attempt": "1", "tranche.dag": "daily",
			"tranche.partition.key": "2026-01-02", "tranche.status": "succeeded", "tranche.rows": "1",
		}
		if diff := cmp.Diff(wantRun, attrs(run)); diff != "" {
			t.Errorf("run attributes (-want +got):\n%s", diff)
		}
		if !run.StartTime().Equal(t0) || run.EndTime().Sub(t0) != 31500*time.Millisecond {
			t.Errorf("run span from %v to %v; want the run's start, %v, and 31.5 s later", run.StartTime(), run.EndTime(), t0)
		}
		if run.Parent().IsValid() {
			t.Errorf("the run's span has a parent %v, with none in the context", run.Parent())
		}
		if run.SpanKind() != trace.SpanKindInternal || run.InstrumentationScope().Name != trancheotel.ScopeName {
			t.Errorf("run span of kind %v, scope %q", run.SpanKind(), run.InstrumentationScope().Name)
		}

		raw := named(tel, "asset raw")[0]
		if diff := cmp.Diff(map[string]string{"tranche.asset": "raw", "tranche.asset.attempt": "1", "tranche.status": "succeeded", "tranche.rows": "1"}, attrs(raw)); diff != "" {
			t.Errorf("raw's attributes (-want +got):\n%s", diff)
		}
		if d := raw.EndTime().Sub(raw.StartTime()); d != 1500*time.Millisecond {
			t.Errorf("raw's span lasted %v, want 1.5s", d)
		}
		write := named(tel, "write memory")[0]
		if diff := cmp.Diff(map[string]string{"tranche.destination": "memory", "tranche.rows": "1", "tranche.status": "succeeded"}, attrs(write)); diff != "" {
			t.Errorf("write attributes (-want +got):\n%s", diff)
		}

		stats := named(tel, "asset stats")
		first, second := stats[0], stats[1]
		if first.Status() != (sdktrace.Status{Code: codes.Error, Description: "warehouse busy"}) {
			t.Errorf("the retried attempt's status is %+v", first.Status())
		}
		if diff := cmp.Diff([]string{"exception exception.type=*tranche.retryableError exception.message=warehouse busy"}, eventsOf(first)); diff != "" {
			t.Errorf("the retried attempt's events (-want +got):\n%s", diff)
		}
		if got := attrs(first); got["tranche.asset.attempt"] != "1" || got["tranche.retry.wait"] != "30s" {
			t.Errorf("the retried attempt's attributes: %v", got)
		}
		if got := attrs(second); got["tranche.asset.attempt"] != "2" || second.Status().Code != codes.Unset || len(second.Events()) != 0 {
			t.Errorf("the second attempt: %v, status %+v, events %v", got, second.Status(), eventsOf(second))
		}
		if !second.StartTime().Equal(first.EndTime().Add(30 * time.Second)) {
			t.Errorf("the second attempt started at %v, want 30 s after the first ended at %v", second.StartTime(), first.EndTime())
		}

		got := tel.collect(t)
		wantMetrics := map[string]map[string]point{
			trancheotel.MetricRunDuration: {"tranche.dag=daily,tranche.status=succeeded": {Value: 31.5, Count: 1}},
			trancheotel.MetricAssetDuration: {
				"tranche.asset=dim,tranche.dag=daily,tranche.status=succeeded":    {Value: 0, Count: 1},
				"tranche.asset=raw,tranche.dag=daily,tranche.status=succeeded":    {Value: 1.5, Count: 1},
				"tranche.asset=stats,tranche.dag=daily,tranche.status=succeeded":  {Value: 30, Count: 1},
				"tranche.asset=report,tranche.dag=daily,tranche.status=succeeded": {Value: 0, Count: 1},
			},
			trancheotel.MetricWriteDuration: {"tranche.asset=raw,tranche.dag=daily,tranche.destination=memory,tranche.status=succeeded": {Value: 0, Count: 1}},
			trancheotel.MetricRowsWritten:   {"tranche.asset=raw,tranche.dag=daily,tranche.destination=memory": {Value: 1}},
		}
		if diff := cmp.Diff(wantMetrics, got); diff != "" {
			t.Errorf("metrics (-want +got):\n%s", diff)
		}
		// A measurement's exemplar points to the span of its step.
		wantExemplars := map[string][]trace.SpanID{"tranche.dag=daily,tranche.status=succeeded": {run.SpanContext().SpanID()}}
		if diff := cmp.Diff(wantExemplars, tel.exemplarSpans(t, trancheotel.MetricRunDuration)); diff != "" {
			t.Errorf("run duration exemplars (-want +got):\n%s", diff)
		}
		if got := tel.exemplarSpans(t, trancheotel.MetricAssetDuration)["tranche.asset=raw,tranche.dag=daily,tranche.status=succeeded"]; !slices.Equal(got, []trace.SpanID{raw.SpanContext().SpanID()}) {
			t.Errorf("raw's duration exemplars %v, want raw's span %v", got, raw.SpanContext().SpanID())
		}
	})
}

// A window run that fails: the run and the failed attempt are errors;
// the asset canceled for its dependency is an event of the run's span.
func TestFailedRunSpans(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tel := newTelemetry()
		hook, runs := tel.hook()
		r := tranche.Runner{MaxConcurrentAssets: 1, OnEvent: hook}
		_, runErr := r.Run(t.Context(), pipeline(t, new(tranche.MemoryDestination)), days(t, 1, 2))
		if runErr == nil {
			t.Fatal("the window run succeeded")
		}
		if n := runs(); n != 0 {
			t.Errorf("the hook holds %d runs after the run ended", n)
		}
		want := `run failed ERROR
  asset dim succeeded
  asset raw succeeded
    write memory succeeded
  asset stats failed ERROR
`
		if diff := cmp.Diff(want, tree(t, tel)); diff != "" {
			t.Errorf("span tree (-want +got):\n%s", diff)
		}
		run := named(tel, "run")[0]
		if got := attrs(run); got["tranche.window"] != "day 2026-01-01..2026-01-02 UTC" || got["tranche.partition.key"] != "" || got["tranche.dag"] != "" || got["tranche.rows"] != "2" {
			t.Errorf("run attributes: %v", got)
		}
		if run.Status() != (sdktrace.Status{Code: codes.Error, Description: runErr.Error()}) {
			t.Errorf("run status %+v, want the run's error %q", run.Status(), runErr)
		}
		wantEvents := []string{
			`asset.canceled tranche.asset=report tranche.error=tranche: asset "report" canceled: dependency "stats" failed`,
			"exception exception.type=*tranche.AssetError exception.message=" + runErr.Error(),
		}
		if diff := cmp.Diff(wantEvents, eventsOf(run)); diff != "" {
			t.Errorf("run events (-want +got):\n%s", diff)
		}
		stats := named(tel, "asset stats")[0]
		if stats.Status().Code != codes.Error || !strings.Contains(stats.Status().Description, "no window support yet") || len(stats.Events()) != 1 {
			t.Errorf("stats: status %+v, events %v", stats.Status(), eventsOf(stats))
		}
		got := tel.collect(t)
		if p := got[trancheotel.MetricRunDuration]["tranche.status=failed"]; p != (point{Value: 1.5, Count: 1}) {
			t.Errorf("run duration of the failed run: %+v (all: %v)", p, got[trancheotel.MetricRunDuration])
		}
		if p := got[trancheotel.MetricAssetDuration]["tranche.asset=stats,tranche.status=failed"]; p.Count != 1 {
			t.Errorf("stats' failure was not measured: %v", got[trancheotel.MetricAssetDuration])
		}
		if _, ok := got[trancheotel.MetricAssetDuration]["tranche.asset=report,tranche.status=canceled"]; ok {
			t.Errorf("report, which never ran, was measured: %v", got[trancheotel.MetricAssetDuration])
		}
		if p := got[trancheotel.MetricRowsWritten]["tranche.asset=raw,tranche.destination=memory"]; p.Value != 2 {
			t.Errorf("rows written: %v", got[trancheotel.MetricRowsWritten])
		}
	})
}

// A canceled run: the attempt that was running ends as an error when the
// run is canceled, the asset waiting to retry and the one waiting for its
// dependency are events of the run, and every span ends.
func TestCanceledRunSpans(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tel := newTelemetry()
		hook, runs := tel.hook()
		slow := tranchetest.Func("slow", func(ctx context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
			if n := runs(); n != 1 {
				t.Errorf("the hook holds %d runs during the run, want 1", n)
			}
			<-ctx.Done()
			return nil, context.Cause(ctx)
		})
		flaky := tranchetest.Fail("flaky", tranche.Retryable(errors.New("try later")))
		flaky.Retry = tranche.Retry{Attempts: 3, Backoff: time.Hour}
		dag := tranchetest.NewDAG(t, slow, flaky, tranchetest.Noop("after", "slow"))
		ctx, cancel := context.WithCancelCause(t.Context())
		time.AfterFunc(10*time.Second, func() { cancel(errors.New("operator stop")) })
		r := tranche.Runner{MaxConcurrentAssets: 2, OnEvent: hook}
		if _, err := r.Run(ctx, dag, nil); err == nil || err.Error() != "operator stop" {
			t.Fatalf("Run: %v, want the cause", err)
		}
		if n := runs(); n != 0 {
			t.Errorf("the hook holds %d runs after the run ended", n)
		}
		want := `run canceled ERROR
  asset flaky retrying ERROR
  asset slow canceled ERROR
`
		if diff := cmp.Diff(want, tree(t, tel)); diff != "" {
			t.Errorf("span tree (-want +got):\n%s", diff)
		}
		run := named(tel, "run")[0]
		var events []string
		for _, e := range eventsOf(run) {
			events = append(events, strings.SplitN(e, " tranche.error=", 2)[0])
		}
		want2 := []string{"asset.canceled tranche.asset=after", "asset.canceled tranche.asset=flaky", "exception exception.type=*errors.errorString exception.message=operator stop"}
		if diff := cmp.Diff(want2, events, cmpSorted); diff != "" {
			t.Errorf("run events (-want +got):\n%s", diff)
		}
		if s := named(tel, "asset slow")[0]; s.EndTime().Sub(s.StartTime()) != 10*time.Second {
			t.Errorf("slow's span lasted %v, want the 10 s until the cancel", s.EndTime().Sub(s.StartTime()))
		}
		if p := tel.collect(t)[trancheotel.MetricRunDuration]["tranche.status=canceled"]; p != (point{Value: 10, Count: 1}) {
			t.Errorf("canceled run measured %+v", p)
		}
	})
}

var cmpSorted = cmp.Transformer("sorted", func(in []string) []string { return slices.Sorted(slices.Values(in)) })

// A backfill on the in-memory ledger, with concurrency: a span per
// partition run under the caller's span, and the partitions counted by
// how they ended, held by another worker and skipped included.
func TestBackfill(t *testing.T) {
	ctx := t.Context()
	tel := newTelemetry()
	hook, runs := tel.hook(trancheotel.WithDAG("daily"))
	dest := new(tranche.MemoryDestination)
	var mu sync.Mutex
	failing := map[string]bool{"2026-01-03": true}
	events := tranche.Asset{
		Name:         "events",
		Partitioning: tranche.Partitioning{Granularity: tranche.Day, Column: "day"},
		Destinations: []tranche.Destination{dest},
		Materialize: func(_ context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
			p, err := m.Partition()
			return []tranche.Row{{"day": p.Key(), "n": 1}, {"day": p.Key(), "n": 2}}, err
		},
	}
	rollup := tranchetest.Func("rollup", func(_ context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
		p, err := m.Partition()
		mu.Lock()
		defer mu.Unlock()
		if failing[p.Key()] {
			return nil, errors.New("rollup broke on " + p.Key())
		}
		return nil, err
	}, "events")
	rollup.Partitioning = tranche.Partitioning{Granularity: tranche.Day}
	dag := tranchetest.NewDAG(t, events, rollup)
	l := memledger.New(nil)
	b := &backfill.Backfill{DAG: dag, Window: days(t, 1, 5), Ledger: l, Concurrency: 2, OnFailure: tranche.FailContinue,
		Runner: &tranche.Runner{OnEvent: hook}, OnEvent: hook, Worker: "w1"}
	id, err := b.ID()
	if err != nil {
		t.Fatal(err)
	}
	// 2026-01-01 already succeeded; 2026-01-02 is running elsewhere.
	dagID := backfill.DAGIdentity(dag, tranche.Day, time.UTC)
	for _, c := range []struct {
		p      tranche.TimePartition
		finish bool
	}{{day(1), true}, {day(2), false}} {
		lease, err := l.Claim(ctx, ledger.ClaimRequest{DAG: dagID, Worker: "other", RunID: backfill.RunID(dagID, c.p.Start, c.p.End),
			Partitions: []tranche.TimePartition{c.p}, Lease: time.Hour, Policy: ledger.RerunAll})
		if err != nil {
			t.Fatal(err)
		}
		if c.finish {
			if err := l.Finish(ctx, lease, []ledger.Outcome{{State: ledger.StateSucceeded}}); err != nil {
				t.Fatal(err)
			}
		}
	}

	tracer := tel.tp.Tracer("test")
	bctx, parent := tracer.Start(ctx, "backfill")
	if _, err := b.Run(bctx); err == nil || !strings.Contains(err.Error(), "rollup broke on 2026-01-03") {
		t.Fatalf("backfill: %v", err)
	}
	parent.End()
	if n := runs(); n != 0 {
		t.Errorf("the hook holds %d runs after the backfill", n)
	}
	want := `backfill 
  run daily failed ERROR
    asset events succeeded
      write memory succeeded
    asset rollup failed ERROR
  run daily succeeded
    asset events succeeded
      write memory succeeded
    asset rollup succeeded
  run daily succeeded
    asset events succeeded
      write memory succeeded
    asset rollup succeeded
`
	if diff := cmp.Diff(want, sortedRuns(tree(t, tel))); diff != "" {
		t.Errorf("span tree (-want +got):\n%s", diff)
	}
	keys := map[string]string{}
	for _, s := range named(tel, "run daily") {
		a := attrs(s)
		if a["tranche.backfill.id"] != id || a["tranche.run.attempt"] != "1" || a["tranche.dag"] != "daily" || a["tranche.trigger"] != "backfill" {
			t.Errorf("run %s: attributes %v; want backfill %s, attempt 1", a["tranche.partition.key"], a, id)
		}
		keys[a["tranche.partition.key"]] = a["tranche.status"]
		p, _ := tranche.ParsePartitionKey(tranche.Day, a["tranche.partition.key"], time.UTC)
		if a["tranche.run.id"] != backfill.RunID(dagID, p.Start, p.End) {
			t.Errorf("run %s has run id %s", a["tranche.partition.key"], a["tranche.run.id"])
		}
		if s.Parent().SpanID() != parent.SpanContext().SpanID() {
			t.Errorf("run %s is not a child of the span around the backfill", a["tranche.partition.key"])
		}
	}
	if diff := cmp.Diff(map[string]string{"2026-01-03": "failed", "2026-01-04": "succeeded", "2026-01-05": "succeeded"}, keys); diff != "" {
		t.Errorf("runs by partition (-want +got):\n%s", diff)
	}
	got := tel.collect(t)
	wantPartitions := map[string]point{
		"tranche.dag=daily,tranche.partition.state=succeeded": {Value: 2},
		"tranche.dag=daily,tranche.partition.state=failed":    {Value: 1},
		"tranche.dag=daily,tranche.partition.state=held":      {Value: 1},
		"tranche.dag=daily,tranche.partition.state=skipped":   {Value: 1},
	}
	if diff := cmp.Diff(wantPartitions, got[trancheotel.MetricPartitions]); diff != "" {
		t.Errorf("partitions (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]point{"tranche.asset=events,tranche.dag=daily,tranche.destination=memory": {Value: 6}}, got[trancheotel.MetricRowsWritten]); diff != "" {
		t.Errorf("rows written (-want +got):\n%s", diff)
	}
	counts := map[string]uint64{}
	for _, name := range []string{trancheotel.MetricRunDuration, trancheotel.MetricAssetDuration, trancheotel.MetricWriteDuration} {
		for attrs, p := range got[name] {
			counts[name+" "+attrs] = p.Count
		}
	}
	wantCounts := map[string]uint64{
		"tranche.run.duration tranche.dag=daily,tranche.status=succeeded,tranche.trigger=backfill":                          2,
		"tranche.run.duration tranche.dag=daily,tranche.status=failed,tranche.trigger=backfill":                             1,
		"tranche.asset.duration tranche.asset=events,tranche.dag=daily,tranche.status=succeeded":                            3,
		"tranche.asset.duration tranche.asset=rollup,tranche.dag=daily,tranche.status=succeeded":                            2,
		"tranche.asset.duration tranche.asset=rollup,tranche.dag=daily,tranche.status=failed":                               1,
		"tranche.write.duration tranche.asset=events,tranche.dag=daily,tranche.destination=memory,tranche.status=succeeded": 3,
	}
	if diff := cmp.Diff(wantCounts, counts); diff != "" {
		t.Errorf("measurements (-want +got):\n%s", diff)
	}

	// Resumed: the failed partition runs again, as the ledger's second
	// attempt, and succeeds; the others are skipped or still held.
	tel.spans.Reset()
	mu.Lock()
	failing = nil
	mu.Unlock()
	// The partition another worker holds keeps the run from being done.
	if _, err := b.Run(ctx); err != nil {
		t.Fatal(err)
	}
	rerun := named(tel, "run daily")
	if len(rerun) != 1 || attrs(rerun[0])["tranche.run.attempt"] != "2" || attrs(rerun[0])["tranche.partition.key"] != "2026-01-03" || rerun[0].Parent().IsValid() {
		t.Errorf("the resumed backfill ran %d runs: %v", len(rerun), tree(t, tel))
	}
	got = tel.collect(t)
	wantPartitions = map[string]point{
		"tranche.dag=daily,tranche.partition.state=succeeded": {Value: 3},
		"tranche.dag=daily,tranche.partition.state=failed":    {Value: 1},
		"tranche.dag=daily,tranche.partition.state=held":      {Value: 2},
		"tranche.dag=daily,tranche.partition.state=skipped":   {Value: 4},
	}
	if diff := cmp.Diff(wantPartitions, got[trancheotel.MetricPartitions]); diff != "" {
		t.Errorf("partitions after the resume (-want +got):\n%s", diff)
	}
}

// sortedRuns sorts the run subtrees of a backfill's tree by their text:
// the runs are concurrent, so they start in any order.
func sortedRuns(s string) string {
	var head, runs []string
	for _, l := range strings.SplitAfter(s, "\n") {
		switch {
		case strings.HasPrefix(l, "  run "):
			runs = append(runs, l)
		case len(runs) > 0 && strings.HasPrefix(l, "    "):
			runs[len(runs)-1] += l
		default:
			head = append(head, l)
		}
	}
	slices.Sort(runs)
	return strings.Join(head, "") + strings.Join(runs, "")
}

// Events of kinds the hook does not know become events of their run's
// span, and are ignored without a traced run; events of runs the hook
// never saw start take no state.
func TestUnknownKinds(t *testing.T) {
	tel := newTelemetry()
	hook, runs := tel.hook()
	ctx := t.Context()
	t0 := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	ev := func(kind tranche.Kind, run string, attempt int, at time.Duration, err error) {
		hook(ctx, tranche.Event{Kind: kind, RunID: run, Attempt: attempt, Time: t0.Add(at), Err: err, Asset: map[bool]string{true: "a"}[strings.HasPrefix(string(kind), "asset.")]})
	}
	ev("lease.lost", "nobody", 1, 0, errors.New("fenced"))                // no such run
	ev(tranche.KindAssetStarted, "nobody", 1, 0, nil)                     // no such run
	ev(tranche.KindRunSucceeded, "nobody", 1, 0, nil)                     // no such run
	ev("partition.relinquished", "", 0, 0, nil)                           // not of a run
	ev(tranche.KindRunStarted, "r", 1, 0, nil)                            //
	ev(tranche.KindAssetStarted, "r", 1, time.Second, nil)                //
	ev("lease.renewal_failed", "r", 0, 2*time.Second, errors.New("slow")) // a kind added later
	ev(tranche.KindAssetSucceeded, "r", 1, 3*time.Second, nil)            //
	ev(tranche.KindRunSucceeded, "r", 1, 4*time.Second, nil)              //
	ev("lease.renewal_failed", "r", 0, 5*time.Second, nil)                // after the run: ignored
	if n := runs(); n != 0 {
		t.Errorf("the hook holds %d runs", n)
	}
	if diff := cmp.Diff("run succeeded\n  asset a succeeded\n", tree(t, tel)); diff != "" {
		t.Errorf("span tree (-want +got):\n%s", diff)
	}
	run := named(tel, "run")[0]
	if diff := cmp.Diff([]string{"lease.renewal_failed tranche.error=slow"}, eventsOf(run)); diff != "" {
		t.Errorf("run events (-want +got):\n%s", diff)
	}
	if got := run.Events()[0].Time; !got.Equal(t0.Add(2 * time.Second)) {
		t.Errorf("the event is at %v, want the event's time", got)
	}
}

// Two attempts of one run id open at once (a worker that lost its lease
// to another in the same process, and has not noticed yet): each run's
// span ends with its own end, asset events go to the newer attempt, and
// an attempt that ends first leaves the other in place.
func TestOverlappingAttempts(t *testing.T) {
	tel := newTelemetry()
	hook, runs := tel.hook()
	ctx := t.Context()
	t0 := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	ev := func(kind tranche.Kind, attempt int, at time.Duration) {
		e := tranche.Event{Kind: kind, RunID: "r", Attempt: attempt, Time: t0.Add(at)}
		if strings.HasPrefix(string(kind), "asset.") {
			e.Asset = "a"
		}
		hook(ctx, e)
	}
	ev(tranche.KindRunStarted, 1, 0)
	ev(tranche.KindRunStarted, 2, time.Second)
	ev(tranche.KindRunStarted, 3, 2*time.Second)
	if n := runs(); n != 3 {
		t.Errorf("the hook holds %d runs, want 3", n)
	}
	ev(tranche.KindAssetStarted, 1, 3*time.Second)
	ev(tranche.KindRunFailed, 2, 4*time.Second) // the middle one
	ev(tranche.KindRunCanceled, 1, 5*time.Second)
	if n := runs(); n != 1 {
		t.Errorf("the hook holds %d runs, want 1", n)
	}
	ev(tranche.KindAssetSucceeded, 1, 6*time.Second)
	ev(tranche.KindRunSucceeded, 3, 7*time.Second)
	if n := runs(); n != 0 {
		t.Errorf("the hook holds %d runs, want none", n)
	}
	spans := named(tel, "run")
	if len(spans) != 3 {
		t.Fatalf("%d run spans", len(spans))
	}
	for i, s := range spans {
		if got, want := attrs(s)["tranche.run.attempt"], []string{"1", "2", "3"}[i]; got != want {
			t.Errorf("run span %d is attempt %s", i, got)
		}
		if got, want := s.EndTime().Sub(t0), []time.Duration{5, 4, 7}[i]*time.Second; got != want {
			t.Errorf("attempt %d ended at %v, want %v", i+1, got, want)
		}
	}
	asset := named(tel, "asset a")[0]
	if asset.Parent().SpanID() != spans[2].SpanContext().SpanID() {
		t.Errorf("the asset is not under the newest attempt")
	}
	tel.ended(t)
}

// With otel's no-op providers, or one of them, the hook is nil or does
// only the other half; a sampler that drops runs leaves no state.
func TestNoopProviders(t *testing.T) {
	if h := trancheotel.NewHook(trancheotel.WithTracerProvider(tracenoop.NewTracerProvider()),
		trancheotel.WithMeterProvider(metricnoop.NewMeterProvider())); h != nil {
		t.Error("NewHook with no-op providers is not nil")
	}
	dag := tranchetest.NewDAG(t, tranchetest.Noop("a"), tranchetest.Noop("b", "a"))

	tel := newTelemetry()
	metricsOnly := trancheotel.NewHook(trancheotel.WithTracerProvider(tracenoop.NewTracerProvider()), trancheotel.WithMeterProvider(tel.mp))
	if metricsOnly == nil {
		t.Fatal("NewHook with a meter provider is nil")
	}
	r := tranche.Runner{OnEvent: metricsOnly}
	if _, err := r.Run(t.Context(), dag, nil); err != nil {
		t.Fatal(err)
	}
	if p := tel.collect(t)[trancheotel.MetricRunDuration]["tranche.status=succeeded"]; p.Count != 1 {
		t.Errorf("run duration without a tracer: %+v", p)
	}

	tel = newTelemetry()
	tracesOnly := trancheotel.NewHook(trancheotel.WithTracerProvider(tel.tp), trancheotel.WithMeterProvider(metricnoop.NewMeterProvider()))
	r = tranche.Runner{OnEvent: tracesOnly}
	if _, err := r.Run(t.Context(), dag, nil); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff("run succeeded\n  asset a succeeded\n  asset b succeeded\n", tree(t, tel)); diff != "" {
		t.Errorf("span tree (-want +got):\n%s", diff)
	}

	tel = newTelemetry(sdktrace.WithSampler(sdktrace.NeverSample()))
	hook, runs := tel.hook()
	held := -1
	dag = tranchetest.NewDAG(t, tranchetest.Func("a", func(context.Context, *tranche.Materialization) ([]tranche.Row, error) {
		held = runs()
		return nil, nil
	}))
	r = tranche.Runner{OnEvent: hook}
	if _, err := r.Run(t.Context(), dag, nil); err != nil {
		t.Fatal(err)
	}
	if held != 0 || len(tel.spans.Ended()) != 0 {
		t.Errorf("an unsampled run: %d runs held during it, %d spans", held, len(tel.spans.Ended()))
	}
	if p := tel.collect(t)[trancheotel.MetricRunDuration]["tranche.status=succeeded"]; p.Count != 1 {
		t.Errorf("an unsampled run is still measured: %+v", p)
	}
}

// TestGlobalProviders checks, in a process of its own (the global
// providers cannot be unset), that NewHook without options is nil while
// no program has set otel's global providers, and uses them once set.
func TestGlobalProviders(t *testing.T) {
	if os.Getenv("TRANCHEOTEL_GLOBAL_CHILD") == "" {
		cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestGlobalProviders$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), "TRANCHEOTEL_GLOBAL_CHILD=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestGlobalProviders") {
			t.Fatalf("child: %v\n%s", err, out)
		}
		return
	}
	if h := trancheotel.NewHook(); h != nil {
		t.Fatal("NewHook with the global providers unset is not nil: otel's global delegate is no longer recognized")
	}
	tel := newTelemetry()
	otel.SetMeterProvider(tel.mp)
	h := trancheotel.NewHook()
	if h == nil {
		t.Fatal("NewHook with a global meter provider is nil")
	}
	otel.SetTracerProvider(tel.tp)
	h = trancheotel.NewHook()
	r := tranche.Runner{OnEvent: h}
	if _, err := r.Run(t.Context(), tranchetest.NewDAG(t, tranchetest.Noop("a")), nil); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff("run succeeded\n  asset a succeeded\n", tree(t, tel)); diff != "" {
		t.Errorf("span tree through the global provider (-want +got):\n%s", diff)
	}
	if p := tel.collect(t)[trancheotel.MetricRunDuration]["tranche.status=succeeded"]; p.Count != 1 {
		t.Errorf("run duration through the global provider: %+v", p)
	}
	otel.SetTracerProvider(tracenoop.NewTracerProvider())
	otel.SetMeterProvider(metricnoop.NewMeterProvider())
	if h := trancheotel.NewHook(); h != nil {
		t.Error("NewHook with global no-op providers is not nil")
	}
}

// Many runs at once through one hook: every span ends under its own run,
// and nothing is held after.
func TestConcurrentRuns(t *testing.T) {
	tel := newTelemetry()
	hook, runs := tel.hook()
	dest := new(tranche.MemoryDestination)
	rows := tranchetest.Rows("rows", []tranche.Row{{"n": 1}})
	rows.Destinations = []tranche.Destination{dest}
	dag := tranchetest.NewDAG(t, rows, tranchetest.Noop("b", "rows"), tranchetest.Noop("c", "rows"), tranchetest.Fail("d", errors.New("no")))
	const goroutines, each = 8, 25
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			r := tranche.Runner{OnEvent: hook, MaxConcurrentAssets: 3, OnFailure: tranche.FailContinue}
			for range each {
				if _, err := r.Run(t.Context(), dag, nil); err == nil {
					t.Error("the run did not fail")
				}
			}
		})
	}
	wg.Wait()
	if n := runs(); n != 0 {
		t.Errorf("the hook holds %d runs", n)
	}
	spans := tel.ended(t)
	byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		byID[s.SpanContext().SpanID()] = s
	}
	count := map[string]int{}
	for _, s := range spans {
		count[s.Name()]++
		if s.Name() == "run" {
			continue
		}
		p, ok := byID[s.Parent().SpanID()]
		for ok && p.Name() != "run" {
			p, ok = byID[p.Parent().SpanID()]
		}
		if !ok {
			t.Errorf("span %s has no run above it", s.Name())
		}
	}
	n := goroutines * each
	if diff := cmp.Diff(map[string]int{"run": n, "asset rows": n, "write memory": n, "asset b": n, "asset c": n, "asset d": n}, count); diff != "" {
		t.Errorf("spans by name (-want +got):\n%s", diff)
	}
	if p := tel.collect(t)[trancheotel.MetricRowsWritten]["tranche.asset=rows,tranche.destination=memory"]; p.Value != float64(n) {
		t.Errorf("rows written: %+v", p)
	}
}

// A chunked backfill counts each chunk's partitions, and its runs carry
// the chunk's window.
func TestBackfillChunks(t *testing.T) {
	tel := newTelemetry()
	hook, _ := tel.hook()
	a := tranchetest.Noop("a")
	a.Partitioning = tranche.Partitioning{Granularity: tranche.Day, AllowWindow: true}
	b := &backfill.Backfill{DAG: tranchetest.NewDAG(t, a), Window: days(t, 1, 4), Ledger: memledger.New(nil), ChunkSize: 2,
		Runner: &tranche.Runner{OnEvent: hook}, OnEvent: hook}
	if _, err := b.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	var windows []string
	for _, s := range named(tel, "run") {
		windows = append(windows, attrs(s)["tranche.window"])
		// Without WithDAG, a backfill's run names the DAG its
		// backfill's events carry.
		if got := attrs(s)["tranche.dag"]; got != "a" {
			t.Errorf("run span's tranche.dag = %q; want a", got)
		}
	}
	if diff := cmp.Diff([]string{"day 2026-01-03..2026-01-04 UTC", "day 2026-01-01..2026-01-02 UTC"}, windows); diff != "" {
		t.Errorf("run windows (-want +got):\n%s", diff)
	}
	// Without WithDAG, the partition counts name the DAG as its
	// backfill's events do (tranche.DAG.Name, here NewDAG's default).
	if diff := cmp.Diff(map[string]point{"tranche.dag=a,tranche.partition.state=succeeded": {Value: 4}}, tel.collect(t)[trancheotel.MetricPartitions]); diff != "" {
		t.Errorf("partitions (-want +got):\n%s", diff)
	}
}

// panicky is a span processor that panics when a span of a given name
// starts, as a broken exporter pipeline might.
type panicky struct {
	sdktrace.SpanProcessor
	name string
}

func (p panicky) OnStart(ctx context.Context, s sdktrace.ReadWriteSpan) {
	if s.Name() == p.name {
		panic("processor broke on " + p.name)
	}
	p.SpanProcessor.OnStart(ctx, s)
}

// A panic inside the SDK, which the runner recovers from the hook, leaves
// the run's state usable: its later events are handled (rather than
// waiting forever for a lock the panic left held) and its spans end.
func TestProcessorPanics(t *testing.T) {
	tel := newTelemetry()
	tel.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(panicky{tel.spans, "asset b"}))
	hook, runs := tel.hook()
	r := tranche.Runner{MaxConcurrentAssets: 1, OnEvent: hook}
	dag := tranchetest.NewDAG(t, tranchetest.Noop("a"), tranchetest.Noop("b", "a"), tranchetest.Noop("c", "b"))
	done := make(chan *tranche.Result, 1)
	go func() {
		res, err := r.Run(t.Context(), dag, nil)
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	var res *tranche.Result
	select {
	case res = <-done:
	case <-time.After(time.Minute):
		t.Fatal("the run did not end a minute after a span processor panicked: the hook is stuck")
	}
	if res == nil {
		return
	}
	if res.HookErr == nil || !strings.Contains(res.HookErr.Error(), "processor broke on asset b") {
		t.Errorf("HookErr %v, want the processor's panic", res.HookErr)
	}
	if n := runs(); n != 0 {
		t.Errorf("the hook holds %d runs", n)
	}
	if diff := cmp.Diff("run succeeded\n  asset a succeeded\n  asset c succeeded\n", tree(t, tel)); diff != "" {
		t.Errorf("span tree (-want +got):\n%s", diff)
	}
}
