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
	return readsBackfill(t, l, dag, w)
}

// ScheduleReadsBackfill is ReadsBackfill of n slots from 2010 of the
// cron schedule expr in UTC, whose slots must all last step ("*/5 * * *
// *" and 5 minutes, "5 * * * *" and an hour).
func ScheduleReadsBackfill(t testing.TB, l ledger.Ledger, expr string, step time.Duration, n int) (*tranche.DAG, tranche.TimePartitionWindow, string) {
	t.Helper()
	g, err := tranche.ParseCron(expr)
	if err != nil {
		t.Fatal(err)
	}
	dag, err := ScheduledDAG("events", g, time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	first := tranche.PartitionOf(g, time.Date(2010, 1, 1, 0, 0, 0, 0, time.UTC)).Start
	w, err := tranche.NewTimePartitionWindow(g, first, first.Add(time.Duration(n-1)*step))
	if err != nil {
		t.Fatal(err)
	}
	if w.Len() != n {
		t.Fatalf("%d slots of %s from %s; want %d, each of %v", w.Len(), expr, first, n, step)
	}
	return readsBackfill(t, l, dag, w)
}

// ScheduledDAG returns a DAG of one asset named name, partitioned by g
// in loc, windows allowed, that does nothing.
func ScheduledDAG(name string, g tranche.TimeGranularity, loc *time.Location) (*tranche.DAG, error) {
	return tranche.NewDAG(tranche.Asset{Name: name,
		Partitioning: tranche.Partitioning{Granularity: g, Location: loc, AllowWindow: true},
		Materialize:  func(context.Context, *tranche.Materialization) ([]tranche.Row, error) { return nil, nil }})
}

// readsBackfill fills l with the attempts of ReadsBackfill over w for
// dag, unless it holds them, and records the backfill of w.
func readsBackfill(t testing.TB, l ledger.Ledger, dag *tranche.DAG, w tranche.TimePartitionWindow) (*tranche.DAG, tranche.TimePartitionWindow, string) {
	t.Helper()
	id := backfill.DAGIdentity(dag, w.Granularity(), time.UTC)
	ctx := context.Background()
	if rev, err := l.RevisionIn(ctx, id, w.Start(), w.End(), 0); err != nil {
		t.Fatal(err)
	} else if rev == 0 {
		Fill(t, l, id, w, "host-12345")
	}
	bid := backfill.ID(id, w, 1)
	if _, err := l.PutBackfill(ctx, ledger.BackfillRecord{ID: bid, DAG: id, Window: w.String(), Chunk: 1}); err != nil {
		t.Fatal(err)
	}
	return dag, w, bid
}

// A Read is one of the reads the benchmarks time: StatusOf, Status.Grid
// (of 2,000 cells at most) or Plan, in runs of one partition or chunks
// of ten, of the backfill of ReadsBackfill.
type Read struct {
	Name string
	Run  func(ctx context.Context, r *Reading) error
}

// Reading is what a Read reads: the backfill of ReadsBackfill in l, and
// its status, which Grid draws, read from l before the Read is timed.
type Reading struct {
	L      ledger.Ledger
	DAG    *tranche.DAG
	Window tranche.TimePartitionWindow
	ID     string
	Status *backfill.Status
}

// Reads are the reads the benchmarks time, each checking its answer for
// a ledger filled by Fill.
var Reads = []Read{
	{"StatusOf", func(ctx context.Context, r *Reading) error {
		s, err := backfill.StatusOf(ctx, r.L, r.ID, time.Now())
		if err != nil {
			return err
		}
		if s.Counts[ledger.StateFailed] != r.Window.Len()/10 || len(s.Blocked) != 0 {
			return fmt.Errorf("status %v, blocked %q; want %d failed", s.Counts, s.Blocked, r.Window.Len()/10)
		}
		return nil
	}},
	{"Grid", func(ctx context.Context, r *Reading) error {
		g, err := r.Status.Grid(ctx, 2000)
		if err != nil {
			return err
		}
		total := 0
		for _, c := range g.Cells {
			total += c.Partitions
		}
		if len(g.Cells) > 2000 || total != r.Window.Len() {
			return fmt.Errorf("grid of %d cells holding %d partitions; want at most 2000 holding %d", len(g.Cells), total, r.Window.Len())
		}
		return nil
	}},
	{"Plan", func(ctx context.Context, r *Reading) error {
		p, err := (&backfill.Backfill{DAG: r.DAG, Window: r.Window, Ledger: r.L, MaxPartitions: r.Window.Len()}).Plan(ctx)
		if err != nil {
			return err
		}
		if p.Counts.Total != r.Window.Len() || p.Counts.Run != r.Window.Len()/10 {
			return fmt.Errorf("plan counts %+v; want %d to run", p.Counts, r.Window.Len()/10)
		}
		return nil
	}},
	{"PlanChunks10", func(ctx context.Context, r *Reading) error {
		// Fill fails every tenth partition, so each chunk of ten holds
		// one failed partition among succeeded ones: a run of one.
		dag, err := windowed(r.DAG, r.Window.Granularity())
		if err != nil {
			return err
		}
		p, err := (&backfill.Backfill{DAG: dag, Window: r.Window, Ledger: r.L, MaxPartitions: r.Window.Len(), ChunkSize: 10}).Plan(ctx)
		if err != nil {
			return err
		}
		if want := r.Window.Len() / 10; p.Counts.Total != r.Window.Len() || p.Counts.Run != want || p.Counts.Runs != want {
			return fmt.Errorf("plan in chunks of 10 counts %+v; want %d to run in %d runs", p.Counts, want, want)
		}
		return nil
	}},
}

// windowed returns dag with every asset's Partitioning.AllowWindow set,
// as chunks of more than one partition need: the same DAG identity, so
// the same history in a ledger.
func windowed(dag *tranche.DAG, g tranche.TimeGranularity) (*tranche.DAG, error) {
	var assets []tranche.Asset
	for a := range dag.Assets() {
		a.Partitioning.AllowWindow = true
		assets = append(assets, a)
	}
	w, err := tranche.NewDAG(assets...)
	if err != nil {
		return nil, err
	}
	if got, want := backfill.DAGIdentity(w, g, time.UTC), backfill.DAGIdentity(dag, g, time.UTC); got != want {
		return nil, fmt.Errorf("the windowed DAG's identity is %s, not the DAG's %s", got, want)
	}
	return w, nil
}

// reading returns the Reading of the backfill of ReadsBackfill in l,
// filling l first if it is new.
func reading(t testing.TB, l ledger.Ledger, n int) *Reading {
	t.Helper()
	dag, w, id := ReadsBackfill(t, l, n)
	return &Reading{L: l, DAG: dag, Window: w, ID: id}
}

// scheduleReading is reading of ScheduleReadsBackfill.
func scheduleReading(t testing.TB, l ledger.Ledger, expr string, step time.Duration, n int) *Reading {
	t.Helper()
	dag, w, id := ScheduleReadsBackfill(t, l, expr, step, n)
	return &Reading{L: l, DAG: dag, Window: w, ID: id}
}

// through returns r read through l, with its status from l.
func (r *Reading) through(t testing.TB, l ledger.Ledger) *Reading {
	t.Helper()
	s, err := backfill.StatusOf(context.Background(), l, r.ID, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	v := *r
	v.L, v.Status = l, s
	return &v
}

// BenchReads times each of Reads on l, filled by ReadsBackfill with n
// partitions, counted by the ledger ("counted") and read from every
// latest attempt ("every-attempt", through EveryAttempt), in
// sub-benchmarks of one run, and reports the heap allocated per read.
func BenchReads(b *testing.B, l ledger.Ledger, n int) {
	benchReads(b, l, reading(b, l, n))
}

// BenchScheduleReads is BenchReads of the backfill of
// ScheduleReadsBackfill: n slots of expr, each lasting step.
func BenchScheduleReads(b *testing.B, l ledger.Ledger, expr string, step time.Duration, n int) {
	benchReads(b, l, scheduleReading(b, l, expr, step, n))
}

func benchReads(b *testing.B, l ledger.Ledger, r *Reading) {
	for _, read := range Reads {
		for _, path := range []struct {
			name string
			l    ledger.Ledger
		}{{"counted", l}, {"every-attempt", EveryAttempt{l}}} {
			b.Run(read.Name+"/"+path.name, func(b *testing.B) {
				r := r.through(b, path.l)
				b.ReportAllocs()
				for b.Loop() {
					if err := read.Run(b.Context(), r); err != nil {
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
	measureReads(t, l, reading(t, l, n), path)
}

// MeasureScheduleReads is MeasureReads of the backfill of
// ScheduleReadsBackfill: n slots of "*/5 * * * *".
func MeasureScheduleReads(t *testing.T, l ledger.Ledger, n int, path string) {
	measureReads(t, l, scheduleReading(t, l, "*/5 * * * *", 5*time.Minute, n), path)
}

func measureReads(t *testing.T, l ledger.Ledger, r *Reading, path string) {
	if path == "every-attempt" {
		l = EveryAttempt{l}
	}
	r = r.through(t, l)
	n := r.Window.Len()
	for _, read := range Reads {
		peak, stop := sampleHeap()
		t0 := time.Now()
		err := read.Run(t.Context(), r)
		took := time.Since(t0)
		stop()
		if err != nil {
			t.Fatalf("%s: %v", read.Name, err)
		}
		t.Logf("%s of %d partitions, %s: %v, heap in use at most %d MB", read.Name, n, path, took.Round(time.Millisecond), *peak>>20)
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

// MeasureChosenReads runs StatusOf and Status.Grid (of 2,000 cells at
// most) once each, through each of paths ("counted", "every-attempt"),
// on backfills of every stride-th slot of the window of
// ScheduleReadsBackfill's n slots of "*/5 * * * *" (filling l first if it is new), and
// logs the time each took: what a backfill of chosen slots costs as the
// runs of adjacent slots, one range of a count each, multiply.
func MeasureChosenReads(t *testing.T, l ledger.Ledger, n int, strides []int, paths []string) {
	dag, w, _ := ScheduleReadsBackfill(t, l, "*/5 * * * *", 5*time.Minute, n)
	id := backfill.DAGIdentity(dag, w.Granularity(), time.UTC)
	ctx := t.Context()
	for _, stride := range strides {
		var ps []tranche.TimePartition
		var starts []time.Time
		i := 0
		for p := range w.OldestFirst() {
			if i%stride == 0 {
				ps, starts = append(ps, p), append(starts, p.Start)
			}
			i++
		}
		bid := backfill.IDOf(id, ps, 1)
		if _, err := l.PutBackfill(ctx, ledger.BackfillRecord{ID: bid, DAG: id, Window: w.String(), Partitions: starts, Chunk: 1}); err != nil {
			t.Fatal(err)
		}
		for _, path := range paths {
			rl := l
			if path == "every-attempt" {
				rl = EveryAttempt{l}
			}
			t0 := time.Now()
			s, err := backfill.StatusOf(ctx, rl, bid, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			status := time.Since(t0)
			t0 = time.Now()
			g, err := s.Grid(ctx, 2000)
			if err != nil {
				t.Fatal(err)
			}
			grid := time.Since(t0)
			attempted := s.Counts[ledger.StateSucceeded] + s.Counts[ledger.StateFailed]
			if attempted != len(ps) || len(g.Cells) == 0 {
				t.Fatalf("every %dth slot, %s: status %v; want %d attempted", stride, path, s.Counts, len(ps))
			}
			// The newest failure, which StatusOf reads to explain a
			// backfill with partitions pending: here none are, so it is
			// asked for alone, as for the runs of those slots.
			newest := time.Duration(0)
			if lr, ok := rl.(ledger.LatestReader); ok {
				ranges := make([]ledger.Range, len(ps))
				for i, p := range ps {
					ranges[i] = ledger.Range{From: p.Start, To: p.End}
				}
				t0 = time.Now()
				found := 0
				for _, err := range lr.FindLatest(ctx, ledger.FindRequest{DAG: id, Ranges: ranges,
					States: []ledger.State{ledger.StateFailed, ledger.StateCanceled}, Newest: 1}) {
					if err != nil {
						t.Fatal(err)
					}
					found++
				}
				newest = time.Since(t0)
				if want := min(1, s.Counts[ledger.StateFailed]); found != want {
					t.Fatalf("every %dth slot, %s: FindLatest of the newest failure found %d; want %d", stride, path, found, want)
				}
			}
			t.Logf("every %dth of %d slots (%d runs), %s: StatusOf %v, Grid %v, newest failure %v", stride, n, len(ps), path,
				status.Round(time.Millisecond), grid.Round(time.Millisecond), newest.Round(time.Millisecond))
		}
	}
}
