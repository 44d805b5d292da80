package proctest

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/ledger"
)

// EveryAttempt is a ledger without its optional interfaces
// (ledger.LatestReader): the status, grid and plan of a backfill read
// every latest attempt from it, as they did before ledgers counted
// them. The benchmarks measure the old path with it, beside the new.
type EveryAttempt struct{ ledger.Ledger }

// ReadsBackfill fills l, unless it holds them already, with one attempt
// at each of n hourly partitions (see Fill), records the backfill of the
// window, and returns the DAG, the window and the backfill's id: what
// the benchmarks of StatusOf, Grid and Plan read.
func ReadsBackfill(t testing.TB, l ledger.Ledger, n int) (*tranche.DAG, tranche.TimePartitionWindow, string) {
	t.Helper()
	dag, w := Hourly(t, n)
	id := tranche.DAGIdentity(dag, tranche.Hour, time.UTC)
	ctx := context.Background()
	if rev, err := l.RevisionIn(ctx, id, w.Start(), w.End(), 0); err != nil {
		t.Fatal(err)
	} else if rev == 0 {
		Fill(t, l, id, w, "host-12345")
	}
	bid := backfill.BackfillID(id, w, 1)
	if _, err := l.PutBackfill(ctx, ledger.BackfillRecord{ID: bid, DAG: id, Window: w.String(), Chunk: 1}); err != nil {
		t.Fatal(err)
	}
	return dag, w, bid
}

// A Read is one of the reads the benchmarks time: StatusOf, Grid (of
// 2,000 cells at most) or Plan of the backfill of ReadsBackfill.
type Read struct {
	Name string
	Run  func(ctx context.Context, l ledger.Ledger, dag *tranche.DAG, w tranche.TimePartitionWindow, id string) error
}

// Reads are the reads the benchmarks time, each checking its answer for
// a ledger filled by Fill.
var Reads = []Read{
	{"StatusOf", func(ctx context.Context, l ledger.Ledger, _ *tranche.DAG, w tranche.TimePartitionWindow, id string) error {
		s, err := backfill.StatusOf(ctx, l, id, time.Now())
		if err != nil {
			return err
		}
		if s.Counts[ledger.StateFailed] != w.Len()/10 || len(s.Blocked) != 0 {
			return fmt.Errorf("status %v, blocked %q; want %d failed", s.Counts, s.Blocked, w.Len()/10)
		}
		return nil
	}},
	{"Grid", func(ctx context.Context, l ledger.Ledger, _ *tranche.DAG, w tranche.TimePartitionWindow, id string) error {
		s, err := backfill.StatusOf(ctx, l, id, time.Now())
		if err != nil {
			return err
		}
		g, err := s.Grid(ctx, 2000)
		if err != nil {
			return err
		}
		total := 0
		for _, c := range g.Cells {
			total += c.Partitions
		}
		if len(g.Cells) > 2000 || total != w.Len() {
			return fmt.Errorf("grid of %d cells holding %d partitions; want at most 2000 holding %d", len(g.Cells), total, w.Len())
		}
		return nil
	}},
	{"Plan", func(ctx context.Context, l ledger.Ledger, dag *tranche.DAG, w tranche.TimePartitionWindow, _ string) error {
		p, err := (&backfill.Backfill{DAG: dag, Window: w, Ledger: l, MaxPartitions: w.Len()}).Plan(ctx)
		if err != nil {
			return err
		}
		if p.Counts.Total != w.Len() || p.Counts.Run != w.Len()/10 {
			return fmt.Errorf("plan counts %+v; want %d to run", p.Counts, w.Len()/10)
		}
		return nil
	}},
}

// BenchReads times each of Reads on l, filled by ReadsBackfill with n
// partitions, counted by the ledger ("counted") and read from every
// latest attempt ("every-attempt", through EveryAttempt), in
// sub-benchmarks of one run, and reports the heap allocated per read.
func BenchReads(b *testing.B, l ledger.Ledger, n int) {
	dag, w, id := ReadsBackfill(b, l, n)
	for _, r := range Reads {
		for _, path := range []struct {
			name string
			l    ledger.Ledger
		}{{"counted", l}, {"every-attempt", EveryAttempt{l}}} {
			b.Run(r.Name+"/"+path.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if err := r.Run(b.Context(), path.l, dag, w, id); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// MeasureReads runs each of Reads once on l, filled by ReadsBackfill
// with n partitions, through the path named ("counted" or
// "every-attempt"), and logs the time each took and the peak of the
// heap in use, sampled: the measured run at a million partitions, under
// /usr/bin/time -v for the process's peak RSS.
func MeasureReads(t *testing.T, l ledger.Ledger, n int, path string) {
	dag, w, id := ReadsBackfill(t, l, n)
	if path == "every-attempt" {
		l = EveryAttempt{l}
	}
	for _, r := range Reads {
		peak, stop := sampleHeap()
		t0 := time.Now()
		err := r.Run(t.Context(), l, dag, w, id)
		took := time.Since(t0)
		stop()
		if err != nil {
			t.Fatalf("%s: %v", r.Name, err)
		}
		t.Logf("%s of %d partitions, %s: %v, heap in use at most %d MB", r.Name, n, path, took.Round(time.Millisecond), *peak>>20)
	}
}

// sampleHeap samples the heap in use every 10ms until stop is called,
// keeping the peak.
func sampleHeap() (peak *uint64, stop func()) {
	peak = new(uint64)
	done, quit := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		var m runtime.MemStats
		for {
			runtime.ReadMemStats(&m)
			*peak = max(*peak, m.HeapInuse)
			select {
			case <-quit:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	return peak, func() { close(quit); <-done }
}
