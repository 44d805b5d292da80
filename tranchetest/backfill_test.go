package tranchetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/destination/files"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/ledgertest"
	"github.com/tranche-dev/tranche/ledger/memledger"
)

var jan1 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// days returns the window of n days from 2026-01-01, UTC.
func days(t *testing.T, n int) tranche.TimePartitionWindow {
	t.Helper()
	w, err := tranche.NewTimePartitionWindow(tranche.Day, jan1, jan1.AddDate(0, 0, n-1))
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// eventsDAG is a daily asset writing one row per day to dest, failing
// the partitions for which fail returns an error.
func eventsDAG(t *testing.T, dest tranche.Destination, fail func(key string) error) *tranche.DAG {
	t.Helper()
	a := Func("events", func(_ context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
		p, err := m.Partition()
		if err != nil {
			return nil, err
		}
		if fail != nil {
			if err := fail(p.Key()); err != nil {
				return nil, err
			}
		}
		return []tranche.Row{{"day": p.Key(), "n": 1, "at": p.Start}}, nil
	})
	a.Partitioning = tranche.Partitioning{Granularity: tranche.Day, Location: time.UTC, Column: "day"}
	a.Destinations = []tranche.Destination{dest}
	return NewDAG(t, a)
}

func TestRunBackfill(t *testing.T) {
	dest := &files.Destination{Dir: t.TempDir()}
	b := &backfill.Backfill{DAG: eventsDAG(t, dest, nil), Window: days(t, 3)}
	report, err := RunBackfill(t.Context(), nil, b)
	if err != nil {
		t.Fatal(err)
	}
	if report.Succeeded != 3 || report.Total != 3 || report.Worker != Worker {
		t.Errorf("report %v; want 3 of 3 succeeded by %s", report, Worker)
	}
	if _, ok := b.Ledger.(*memledger.Ledger); !ok {
		t.Fatalf("RunBackfill left the Ledger %T; want a *memledger.Ledger", b.Ledger)
	}
	// The nil clock stands at the window's end: every attempt is stamped
	// with that instant, on every run.
	dag := backfill.DAGIdentity(b.DAG, tranche.Day, time.UTC)
	for p := range b.Window.All() {
		h, err := b.Ledger.History(t.Context(), dag, p.Start)
		if err != nil || len(h) != 1 {
			t.Fatalf("history of %s: %v, %v; want one attempt", p.Key(), h, err)
		}
		if a := h[0]; !a.Started.Equal(b.Window.End()) || !a.Finished.Equal(b.Window.End()) || a.Worker != Worker {
			t.Errorf("%s: attempt started %v, finished %v by %s; want both at %v by %s", p.Key(), a.Started, a.Finished, a.Worker, b.Window.End(), Worker)
		}
	}
	RequireSucceededOnce(t, b)
	check(t, "succeeded once", false, "", func(t testingT) { requireSucceededOnce(context.Background(), t, b) })

	// A ledger, clock and worker the backfill has are its own.
	clock := ledgertest.NewClock(jan1.AddDate(1, 0, 0))
	lg := memledger.New(clock.Now)
	own := &backfill.Backfill{DAG: b.DAG, Window: b.Window, Ledger: lg, Worker: "mine"}
	if _, err := RunBackfill(t.Context(), ledgertest.NewClock(jan1), own); err != nil {
		t.Fatal(err)
	}
	if own.Ledger != lg || own.Worker != "mine" {
		t.Errorf("RunBackfill replaced the backfill's ledger or worker")
	}
	h, err := lg.History(t.Context(), dag, jan1)
	if err != nil || len(h) != 1 || !h[0].Started.Equal(clock.Now()) || h[0].Worker != "mine" {
		t.Errorf("history %v, %v; want one attempt by mine at the ledger's clock, %v", h, err, clock.Now())
	}
}

// TestRunBackfillLeaseOnTheClock shows what the clock is for: a partition
// another worker holds is left to it until the test moves the clock past
// its lease, and then taken over, without a sleep.
func TestRunBackfillLeaseOnTheClock(t *testing.T) {
	clock := ledgertest.NewClock(jan1.AddDate(0, 1, 0))
	lg := memledger.New(clock.Now)
	b := &backfill.Backfill{DAG: eventsDAG(t, new(tranche.MemoryDestination), nil), Window: days(t, 3), Ledger: lg}
	id, err := b.ID()
	if err != nil {
		t.Fatal(err)
	}
	second := tranche.PartitionOf(tranche.Day, jan1.AddDate(0, 0, 1))
	if _, err := lg.Claim(t.Context(), ledger.ClaimRequest{
		DAG: backfill.DAGIdentity(b.DAG, tranche.Day, time.UTC), Backfill: id, Worker: "stuck", RunID: "run",
		Partitions: []tranche.TimePartition{second}, Lease: time.Minute, Policy: ledger.RerunFailed,
	}); err != nil {
		t.Fatal(err)
	}
	report, err := RunBackfill(t.Context(), clock, b)
	if err != nil || report.Succeeded != 2 || report.Held != 1 {
		t.Fatalf("first run: %v, %v; want 2 succeeded and 1 held elsewhere", report, err)
	}
	check(t, "held elsewhere", true, "1 of 3 partitions did not succeed exactly once\n\t1 not succeeded:\n\t\t2026-01-02: attempt 1 by stuck running",
		func(t testingT) { requireSucceededOnce(context.Background(), t, b) })

	clock.Advance(time.Minute)
	report, err = RunBackfill(t.Context(), clock, b)
	if err != nil || report.Succeeded != 1 || report.Skipped != 2 {
		t.Fatalf("after the lease expired: %v, %v; want 1 succeeded and 2 skipped", report, err)
	}
	RequireSucceededOnce(t, b)
}

func TestCheckSucceededOnce(t *testing.T) {
	ctx := t.Context()
	var failures atomic.Int32
	failOnce := func(key string) error {
		if key == "2026-01-02" && failures.Add(1) == 1 {
			return errors.New("disk full")
		}
		return nil
	}
	b := &backfill.Backfill{DAG: eventsDAG(t, new(tranche.MemoryDestination), failOnce), Window: days(t, 3)}
	report, err := RunBackfill(ctx, nil, b)
	// Newest first, the failure stops the backfill: 2026-01-01 never runs.
	if err == nil || report.Failed != 1 || report.NotRun != 1 {
		t.Fatalf("first run: %v, %v; want one partition failed and one not run", report, err)
	}
	err = CheckSucceededOnce(ctx, b)
	want := "tranchetest: backfill of day 2026-01-01..2026-01-03 UTC: 2 of 3 partitions did not succeed exactly once\n" +
		"\t2 not succeeded:\n\t\t2026-01-01: never attempted\n\t\t2026-01-02: attempt 1 by tranchetest failed: "
	if err == nil || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("after a failure: %v\nwant it to start %q and name the error", err, want)
	}

	// Failed, then succeeded: once.
	if _, err := RunBackfill(ctx, nil, b); err != nil {
		t.Fatal(err)
	}
	if err := CheckSucceededOnce(ctx, b); err != nil {
		t.Errorf("after the resume: %v", err)
	}

	// Rerun all: every partition succeeded twice.
	b.Rerun = ledger.RerunAll
	if _, err := RunBackfill(ctx, nil, b); err != nil {
		t.Fatal(err)
	}
	err = CheckSucceededOnce(ctx, b)
	if err == nil || !strings.Contains(err.Error(), "3 of 3 partitions did not succeed exactly once\n\t3 succeeded more than once:\n\t\t2026-01-01: attempt 1 by tranchetest, attempt 2 by tranchetest") {
		t.Errorf("after rerunning all: %v", err)
	}
	check(t, "succeeded twice", true, "succeeded more than once", func(t testingT) { requireSucceededOnce(ctx, t, b) })

	// Succeeded, then rerun and failed: the latest attempt is what a
	// reader of the ledger sees, so it is not a success.
	var calls atomic.Int32
	failSecond := func(string) error {
		if calls.Add(1) == 2 {
			return errors.New("bad rerun")
		}
		return nil
	}
	rerun := &backfill.Backfill{DAG: eventsDAG(t, new(tranche.MemoryDestination), failSecond), Window: days(t, 1), Rerun: ledger.RerunAll}
	if _, err := RunBackfill(ctx, nil, rerun); err != nil {
		t.Fatal(err)
	}
	if _, err := RunBackfill(ctx, nil, rerun); err == nil {
		t.Fatal("the failing rerun succeeded")
	}
	if err := CheckSucceededOnce(ctx, rerun); err == nil || !strings.Contains(err.Error(), "2026-01-01: succeeded, then attempt 2 by tranchetest failed: ") {
		t.Errorf("succeeded, then failed: %v", err)
	}

	// A window never run: each partition named up to ten, then counted.
	fresh := &backfill.Backfill{DAG: b.DAG, Window: days(t, 12), Ledger: memledger.New(nil)}
	err = CheckSucceededOnce(ctx, fresh)
	if err == nil || !strings.Contains(err.Error(), "12 not succeeded:\n\t\t2026-01-01: never attempted") ||
		!strings.Contains(err.Error(), "2026-01-10: never attempted\n\t\t... and 2 more") || strings.Contains(err.Error(), "2026-01-11") {
		t.Errorf("a window never run: %v", err)
	}

	if err := CheckSucceededOnce(ctx, &backfill.Backfill{Window: days(t, 1)}); err == nil || !strings.Contains(err.Error(), "no DAG or no Ledger") {
		t.Errorf("a backfill without a DAG: %v", err)
	}
}

