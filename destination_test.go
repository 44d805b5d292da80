package tranche_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/destination"
	"github.com/tranche-dev/tranche/destination/destinationtest"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/memledger"
	"github.com/tranche-dev/tranche/tranchetest"
)

// dailyAsset returns a daily asset, column "day", that produces rows and
// writes them to dests.
func dailyAsset(name string, rows func(m *tranche.Materialization) []tranche.Row, dests ...tranche.Destination) tranche.Asset {
	a := tranchetest.Func(name, func(_ context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
		return rows(m), nil
	})
	a.Partitioning = tranche.Partitioning{Granularity: tranche.Day, Column: "day", AllowWindow: true}
	a.Destinations = dests
	return a
}

func fixed(rows ...tranche.Row) func(*tranche.Materialization) []tranche.Row {
	return func(*tranche.Materialization) []tranche.Row { return rows }
}

func TestDestinationSplitsWindows(t *testing.T) {
	w, err := tranche.NewTimePartitionWindow(tranche.Day, jan1, jan1.AddDate(0, 0, 3)) // Jan 1..4
	if err != nil {
		t.Fatal(err)
	}
	rows := []tranche.Row{
		{"day": "2026-01-01", "n": 1},
		{"day": jan1.AddDate(0, 0, 2).Add(13 * time.Hour), "n": 2}, // a time inside Jan 3
		{"day": "2026-01-01", "n": 3},
		{"day": time.Date(2026, 1, 3, 20, 0, 0, 0, time.FixedZone("", -5*3600)), "n": 4}, // Jan 4 01:00 UTC
	}
	dest := new(tranche.MemoryDestination)
	dag := tranchetest.NewDAG(t, dailyAsset("a", fixed(rows...), dest))
	res, err := new(tranche.Runner).Run(ctxT, dag, w)
	tranchetest.RequireSucceeded(t, res, err)
	tranchetest.RequireKeys(t, dest, "a", "2026-01-01", "2026-01-02", "2026-01-03", "2026-01-04")
	tranchetest.RequireRows(t, dest, "a", "2026-01-01", []tranche.Row{rows[0], rows[2]})
	tranchetest.RequireRows(t, dest, "a", "2026-01-02", nil) // written empty
	tranchetest.RequireRows(t, dest, "a", "2026-01-03", []tranche.Row{rows[1]})
	tranchetest.RequireRows(t, dest, "a", "2026-01-04", []tranche.Row{rows[3]})
	o := assetResult(res, "a")
	if diff := cmp.Diff(map[string]int{"2026-01-01": 2, "2026-01-02": 0, "2026-01-03": 1, "2026-01-04": 1}, o.RowsByPartition); diff != "" {
		t.Errorf("RowsByPartition mismatch (-want +got):\n%s", diff)
	}
	if o.Rows != 4 || res.Rows != 4 {
		t.Errorf("Rows = %d, run rows = %d, want 4", o.Rows, res.Rows)
	}

	// A re-run replaces each partition: no duplicates, and a partition
	// that lost its rows is emptied.
	dag = tranchetest.NewDAG(t, dailyAsset("a", fixed(rows[1]), dest))
	res, err = new(tranche.Runner).Run(ctxT, dag, w)
	tranchetest.RequireSucceeded(t, res, err)
	tranchetest.RequireRows(t, dest, "a", "2026-01-01", nil)
	tranchetest.RequireRows(t, dest, "a", "2026-01-03", []tranche.Row{rows[1]})
}

func TestDestinationPartitionRun(t *testing.T) {
	dest := new(tranche.MemoryDestination)
	for _, run := range []int{1, 2} { // twice: replaced, not appended
		dag := tranchetest.NewDAG(t, dailyAsset("a", func(m *tranche.Materialization) []tranche.Row {
			p, _ := m.Partition()
			return []tranche.Row{{"day": p.Key(), "run": run}}
		}, dest), dailyAsset("empty", fixed(), dest))
		res, err := new(tranche.Runner).Run(ctxT, dag, day(7))
		tranchetest.RequireSucceeded(t, res, err)
		tranchetest.RequireRows(t, dest, "a", "2026-01-07", []tranche.Row{{"day": "2026-01-07", "run": run}})
		tranchetest.RequireRows(t, dest, "empty", "2026-01-07", nil)
	}
	tranchetest.RequireKeys(t, dest, "a", "2026-01-07")
}

