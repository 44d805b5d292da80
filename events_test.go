package tranche_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"testing/slogtest"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/tranchetest"
)

func init() {
	// Registered here, and only if no other test file of the package has,
	// so that the package's golden tests share one -update flag.
	if flag.Lookup("update") == nil {
		flag.Bool("update", false, "rewrite the golden files under testdata")
	}
}

func updating() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

// golden compares got with testdata/name, or rewrites it under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if updating() {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s mismatch (-want +got):\n%s", path, diff)
	}
}

func TestKindNames(t *testing.T) {
	// The names are stored by users; they must never change.
	for kind, want := range map[tranche.Kind]string{
		tranche.KindRunStarted: "run.started", tranche.KindRunSucceeded: "run.succeeded",
		tranche.KindRunFailed: "run.failed", tranche.KindRunCanceled: "run.canceled",
		tranche.KindAssetStarted: "asset.started", tranche.KindAssetRetrying: "asset.retrying",
		tranche.KindAssetSucceeded: "asset.succeeded", tranche.KindAssetFailed: "asset.failed",
		tranche.KindAssetCanceled: "asset.canceled", tranche.KindAssetSkipped: "asset.skipped",
		tranche.KindWriteStarted: "write.started", tranche.KindWriteSucceeded: "write.succeeded",
		tranche.KindWriteFailed: "write.failed", tranche.KindLog: "log",
		backfill.KindStarted: "backfill.started", backfill.KindSucceeded: "backfill.succeeded",
		backfill.KindFailed: "backfill.failed", backfill.KindCanceled: "backfill.canceled",
		backfill.KindPartitionClaimed: "partition.claimed", backfill.KindPartitionStarted: "partition.started",
		backfill.KindPartitionSucceeded: "partition.succeeded", backfill.KindPartitionFailed: "partition.failed",
		backfill.KindPartitionSkipped: "partition.skipped", backfill.KindPartitionHeld: "partition.held",
	} {
		if string(kind) != want || fmt.Sprint(kind) != want {
			t.Errorf("kind %q prints as %q, want %q", string(kind), fmt.Sprint(kind), want)
		}
	}
	for status, want := range map[tranche.State]string{
		tranche.StateSucceeded: "succeeded", tranche.StateFailed: "failed",
		tranche.StateCanceled: "canceled", tranche.StateSkipped: "skipped",
	} {
		if string(status) != want || fmt.Sprint(status) != want {
			t.Errorf("Status %q, want %q", status, want)
		}
	}
	for policy, want := range map[tranche.FailurePolicy]string{tranche.FailStop: "stop", tranche.FailContinue: "continue"} {
		if string(policy) != want || fmt.Sprint(policy) != want {
			t.Errorf("FailurePolicy %q, want %q", policy, want)
		}
	}
}

// goldenRuns runs a small DAG twice, on the fake clock, with hook: a
// partition run in which "stats" is retried once, and a window run that
// fails.
func goldenRuns(t *testing.T, hook func(context.Context, tranche.Event)) {
	dest := new(tranche.MemoryDestination)
	raw := tranchetest.Func("raw", func(_ context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
		time.Sleep(1500 * time.Millisecond)
		w := m.Window()
		m.Logger().Info("loaded", "files", 2, slog.Group("source", "bucket", "b1"))
		m.Logger().Debug("detail")
		rows := []tranche.Row{}
		for p := range w.OldestFirst() {
			rows = append(rows, tranche.Row{"day": p.Key(), "views": 10})
		}
		return rows, nil
	})
	raw.Partitioning = tranche.Partitioning{Granularity: tranche.Day, Column: "day", AllowWindow: true}
	raw.Destinations = []tranche.Destination{dest}
	tries := 0
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
	dag := tranchetest.NewDAG(t, raw, stats, report, tranchetest.Noop("dim"))
	r := tranche.Runner{MaxConcurrentAssets: 1, OnEvent: hook}
	if _, err := tranche.RunWithID(&r, ctxT, dag, day(2), "run-1", 1, ""); err != nil {
		t.Fatal(err)
	}
	w, err := tranche.NewTimePartitionWindow(tranche.Day, jan1, jan1.AddDate(0, 0, 1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tranche.RunWithID(&r, ctxT, dag, w, "run-2", 3, ""); err == nil {
		t.Fatal("the window run succeeded")
	}
}

func TestSlogHookGolden(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer
		// The handler formats times in their own location, the host's for
		// the runner's clock: the golden file holds UTC, so that the test
		// passes under any TZ.
		l := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug, ReplaceAttr: utcTime}))
		goldenRuns(t, tranche.SlogHook(l))
		golden(t, "events.slog.golden", buf.Bytes())
	})
}