func TestFileRows(t *testing.T) {
	dest := &files.Destination{Dir: t.TempDir()}
	b := &backfill.Backfill{DAG: eventsDAG(t, dest, nil), Window: days(t, 2)}
	if _, err := RunBackfill(t.Context(), nil, b); err != nil {
		t.Fatal(err)
	}
	rows, err := FileRows(dest, "events", "day", "2026-01-02")
	if err != nil {
		t.Fatal(err)
	}
	want := []tranche.Row{{"day": "2026-01-02", "n": json.Number("1"), "at": "2026-01-02T00:00:00Z"}}
	if fmt.Sprint(rows) != fmt.Sprint(want) {
		t.Errorf("FileRows = %v; want %v", rows, want)
	}
	keys, err := FileKeys(dest, "events", "day")
	if err != nil || !slices.Equal(keys, []string{"2026-01-01", "2026-01-02"}) {
		t.Errorf("FileKeys = %q, %v", keys, err)
	}
	if keys, err := FileKeys(dest, "other", "day"); err != nil || keys != nil {
		t.Errorf("FileKeys of an asset never written = %q, %v; want none", keys, err)
	}
	if _, err := FileRows(dest, "events", "day", "2026-01-03"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("FileRows of a partition never written = %v; want fs.ErrNotExist", err)
	}

	RequireFileRows(t, dest, "events", "day", "2026-01-01", []tranche.Row{{"day": "2026-01-01", "n": 1, "at": jan1}})
	check(t, "equal as JSON", false, "", func(t testingT) {
		requireFileRows(t, dest, "events", "day", "2026-01-01", []tranche.Row{{"day": "2026-01-01", "n": 1.0, "at": "2026-01-01T00:00:00Z"}})
	})
	check(t, "rows differ", true, `asset "events", partition "2026-01-01" in files:`+dest.Dir+": rows differ", func(t testingT) {
		requireFileRows(t, dest, "events", "day", "2026-01-01", []tranche.Row{{"day": "2026-01-01", "n": 2, "at": jan1}})
	})
	check(t, "never written", true, `partition "2026-01-03": never written to files:`+dest.Dir+`; written partitions: ["2026-01-01" "2026-01-02"]`, func(t testingT) {
		requireFileRows(t, dest, "events", "day", "2026-01-03", nil)
	})
	check(t, "want not JSON", true, "want row 0 does not encode as JSON", func(t testingT) {
		requireFileRows(t, dest, "events", "day", "2026-01-01", []tranche.Row{{"f": func() {}}})
	})

	// Hourly keys are escaped in folder names, and read back as keys; an
	// empty partition is an empty file; an unpartitioned asset has one.
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	hour := tranche.PartitionOf(tranche.Hour, time.Date(2026, 11, 1, 1, 30, 0, 0, ny).Add(time.Hour))
	if err := dest.Write(t.Context(), []tranche.Batch{
		{Asset: "hourly", Column: "hour", Partition: hour},
		{Asset: "totals", Rows: []tranche.Row{{"n": 2}, {"n": 3}}},
	}); err != nil {
		t.Fatal(err)
	}
	if keys, err := FileKeys(dest, "hourly", "hour"); err != nil || !slices.Equal(keys, []string{"2026-11-01T01:00-05:00"}) {
		t.Errorf("FileKeys of an hourly asset = %q, %v; want the repeated 01:00", keys, err)
	}
	RequireFileRows(t, dest, "hourly", "hour", "2026-11-01T01:00-05:00", nil)
	RequireFileRows(t, dest, "totals", "", "", []tranche.Row{{"n": 2}, {"n": 3}})

	if err := os.WriteFile(dest.Path("events", "day", "2026-01-01"), []byte("{\"n\":1}\nnot json\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := FileRows(dest, "events", "day", "2026-01-01"); err == nil || !strings.Contains(err.Error(), filepath.Join("day=2026-01-01", "data.jsonl")+", line 2") {
		t.Errorf("FileRows of a corrupt file = %v; want the file and line", err)
	}
	check(t, "corrupt", true, "line 2", func(t testingT) { requireFileRows(t, dest, "events", "day", "2026-01-01", nil) })
}
