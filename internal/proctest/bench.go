package proctest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/ledger"
)

// Bench is the bench mode of the ledgers' worker binaries: one process
// claiming and finishing hourly partitions with no work between, so that
// the benchmarks of the SQLite and PostgreSQL ledgers compare like with
// like.
type Bench struct {
	Worker string
	First  time.Time // the first hour of the DAG's partitions
	Offset int       // this worker's first partition, in hours after First
	Ops    int       // partitions to claim and finish
	Chunk  int       // partitions per claim and finish; 0 means 1
	// Ahead, when positive, claims Ahead partitions a call (Chunk is
	// then 1), through ClaimNext along the cursor of a backfill of this
	// worker's own, and finishes each alone, one commit a partition: the
	// floor, in the ledger, of a backfill of Concurrency 1 that records
	// each success before its next partition starts, its claims made
	// ahead (issue 28's promise).
	Ahead int
}

// BenchResult is what [Bench.Run] prints: the partitions done, and the
// latencies of a claim plus a finish.
type BenchResult struct {
	Ops      int     `json:"ops"`
	MedianUS float64 `json:"median_us"`
	P90US    float64 `json:"p90_us"`
	P99US    float64 `json:"p99_us"`
	Seconds  float64 `json:"seconds"`
}

// Ready is the line a worker prints when its ledger is open; it then
// waits for a line (or the end) of its standard input before starting, so
// that the benchmark times the work of all workers at once, not their
// starts.
const Ready = "ready"

// Run prints Ready to out, waits for a line from in, claims and finishes
// the partitions, and prints a BenchResult to out as JSON.
func (b Bench) Run(ctx context.Context, l ledger.Ledger, in io.Reader, out io.Writer) error {
	chunk := max(b.Chunk, 1)
	run := b.runEach
	if b.Ahead > 0 {
		chunk, run = 1, b.runAhead
	}
	if _, err := fmt.Fprintln(out, Ready); err != nil {
		return err
	}
	if _, err := bufio.NewReader(in).ReadString('\n'); err != nil && err != io.EOF {
		return fmt.Errorf("waiting for the start: %w", err)
	}
	start := time.Now()
	lat, err := run(ctx, l)
	if err != nil {
		return err
	}
	if len(lat) == 0 {
		return fmt.Errorf("bench of %d partitions in chunks of %d: nothing to do", b.Ops, chunk)
	}
	total := time.Since(start)
	slices.Sort(lat)
	q := func(f float64) float64 { return float64(lat[int(f*float64(len(lat)-1))].Microseconds()) }
	return json.NewEncoder(out).Encode(BenchResult{Ops: len(lat) * chunk, MedianUS: q(0.5), P90US: q(0.9), P99US: q(0.99), Seconds: total.Seconds()})
}

// runEach claims and finishes b.Ops partitions, b.Chunk a call, and
// returns the latency of each claim plus finish.
func (b Bench) runEach(ctx context.Context, l ledger.Ledger) ([]time.Duration, error) {
	chunk := max(b.Chunk, 1)
	ps := make([]tranche.TimePartition, chunk)
	outcomes := make([]ledger.Outcome, chunk)
	for i := range outcomes {
		outcomes[i] = ledger.Outcome{State: ledger.StateSucceeded, Rows: 1}
	}
	lat := make([]time.Duration, 0, b.Ops/chunk)
	for i := 0; i+chunk <= b.Ops; i += chunk {
		for j := range ps {
			ps[j] = tranche.PartitionOf(tranche.Hour, b.First.Add(time.Duration(b.Offset+i+j)*time.Hour))
		}
		t0 := time.Now()
		lease, err := l.Claim(ctx, ledger.ClaimRequest{DAG: "bench-dag", Backfill: "bench", Worker: b.Worker, RunID: "bench",
			Partitions: ps, Lease: time.Minute})
		if err != nil {
			return nil, err
		}
		if err := l.Finish(ctx, lease, outcomes); err != nil {
			return nil, err
		}
		lat = append(lat, time.Since(t0))
	}
	return lat, nil
}

// runAhead claims b.Ops partitions Ahead a call and finishes each
// alone, returning the latency of each finish.
func (b Bench) runAhead(ctx context.Context, l ledger.Ledger) ([]time.Duration, error) {
	id := "bench-" + b.Worker
	if _, err := l.PutBackfill(ctx, ledger.BackfillRecord{ID: id, DAG: "bench-dag", Window: "bench", Chunk: 1}); err != nil {
		return nil, err
	}
	jobs := make([]ledger.Job, b.Ops)
	for i := range jobs {
		p := tranche.PartitionOf(tranche.Hour, b.First.Add(time.Duration(b.Offset+i)*time.Hour))
		jobs[i] = ledger.Job{RunID: "bench", Partitions: []tranche.TimePartition{p}}
	}
	done := []ledger.Outcome{{State: ledger.StateSucceeded, Rows: 1}}
	lat := make([]time.Duration, 0, b.Ops)
	for len(jobs) > 0 {
		grants, err := l.ClaimNext(ctx, ledger.NextRequest{DAG: "bench-dag", Backfill: id, Worker: b.Worker, Jobs: jobs,
			Want: b.Ahead, Lease: time.Minute})
		if err != nil {
			return nil, err
		}
		if len(grants) == 0 {
			return nil, fmt.Errorf("ClaimNext granted nothing of %d jobs", len(jobs))
		}
		for _, g := range grants {
			if g.Lease == nil {
				return nil, fmt.Errorf("ClaimNext refused a partition of this worker's own: %w", g.Err)
			}
			t0 := time.Now()
			if err := l.Finish(ctx, g.Lease, done); err != nil {
				return nil, err
			}
			lat = append(lat, time.Since(t0))
		}
		jobs = jobs[len(grants):]
	}
	return lat, nil
}