// utcTime is a slog ReplaceAttr that writes the record's time in UTC.
func utcTime(groups []string, a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey && len(groups) == 0 {
		return slog.Time(a.Key, a.Value.Time().UTC())
	}
	return a
}

func TestSlogHookLevels(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer
		goldenRuns(t, tranche.SlogHook(slog.New(slog.NewTextHandler(&buf, nil)))) // INFO and up
		out := buf.String()
		for _, want := range []string{"level=ERROR msg=asset.failed", "level=WARN msg=asset.retrying", "level=INFO msg=run.started", "level=INFO msg=loaded"} {
			if !strings.Contains(out, want) {
				t.Errorf("INFO output lacks %q", want)
			}
		}
		for _, absent := range []string{"write.started", "msg=detail"} {
			if strings.Contains(out, absent) {
				t.Errorf("INFO output has the DEBUG event %q", absent)
			}
		}
		tranche.SlogHook(nil)(ctxT, tranche.Event{Kind: tranche.KindRunStarted}) // a no-op
	})
}

// TestEventJSONGolden pins the JSON form of a run's events, one
// [tranche.Event.MarshalJSON] object a line, as eventlog.Writer writes
// them.
func TestEventJSONGolden(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer
		goldenRuns(t, func(_ context.Context, e tranche.Event) {
			b, err := e.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			buf.Write(append(b, '\n'))
		})
		golden(t, "events.jsonl.golden", buf.Bytes())
		for i, line := range strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n") {
			var v map[string]any
			if err := json.Unmarshal([]byte(line), &v); err != nil || v["id"] == "" || v["kind"] == "" {
				t.Errorf("line %d is not an event object: %v: %s", i, err, line)
			}
		}
	})
}

// An attribute that JSON cannot encode is encoded as its text, so that a
// log record never makes its event unwritable.
func TestEventJSONUnencodableAttr(t *testing.T) {
	e := tranche.Event{Kind: tranche.KindLog, Attrs: []slog.Attr{slog.Any("f", func() {})}}
	if _, err := e.MarshalJSON(); err != nil {
		t.Errorf("an attribute JSON cannot encode should be written as text: %v", err)
	}
}

func TestHooksFanOut(t *testing.T) {
	var got []string
	var panicLine int // the line of b's panic
	mk := func(name string, panics bool) func(context.Context, tranche.Event) {
		return func(_ context.Context, e tranche.Event) {
			got = append(got, name+":"+string(e.Kind))
			if panics {
				_, _, line, _ := runtime.Caller(0)
				panicLine = line + 2 // the line of the panic below
				panic(name)
			}
		}
	}
	h := tranche.Hooks(mk("a", false), nil, mk("b", true), mk("c", true), mk("d", false))
	func() {
		defer func() {
			v := recover()
			pe, ok := v.(*tranche.PanicError)
			if !ok || pe.Value != "b" {
				t.Fatalf("recovered %v, want a *PanicError of the first panic, b", v)
			}
			// The stack is the panicking hook's, not that of Hooks'
			// panic again.
			if at := fmt.Sprintf("events_test.go:%d", panicLine); !strings.Contains(string(pe.Stack), at) {
				t.Errorf("the panic's stack does not hold the hook's panic at %s:\n%s", at, pe.Stack)
			}
			if pe.Where != "hook 2 of Hooks" {
				t.Errorf("Where = %q, want the index of the hook", pe.Where)
			}
		}()
		h(ctxT, tranche.Event{Kind: tranche.KindLog})
	}()
	if diff := cmp.Diff([]string{"a:log", "b:log", "c:log", "d:log"}, got); diff != "" {
		t.Errorf("calls mismatch (-want +got):\n%s", diff)
	}

	// The runner reports the panic in Result.HookErr with that stack.
	runner := tranche.Runner{OnEvent: h}
	res, err := runner.Run(ctxT, tranchetest.NewDAG(t, tranchetest.Rows("a", nil)), nil)
	if err != nil || res.State != tranche.StateSucceeded {
		t.Fatalf("Run = %v, %v; want it succeeded whatever its hooks do", res, err)
	}
	pe, ok := errors.AsType[*tranche.PanicError](res.HookErr)
	if !ok || pe.Value != "b" || !strings.Contains(string(pe.Stack), fmt.Sprintf("events_test.go:%d", panicLine)) ||
		!strings.HasSuffix(pe.Where, ", hook 2 of Hooks") {
		t.Errorf("HookErr = %v (%+v); want the hook's *PanicError with its stack", res.HookErr, pe)
	}
}

