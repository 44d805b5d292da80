package backfill_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/ledgertest"
	"github.com/tranche-dev/tranche/ledger/memledger"
	"github.com/tranche-dev/tranche/tranchetest"
)

func init() {
	// Registered only if no other test file of the package has, so that
	// the package's golden tests share one -update flag.
	if flag.Lookup("update") == nil {
		flag.Bool("update", false, "rewrite the golden files under testdata")
	}
}

// bfUpdating reports whether the test runs with -update.
func bfUpdating() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

// bfT0 is where the manual clocks of these tests start: after every
// window they backfill, so that no plan warns of an incomplete partition.
var bfT0 = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

// bfDay returns the partition of day d of January 2026, in UTC.
func bfDay(d int) tranche.TimePartition {
	return tranche.PartitionOf(tranche.Day, time.Date(2026, 1, d, 0, 0, 0, 0, time.UTC))
}

// bfDays returns the window of days from to to of January 2026, in UTC.
func bfDays(t testing.TB, from, to int) tranche.TimePartitionWindow {
	t.Helper()
	w, err := tranche.NewTimePartitionWindow(tranche.Day, bfDay(from).Start, bfDay(to).Start)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// bfKeys returns the keys of days, as "2026-01-05".
func bfKeys(days ...int) []string {
	keys := make([]string, len(days))
	for i, d := range days {
		keys[i] = bfDay(d).Key()
	}
	return keys
}

// bfProbe is the materializer of the tests' assets: it records every
// call's target (a partition's key, or a window's text form), the most
// calls in flight at once, and calls hook, when set, before returning one
// row per partition of its target.
type bfProbe struct {
	hook func(ctx context.Context, target string) error

	mu       sync.Mutex
	calls    []string
	inflight int
	peak     int
}

func (p *bfProbe) materialize(ctx context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
	w := m.Window()
	target := w.String()
	if part, err := m.Partition(); err == nil {
		target = part.Key()
	}
	p.mu.Lock()
	p.calls = append(p.calls, target)
	p.inflight++
	p.peak = max(p.peak, p.inflight)
	hook := p.hook
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.inflight--
		p.mu.Unlock()
	}()
	if hook != nil {
		if err := hook(ctx, target); err != nil {
			return nil, err
		}
	}
	var rows []tranche.Row
	for q := range w.OldestFirst() {
		rows = append(rows, tranche.Row{"day": q.Key()})
	}
	return rows, nil
}

func (p *bfProbe) Calls() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.calls)
}

func (p *bfProbe) Peak() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.peak
}

// bfDAG returns the DAG of the tests: "raw", daily in UTC from 2020, and
// "clean", which reads it. Only raw calls the probe, so each run of a
// partition or chunk is one call. Its identity is fixed by
// TestBackfillIdentity.
func bfDAG(t testing.TB, p *bfProbe, allowWindow bool) *tranche.DAG {
	t.Helper()
	part := tranche.Partitioning{Granularity: tranche.Day, Location: time.UTC, Column: "day", AllowWindow: allowWindow,
		First: time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)}
	dag, err := tranche.NewDAG(
		tranche.Asset{Name: "raw", Partitioning: part, Materialize: p.materialize},
		tranche.Asset{Name: "clean", Deps: []string{"raw"}, Partitioning: part,
			Materialize: func(_ context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
				return m.Input("raw")
			}},
	)
	if err != nil {
		t.Fatal(err)
	}
	return dag
}

// bfFailOn returns a hook that fails the calls whose target is one of
// keys, each only the first time when once is set.
func bfFailOn(once bool, keys ...string) func(context.Context, string) error {
	var mu sync.Mutex
	failed := map[string]bool{}
	return func(_ context.Context, target string) error {
		mu.Lock()
		defer mu.Unlock()
		if !slices.Contains(keys, target) || once && failed[target] {
			return nil
		}
		failed[target] = true
		return fmt.Errorf("boom on %s", target)
	}
}

// bfCheckReport checks that a report adds up and holds the counts given.
func bfCheckReport(t *testing.T, r *backfill.Report, want backfill.Report) {
	t.Helper()
	if r == nil {
		t.Fatal("no report")
	}
	if sum := r.Succeeded + r.Failed + r.Skipped + r.Elsewhere + r.Held + r.NotRun + r.Unclaimed; sum != r.Total {
		t.Errorf("report does not add up: %d+%d+%d+%d+%d+%d+%d = %d, total %d", r.Succeeded, r.Failed, r.Skipped, r.Elsewhere, r.Held, r.NotRun, r.Unclaimed, sum, r.Total)
	}
	// The counts alone: what ran, and why, is each test's to check.
	counts := cmpopts.IgnoreFields(backfill.Report{}, "Backfill", "Worker", "Failures", "ClaimFailures", "Duration", "Plan", "HookErr")
	if diff := cmp.Diff(want, *r, counts); diff != "" {
		t.Errorf("report's counts (-want +got):\n%s(%s)", diff, r)
	}
	if len(r.Failures) != r.Failed {
		t.Errorf("report lists %d failures for %d failed partitions", len(r.Failures), r.Failed)
	}
}

// bfSeed records an attempt at p directly in the ledger, as worker, that
// ends in state after took on the clock (a running attempt stays so under
// a lease of lease).
func bfSeed(t *testing.T, l ledger.Ledger, clock *ledgertest.Clock, dag string, p tranche.TimePartition, worker string, state ledger.State, took, lease time.Duration) {
	t.Helper()
	ctx := t.Context()
	rev, err := l.Revision(ctx, dag)
	if err != nil {
		t.Fatal(err)
	}
	le, err := l.Claim(ctx, ledger.ClaimRequest{DAG: dag, Worker: worker, RunID: backfill.RunID(dag, p.Start, p.End),
		Partitions: []tranche.TimePartition{p}, Lease: lease, Policy: ledger.RerunAll, Revision: rev})
	if err != nil {
		t.Fatal(err)
	}
	if state == ledger.StateRunning {
		return
	}
	clock.Advance(took)
	out := ledger.Outcome{State: state, Rows: 1}
	if state != ledger.StateSucceeded {
		out = ledger.Outcome{State: state, Err: "boom"}
	}
	if err := l.Finish(ctx, le, []ledger.Outcome{out}); err != nil {
		t.Fatal(err)
	}
}

// bfHistory returns the attempts at p as "N state worker" strings.
func bfHistory(t *testing.T, l ledger.Ledger, dag string, p tranche.TimePartition) []string {
	t.Helper()
	h, err := l.History(t.Context(), dag, p.Start)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range h {
		out = append(out, fmt.Sprintf("%d %s %s", a.Number, a.State, a.Worker))
	}
	return out
}

// bfLatest returns the latest attempts in w as "KEY N state" strings,
// oldest first.
func bfLatest(t *testing.T, l ledger.Ledger, dag string, w tranche.TimePartitionWindow) []string {
	t.Helper()
	var out []string
	for a, err := range l.Latest(t.Context(), dag, w.Start(), w.End()) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s %d %s", a.Key, a.Number, a.State))
	}
	return out
}

func bfGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if bfUpdating() {
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
		t.Errorf("%s differs (-want +got; run with -update to accept):\n%s", path, diff)
	}
}

// The fixed identity of bfDAG in days in UTC, and the ids built on it.
const (
	bfDAGID        = "1d63d20e4d788700"
	bfJanuaryID    = "e398d24f7c20"
	bfJanuary3ID   = "c068ff3378bb"
	bfFebruaryID   = "9f102030dad0"
	bfJanuary5Run  = "ba659016e78fe0b5"
	bfBerlinDAGID  = "b52e0fa3b879cd18"
	bfHourWindowID = "19b09f20e434"
)

func TestBackfillIdentity(t *testing.T) {
	p := new(bfProbe)
	dag := bfDAG(t, p, true)
	dagID := backfill.DAGIdentity(dag, tranche.Day, time.UTC)
	jan := bfDays(t, 1, 31)
	feb, err := tranche.NewTimePartitionWindow(tranche.Day, time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 2, 28, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct{ what, got, want string }{
		{"DAGIdentity", dagID, bfDAGID},
		{"ID of January", backfill.ID(dagID, jan, 1), bfJanuaryID},
		{"ID of January, chunk 0", backfill.ID(dagID, jan, 0), bfJanuaryID},
		{"ID of January, chunk 3", backfill.ID(dagID, jan, 3), bfJanuary3ID},
		{"ID of February", backfill.ID(dagID, feb, 1), bfFebruaryID},
		{"RunID of 2026-01-05", backfill.RunID(dagID, bfDay(5).Start, bfDay(5).End), bfJanuary5Run},
		{"RunID of 2026-01-05 in Berlin", backfill.RunID(dagID, bfDay(5).Start.In(berlin), bfDay(5).End.In(berlin)), bfJanuary5Run},
		{"DAGIdentity in Berlin", backfill.DAGIdentity(dag, tranche.Day, berlin), bfBerlinDAGID},
	}
	// The same DAG declared in another order is the same DAG.
	other, err := tranche.NewDAG(slices.Collect(dag.Assets())[1], slices.Collect(dag.Assets())[0])
	if err != nil {
		t.Fatal(err)
	}
	checks = append(checks, struct{ what, got, want string }{"DAGIdentity of the assets in another order", backfill.DAGIdentity(other, tranche.Day, time.UTC), bfDAGID})

	// Equal instants in different zones give one id: hours of UTC and of
	// Berlin fall on the same instants.
	hoursUTC, err := tranche.NewTimePartitionWindow(tranche.Hour, time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC), time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	hoursBerlin, err := tranche.NewTimePartitionWindow(tranche.Hour, hoursUTC.Start().In(berlin), hoursUTC.Newest().Start.In(berlin))
	if err != nil {
		t.Fatal(err)
	}
	if hoursBerlin.Location() != berlin || hoursBerlin.Len() != 3 {
		t.Fatalf("Berlin window %s", hoursBerlin)
	}
	checks = append(checks,
		struct{ what, got, want string }{"ID of hours in UTC", backfill.ID(dagID, hoursUTC, 1), bfHourWindowID},
		struct{ what, got, want string }{"ID of the same hours in Berlin", backfill.ID(dagID, hoursBerlin, 1), bfHourWindowID},
	)

	// Backfill.ID is ID of the DAG's identity.
	for _, c := range []struct {
		chunk int
		want  string
	}{{0, bfJanuaryID}, {1, bfJanuaryID}, {3, bfJanuary3ID}} {
		b := &backfill.Backfill{DAG: dag, Window: jan, Ledger: memledger.New(nil), ChunkSize: c.chunk}
		id, err := b.ID()
		if err != nil {
			t.Fatal(err)
		}
		checks = append(checks, struct{ what, got, want string }{fmt.Sprintf("Backfill.ID, chunk size %d", c.chunk), id, c.want})
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %q; want %q", c.what, c.got, c.want)
		}
	}
	// The ids that must differ do.
	distinct := []string{bfJanuaryID, bfJanuary3ID, bfFebruaryID, bfHourWindowID}
	slices.Sort(distinct)
	if len(slices.Compact(distinct)) != 4 || bfDAGID == bfBerlinDAGID {
		t.Errorf("ids collide: %v, DAG %s and %s", distinct, bfDAGID, bfBerlinDAGID)
	}
	// A change of assets changes the DAG's identity.
	more, err := tranche.NewDAG(append(slices.Collect(dag.Assets()), tranche.Asset{Name: "extra", Deps: []string{"clean"},
		Partitioning: tranche.Partitioning{Granularity: tranche.Day}, Materialize: p.materialize})...)
	if err != nil {
		t.Fatal(err)
	}
	if id := backfill.DAGIdentity(more, tranche.Day, time.UTC); id == bfDAGID {
		t.Errorf("DAGIdentity with one more asset = %s, the same", id)
	}
}