// RunBench runs worker commands in bench mode at once: it starts them,
// waits until each has its ledger open, releases them together, and
// reports the medians over the workers of their median and 99th
// percentile latencies, and the aggregate throughput from the release to
// the last worker's end.
func RunBench(b *testing.B, cmds []*exec.Cmd) {
	b.Helper()
	workers := startWorkers(b, cmds)
	defer stopWorkers(workers)
	release(b, workers)
	results := make([]BenchResult, len(workers))
	for i, w := range workers {
		err := json.NewDecoder(w.out).Decode(&results[i])
		if werr := w.cmd.Wait(); err != nil || werr != nil {
			b.Fatalf("%s: %v, %v\n%s", w.cmd, err, werr, &w.stderr)
		}
	}
	b.StopTimer()
	var medians, p99s []float64
	ops := 0
	for _, r := range results {
		medians, p99s = append(medians, r.MedianUS), append(p99s, r.P99US)
		ops += r.Ops
	}
	slices.Sort(medians)
	slices.Sort(p99s)
	b.ReportMetric(medians[len(medians)/2], "median-µs")
	b.ReportMetric(p99s[len(p99s)/2], "p99-µs")
	b.ReportMetric(float64(ops)/b.Elapsed().Seconds(), "partitions/s")
}

// worker is a worker process of a benchmark.
type worker struct {
	cmd    *exec.Cmd
	start  io.WriteCloser
	out    *bufio.Reader
	stderr strings.Builder
}

// startWorkers starts cmds with the benchmark's timer stopped and reset,
// and waits until each has printed Ready.
func startWorkers(b *testing.B, cmds []*exec.Cmd) []*worker {
	b.Helper()
	b.StopTimer()
	b.ResetTimer()
	workers := make([]*worker, 0, len(cmds))
	for _, c := range cmds {
		w := &worker{cmd: c}
		var err error
		if w.start, err = c.StdinPipe(); err != nil {
			stopWorkers(workers)
			b.Fatal(err)
		}
		stdout, err := c.StdoutPipe()
		if err != nil {
			stopWorkers(workers)
			b.Fatal(err)
		}
		w.out = bufio.NewReader(stdout)
		c.Stderr = &w.stderr
		if err := c.Start(); err != nil {
			stopWorkers(workers)
			b.Fatal(err)
		}
		workers = append(workers, w)
	}
	for _, w := range workers {
		if line, err := w.out.ReadString('\n'); strings.TrimSpace(line) != Ready {
			w.cmd.Wait()
			stopWorkers(workers)
			b.Fatalf("%s: %q, %v; want %q\n%s", w.cmd, line, err, Ready, &w.stderr)
		}
	}
	return workers
}

// release starts the timer and lets the workers go.
func release(b *testing.B, workers []*worker) {
	b.Helper()
	b.StartTimer()
	for _, w := range workers {
		if _, err := io.WriteString(w.start, "go\n"); err != nil {
			b.Fatal(err)
		}
	}
}

// stopWorkers kills the workers still running.
func stopWorkers(workers []*worker) {
	for _, w := range workers {
		if w.cmd.Process != nil && w.cmd.ProcessState == nil {
			w.cmd.Process.Kill()
			w.cmd.Wait()
		}
	}
}

// Hourly returns a DAG of one hourly asset that does nothing, and a window
// of n hours from 2010: what the planning benchmarks plan.
func Hourly(t testing.TB, n int) (*tranche.DAG, tranche.TimePartitionWindow) {
	t.Helper()
	dag, err := tranche.NewDAG(tranche.Asset{Name: "events",
		Partitioning: tranche.Partitioning{Granularity: tranche.Hour, Location: time.UTC, Column: "hour"},
		Materialize:  func(context.Context, *tranche.Materialization) ([]tranche.Row, error) { return nil, nil }})
	if err != nil {
		t.Fatal(err)
	}
	first := time.Date(2010, 1, 1, 0, 0, 0, 0, time.UTC)
	w, err := tranche.NewTimePartitionWindow(tranche.Hour, first, first.Add(time.Duration(n-1)*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return dag, w
}

// Fill records, as worker, one finished attempt at every partition of w
// for dag, in chunks of 500, a tenth of them failed, as a backfill would
// leave them.
func Fill(t testing.TB, l ledger.Ledger, dag string, w tranche.TimePartitionWindow, worker string) {
	t.Helper()
	ctx := context.Background()
	for chunk := range w.Chunks(500) {
		ps := slices.Collect(chunk.OldestFirst())
		lease, err := l.Claim(ctx, ledger.ClaimRequest{DAG: dag, Backfill: "0123456789ab", Worker: worker,
			RunID: backfill.RunID(dag, chunk.Start(), chunk.End()), Partitions: ps, Lease: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		outcomes := make([]ledger.Outcome, len(ps))
		for i := range outcomes {
			outcomes[i] = ledger.Outcome{State: ledger.StateSucceeded, Rows: 1000}
			if i%10 == 0 {
				outcomes[i] = ledger.Outcome{State: ledger.StateFailed, Err: "asset \"events\": extract: connection reset by peer"}
			}
		}
		if err := l.Finish(ctx, lease, outcomes); err != nil {
			t.Fatal(err)
		}
	}
}