func TestEventLogValue(t *testing.T) {
	e := tranche.Event{Kind: tranche.KindAssetFailed, RunID: "r", Asset: "a", Partition: day(1), Target: "2026-01-01",
		Attempt: 2, Duration: time.Second, Err: errors.New("x"), Rows: 3,
		Progress: &tranche.Progress{Done: 1, Total: 4}}
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}})).Info("m", "e", e)
	want := "level=INFO msg=m e.kind=asset.failed e.run=r e.asset=a e.target=2026-01-01 e.attempt=2 e.duration=1s e.rows=3 e.err=x " +
		"e.progress.done=1 e.progress.failed=0 e.progress.skipped=0 e.progress.held=0 e.progress.total=4 e.progress.eta=0s e.id=" + e.ID() + "\n"
	if got := buf.String(); got != want {
		t.Errorf("LogValue:\n got %s\nwant %s", got, want)
	}
	if len(e.ID()) != 32 {
		t.Errorf("ID() = %q, want 32 hex digits", e.ID())
	}
	b, err := json.Marshal(e)
	if err != nil || !strings.Contains(string(b), `"progress":{"done":1,"failed":0,"skipped":0,"held":0,"total":4,"eta_ns":0}`) {
		t.Errorf("MarshalJSON = %s, %v", b, err)
	}
}

// TestAssetLogger checks the handler behind Materialization.Logger with
// testing/slogtest: each record becomes one KindLog event.
func TestAssetLogger(t *testing.T) {
	var rec tranchetest.Recorder
	dag := tranchetest.NewDAG(t, tranchetest.Func("a", func(_ context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
		var err error
		slogtest.Run(t, func(*testing.T) slog.Handler {
			rec.Reset()
			return m.Logger().Handler()
		}, func(*testing.T) map[string]any {
			var logs []tranche.Event
			for _, e := range rec.Events() {
				if e.Kind == tranche.KindLog {
					logs = append(logs, e)
				}
			}
			if len(logs) != 1 {
				err = fmt.Errorf("%d log events, want 1", len(logs))
				return nil
			}
			e := logs[0]
			m := map[string]any{slog.LevelKey: e.Level, slog.MessageKey: e.Message}
			if !e.Time.IsZero() {
				m[slog.TimeKey] = e.Time
			}
			for k, v := range attrsToMap(e.Attrs) {
				m[k] = v
			}
			return m
		})
		return nil, err
	}))
	res, err := (&tranche.Runner{OnEvent: rec.OnEvent}).Run(ctxT, dag, nil)
	tranchetest.RequireSucceeded(t, res, err)

	// Without a hook the logger discards everything.
	dag = tranchetest.NewDAG(t, tranchetest.Func("quiet", func(ctx context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
		if m.Logger().Enabled(ctx, slog.LevelError) {
			return nil, errors.New("a logger without a hook is enabled")
		}
		return nil, nil
	}))
	res, err = new(tranche.Runner).Run(ctxT, dag, nil)
	tranchetest.RequireSucceeded(t, res, err)
}

func attrsToMap(attrs []slog.Attr) map[string]any {
	m := map[string]any{}
	for _, a := range attrs {
		if a.Value.Kind() == slog.KindGroup {
			m[a.Key] = attrsToMap(a.Value.Group())
		} else {
			m[a.Key] = a.Value.Any()
		}
	}
	return m
}

// TestEventJSONTimeInUTC: the JSON lines of workers in different zones
// hold the same text for the same instant, whatever the host's zone.
func TestEventJSONTimeInUTC(t *testing.T) {
	kathmandu := loadLocation(t, "Asia/Kathmandu")
	at := time.Date(2026, 1, 2, 5, 45, 0, 500, kathmandu)
	for _, when := range []time.Time{at, at.UTC(), at.In(loadLocation(t, "America/St_Johns"))} {
		b, err := json.Marshal(tranche.Event{Kind: tranche.KindRunStarted, Time: when, RunID: "r"})
		if err != nil {
			t.Fatal(err)
		}
		var v struct{ Time string }
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
		if want := "2026-01-02T00:00:00.0000005Z"; v.Time != want {
			t.Errorf("the time of an event at %v is written %q, want %q", when, v.Time, want)
		}
	}
}