// bfNothingWritten fails the test if the ledger holds anything.
func bfNothingWritten(t *testing.T, l *memledger.Ledger, dag string, w tranche.TimePartitionWindow) {
	t.Helper()
	if bs, err := l.Backfills(t.Context()); err != nil || len(bs) != 0 {
		t.Errorf("Backfills = %v, %v; want none", bs, err)
	}
	if dag == "" {
		return
	}
	if rev, err := l.Revision(t.Context(), dag); err != nil || rev != 0 {
		t.Errorf("Revision = %d, %v; want 0", rev, err)
	}
	if w.Len() > 0 {
		if got := bfLatest(t, l, dag, w); len(got) != 0 {
			t.Errorf("Latest = %v; want nothing", got)
		}
	}
}

func TestBackfillRefusals(t *testing.T) {
	p := new(bfProbe)
	dag := bfDAG(t, p, false)
	jan := bfDays(t, 1, 31)
	daily := func(name string, part tranche.Partitioning) tranche.Asset {
		return tranche.Asset{Name: name, Partitioning: part, Materialize: p.materialize}
	}
	plain := func(name string) tranche.Asset {
		return tranche.Asset{Name: name, Materialize: p.materialize}
	}
	mustDAG := func(assets ...tranche.Asset) *tranche.DAG {
		d, err := tranche.NewDAG(assets...)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	minutes := func(n int) tranche.TimePartitionWindow {
		w, err := tranche.NewTimePartitionWindow(tranche.Minute, bfT0, bfT0.Add(time.Duration(n-1)*time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	// A window whose start was left unset: time.Time{} is 0001-01-01.
	zeroStart := func(loc *time.Location) tranche.TimePartitionWindow {
		start := tranche.PartitionOf(tranche.Day, time.Time{}.In(loc)).Start
		w, err := tranche.NewTimePartitionWindow(tranche.Day, start, start.AddDate(0, 0, 2))
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	minuteDAG := mustDAG(daily("ticks", tranche.Partitioning{Granularity: tranche.Minute}))

	tests := []struct {
		name string
		b    backfill.Backfill
		want []string // substrings of the error
		as   bool     // the error holds a *PartitionError
	}{
		{name: "unpartitioned assets",
			b:    backfill.Backfill{DAG: mustDAG(plain("zones"), plain("lookup"), daily("events", tranche.Partitioning{Granularity: tranche.Day})), Window: jan},
			want: []string{`unpartitioned assets "lookup", "zones" would be re-extracted whole by every run; give them a Partitioning or run them outside the backfill`}},
		{name: "before the first partition",
			b:    backfill.Backfill{DAG: mustDAG(daily("events", tranche.Partitioning{Granularity: tranche.Day, First: time.Date(2026, 1, 10, 12, 0, 0, 0, time.UTC)})), Window: jan},
			want: []string{`asset "events": partition 2026-01-01 is before its first partition 2026-01-10; clamp the window to start at 2026-01-10T00:00:00Z`},
			as:   true},
		{name: "empty window", b: backfill.Backfill{DAG: dag},
			want: []string{"empty window: give a window of at least one partition"}},
		{name: "chunks of an asset that forbids windows", b: backfill.Backfill{DAG: dag, Window: jan, ChunkSize: 3},
			want: []string{`chunk size 3 needs window runs, which assets "clean", "raw" do not allow (they run one partition at a time); use chunk size 1 (--chunk 1)`}},
		{name: "negative concurrency", b: backfill.Backfill{DAG: dag, Window: jan, Concurrency: -1},
			want: []string{"concurrency -1: want 1 or more (0 means 1)"}},
		{name: "negative chunk size", b: backfill.Backfill{DAG: dag, Window: jan, ChunkSize: -2},
			want: []string{"chunk size -2: want 1 or more partitions per run (0 means 1)"}},
		{name: "unknown rerun policy", b: backfill.Backfill{DAG: dag, Window: jan, Rerun: "sometimes"},
			want: []string{`unknown rerun policy "sometimes"; accepted: none, failed, all`}},
		{name: "unknown failure policy", b: backfill.Backfill{DAG: dag, Window: jan, OnFailure: "panic"},
			want: []string{`unknown failure policy "panic"; accepted: stop, continue`}},
		{name: "unknown order", b: backfill.Backfill{DAG: dag, Window: jan, Order: 7},
			want: []string{"unknown order 7: want NewestFirst or OldestFirst"}},
		{name: "lease equal to heartbeat", b: backfill.Backfill{DAG: dag, Window: jan, Lease: 10 * time.Second, Heartbeat: 10 * time.Second},
			want: []string{"lease 10s and heartbeat 10s: the lease must be positive and longer than the heartbeat"}},
		{name: "lease shorter than heartbeat", b: backfill.Backfill{DAG: dag, Window: jan, Lease: time.Second, Heartbeat: 5 * time.Second},
			want: []string{"lease 1s and heartbeat 5s"}},
		{name: "default lease shorter than heartbeat", b: backfill.Backfill{DAG: dag, Window: jan, Heartbeat: time.Minute},
			want: []string{"lease 30s and heartbeat 1m0s"}},
		{name: "negative lease", b: backfill.Backfill{DAG: dag, Window: jan, Lease: -time.Second},
			want: []string{"lease -1s and heartbeat -333.333333ms"}},
		{name: "window beyond MaxPartitions", b: backfill.Backfill{DAG: dag, Window: jan, MaxPartitions: 30},
			want: []string{"window day 2026-01-01..2026-01-31 UTC holds 31 partitions, more than the limit of 30; split it, or raise MaxPartitions"}},
		{name: "window beyond the default limit", b: backfill.Backfill{DAG: minuteDAG, Window: minutes(100_001)},
			want: []string{"holds 100001 partitions, more than the limit of 100000"}},
		{name: "negative MaxPartitions", b: backfill.Backfill{DAG: dag, Window: jan, MaxPartitions: -1},
			want: []string{"MaxPartitions -1: want 1 or more (0 means 100000)"}},
		{name: "granularity", b: backfill.Backfill{DAG: minuteDAG, Window: jan},
			want: []string{`asset "ticks" is partitioned by minute, the window by day`}},
		{name: "location", b: backfill.Backfill{DAG: mustDAG(daily("events", tranche.Partitioning{Granularity: tranche.Day, Location: time.FixedZone("X", 3600)})), Window: jan},
			want: []string{`asset "events" follows X, the window UTC`}},
		{name: "no DAG", b: backfill.Backfill{Window: jan}, want: []string{"no DAG"}},
		{name: "the zero time as the start", b: backfill.Backfill{DAG: dag, Window: zeroStart(time.UTC)},
			want: []string{"window day 0001-01-01..0001-01-03 UTC starts in year 1, at the zero time.Time: the window's start was not set"}},
		{name: "the zero time in Berlin as the start", b: backfill.Backfill{DAG: mustDAG(daily("events", tranche.Partitioning{Granularity: tranche.Day, Location: berlin})), Window: zeroStart(berlin)},
			want: []string{"starts in year 1, at the zero time.Time"}},
		{name: "a chosen partition at the zero time", b: backfill.Backfill{DAG: dag, Partitions: []tranche.TimePartition{tranche.PartitionOf(tranche.Day, time.Time{}), jan.Oldest()}},
			want: []string{"starts in year 1, at the zero time.Time"}},
		{name: "several problems at once", b: backfill.Backfill{DAG: dag, Window: jan, Concurrency: -3, Rerun: "x"},
			want: []string{"concurrency -3", `unknown rerun policy "x"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := memledger.New(nil)
			b := tt.b
			if tt.name != "no ledger" {
				b.Ledger = l
			}
			var dagID string
			if b.DAG != nil && b.Window.Len() > 0 {
				dagID = backfill.DAGIdentity(b.DAG, b.Window.Granularity(), b.Window.Location())
			}
			check := func(what string, err error) {
				t.Helper()
				if err == nil {
					t.Fatalf("%s: no error", what)
				}
				for _, w := range tt.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("%s: error %q\nlacks %q", what, err, w)
					}
				}
				var pe *tranche.PartitionError
				if got := errors.As(err, &pe); got != tt.as {
					t.Errorf("%s: errors.As(*PartitionError) = %v; want %v", what, got, tt.as)
				} else if got && (pe.Asset != "events" || pe.Oldest.Key() != "2026-01-01" || pe.First.Key() != "2026-01-10") {
					t.Errorf("%s: PartitionError = %+v", what, pe)
				}
			}
			_, err := b.ID()
			check("ID", err)
			plan, err := b.Plan(t.Context())
			check("Plan", err)
			if plan != nil {
				t.Errorf("Plan returned a plan with its error")
			}
			rep, err := b.Run(t.Context())
			check("Run", err)
			if rep != nil {
				t.Errorf("Run returned a report with its error")
			}
			bfNothingWritten(t, l, dagID, b.Window)
		})
	}
	if calls := p.Calls(); len(calls) != 0 {
		t.Errorf("assets were called: %v", calls)
	}

	// At the limit, the window is accepted.
	b := backfill.Backfill{DAG: minuteDAG, Window: minutes(100_000), Ledger: memledger.New(nil)}
	if _, err := b.ID(); err != nil {
		t.Errorf("a window of 100,000 partitions: %v", err)
	}
	// Without a ledger, nothing can be written.
	b = backfill.Backfill{DAG: dag, Window: jan}
	if _, err := b.Run(t.Context()); err == nil || !strings.Contains(err.Error(), "no Ledger") {
		t.Errorf("Run without a ledger: %v", err)
	}
	// Naming a backfill needs no ledger: a program checks and names one
	// before it opens a ledger, and the name is the one Run records.
	id, err := b.ID()
	if err != nil {
		t.Fatalf("ID without a ledger: %v", err)
	}
	b.Ledger = memledger.New(nil)
	if withLedger, err := b.ID(); err != nil || withLedger != id {
		t.Errorf("ID with a ledger: %q, %v; want %q as without", withLedger, err, id)
	}
}

// A partition that fails is retried by the next run, alone, under its run
// id, as attempt 2.
func TestBackfillResume(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &bfProbe{hook: bfFailOn(true, "2026-01-05")}
		l := memledger.New(nil)
		b := &backfill.Backfill{DAG: bfDAG(t, p, false), Window: bfDays(t, 1, 10), Ledger: l, Worker: "w1", OnFailure: tranche.FailContinue}

		rep, err := b.Run(t.Context())
		if err == nil || err.Error() != "tranche: backfill "+bfJanuaryResumeID+": 1 partition failed (first 2026-01-05: tranche: asset \"raw\" failed for 2026-01-05: boom on 2026-01-05)" {
			t.Errorf("first run: %v", err)
		}
		bfCheckReport(t, rep, backfill.Report{Total: 10, Succeeded: 9, Failed: 1})
		if len(rep.Failures) == 1 && rep.Failures[0].Key != "2026-01-05" {
			t.Errorf("failures %v", rep.Failures)
		}
		if got, want := p.Calls(), bfKeys(10, 9, 8, 7, 6, 5, 4, 3, 2, 1); !slices.Equal(got, want) {
			t.Errorf("first run called %v; want %v", got, want)
		}
		if rep.Backfill != bfJanuaryResumeID || rep.Worker != "w1" {
			t.Errorf("report of %s by %s", rep.Backfill, rep.Worker)
		}

		p.mu.Lock()
		p.calls = nil
		p.mu.Unlock()
		rep, err = b.Run(t.Context())
		if err != nil {
			t.Fatalf("second run: %v", err)
		}
		bfCheckReport(t, rep, backfill.Report{Total: 10, Succeeded: 1, Skipped: 9})
		if got := p.Calls(); !slices.Equal(got, []string{"2026-01-05"}) {
			t.Errorf("second run called %v; want only 2026-01-05", got)
		}
		h, err := l.History(t.Context(), bfDAGID, bfDay(5).Start)
		if err != nil || len(h) != 2 {
			t.Fatalf("history %+v, %v", h, err)
		}
		for i, a := range h {
			if a.RunID != bfJanuary5Run || a.Number != i+1 || a.Backfill != bfJanuaryResumeID || a.Worker != "w1" || a.Rows != []int64{0, 2}[i] {
				t.Errorf("attempt %d: %+v; want run id %s, backfill %s", i+1, a, bfJanuary5Run, bfJanuaryResumeID)
			}
		}
		if h[0].State != ledger.StateFailed || h[0].Err != `tranche: asset "raw" failed for 2026-01-05: boom on 2026-01-05` || h[1].State != ledger.StateSucceeded || h[1].Err != "" {
			t.Errorf("history %+v", h)
		}
		// A third run has nothing to do.
		rep, err = b.Run(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		bfCheckReport(t, rep, backfill.Report{Total: 10, Skipped: 10})
		st, err := backfill.StatusOf(t.Context(), l, bfJanuaryResumeID, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if !st.Done() || st.Counts[ledger.StateSucceeded] != 10 || len(st.Blocked) != 0 {
			t.Errorf("status %s, blocked %q", st, st.Blocked)
		}
		if got, want := st.String(), "backfill "+bfJanuaryResumeID+" of day 2026-01-01..2026-01-10 UTC: 10 succeeded, 0 running, 0 failed, 0 canceled, 0 pending"; got != want {
			t.Errorf("status %q; want %q", got, want)
		}
	})
}

const bfJanuaryResumeID = "7b1091e6b11b" // ID of bfDAG over 2026-01-01..10, chunk 1

func TestBackfillRerunPolicies(t *testing.T) {
	// Day 1 succeeded, 2 failed, 3 canceled, 4 was never run, 5 succeeded.
	tests := []struct {
		rerun   ledger.RerunPolicy
		actions []ledger.Action // days 5 to 1
		calls   []string
		report  [5]int // succeeded, failed, skipped, elsewhere, not run
	}{
		{ledger.RerunNone,
			[]ledger.Action{ledger.ActionSkipSucceeded, ledger.ActionRun, ledger.ActionSkipRecorded, ledger.ActionSkipRecorded, ledger.ActionSkipSucceeded},
			bfKeys(4), [5]int{1, 0, 4, 0, 0}},
		{"",
			[]ledger.Action{ledger.ActionSkipSucceeded, ledger.ActionRun, ledger.ActionRun, ledger.ActionRun, ledger.ActionSkipSucceeded},
			bfKeys(4, 3, 2), [5]int{3, 0, 2, 0, 0}},
		{ledger.RerunFailed,
			[]ledger.Action{ledger.ActionSkipSucceeded, ledger.ActionRun, ledger.ActionRun, ledger.ActionRun, ledger.ActionSkipSucceeded},
			bfKeys(4, 3, 2), [5]int{3, 0, 2, 0, 0}},
		{ledger.RerunAll,
			[]ledger.Action{ledger.ActionRun, ledger.ActionRun, ledger.ActionRun, ledger.ActionRun, ledger.ActionRun},
			bfKeys(5, 4, 3, 2, 1), [5]int{5, 0, 0, 0, 0}},
	}
	for _, tt := range tests {
		t.Run(string(tt.rerun), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				clock := ledgertest.NewClock(bfT0)
				l := memledger.New(clock.Now)
				for d, st := range map[int]ledger.State{1: ledger.StateSucceeded, 2: ledger.StateFailed, 3: ledger.StateCanceled, 5: ledger.StateSucceeded} {
					bfSeed(t, l, clock, bfDAGID, bfDay(d), "seed", st, time.Second, time.Minute)
				}
				p := new(bfProbe)
				b := &backfill.Backfill{DAG: bfDAG(t, p, false), Window: bfDays(t, 1, 5), Ledger: l, Worker: "w", Rerun: tt.rerun, Now: clock.Now}
				plan, err := b.Plan(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				var actions []ledger.Action
				for item, err := range plan.Items(t.Context()) {
					if err != nil {
						t.Fatal(err)
					}
					actions = append(actions, item.Action)
				}
				if !slices.Equal(actions, tt.actions) {
					t.Errorf("plan actions %v; want %v", actions, tt.actions)
				}
				rep, err := b.Run(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				bfCheckReport(t, rep, backfill.Report{Total: 5, Succeeded: tt.report[0], Failed: tt.report[1], Skipped: tt.report[2], Elsewhere: tt.report[3], NotRun: tt.report[4]})
				if got := p.Calls(); !slices.Equal(got, tt.calls) {
					t.Errorf("ran %v; want %v", got, tt.calls)
				}
				// Running it again runs nothing more, whatever the policy,
				// except all, which runs everything once more.
				p.mu.Lock()
				p.calls = nil
				p.mu.Unlock()
				if _, err := b.Run(t.Context()); err != nil {
					t.Fatal(err)
				}
				want := []string(nil)
				if tt.rerun == ledger.RerunAll {
					want = bfKeys(5, 4, 3, 2, 1)
				}
				if got := p.Calls(); !slices.Equal(got, want) {
					t.Errorf("second run ran %v; want %v", got, want)
				}
			})
		})
	}
}

func TestBackfillOrder(t *testing.T) {
	tests := []struct {
		name  string
		order backfill.Order
		chunk int
		calls []string
	}{
		{"newest first", backfill.NewestFirst, 1, bfKeys(5, 4, 3, 2, 1)},
		{"oldest first", backfill.OldestFirst, 1, bfKeys(1, 2, 3, 4, 5)},
		{"chunks newest first", backfill.NewestFirst, 2, []string{"day 2026-01-04..2026-01-05 UTC", "day 2026-01-02..2026-01-03 UTC", "2026-01-01"}},
		{"chunks oldest first", backfill.OldestFirst, 2, []string{"2026-01-01", "day 2026-01-02..2026-01-03 UTC", "day 2026-01-04..2026-01-05 UTC"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := new(bfProbe)
			b := &backfill.Backfill{DAG: bfDAG(t, p, true), Window: bfDays(t, 1, 5), Ledger: memledger.New(nil), Order: tt.order, ChunkSize: tt.chunk}
			rep, err := b.Run(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			bfCheckReport(t, rep, backfill.Report{Total: 5, Succeeded: 5})
			if got := p.Calls(); !slices.Equal(got, tt.calls) {
				t.Errorf("ran %v; want %v", got, tt.calls)
			}
			// String is the text form: "newest-first", as MarshalText.
			text, err := tt.order.MarshalText()
			if err != nil {
				t.Fatal(err)
			}
			if got, want := tt.order.String(), strings.ReplaceAll(tt.name[len(tt.name)-12:], " ", "-"); got != want || string(text) != want {
				t.Errorf("Order.String() = %q, MarshalText = %q; want %q", got, text, want)
			}
		})
	}
}

// A chunked backfill runs windows of ChunkSize partitions, newest first,
// and records each partition under its chunk's run id.
func TestBackfillChunks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clock := ledgertest.NewClock(bfT0)
		l := memledger.New(clock.Now)
		p := &bfProbe{hook: bfFailOn(true, "day 2026-01-05..2026-01-07 UTC")}
		w := bfDays(t, 1, 10)
		b := &backfill.Backfill{DAG: bfDAG(t, p, true), Window: w, Ledger: l, ChunkSize: 3, OnFailure: tranche.FailContinue, Worker: "w", Now: clock.Now}
		plan, err := b.Plan(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if want := (backfill.PlanCounts{Total: 10, Run: 10, Runs: 4}); plan.Counts != want {
			t.Errorf("plan counts %+v; want %+v", plan.Counts, want)
		}
		rep, err := b.Run(t.Context())
		if err == nil {
			t.Error("no error from a failed chunk")
		}
		bfCheckReport(t, rep, backfill.Report{Total: 10, Succeeded: 7, Failed: 3})
		chunks := []string{"day 2026-01-08..2026-01-10 UTC", "day 2026-01-05..2026-01-07 UTC", "day 2026-01-02..2026-01-04 UTC", "2026-01-01"}
		if got := p.Calls(); !slices.Equal(got, chunks) {
			t.Errorf("ran %v; want %v", got, chunks)
		}
		runIDs := map[int]string{}
		for d := 1; d <= 10; d++ {
			c := bfDay(1)
			switch {
			case d >= 8:
				c = bfDay(8)
			case d >= 5:
				c = bfDay(5)
			case d >= 2:
				c = bfDay(2)
			}
			size := map[int]int{8: 3, 5: 3, 2: 3, 1: 1}[c.Start.Day()]
			runIDs[d] = backfill.RunID(bfDAGID, c.Start, c.Start.AddDate(0, 0, size))
		}
		check := func(run int) {
			t.Helper()
			for d := 1; d <= 10; d++ {
				h, err := l.History(t.Context(), bfDAGID, bfDay(d).Start)
				if err != nil {
					t.Fatal(err)
				}
				wantAttempts := 1
				if run == 2 && d >= 5 && d <= 7 {
					wantAttempts = 2
				}
				if len(h) != wantAttempts {
					t.Errorf("run %d: day %d has %d attempts; want %d", run, d, len(h), wantAttempts)
					continue
				}
				a := h[len(h)-1]
				wantState, wantRows := ledger.StateSucceeded, int64(2) // a row from raw and one from clean
				if run == 1 && d >= 5 && d <= 7 {
					wantState, wantRows = ledger.StateFailed, 0
				}
				if a.State != wantState || a.Rows != wantRows || a.RunID != runIDs[d] || a.Key != bfDay(d).Key() || a.Backfill != bfJanuary10Chunk3ID {
					t.Errorf("run %d: day %d latest %+v; want %s, %d rows, run id %s", run, d, a, wantState, wantRows, runIDs[d])
				}
			}
		}
		check(1)
		p.mu.Lock()
		p.calls = nil
		p.mu.Unlock()
		rep, err = b.Run(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		bfCheckReport(t, rep, backfill.Report{Total: 10, Succeeded: 3, Skipped: 7})
		if got := p.Calls(); !slices.Equal(got, chunks[1:2]) {
			t.Errorf("resume ran %v; want %v", got, chunks[1:2])
		}
		check(2)
	})
}

const bfJanuary10Chunk3ID = "f99bb68ac0de" // ID of bfDAG over 2026-01-01..10, chunk 3

// FailStop claims nothing after a failure: with one partition at a time,
// the partitions after the failed one stay pending, and the status says
// why. FailContinue runs them all.
func TestBackfillFailurePolicies(t *testing.T) {
	tests := []struct {
		policy tranche.FailurePolicy
		calls  []string
		report [5]int
		latest []string
	}{
		{"", bfKeys(6, 5), [5]int{1, 1, 0, 0, 4}, []string{"2026-01-05 1 failed", "2026-01-06 1 succeeded"}},
		{tranche.FailStop, bfKeys(6, 5), [5]int{1, 1, 0, 0, 4}, []string{"2026-01-05 1 failed", "2026-01-06 1 succeeded"}},
		{tranche.FailContinue, bfKeys(6, 5, 4, 3, 2, 1), [5]int{5, 1, 0, 0, 0}, []string{
			"2026-01-01 1 succeeded", "2026-01-02 1 succeeded", "2026-01-03 1 succeeded", "2026-01-04 1 succeeded",
			"2026-01-05 1 failed", "2026-01-06 1 succeeded"}},
	}
	for _, tt := range tests {
		t.Run(string(tt.policy), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := memledger.New(nil)
				p := &bfProbe{hook: bfFailOn(false, "2026-01-05")}
				w := bfDays(t, 1, 6)
				b := &backfill.Backfill{DAG: bfDAG(t, p, false), Window: w, Ledger: l, Worker: "w1", OnFailure: tt.policy}
				rep, err := b.Run(t.Context())
				if err == nil || !strings.Contains(err.Error(), "1 partition failed (first 2026-01-05") {
					t.Errorf("Run: %v", err)
				}
				bfCheckReport(t, rep, backfill.Report{Total: 6, Succeeded: tt.report[0], Failed: tt.report[1], Skipped: tt.report[2], Elsewhere: tt.report[3], NotRun: tt.report[4]})
				if got := p.Calls(); !slices.Equal(got, tt.calls) {
					t.Errorf("ran %v; want %v", got, tt.calls)
				}
				if got := bfLatest(t, l, bfDAGID, w); !slices.Equal(got, tt.latest) {
					t.Errorf("ledger %v; want %v", got, tt.latest)
				}
				id, _ := b.ID()
				st, err := backfill.StatusOf(t.Context(), l, id, time.Now())
				if err != nil {
					t.Fatal(err)
				}
				want := map[ledger.State]int{ledger.StateSucceeded: tt.report[0], ledger.StateFailed: 1, ledger.StatePending: tt.report[4]}
				if !mapsEqualNonZero(st.Counts, want) {
					t.Errorf("status counts %v; want %v", st.Counts, want)
				}
				var blocked []string
				if tt.report[4] > 0 {
					blocked = []string{`stopped after the failure of partition 2026-01-05 by worker w1: tranche: asset "raw" failed for 2026-01-05: boom on 2026-01-05`}
				}
				if !slices.Equal(st.Blocked, blocked) {
					t.Errorf("status blocked %q; want %q", st.Blocked, blocked)
				}
			})
		})
	}
}

func mapsEqualNonZero(a, b map[ledger.State]int) bool {
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	for k, v := range b {
		if a[k] != v {
			return false
		}
	}
	return true
}

// Under FailStop, the partitions running when another fails finish and
// are recorded; nothing more starts.
func TestBackfillFailStopLetsRunningFinish(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		othersIn := make(chan struct{})
		var others atomic.Int64
		p := &bfProbe{hook: func(ctx context.Context, target string) error {
			if target == "2026-01-06" {
				// Fail once the two others are running.
				<-othersIn
				return errors.New("boom")
			}
			if others.Add(1) == 2 {
				close(othersIn)
			}
			<-release
			return nil
		}}
		failed := make(chan struct{})
		l := memledger.New(nil)
		b := &backfill.Backfill{DAG: bfDAG(t, p, false), Window: bfDays(t, 1, 6), Ledger: l, Concurrency: 3,
			OnEvent: func(_ context.Context, e tranche.Event) {
				if e.Kind == backfill.KindPartitionFailed {
					close(failed)
				}
			}}
		go func() {
			<-failed
			close(release)
		}()
		rep, err := b.Run(t.Context())
		if err == nil {
			t.Error("no error")
		}
		bfCheckReport(t, rep, backfill.Report{Total: 6, Succeeded: 2, Failed: 1, NotRun: 3})
		got := p.Calls()
		slices.Sort(got)
		if want := bfKeys(4, 5, 6); !slices.Equal(got, want) {
			t.Errorf("ran %v; want %v", got, want)
		}
		if got, want := bfLatest(t, l, bfDAGID, bfDays(t, 1, 6)), []string{"2026-01-04 1 succeeded", "2026-01-05 1 succeeded", "2026-01-06 1 failed"}; !slices.Equal(got, want) {
			t.Errorf("ledger %v; want %v", got, want)
		}
	})
}

// No more than Concurrency partitions run at once.
func TestBackfillConcurrency(t *testing.T) {
	for _, n := range []int{1, 3, 8} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				entered := make(chan struct{}, 20)
				release := make(chan struct{})
				p := &bfProbe{hook: func(ctx context.Context, _ string) error {
					entered <- struct{}{}
					<-release
					return nil
				}}
				b := &backfill.Backfill{DAG: bfDAG(t, p, false), Window: bfDays(t, 1, 12), Ledger: memledger.New(nil), Concurrency: n}
				done := make(chan *backfill.Report)
				go func() {
					rep, err := b.Run(t.Context())
					if err != nil {
						t.Error(err)
					}
					done <- rep
				}()
				for range n {
					<-entered
				}
				// With n partitions blocked, no other starts.
				select {
				case <-entered:
					t.Errorf("a partition started beyond the concurrency of %d", n)
				case <-time.After(20 * time.Millisecond):
				}
				close(release)
				rep := <-done
				bfCheckReport(t, rep, backfill.Report{Total: 12, Succeeded: 12})
				if got := p.Peak(); got != n {
					t.Errorf("peak concurrency %d; want %d", got, n)
				}
			})
		})
	}
}

// Canceling the context records the partitions in flight failed, cause
// canceled, and returns promptly with a report that adds up.
func TestBackfillContextCanceled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		entered := make(chan string, 20)
		p := &bfProbe{hook: func(ctx context.Context, target string) error {
			entered <- target
			<-ctx.Done()
			return context.Cause(ctx)
		}}
		rec := new(tranchetest.Recorder)
		l := memledger.New(nil)
		w := bfDays(t, 1, 10)
		b := &backfill.Backfill{DAG: bfDAG(t, p, false), Window: w, Ledger: l, Concurrency: 2, OnEvent: rec.OnEvent}
		type result struct {
			rep *backfill.Report
			err error
		}
		done := make(chan result)
		go func() {
			rep, err := b.Run(ctx)
			done <- result{rep, err}
		}()
		<-entered
		<-entered
		cancel()
		start := time.Now()
		var r result
		select {
		case r = <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("Run did not return after cancellation")
		}
		if took := time.Since(start); took > time.Second {
			t.Errorf("Run took %v to return after cancellation", took)
		}
		if !errors.Is(r.err, context.Canceled) {
			t.Errorf("Run: %v; want context.Canceled", r.err)
		}
		bfCheckReport(t, r.rep, backfill.Report{Total: 10, Failed: 2, NotRun: 8})
		got := bfLatest(t, l, bfDAGID, w)
		if want := []string{"2026-01-09 1 failed", "2026-01-10 1 failed"}; !slices.Equal(got, want) {
			t.Errorf("ledger %v; want %v", got, want)
		}
		for _, d := range []int{9, 10} {
			h, _ := l.History(t.Context(), bfDAGID, bfDay(d).Start)
			if len(h) != 1 || !strings.Contains(h[0].Err, "canceled") {
				t.Errorf("day %d: %+v; want an attempt failed with cause canceled", d, h)
			}
		}
		events := rec.Events()
		if last := events[len(events)-1]; last.Kind != backfill.KindCanceled || !errors.Is(last.Err, context.Canceled) {
			t.Errorf("last event %s: %v; want backfill.canceled", last.Kind, last.Err)
		}
		// Running it again resumes: the failed partitions and the pending
		// ones run.
		p.hook = nil
		rep, err := b.Run(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		bfCheckReport(t, rep, backfill.Report{Total: 10, Succeeded: 10})
	})
}

// A cancellation of a window larger than the plan's batches (4,096
// partitions) still counts every partition, and reports a cancellation.
func TestBackfillContextCanceledLargeWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		var calls atomic.Int64
		dag, err := tranche.NewDAG(tranche.Asset{Name: "ticks", Partitioning: tranche.Partitioning{Granularity: tranche.Minute},
			Materialize: func(ctx context.Context, _ *tranche.Materialization) ([]tranche.Row, error) {
				if calls.Add(1) == 3 {
					cancel()
				}
				return nil, ctx.Err()
			}})
		if err != nil {
			t.Fatal(err)
		}
		w, err := tranche.NewTimePartitionWindow(tranche.Minute, bfT0, bfT0.Add(4999*time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		l := memledger.New(nil)
		b := &backfill.Backfill{DAG: dag, Window: w, Ledger: l}
		rep, err := b.Run(ctx)
		if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "canceled") {
			t.Errorf("Run: %v; want a cancellation", err)
		}
		bfCheckReport(t, rep, backfill.Report{Total: 5000, Succeeded: 2, Failed: 1, NotRun: 4997})
	})
}

// After a stop, partitions that need no run are still reported as what
// they are, not as left pending.
func TestBackfillStopCountsSkipped(t *testing.T) {
	clock := ledgertest.NewClock(bfT0)
	l := memledger.New(clock.Now)
	bfSeed(t, l, clock, bfDAGID, bfDay(2), "seed", ledger.StateSucceeded, time.Second, time.Minute)
	bfSeed(t, l, clock, bfDAGID, bfDay(3), "other", ledger.StateRunning, 0, time.Hour)
	p := &bfProbe{hook: bfFailOn(false, "2026-01-05")}
	b := &backfill.Backfill{DAG: bfDAG(t, p, false), Window: bfDays(t, 1, 6), Ledger: l, Now: clock.Now}
	rep, err := b.Run(t.Context())
	if err == nil {
		t.Error("no error")
	}
	// 6 succeeds, 5 fails, 4 and 1 stay pending, 3 is held elsewhere, 2 skipped.
	bfCheckReport(t, rep, backfill.Report{Total: 6, Succeeded: 1, Failed: 1, Skipped: 1, Held: 1, NotRun: 2})
}

// A backfill canceled in the ledger while it runs claims nothing more and
// returns ErrBackfillCanceled; the next run claims nothing at all.
// bfSlowerThanLookahead is a partition's work long enough that a
// worker claims no partition ahead of its run: the claim of the next is
// seen to follow what the run before it did to the ledger.
const bfSlowerThanLookahead = 210 * time.Millisecond // above claimAhead

func TestBackfillCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clock := ledgertest.NewClock(bfT0)
		l := memledger.New(clock.Now)
		var b *backfill.Backfill
		p := &bfProbe{hook: func(ctx context.Context, target string) error {
			time.Sleep(bfSlowerThanLookahead) // no partition is claimed ahead of its run
			if target == "2026-01-04" {
				id, _ := b.ID()
				if err := l.CancelBackfill(ctx, id, ledger.CancelOptions{}); err != nil {
					return err
				}
			}
			return nil
		}}
		rec := new(tranchetest.Recorder)
		w := bfDays(t, 1, 5)
		b = &backfill.Backfill{DAG: bfDAG(t, p, false), Window: w, Ledger: l, Worker: "w1", Now: clock.Now, OnEvent: rec.OnEvent}
		id, _ := b.ID()
		if err := l.CancelBackfill(t.Context(), id, ledger.CancelOptions{}); !errors.Is(err, ledger.ErrUnknownBackfill) {
			t.Errorf("CancelBackfill of a backfill never run: %v", err)
		}
		rep, err := b.Run(t.Context())
		if !errors.Is(err, backfill.ErrBackfillCanceled) {
			t.Errorf("Run canceled midway: %v; want ErrBackfillCanceled", err)
		}
		// The running partition finishes; nothing more is claimed.
		bfCheckReport(t, rep, backfill.Report{Total: 5, Succeeded: 2, NotRun: 3})
		if got, want := p.Calls(), bfKeys(5, 4); !slices.Equal(got, want) {
			t.Errorf("ran %v; want %v", got, want)
		}
		events := rec.Events()
		if last := events[len(events)-1]; last.Kind != backfill.KindCanceled || !errors.Is(last.Err, backfill.ErrBackfillCanceled) {
			t.Errorf("last event %s: %v", last.Kind, last.Err)
		}
		st, err := backfill.StatusOf(t.Context(), l, id, clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		if !st.Record.Canceled || len(st.Blocked) == 0 || st.Blocked[0] != "canceled: workers claim nothing more until it is resumed (the resume command)" {
			t.Errorf("status %s, blocked %q", st, st.Blocked)
		}
		if !strings.HasSuffix(st.String(), "2 succeeded, 0 running, 0 failed, 0 canceled, 3 pending (canceled)") {
			t.Errorf("status %q", st)
		}

		rev, _ := l.Revision(t.Context(), bfDAGID)
		rep, err = b.Run(t.Context())
		if !errors.Is(err, backfill.ErrBackfillCanceled) || rep != nil {
			t.Errorf("Run of a canceled backfill: %v, %v; want ErrBackfillCanceled", rep, err)
		}
		if got := len(p.Calls()); got != 2 {
			t.Errorf("%d calls; want no more", got)
		}
		if after, _ := l.Revision(t.Context(), bfDAGID); after != rev {
			t.Errorf("revision moved from %d to %d", rev, after)
		}
	})
}

// With StopOnCancel, a running partition stops at its next heartbeat once
// the backfill is canceled, and is recorded failed, cause canceled; and
// so it does in a worker without StopOnCancel when the backfill is
// canceled with stopRunning (BackfillRecord.StopRunning).
func TestBackfillStopOnCancel(t *testing.T) {
	for _, c := range []struct {
		name                      string
		stopOnCancel, stopRunning bool
	}{{"StopOnCancel", true, false}, {"stopRunning", false, true}, {"both", true, true}} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := memledger.New(nil)
				var b *backfill.Backfill
				p := &bfProbe{hook: func(ctx context.Context, target string) error {
					id, _ := b.ID()
					if err := l.CancelBackfill(ctx, id, ledger.CancelOptions{StopRunning: c.stopRunning}); err != nil {
						return err
					}
					select {
					case <-ctx.Done():
						return context.Cause(ctx)
					case <-time.After(5 * time.Second):
						return errors.New("not stopped")
					}
				}}
				b = &backfill.Backfill{DAG: bfDAG(t, p, false), Window: bfDays(t, 1, 3), Ledger: l, StopOnCancel: c.stopOnCancel,
					Lease: time.Minute, Heartbeat: 5 * time.Millisecond}
				rep, err := b.Run(t.Context())
				if !errors.Is(err, backfill.ErrBackfillCanceled) {
					t.Errorf("Run: %v; want ErrBackfillCanceled", err)
				}
				bfCheckReport(t, rep, backfill.Report{Total: 3, Failed: 1, NotRun: 2})
				h, _ := l.History(t.Context(), bfDAGID, bfDay(3).Start)
				if len(h) != 1 || h[0].State != ledger.StateFailed || !strings.Contains(h[0].Err, "canceled") {
					t.Errorf("history %+v; want one attempt failed, canceled", h)
				}
			})
		})
	}
}

// Without StopOnCancel or stopRunning, a partition running when its
// backfill is canceled finishes: only new claims stop.
func TestBackfillCancelLetsRunningFinish(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := memledger.New(nil)
		var b *backfill.Backfill
		p := &bfProbe{hook: func(ctx context.Context, target string) error {
			id, _ := b.ID()
			if err := l.CancelBackfill(ctx, id, ledger.CancelOptions{}); err != nil {
				return err
			}
			select {
			case <-ctx.Done():
				return context.Cause(ctx)
			case <-time.After(50 * time.Millisecond): // ten heartbeats
				return nil
			}
		}}
		b = &backfill.Backfill{DAG: bfDAG(t, p, false), Window: bfDays(t, 1, 3), Ledger: l,
			Lease: time.Minute, Heartbeat: 5 * time.Millisecond}
		if _, err := b.Run(t.Context()); !errors.Is(err, backfill.ErrBackfillCanceled) {
			t.Errorf("Run: %v; want ErrBackfillCanceled", err)
		}
		h, _ := l.History(t.Context(), bfDAGID, bfDay(3).Start)
		if len(h) != 1 || h[0].State != ledger.StateSucceeded {
			t.Errorf("history %+v; want one attempt succeeded", h)
		}
	})
}

// History is shared: a partition run on its own through RunRecorded (a
// daily job) counts for later backfills, chunked or not.
func TestBackfillRunRecorded(t *testing.T) {
	for _, chunk := range []int{1, 3} {
		t.Run(fmt.Sprint("chunk ", chunk), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := memledger.New(nil)
				p := new(bfProbe)
				dag := bfDAG(t, p, true)
				res, err := backfill.RunRecorded(t.Context(), l, nil, dag, bfDay(5), "daily")
				tranchetest.RequireSucceeded(t, res, err)
				if res.RunID != bfJanuary5Run {
					t.Errorf("RunRecorded run id %s; want %s", res.RunID, bfJanuary5Run)
				}
				h, _ := l.History(t.Context(), bfDAGID, bfDay(5).Start)
				if len(h) != 1 || h[0].State != ledger.StateSucceeded || h[0].Backfill != "" || h[0].Worker != "daily" || h[0].RunID != bfJanuary5Run || h[0].Rows != 2 {
					t.Errorf("history %+v", h)
				}
				b := &backfill.Backfill{DAG: dag, Window: bfDays(t, 1, 7), Ledger: l, ChunkSize: chunk}
				rep, err := b.Run(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				bfCheckReport(t, rep, backfill.Report{Total: 7, Succeeded: 6, Skipped: 1})
				want := bfKeys(7, 6, 4, 3, 2, 1)
				if chunk == 3 {
					// The chunk 5..7 holds the landed day 5: days 6 and 7 run
					// as a window of their own.
					want = []string{"day 2026-01-06..2026-01-07 UTC", "day 2026-01-02..2026-01-04 UTC", "2026-01-01"}
				}
				if got := p.Calls()[1:]; !slices.Equal(got, want) {
					t.Errorf("ran %v; want %v", got, want)
				}
				st, err := backfill.StatusOf(t.Context(), l, rep.Backfill, time.Now())
				if err != nil {
					t.Fatal(err)
				}
				if !st.Done() {
					t.Errorf("status %s", st)
				}
				if h, _ := l.History(t.Context(), bfDAGID, bfDay(5).Start); len(h) != 1 {
					t.Errorf("day 5 ran again: %+v", h)
				}
			})
		})
	}
	// A partition held under a live lease refuses an ordinary run.
	l := memledger.New(nil)
	clock := ledgertest.NewClock(bfT0)
	bfSeed(t, l, clock, bfDAGID, bfDay(5), "other", ledger.StateRunning, 0, time.Hour)
	_, err := backfill.RunRecorded(t.Context(), l, nil, bfDAG(t, new(bfProbe), false), bfDay(5), "daily")
	if !errors.Is(err, ledger.ErrNotClaimable) {
		t.Errorf("RunRecorded of a held partition: %v; want ErrNotClaimable", err)
	}
}

// A partition left running by a dead worker is skipped while its lease
// is live, and taken over once it expires.
func TestBackfillLeaseTakeover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clock := ledgertest.NewClock(bfT0)
		l := memledger.New(clock.Now)
		p := new(bfProbe)
		w := bfDays(t, 1, 5)
		b := &backfill.Backfill{DAG: bfDAG(t, p, false), Window: w, Ledger: l, Worker: "w1", Now: clock.Now}
		id, err := b.ID()
		if err != nil {
			t.Fatal(err)
		}
		// The dead worker claims day 3 for the backfill and never finishes.
		if _, err := l.Claim(t.Context(), ledger.ClaimRequest{DAG: bfDAGID, Backfill: id, Worker: "dead", RunID: backfill.RunID(bfDAGID, bfDay(3).Start, bfDay(3).End),
			Partitions: []tranche.TimePartition{bfDay(3)}, Lease: time.Minute, Policy: ledger.RerunFailed}); err != nil {
			t.Fatal(err)
		}
		plan, err := b.Plan(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if want := (backfill.PlanCounts{Total: 5, Run: 4, SkipRunning: 1, Runs: 4}); plan.Counts != want {
			t.Errorf("plan counts %+v; want %+v", plan.Counts, want)
		}
		if want := "1 partition is running elsewhere under a live lease; this run takes over what stops being renewed, once it expires, and reports the rest held"; !slices.Contains(plan.Warnings, want) {
			t.Errorf("plan warnings %q; want %q", plan.Warnings, want)
		}
		for item, err := range plan.Items(t.Context()) {
			if err != nil {
				t.Fatal(err)
			}
			if item.Partition.Key() == "2026-01-03" && (item.Action != ledger.ActionSkipRunning || item.Latest == nil || item.Latest.Worker != "dead") {
				t.Errorf("plan item %+v; want skip: running elsewhere, held by dead", item)
			}
		}
		rep, err := b.Run(t.Context())
		if err != nil || rep.Done() {
			t.Errorf("Run with a partition held elsewhere: %v, done %v; want no error, not done: overlap is reported, not an error", err, rep.Done())
		}
		bfCheckReport(t, rep, backfill.Report{Total: 5, Succeeded: 4, Held: 1})
		if rep.Done() || !strings.Contains(rep.String(), "1 held by other workers (not done)") {
			t.Errorf("report %s: done %v; want 1 held, not done", rep, rep.Done())
		}
		st, err := backfill.StatusOf(t.Context(), l, id, clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{"partition 2026-01-03 held by worker dead until 2026-03-01T00:01:00Z"}; !slices.Equal(st.Blocked, want) {
			t.Errorf("status blocked %q; want %q", st.Blocked, want)
		}
		if st.Counts[ledger.StateRunning] != 1 || st.Counts[ledger.StateSucceeded] != 4 || st.Done() {
			t.Errorf("status %s", st)
		}

		clock.Advance(time.Minute) // at LeaseUntil, the lease has expired
		st, err = backfill.StatusOf(t.Context(), l, id, clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{"partition 2026-01-03: the lease of worker dead expired at 2026-03-01T00:01:00Z; the next worker to run the backfill takes it over"}; !slices.Equal(st.Blocked, want) {
			t.Errorf("status blocked %q; want %q", st.Blocked, want)
		}
		rep, err = b.Run(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		bfCheckReport(t, rep, backfill.Report{Total: 5, Succeeded: 1, Skipped: 4})
		h, _ := l.History(t.Context(), bfDAGID, bfDay(3).Start)
		if len(h) != 2 || h[0].State != ledger.StateFailed || h[0].Worker != "dead" ||
			h[0].Err != "lease expired at 2026-03-01T00:01:00Z; taken over by worker w1" ||
			h[1].State != ledger.StateSucceeded || h[1].Worker != "w1" || h[1].Number != 2 || h[1].RunID != h[0].RunID {
			t.Errorf("history %+v", h)
		}
		if got, want := p.Calls(), bfKeys(5, 4, 2, 1, 3); !slices.Equal(got, want) {
			t.Errorf("ran %v; want %v", got, want)
		}
		st, _ = backfill.StatusOf(t.Context(), l, id, clock.Now())
		if !st.Done() || len(st.Blocked) != 0 {
			t.Errorf("status %s, blocked %q", st, st.Blocked)
		}
	})
}

// bfGatedLedger drops heartbeats while drop is set, as if the worker's
// connection to the ledger stalled.
type bfGatedLedger struct {
	ledger.Ledger
	drop  atomic.Bool
	beats atomic.Int64
}

func (l *bfGatedLedger) Heartbeat(ctx context.Context, lease *ledger.Lease, d time.Duration) error {
	l.beats.Add(1)
	if l.drop.Load() {
		return nil
	}
	return l.Ledger.Heartbeat(ctx, lease, d)
}

// A worker whose lease expired and was taken over records nothing: it
// learns it at its next heartbeat, which stops its run, or when it
// finishes.
func TestBackfillFencing(t *testing.T) {
	for _, how := range []string{"heartbeat", "finish"} {
		t.Run(how, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				clock := ledgertest.NewClock(bfT0)
				mem := memledger.New(clock.Now)
				gated := &bfGatedLedger{Ledger: mem}
				entered, release := make(chan struct{}), make(chan struct{})
				var calls atomic.Int64
				p := &bfProbe{hook: func(ctx context.Context, _ string) error {
					if calls.Add(1) > 1 {
						return nil // the worker that takes over
					}
					close(entered)
					select {
					case <-ctx.Done():
						return context.Cause(ctx)
					case <-release:
						return nil
					}
				}}
				dag := bfDAG(t, p, false)
				w := bfDays(t, 5, 5)
				heartbeat := 59 * time.Second // never, within the test
				if how == "heartbeat" {
					heartbeat = 2 * time.Millisecond
				}
				a := &backfill.Backfill{DAG: dag, Window: w, Ledger: gated, Worker: "A", Lease: time.Minute, Heartbeat: heartbeat, Now: clock.Now}
				type result struct {
					rep *backfill.Report
					err error
				}
				done := make(chan result, 1)
				go func() {
					rep, err := a.Run(t.Context())
					done <- result{rep, err}
				}()
				select {
				case <-entered:
				case r := <-done:
					t.Fatalf("A returned before running: %v", r.err)
				}
				// A stalls: its heartbeats stop reaching the ledger. Once one
				// more has been dropped, none is in flight.
				gated.drop.Store(true)
				n := gated.beats.Load()
				for how == "heartbeat" && gated.beats.Load() < n+1 {
					time.Sleep(time.Millisecond)
				}
				clock.Advance(2 * time.Minute)
				bw := &backfill.Backfill{DAG: dag, Window: w, Ledger: mem, Worker: "B", Now: clock.Now}
				rep, err := bw.Run(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				bfCheckReport(t, rep, backfill.Report{Total: 1, Succeeded: 1})
				// A comes back.
				if how == "heartbeat" {
					gated.drop.Store(false)
				} else {
					close(release)
				}
				var r result
				select {
				case r = <-done:
				case <-time.After(5 * time.Second):
					t.Fatal("A did not stop")
				}
				if !errors.Is(r.err, tranche.ErrFenced) {
					t.Errorf("A: %v; want ErrFenced", r.err)
				}
				bfCheckReport(t, r.rep, backfill.Report{Total: 1, Failed: 1})
				if len(r.rep.Failures) == 1 && !errors.Is(r.rep.Failures[0].Err, tranche.ErrFenced) {
					t.Errorf("A's failure: %v", r.rep.Failures[0].Err)
				}
				h, _ := mem.History(t.Context(), bfDAGID, bfDay(5).Start)
				if len(h) != 2 || h[0].Worker != "A" || h[0].State != ledger.StateFailed || h[0].Err != "lease expired at 2026-03-01T00:01:00Z; taken over by worker B" ||
					h[1].Worker != "B" || h[1].State != ledger.StateSucceeded || h[1].Number != 2 {
					t.Errorf("history %+v; want A's attempt failed by takeover and B's succeeded", h)
				}
			})
		})
	}
}

// Executing a plan whose ledger moved on runs nothing and returns the new
// plan.
func TestBackfillStalePlan(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := memledger.New(nil)
		p := new(bfProbe)
		dag := bfDAG(t, p, false)
		b := &backfill.Backfill{DAG: dag, Window: bfDays(t, 1, 5), Ledger: l}
		plan, err := b.Plan(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if plan.Revision != 0 || plan.Counts.Run != 5 {
			t.Fatalf("plan %s at revision %d", plan, plan.Revision)
		}
		bfNothingWritten(t, l, bfDAGID, b.Window) // a dry run writes nothing
		if _, err := backfill.RunRecorded(t.Context(), l, nil, dag, bfDay(2), "daily"); err != nil {
			t.Fatal(err)
		}
		rep, err := b.Execute(t.Context(), plan)
		var stale *backfill.StalePlanError
		if !errors.As(err, &stale) || rep != nil {
			t.Fatalf("Execute of a stale plan: %v, %v; want a *StalePlanError", rep, err)
		}
		if stale.Old != plan || stale.Plan.Revision != 2 || stale.Plan.Counts.Run != 4 || stale.Plan.Counts.SkipSucceeded != 1 {
			t.Errorf("stale plan error: old %v, new %s at revision %d", stale.Old == plan, stale.Plan, stale.Plan.Revision)
		}
		if want := "tranche: backfill " + bfJanuary5DaysID + ": its partitions changed in the ledger since the plan was made (at revision 0, now 2); review the new plan"; err.Error() != want {
			t.Errorf("error %q; want %q", err, want)
		}
		if got := p.Calls(); len(got) != 1 {
			t.Errorf("ran %v; want only the ordinary run", got)
		}
		if bs, _ := l.Backfills(t.Context()); len(bs) != 0 {
			t.Errorf("backfills recorded: %v", bs)
		}
		rep, err = b.Execute(t.Context(), stale.Plan)
		if err != nil {
			t.Fatal(err)
		}
		bfCheckReport(t, rep, backfill.Report{Total: 5, Succeeded: 4, Skipped: 1})
		if rep.Plan != stale.Plan {
			t.Error("report does not hold its plan")
		}
		// A plan of another backfill is refused.
		other := &backfill.Backfill{DAG: dag, Window: bfDays(t, 1, 6), Ledger: l}
		if _, err := other.Execute(t.Context(), stale.Plan); err == nil || !strings.Contains(err.Error(), "plan of backfill "+bfJanuary5DaysID+" given to backfill") {
			t.Errorf("Execute of another backfill's plan: %v", err)
		}
	})
}

const bfJanuary5DaysID = "b258991b84c7" // ID of bfDAG over 2026-01-01..05, chunk 1

// bfPlanScenario is a ledger with every kind of history over the eight
// days 2026-01-01..08, at 10:01:31 on the 8th: days 1, 2 and 5 succeeded
// (in 40s, 20s and 30s), 3 failed, 4 is held by a live lease, and 6 to 8
// were never run.
func bfPlanScenario(t *testing.T) (*ledgertest.Clock, *memledger.Ledger) {
	clock := ledgertest.NewClock(time.Date(2026, 1, 8, 10, 0, 0, 0, time.UTC))
	l := memledger.New(clock.Now)
	bfSeed(t, l, clock, bfDAGID, bfDay(1), "w0", ledger.StateSucceeded, 40*time.Second, time.Minute)
	bfSeed(t, l, clock, bfDAGID, bfDay(2), "w0", ledger.StateSucceeded, 20*time.Second, time.Minute)
	bfSeed(t, l, clock, bfDAGID, bfDay(3), "w0", ledger.StateFailed, time.Second, time.Minute)
	bfSeed(t, l, clock, bfDAGID, bfDay(4), "dead", ledger.StateRunning, 0, time.Hour)
	bfSeed(t, l, clock, bfDAGID, bfDay(5), "w1", ledger.StateSucceeded, 30*time.Second, time.Minute)
	return clock, l
}

func TestBackfillPlanGolden(t *testing.T) {
	tests := []struct {
		name string
		b    backfill.Backfill
	}{
		{"backfill_plan", backfill.Backfill{Concurrency: 2}},
		{"backfill_plan_chunks", backfill.Backfill{ChunkSize: 3, Order: backfill.OldestFirst, Rerun: ledger.RerunNone, OnFailure: tranche.FailContinue}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock, l := bfPlanScenario(t)
			b := tt.b
			b.DAG, b.Window, b.Ledger, b.Now = bfDAG(t, new(bfProbe), true), bfDays(t, 1, 8), l, clock.Now
			plan, err := b.Plan(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			var text, js bytes.Buffer
			if err := plan.WriteText(t.Context(), &text); err != nil {
				t.Fatal(err)
			}
			text.WriteString(plan.String() + "\n")
			bfGolden(t, tt.name+".txt", text.Bytes())
			if err := plan.WriteJSON(t.Context(), &js); err != nil {
				t.Fatal(err)
			}
			var v struct {
				Backfill   string
				Counts     backfill.PlanCounts
				Partitions []struct{ Key, Action string }
			}
			if err := json.Unmarshal(js.Bytes(), &v); err != nil {
				t.Fatalf("plan JSON does not parse: %v\n%s", err, js.Bytes())
			}
			if v.Backfill != plan.Backfill || v.Counts != plan.Counts || len(v.Partitions) != 8 {
				t.Errorf("plan JSON %+v", v)
			}
			bfGolden(t, tt.name+".json", js.Bytes())
		})
	}
}

// The estimate is the median of the last 20 successful durations times
// the rounds of runs at the plan's concurrency.
func TestBackfillPlanEstimate(t *testing.T) {
	tests := []struct {
		name        string
		durations   []time.Duration // of days 1, 2, ..., in the order they ran
		days        int
		concurrency int
		want        time.Duration
	}{
		{"no history", nil, 10, 1, 0},
		{"three", []time.Duration{10 * time.Second, 50 * time.Second, 20 * time.Second}, 10, 2, 20 * time.Second * 4},
		{"one", []time.Duration{time.Minute}, 4, 1, 3 * time.Minute},
		{"the last 20 only", append(slices.Repeat([]time.Duration{time.Hour}, 5), slices.Repeat([]time.Duration{10 * time.Second}, 20)...), 30, 1, 50 * time.Second},
		{"all succeeded", []time.Duration{time.Second, time.Second}, 2, 1, 0},
		{"under a second", []time.Duration{200 * time.Millisecond}, 2, 1, 200 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := ledgertest.NewClock(bfT0)
			l := memledger.New(clock.Now)
			for i, d := range tt.durations {
				bfSeed(t, l, clock, bfDAGID, bfDay(i+1), "w", ledger.StateSucceeded, d, 2*time.Hour)
			}
			b := &backfill.Backfill{DAG: bfDAG(t, new(bfProbe), false), Window: bfDays(t, 1, tt.days), Ledger: l, Concurrency: tt.concurrency, Now: clock.Now}
			plan, err := b.Plan(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if plan.Estimate != tt.want {
				t.Errorf("estimate %v; want %v", plan.Estimate, tt.want)
			}
			// A short estimate reads in milliseconds, not as 0s.
			if tt.name == "under a second" && !strings.HasSuffix(plan.String(), "; about 200ms") {
				t.Errorf("plan %q; want it to end with about 200ms", plan)
			}
			noEstimate := slices.Contains(plan.Warnings, "no successful run of this DAG recorded: no estimate")
			if noEstimate != (tt.durations == nil) {
				t.Errorf("warnings %q", plan.Warnings)
			}
		})
	}

	// Durations a backfill records come from the ledger's clock: an asset
	// that takes 10s, 20s, ... 50s on it gives a median of 30s.
	clock := ledgertest.NewClock(bfT0)
	l := memledger.New(clock.Now)
	p := &bfProbe{hook: func(_ context.Context, target string) error {
		d, _ := time.Parse(time.DateOnly, target)
		clock.Advance(time.Duration(d.Day()) * 10 * time.Second)
		return nil
	}}
	b := &backfill.Backfill{DAG: bfDAG(t, p, false), Window: bfDays(t, 1, 5), Ledger: l, Now: clock.Now}
	if _, err := b.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	b.Rerun, b.Concurrency = ledger.RerunAll, 2
	plan, err := b.Plan(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if want := 30 * time.Second * 3; plan.Estimate != want {
		t.Errorf("estimate after a run %v; want %v", plan.Estimate, want)
	}
	if got, want := plan.String(), "backfill "+bfJanuary5DaysID+" of day 2026-01-01..2026-01-05 UTC: 5 partitions: 5 to run in 5 runs, 0 succeeded, 0 running elsewhere; about 1m30s"; got != want {
		t.Errorf("plan %q; want %q", got, want)
	}
	if want := "rerun policy all runs succeeded partitions again"; !slices.Contains(plan.Warnings, want) {
		t.Errorf("warnings %q; want %q", plan.Warnings, want)
	}
}

func TestBackfillStatus(t *testing.T) {
	clock, l := bfPlanScenario(t)
	b := &backfill.Backfill{DAG: bfDAG(t, new(bfProbe), false), Window: bfDays(t, 1, 8), Ledger: l, Now: clock.Now}
	id, _ := b.ID()
	if _, err := backfill.StatusOf(t.Context(), l, id, clock.Now()); !errors.Is(err, ledger.ErrUnknownBackfill) {
		t.Errorf("StatusOf an unrecorded backfill: %v; want ErrUnknownBackfill", err)
	}
	if _, err := l.PutBackfill(t.Context(), ledger.BackfillRecord{ID: id, DAG: bfDAGID, Window: b.Window.String(), Chunk: 1}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		advance time.Duration
		cancel  bool
		counts  map[ledger.State]int
		blocked []string
	}{
		{"held", 0, false, map[ledger.State]int{ledger.StateSucceeded: 3, ledger.StateFailed: 1, ledger.StateRunning: 1, ledger.StatePending: 3},
			[]string{"partition 2026-01-04 held by worker dead until 2026-01-08T11:01:01Z"}},
		{"expired", time.Hour, false, map[ledger.State]int{ledger.StateSucceeded: 3, ledger.StateFailed: 1, ledger.StateRunning: 1, ledger.StatePending: 3},
			[]string{"partition 2026-01-04: the lease of worker dead expired at 2026-01-08T11:01:01Z; the next worker to run the backfill takes it over",
				"stopped after the failure of partition 2026-01-03 by worker w0: boom"}},
		{"canceled", 0, true, map[ledger.State]int{ledger.StateSucceeded: 3, ledger.StateFailed: 1, ledger.StateRunning: 1, ledger.StatePending: 3},
			[]string{"canceled: workers claim nothing more until it is resumed (the resume command)",
				"partition 2026-01-04: the lease of worker dead expired at 2026-01-08T11:01:01Z; the next worker to run the backfill takes it over",
				"stopped after the failure of partition 2026-01-03 by worker w0: boom"}},
	}
	for _, tt := range tests {
		clock.Advance(tt.advance)
		if tt.cancel {
			if err := l.CancelBackfill(t.Context(), id, ledger.CancelOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		st, err := backfill.StatusOf(t.Context(), l, id, clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		if !mapsEqualNonZero(st.Counts, tt.counts) {
			t.Errorf("%s: counts %v; want %v", tt.name, st.Counts, tt.counts)
		}
		if !slices.Equal(st.Blocked, tt.blocked) {
			t.Errorf("%s: blocked\n%q\nwant\n%q", tt.name, st.Blocked, tt.blocked)
		}
		if st.Done() {
			t.Errorf("%s: done", tt.name)
		}
	}
	var got []string
	for ps, err := range func() *backfill.Status {
		st, _ := backfill.StatusOf(t.Context(), l, id, clock.Now())
		return st
	}().Partitions(t.Context()) {
		if err != nil {
			t.Fatal(err)
		}
		s := ps.Partition.Key() + " " + string(ps.State)
		if ps.Latest != nil {
			s += " " + ps.Latest.Worker
		}
		got = append(got, s)
	}
	want := []string{"2026-01-08 pending", "2026-01-07 pending", "2026-01-06 pending", "2026-01-05 succeeded w1",
		"2026-01-04 running dead", "2026-01-03 failed w0", "2026-01-02 succeeded w0", "2026-01-01 succeeded w0"}
	if !slices.Equal(got, want) {
		t.Errorf("partitions\n%q\nwant\n%q", got, want)
	}
}

// A backfill's events: started, then per partition claimed, started,
// succeeded or failed, skipped or held, then how it ended, each with
// progress counts that add up.
func TestBackfillEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clock := ledgertest.NewClock(bfT0)
		l := memledger.New(clock.Now)
		bfSeed(t, l, clock, bfDAGID, bfDay(1), "seed", ledger.StateSucceeded, time.Second, time.Minute)
		bfSeed(t, l, clock, bfDAGID, bfDay(2), "dead", ledger.StateRunning, 0, time.Hour)
		rec, runs := new(tranchetest.Recorder), new(tranchetest.Recorder)
		p := &bfProbe{hook: bfFailOn(true, "2026-01-03")}
		w := bfDays(t, 1, 4)
		b := &backfill.Backfill{DAG: bfDAG(t, p, false), Window: w, Ledger: l, Now: clock.Now, OnFailure: tranche.FailContinue,
			OnEvent: rec.OnEvent, Runner: &tranche.Runner{OnEvent: runs.OnEvent}}
		id, _ := b.ID()
		if _, err := b.Run(t.Context()); err == nil {
			t.Fatal("no error")
		}
		events := rec.Events()
		byTarget := map[string][]tranche.Kind{}
		for i, e := range events {
			if e.Backfill != id || e.Progress == nil || e.Time.IsZero() {
				t.Errorf("event %d %s: backfill %q, progress %v, time %v", i, e.Kind, e.Backfill, e.Progress, e.Time)
				continue
			}
			if pr := e.Progress; pr.Total != 4 || pr.Done+pr.Failed+pr.Skipped > pr.Total || pr.Done < 0 || pr.Failed < 0 || pr.Skipped < 0 {
				t.Errorf("event %d %s: progress %+v", i, e.Kind, *pr)
			}
			if strings.HasPrefix(string(e.Kind), "partition.") {
				byTarget[e.Target] = append(byTarget[e.Target], e.Kind)
				p, _ := tranche.ParsePartitionKey(tranche.Day, e.Target, time.UTC)
				if e.Partition.Key() != e.Target || e.RunID != backfill.RunID(bfDAGID, p.Start, p.End) {
					t.Errorf("event %d %s: partition %s, run %s", i, e.Kind, e.Partition.Key(), e.RunID)
				}
				if (e.Kind == backfill.KindPartitionFailed) != (e.Err != nil) {
					t.Errorf("event %d %s: error %v", i, e.Kind, e.Err)
				}
			} else if e.Target != w.String() || !e.Window.Equal(w) || e.RunID != "" {
				t.Errorf("event %d %s: target %q, window %s, run %q", i, e.Kind, e.Target, e.Window, e.RunID)
			}
		}
		want := map[string][]tranche.Kind{
			"2026-01-04": {backfill.KindPartitionClaimed, backfill.KindPartitionStarted, backfill.KindPartitionSucceeded},
			"2026-01-03": {backfill.KindPartitionClaimed, backfill.KindPartitionStarted, backfill.KindPartitionFailed},
			"2026-01-02": {backfill.KindPartitionHeld},
			"2026-01-01": {backfill.KindPartitionSkipped},
		}
		if diff := cmp.Diff(want, byTarget); diff != "" {
			t.Errorf("partition events (-want +got):\n%s", diff)
		}
		first, last := events[0], events[len(events)-1]
		if first.Kind != backfill.KindStarted || *first.Progress != (tranche.Progress{Total: 4}) {
			t.Errorf("first event %s %+v", first.Kind, *first.Progress)
		}
		if last.Kind != backfill.KindFailed || last.Err == nil || !strings.Contains(last.Err.Error(), "boom on 2026-01-03") ||
			!strings.Contains(last.Err.Error(), "and 1 partition is held by other workers") || *last.Progress != (tranche.Progress{Done: 1, Failed: 1, Skipped: 1, Held: 1, Total: 4}) {
			t.Errorf("last event %s %v %+v", last.Kind, last.Err, *last.Progress)
		}
		for _, e := range events {
			if e.Kind == backfill.KindPartitionFailed && !strings.Contains(e.Err.Error(), "boom on 2026-01-03") {
				t.Errorf("failed event: %v", e.Err)
			}
		}
		// The runner's events carry the run id and attempt of the ledger, and
		// the backfill's id.
		rec.Reset()
		runs.Reset()
		clock.Advance(2 * time.Hour) // day 2's lease expires
		rep, err := b.Run(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		bfCheckReport(t, rep, backfill.Report{Total: 4, Succeeded: 2, Skipped: 2})
		got := map[string]int{}
		for _, e := range runs.Events() {
			if e.Kind == tranche.KindRunStarted {
				got[e.Target] = e.Attempt
				if p, _ := tranche.ParsePartitionKey(tranche.Day, e.Target, time.UTC); e.RunID != backfill.RunID(bfDAGID, p.Start, p.End) {
					t.Errorf("run %s of %s; want its partition's run id", e.RunID, e.Target)
				}
			}
			if id, _ := b.ID(); e.Backfill != id {
				t.Errorf("%s event of run %s has backfill %q, want %q", e.Kind, e.RunID, e.Backfill, id)
			}
		}
		if want := map[string]int{"2026-01-03": 2, "2026-01-02": 2}; !cmp.Equal(got, want) {
			t.Errorf("run attempts %v; want %v", got, want)
		}
		events = rec.Events()
		if last := events[len(events)-1]; last.Kind != backfill.KindSucceeded || last.Err != nil || *last.Progress != (tranche.Progress{Done: 2, Skipped: 2, Total: 4}) {
			t.Errorf("last event %s %v %+v", last.Kind, last.Err, *last.Progress)
		}
	})
}

// A chunk's events name its window.
func TestBackfillChunkEvents(t *testing.T) {
	rec := new(tranchetest.Recorder)
	b := &backfill.Backfill{DAG: bfDAG(t, new(bfProbe), true), Window: bfDays(t, 1, 3), Ledger: memledger.New(nil), ChunkSize: 2, OnEvent: rec.OnEvent}
	if _, err := b.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range rec.Events() {
		if e.Kind == backfill.KindPartitionSucceeded {
			part := "-"
			if e.Partition != (tranche.TimePartition{}) {
				part = e.Partition.Key()
			}
			got = append(got, fmt.Sprintf("%s | %s | %s | %d/%d", e.Target, e.Window, part, e.Progress.Done, e.Progress.Total))
		}
	}
	want := []string{"day 2026-01-02..2026-01-03 UTC | day 2026-01-02..2026-01-03 UTC | - | 2/3", "2026-01-01 | empty | 2026-01-01 | 3/3"}
	if !slices.Equal(got, want) {
		t.Errorf("succeeded events\n%q\nwant\n%q", got, want)
	}
}

// A hook that panics is reported and changes nothing else.
func TestBackfillHookPanics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := memledger.New(nil)
		b := &backfill.Backfill{DAG: bfDAG(t, new(bfProbe), false), Window: bfDays(t, 1, 3), Ledger: l,
			OnEvent: func(_ context.Context, e tranche.Event) {
				if e.Kind == backfill.KindPartitionSucceeded {
					panic("hook broke on " + e.Target)
				}
			}}
		rep, err := b.Run(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		bfCheckReport(t, rep, backfill.Report{Total: 3, Succeeded: 3})
		var pe *tranche.PanicError
		if !errors.As(rep.HookErr, &pe) || !strings.Contains(rep.HookErr.Error(), "hook broke on 2026-01-02") {
			t.Errorf("HookErr %v; want the panics", rep.HookErr)
		}
		if got := bfLatest(t, l, bfDAGID, bfDays(t, 1, 3)); len(got) != 3 {
			t.Errorf("ledger %v", got)
		}
	})
}

// The progress reporter writes a plain line when a partition finishes, at
// most one a second, and one for the end, when its writer is not a
// terminal; held partitions are counted apart from skipped ones, and a
// run that leaves some is not called succeeded.
func TestProgressReporterPlain(t *testing.T) {
	var buf bytes.Buffer
	report := backfill.NewProgressReporter(&buf)
	t0 := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	ctx := t.Context()
	ev := func(kind tranche.Kind, at time.Duration, target string, p tranche.Progress, err error) {
		report(ctx, tranche.Event{Kind: kind, Time: t0.Add(at), Backfill: "e398d24f7c20", Target: target, Progress: &p, Err: err})
	}
	ev(backfill.KindStarted, 0, "day 2026-01-01..2026-01-05 UTC", tranche.Progress{Total: 5}, nil)
	ev(backfill.KindPartitionSkipped, 0, "2026-01-05", tranche.Progress{Skipped: 1, Total: 5}, nil)
	ev(backfill.KindPartitionClaimed, 0, "2026-01-04", tranche.Progress{Skipped: 1, Total: 5}, nil)
	ev(backfill.KindPartitionStarted, 0, "2026-01-04", tranche.Progress{Skipped: 1, Total: 5}, nil)
	ev(backfill.KindPartitionSucceeded, 2*time.Second, "2026-01-04", tranche.Progress{Done: 1, Skipped: 1, Total: 5, ETA: 6 * time.Second}, nil)
	report(ctx, tranche.Event{Kind: tranche.KindRunSucceeded, Time: t0.Add(3 * time.Second), Target: "2026-01-03"}) // no progress: ignored
	ev(backfill.KindPartitionFailed, 4*time.Second, "2026-01-03", tranche.Progress{Done: 1, Failed: 1, Skipped: 1, Total: 5, ETA: 4 * time.Second}, errors.New("boom"))
	ev(backfill.KindPartitionHeld, 4*time.Second, "2026-01-02", tranche.Progress{Done: 1, Failed: 1, Skipped: 1, Held: 1, Total: 5, ETA: 2 * time.Second}, nil)
	ev(backfill.KindPartitionSucceeded, 5*time.Second, "2026-01-01", tranche.Progress{Done: 2, Failed: 1, Skipped: 1, Held: 1, Total: 5}, nil)
	ev(backfill.KindFailed, 5*time.Second, "day 2026-01-01..2026-01-05 UTC", tranche.Progress{Done: 2, Failed: 1, Skipped: 1, Held: 1, Total: 5}, errors.New("1 failed"))
	ev(backfill.KindStarted, 10*time.Second, "day 2026-01-01..2026-01-05 UTC", tranche.Progress{Total: 5}, nil)
	// Two partitions finish within a second: one line.
	ev(backfill.KindPartitionSucceeded, 11*time.Second, "2026-01-03", tranche.Progress{Done: 1, Skipped: 3, Held: 1, Total: 5, ETA: 400 * time.Millisecond}, nil)
	ev(backfill.KindPartitionSucceeded, 11500*time.Millisecond, "2026-01-02", tranche.Progress{Done: 2, Skipped: 2, Held: 1, Total: 5}, nil)
	ev(backfill.KindUnfinished, 11500*time.Millisecond, "day 2026-01-01..2026-01-05 UTC", tranche.Progress{Done: 2, Skipped: 2, Held: 1, Total: 5}, nil)
	ev(backfill.KindStarted, 20*time.Second, "day 2026-01-01..2026-01-05 UTC", tranche.Progress{Total: 5}, nil)
	ev(backfill.KindPartitionSucceeded, 21*time.Second, "2026-01-05", tranche.Progress{Done: 1, Skipped: 4, Total: 5}, nil)
	ev(backfill.KindSucceeded, 21*time.Second, "day 2026-01-01..2026-01-05 UTC", tranche.Progress{Done: 1, Skipped: 4, Total: 5}, nil)
	ev(backfill.KindCanceled, 22*time.Second, "day 2026-01-01..2026-01-05 UTC", tranche.Progress{Done: 1, Skipped: 4, Total: 5}, nil)
	bfGolden(t, "backfill_progress.txt", buf.Bytes())

	// Through a backfill of five quick partitions: a line for the
	// first, none for the others within the second, one for the end.
	buf.Reset()
	b := &backfill.Backfill{DAG: bfDAG(t, new(bfProbe), false), Window: bfDays(t, 1, 5), Ledger: memledger.New(nil), OnEvent: backfill.NewProgressReporter(&buf)}
	if _, err := b.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "backfill "+bfJanuary5DaysID+": 2026-01-05 succeeded (1/5 done, 0 failed, 0 skipped") ||
		!strings.HasPrefix(lines[1], "backfill "+bfJanuary5DaysID+" succeeded: 5/5 done, 0 failed, 0 skipped") {
		t.Errorf("progress lines:\n%s", buf.String())
	}
}

// Without a terminal, a million partitions make a line a second, not a
// line each; the first failures are each listed.
func TestProgressReporterThrottles(t *testing.T) {
	var buf bytes.Buffer
	report := backfill.NewProgressReporter(&buf)
	t0 := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	const n = 1_000_000
	report(t.Context(), tranche.Event{Kind: backfill.KindStarted, Time: t0, Progress: &tranche.Progress{Total: n}})
	for i := range n {
		kind, p := backfill.KindPartitionSucceeded, tranche.Progress{Done: i + 1, Total: n}
		if i%1000 == 999 {
			kind, p = backfill.KindPartitionFailed, tranche.Progress{Done: i, Failed: 1, Total: n}
		}
		// 10,000 partitions a second: 100 seconds in all.
		report(t.Context(), tranche.Event{Kind: kind, Time: t0.Add(time.Duration(i+1) * 100 * time.Microsecond), Target: fmt.Sprint(i), Progress: &p})
	}
	report(t.Context(), tranche.Event{Kind: backfill.KindFailed, Time: t0.Add(100 * time.Second), Progress: &tranche.Progress{Done: n - 1000, Failed: 1000, Total: n}})
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	// A line a second, 10 failures listed, and the end.
	if len(lines) < 100 || len(lines) > 115 {
		t.Fatalf("%d lines for %d partitions in 100s; want about one a second, the first 10 failures, and the end", len(lines), n)
	}
	failures := 0
	for _, l := range lines {
		if strings.Contains(l, " failed (") {
			failures++
		}
	}
	if failures < 10 || !strings.Contains(buf.String(), "further failures are counted, not listed") ||
		!strings.HasPrefix(lines[len(lines)-1], "backfill  failed: 999000/1000000 done, 1000 failed, 0 skipped, 10000.0 partitions/s") {
		t.Errorf("%d failure lines, last line %q", failures, lines[len(lines)-1])
	}
}

// Two workers running the same backfill at once on one ledger run each
// partition once between them; waiting for each other, both end with
// every partition done.
func TestBackfillTwoWorkers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := memledger.New(nil)
		var mu sync.Mutex
		runs := map[string]int{}
		p := &bfProbe{hook: func(_ context.Context, target string) error {
			mu.Lock()
			runs[target]++
			mu.Unlock()
			time.Sleep(100 * time.Microsecond)
			return nil
		}}
		dag := bfDAG(t, p, false)
		w := bfDays(t, 1, 31)
		reports := make([]*backfill.Report, 2)
		var wg sync.WaitGroup
		for i := range reports {
			b := &backfill.Backfill{DAG: dag, Window: w, Ledger: l, Worker: fmt.Sprint("w", i), Concurrency: 3, WaitForOthers: true}
			wg.Go(func() {
				rep, err := b.Run(t.Context())
				if err != nil {
					t.Error(err)
				}
				reports[i] = rep
			})
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		for i, r := range reports {
			if sum := r.Succeeded + r.Failed + r.Skipped + r.Elsewhere + r.NotRun; sum != 31 || r.Failed != 0 || r.NotRun != 0 || r.Held != 0 || !r.Done() {
				t.Errorf("worker %d: %s", i, r)
			}
		}
		if got := reports[0].Succeeded + reports[1].Succeeded; got != 31 {
			t.Errorf("succeeded %d + %d; want 31 in all", reports[0].Succeeded, reports[1].Succeeded)
		}
		for d := 1; d <= 31; d++ {
			if n := runs[bfDay(d).Key()]; n != 1 {
				t.Errorf("day %d ran %d times", d, n)
			}
			if h := bfHistory(t, l, bfDAGID, bfDay(d)); len(h) != 1 || !strings.HasPrefix(h[0], "1 succeeded w") {
				t.Errorf("day %d: history %q", d, h)
			}
		}
		t.Logf("w0: %s; w1: %s", reports[0], reports[1])
	})
}