func TestDestinationUnpartitioned(t *testing.T) {
	dest := new(tranche.MemoryDestination)
	a := tranchetest.Rows("dim", []tranche.Row{{"k": "v"}})
	a.Destinations = []tranche.Destination{dest}
	res, err := new(tranche.Runner).Run(ctxT, tranchetest.NewDAG(t, a), nil)
	tranchetest.RequireSucceeded(t, res, err)
	tranchetest.RequireRows(t, dest, "dim", "", []tranche.Row{{"k": "v"}})
	if o := assetResult(res, "dim"); o.RowsByPartition != nil || o.Rows != 1 {
		t.Errorf("outcome %+v", o)
	}
}

func TestDestinationBadRows(t *testing.T) {
	w, err := tranche.NewTimePartitionWindow(tranche.Day, jan1, jan1.AddDate(0, 0, 1)) // Jan 1..2
	if err != nil {
		t.Fatal(err)
	}
	ok := tranche.Row{"day": "2026-01-01"}
	for _, tc := range []struct {
		name   string
		target tranche.Target
		rows   []tranche.Row
		want   string
	}{
		{"outside the partition", day(1), []tranche.Row{ok, {"day": "2026-01-02"}},
			`asset "a": row 1: day "2026-01-02" is outside partition 2026-01-01`},
		{"outside the window", w, []tranche.Row{ok, {"day": time.Date(2026, 1, 5, 3, 0, 0, 0, time.UTC)}},
			`asset "a": row 1: day 2026-01-05T03:00:00Z is outside window day 2026-01-01..2026-01-02 UTC`},
		{"no column", w, []tranche.Row{ok, {"date": "2026-01-01"}},
			`asset "a": row 1 has no partition column "day"`},
		{"wrong type", w, []tranche.Row{{"day": 20260101}},
			`asset "a": row 0: day holds int 20260101; want a time.Time or a partition key string`},
		{"bad key", day(1), []tranche.Row{{"day": "01/01/2026"}},
			`asset "a": row 0: day "01/01/2026" is not a day partition key`},
		{"zero time", day(1), []tranche.Row{{"day": time.Time{}}},
			`asset "a": row 0: day is the zero time`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dest := new(tranche.MemoryDestination)
			res, err := new(tranche.Runner).Run(ctxT, tranchetest.NewDAG(t, dailyAsset("a", fixed(tc.rows...), dest)), tc.target)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Run error = %v, want one containing %q", err, tc.want)
			}
			tranchetest.RequireState(t, res, tranche.StateFailed, "a=failed")
			if keys := dest.Keys("a"); len(keys) > 0 {
				t.Errorf("a refused write stored partitions %v", keys)
			}
		})
	}
}

type failingDestination struct{ err error }

func (d failingDestination) Write(context.Context, []tranche.Batch) error { return d.err }

type panickingDestination struct{}

func (panickingDestination) Write(context.Context, []tranche.Batch) error { panic("disk on fire") }

func TestDestinationFailures(t *testing.T) {
	for _, tc := range []struct {
		name  string
		dest  tranche.Destination
		retry bool
		want  string
	}{
		{"error", failingDestination{errors.New("quota")}, false, "destination tranche_test.failingDestination: quota"},
		{"panic", panickingDestination{}, false, "destination tranche_test.panickingDestination panicked: disk on fire"},
		{"retryable", failingDestination{tranche.Retryable(errors.New("busy"))}, true, "after 2 attempts"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := new(tranchetest.Recorder)
			a := dailyAsset("a", fixed(), tc.dest)
			a.Retry = tranche.Retry{Attempts: 2, Backoff: time.Nanosecond}
			res, err := (&tranche.Runner{OnEvent: rec.OnEvent}).Run(ctxT, tranchetest.NewDAG(t, a), day(1))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Run error = %v, want one containing %q", err, tc.want)
			}
			tranchetest.RequireState(t, res, tranche.StateFailed)
			want := []tranche.Kind{tranche.KindAssetStarted, tranche.KindWriteStarted, tranche.KindWriteFailed}
			if tc.retry {
				want = append(append(want, tranche.KindAssetRetrying), want...)
			}
			tranchetest.RequireKinds(t, rec, "a", append(want, tranche.KindAssetFailed)...)
		})
	}
}

func TestMemoryDestinationCopies(t *testing.T) {
	dest := new(tranche.MemoryDestination)
	row := tranche.Row{"x": 1}
	if err := dest.Write(ctxT, []tranche.Batch{{Asset: "a", Rows: []tranche.Row{row}}}); err != nil {
		t.Fatal(err)
	}
	row["x"] = 2
	got, _ := dest.Rows("a", "")
	got[0]["x"] = 3
	tranchetest.RequireRows(t, dest, "a", "", []tranche.Row{{"x": 1}})
	if _, ok := dest.Rows("a", "2026-01-01"); ok {
		t.Error("Rows found a partition never written")
	}
	ctx, cancel := context.WithCancel(ctxT)
	cancel()
	if err := dest.Write(ctx, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("Write with a canceled context = %v", err)
	}
}

// batchRecorder records every batch written to it.
type batchRecorder struct {
	mu      sync.Mutex
	batches []tranche.Batch
}

func (d *batchRecorder) Write(_ context.Context, batches []tranche.Batch) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.batches = append(d.batches, batches...)
	return nil
}

func (d *batchRecorder) take() []tranche.Batch {
	d.mu.Lock()
	defer d.mu.Unlock()
	b := d.batches
	d.batches = nil
	return b
}

// TestBatchesCarryTokens checks that each batch carries its run id and
// its partition's fencing token: 0 for a run outside a ledger, and under
// a backfill the lease's token, which holds the attempt number and grows
// with each attempt.
func TestBatchesCarryTokens(t *testing.T) {
	dest := new(batchRecorder)
	dag := tranchetest.NewDAG(t, dailyAsset("a", func(m *tranche.Materialization) []tranche.Row { return nil }, dest))
	w, err := tranche.NewTimePartitionWindow(tranche.Day, jan1, jan1.AddDate(0, 0, 3))
	if err != nil {
		t.Fatal(err)
	}
	res, err := new(tranche.Runner).Run(ctxT, dag, w)
	tranchetest.RequireSucceeded(t, res, err)
	for _, b := range dest.take() {
		if b.Token != 0 || b.RunID != res.RunID {
			t.Errorf("Runner.Run batch %s: token %d, run %q; want 0, %q", b.Partition.Key(), b.Token, b.RunID, res.RunID)
		}
	}

	lg := memledger.New(nil)
	identity := backfill.DAGIdentity(dag, tranche.Day, time.UTC)
	prev := map[string]int64{}
	for attempt, rerun := range []ledger.RerunPolicy{ledger.RerunFailed, ledger.RerunAll} {
		bf := &backfill.Backfill{DAG: dag, Window: w, Ledger: lg, ChunkSize: 2, Rerun: rerun}
		if _, err := bf.Run(ctxT); err != nil {
			t.Fatal(err)
		}
		got := dest.take()
		if len(got) != w.Len() {
			t.Fatalf("attempt %d: %d batches written, want %d", attempt+1, len(got), w.Len())
		}
		ids := map[string]bool{}
		for _, b := range got {
			chunk := tranche.PartitionOf(tranche.Day, b.Partition.Start)
			if ledger.TokenAttempt(b.Token) != attempt+1 || b.Token <= prev[b.Partition.Key()] {
				t.Errorf("attempt %d: batch %s has token %d (attempt %d), after %d", attempt+1, b.Partition.Key(), b.Token, ledger.TokenAttempt(b.Token), prev[b.Partition.Key()])
			}
			prev[b.Partition.Key()] = b.Token
			// Chunks of 2, newest first, over Jan 1..4: Jan 3-4 and Jan 1-2.
			start := chunk.Start.AddDate(0, 0, -((chunk.Start.YearDay() - 1) % 2))
			if want := backfill.RunID(identity, start, start.AddDate(0, 0, 2)); b.RunID != want {
				t.Errorf("attempt %d: batch %s has run %q, want %q", attempt+1, b.Partition.Key(), b.RunID, want)
			}
			ids[destination.DeliveryID(b)] = true
		}
		if len(ids) != len(got) {
			t.Errorf("attempt %d: %d delivery ids for %d batches", attempt+1, len(ids), len(got))
		}
	}
}

// The memory destination keeps the destination contract.
func TestMemoryDestinationContract(t *testing.T) {
	destinationtest.Run(t, func(t *testing.T) destinationtest.Subject {
		d := new(tranche.MemoryDestination)
		return destinationtest.Subject{Destination: d,
			Read: func(_ context.Context, p tranche.TimePartition) ([]tranche.Row, error) {
				rows, _ := d.Rows(destinationtest.Asset, p.Key())
				return rows, nil
			}}
	})
}

// TestDestination, the suite's form outside a test, reports a
// destination that breaks the contract: one that never refuses a stale
// write.
func TestDestinationSuiteFindsUnfenced(t *testing.T) {
	err := destinationtest.TestDestination(t.Context(), func() (destinationtest.Subject, error) {
		d := new(tranche.MemoryDestination)
		return destinationtest.Subject{Destination: unfenced{d},
			Read: func(_ context.Context, p tranche.TimePartition) ([]tranche.Row, error) {
				rows, _ := d.Rows(destinationtest.Asset, p.Key())
				return rows, nil
			}}, nil
	})
	if err == nil || !strings.Contains(err.Error(), "StaleToken") || !strings.Contains(err.Error(), "ErrFenced") {
		t.Errorf("TestDestination of an unfenced destination = %v; want the StaleToken check failed", err)
	}
	if err := destinationtest.TestDestination(t.Context(), func() (destinationtest.Subject, error) {
		d := new(tranche.MemoryDestination)
		return destinationtest.Subject{Destination: d,
			Read: func(_ context.Context, p tranche.TimePartition) ([]tranche.Row, error) {
				rows, _ := d.Rows(destinationtest.Asset, p.Key())
				return rows, nil
			}}, nil
	}); err != nil {
		t.Errorf("TestDestination of the memory destination = %v", err)
	}
}

// unfenced writes every batch with token 0: a destination that ignores
// tokens.
type unfenced struct{ d *tranche.MemoryDestination }

func (u unfenced) Write(ctx context.Context, batches []tranche.Batch) error {
	bs := make([]tranche.Batch, len(batches))
	for i, b := range batches {
		b.Token, b.DAG = 0, ""
		bs[i] = b
	}
	return u.d.Write(ctx, bs)
}

// TestMaterializationBatches checks that an asset sees, through
// Materialization.Batches, the batches its destinations receive but
// their rows: the run id, and the ledger's attempt number at each
// partition as the token, with the DAG identity, under a backfill.
func TestMaterializationBatches(t *testing.T) {
	dest := new(batchRecorder)
	var mu sync.Mutex
	var seen []tranche.Batch
	dag := tranchetest.NewDAG(t, dailyAsset("a", func(m *tranche.Materialization) []tranche.Row {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, m.Batches()...)
		return nil
	}, dest))
	w, err := tranche.NewTimePartitionWindow(tranche.Day, jan1, jan1.AddDate(0, 0, 3))
	if err != nil {
		t.Fatal(err)
	}
	byKey := func(bs []tranche.Batch) []tranche.Batch {
		out := slices.Clone(bs)
		for i := range out {
			out[i].Rows = nil
		}
		slices.SortFunc(out, func(a, b tranche.Batch) int { return strings.Compare(a.Partition.Key(), b.Partition.Key()) })
		return out
	}
	check := func(what string) []tranche.Batch {
		t.Helper()
		mu.Lock()
		got := byKey(seen)
		seen = nil
		mu.Unlock()
		if diff := cmp.Diff(byKey(dest.take()), got); diff != "" {
			t.Errorf("%s: Materialization.Batches differ from the destination's batches (-written +seen):\n%s", what, diff)
		}
		return got
	}
	res, err := new(tranche.Runner).Run(ctxT, dag, w)
	tranchetest.RequireSucceeded(t, res, err)
	for _, b := range check("Runner.Run") {
		if b.Token != 0 || b.RunID != res.RunID {
			t.Errorf("Runner.Run: %s has token %d, run %q", b.Partition.Key(), b.Token, b.RunID)
		}
	}
	lg := memledger.New(nil)
	identity := backfill.DAGIdentity(dag, tranche.Day, time.UTC)
	for run, rerun := range []ledger.RerunPolicy{ledger.RerunFailed, ledger.RerunAll} {
		bf := &backfill.Backfill{DAG: dag, Window: w, Ledger: lg, ChunkSize: 2, Rerun: rerun}
		if _, err := bf.Run(ctxT); err != nil {
			t.Fatal(err)
		}
		got := check(fmt.Sprintf("backfill %d", run+1))
		if len(got) != w.Len() {
			t.Fatalf("backfill %d: %d batches seen, want %d", run+1, len(got), w.Len())
		}
		for _, b := range got {
			h, err := lg.History(ctxT, identity, b.Partition.Start)
			if err != nil {
				t.Fatal(err)
			}
			if last := h[len(h)-1]; ledger.TokenAttempt(b.Token) != last.Number || b.DAG != identity || b.RunID != last.RunID {
				t.Errorf("backfill %d: %s seen with token %d, DAG %s, run %s; the ledger's attempt is %d of %s, run %s",
					run+1, b.Partition.Key(), b.Token, b.DAG, b.RunID, last.Number, identity, last.RunID)
			}
		}
	}
	// An unpartitioned asset sees one batch without a partition.
	flat := tranchetest.Func("flat", func(_ context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, m.Batches()...)
		return nil, nil
	})
	flat.Destinations = []tranche.Destination{dest}
	res, err = new(tranche.Runner).Run(ctxT, tranchetest.NewDAG(t, flat), w)
	tranchetest.RequireSucceeded(t, res, err)
	if got := check("an unpartitioned asset"); len(got) != 1 || got[0].Partition != (tranche.TimePartition{}) || got[0].Asset != "flat" {
		t.Errorf("an unpartitioned asset sees %+v", got)
	}
}
