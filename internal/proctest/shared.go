package proctest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/ledger"
)

// SharedFirst is the first hour of the shared benchmark's backfill.
var SharedFirst = time.Date(2010, 1, 1, 0, 0, 0, 0, time.UTC)

// Shared is the shared mode of the ledgers' worker binaries: one replica
// of a backfill that many processes run at once, as a user scales one out
// (the README's "Scaling out", examples/distributed): backfill.Backfill
// over Partitions hourly partitions from SharedFirst of SharedDAG, with
// WaitForOthers, run again until backfill.StatusOf says every partition
// succeeded. BenchmarkSharedBackfill of both ledgers times it
// (RunShared).
type Shared struct {
	Worker      string
	Partitions  int
	Concurrency int
	Work        time.Duration // slept in each partition; 0 for none
	// Lease and Heartbeat are the backfill's; examples/distributed's
	// (6s, 2s) when zero.
	Lease, Heartbeat time.Duration
	// Retry is the pause between runs that left the backfill undone,
	// the README's 1s when zero; Deadline is how long without a
	// partition succeeding anywhere before the worker gives up, 90s
	// when zero.
	Retry, Deadline time.Duration
}

// SharedResult is what [Shared.Run] prints: its runs' results added up.
type SharedResult struct {
	Worker    string   `json:"worker"`
	Runs      int      `json:"runs"`
	Succeeded int      `json:"succeeded"` // partitions this worker ran that succeeded
	Failed    int      `json:"failed"`    // partitions this worker ran that failed
	Fenced    int      `json:"fenced"`    // of those, how many matched tranche.ErrFenced
	Unclaimed int      `json:"unclaimed"` // partitions whose claims failed
	Errors    []string `json:"errors"`    // the first errors of runs, other than partitions held elsewhere
	Done      bool     `json:"done"`      // StatusOf said every partition succeeded
}

// SharedDAG returns the shared benchmark's DAG: one hourly asset that
// sleeps work (nothing when 0) and returns no rows, into no destination.
func SharedDAG(work time.Duration) (*tranche.DAG, error) {
	return tranche.NewDAG(tranche.Asset{Name: "events",
		Partitioning: tranche.Partitioning{Granularity: tranche.Hour, Location: time.UTC, Column: "hour"},
		Materialize: func(ctx context.Context, _ *tranche.Materialization) ([]tranche.Row, error) {
			if work <= 0 {
				return nil, nil
			}
			t := time.NewTimer(work)
			defer t.Stop()
			select {
			case <-t.C:
				return nil, nil
			case <-ctx.Done():
				return nil, context.Cause(ctx)
			}
		}})
}

// SharedWindow returns the window of n hours from SharedFirst.
func SharedWindow(n int) (tranche.TimePartitionWindow, error) {
	return tranche.NewTimePartitionWindow(tranche.Hour, SharedFirst, SharedFirst.Add(time.Duration(n-1)*time.Hour))
}

// SharedDAGID returns the identity of SharedDAG in the ledger.
func SharedDAGID(t testing.TB) string {
	t.Helper()
	dag, err := SharedDAG(0)
	if err != nil {
		t.Fatal(err)
	}
	return backfill.DAGIdentity(dag, tranche.Hour, time.UTC)
}

// Backfill returns the replica's backfill on l.
func (s Shared) Backfill(l ledger.Ledger) (*backfill.Backfill, error) {
	dag, err := SharedDAG(s.Work)
	if err != nil {
		return nil, err
	}
	w, err := SharedWindow(s.Partitions)
	if err != nil {
		return nil, err
	}
	lease, heartbeat := s.Lease, s.Heartbeat
	if lease == 0 {
		lease, heartbeat = 6*time.Second, 2*time.Second
	}
	return &backfill.Backfill{DAG: dag, Window: w, Ledger: l, Worker: s.Worker,
		Concurrency: s.Concurrency, OnFailure: tranche.FailContinue, Lease: lease, Heartbeat: heartbeat,
		WaitForOthers: true, MaxPartitions: max(s.Partitions, 100_000)}, nil
}

// Run prints Ready to out, waits for a line from in, runs the backfill
// until it is done, as a replica does, and prints a SharedResult to out
// as JSON.
func (s Shared) Run(ctx context.Context, l ledger.Ledger, in io.Reader, out io.Writer) error {
	b, err := s.Backfill(l)
	if err != nil {
		return err
	}
	id, err := b.ID()
	if err != nil {
		return err
	}
	retry, deadline := cmpOr(s.Retry, time.Second), cmpOr(s.Deadline, 90*time.Second)
	if _, err := fmt.Fprintln(out, Ready); err != nil {
		return err
	}
	if _, err := bufio.NewReader(in).ReadString('\n'); err != nil && err != io.EOF {
		return fmt.Errorf("waiting for the start: %w", err)
	}
	if dir := os.Getenv("TRANCHE_SHARED_CPUPROFILE"); dir != "" {
		// A profile of each worker, from its start, for pprof.
		f, err := os.Create(filepath.Join(dir, s.Worker+".pprof"))
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	res := SharedResult{Worker: s.Worker}
	progressed, succeeded := time.Now(), 0
	for ctx.Err() == nil {
		r, err := b.Run(ctx)
		res.Runs++
		if r != nil {
			res.Succeeded += r.Succeeded
			res.Failed += r.Failed
			res.Unclaimed += r.Unclaimed
			for _, f := range r.Failures {
				if errors.Is(f.Err, tranche.ErrFenced) {
					res.Fenced++
				}
			}
		}
		if err != nil && len(res.Errors) < 10 {
			res.Errors = append(res.Errors, err.Error())
		}
		// The README's loop: run, then ask the ledger whether every
		// partition succeeded, here or elsewhere.
		st, err := backfill.StatusOf(ctx, l, id, time.Now())
		if err == nil && st.Done() {
			res.Done = true
			break
		}
		if err == nil && st.Counts[ledger.StateSucceeded] > succeeded {
			succeeded, progressed = st.Counts[ledger.StateSucceeded], time.Now()
		}
		if time.Since(progressed) > deadline {
			res.Errors = append(res.Errors, fmt.Sprintf("gave up after %v without a partition succeeding", deadline))
			break
		}
		select {
		case <-time.After(retry):
		case <-ctx.Done():
		}
	}
	return json.NewEncoder(out).Encode(res)
}

func cmpOr(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// SharedRun is one timed run of shared-mode workers (see RunShared).
type SharedRun struct {
	Cmds       []*exec.Cmd // the workers, in shared mode, over Partitions
	Partitions int

	// Ledger opens the ledger the workers share, to check it once they
	// have exited; the function it returns closes it.
	Ledger func() (ledger.Ledger, func())

	// OnRelease, when not nil, is called once every worker has its
	// ledger open, right before they are released, outside the timer:
	// where a statement count starts.
	OnRelease func()
}

// SharedStats is what RunShared measured.
type SharedStats struct {
	Release, Done, Exit time.Time // the release, the last partition's finish by the ledger, the last worker's exit
	Takeovers           int       // partitions that succeeded at a later attempt than the first
	Results             []SharedResult
}

// RunShared starts r's workers, waits until each has its ledger open,
// releases them together and waits for them all to exit, the benchmark's
// timer running from the release to the last exit. It then checks that
// every partition succeeded exactly once in the ledger, and that every
// worker says the backfill is done, failing the benchmark otherwise, and
// reports partitions/s, from the release to the last partition's finish
// (by the ledger's record of it), ns/op per partition (from the release
// to the last exit, not per b.N), the tail (tail-ms: from that finish to
// the last worker's exit, replicas waiting for others), and takeovers.
func RunShared(b *testing.B, r SharedRun) SharedStats {
	b.Helper()
	workers := startWorkers(b, r.Cmds)
	defer stopWorkers(workers)
	if r.OnRelease != nil {
		r.OnRelease()
	}
	st := SharedStats{Release: time.Now()}
	release(b, workers)
	st.Results = make([]SharedResult, len(workers))
	for i, w := range workers {
		err := json.NewDecoder(w.out).Decode(&st.Results[i])
		if werr := w.cmd.Wait(); err != nil || werr != nil {
			b.Fatalf("%s: %v, %v\n%s", w.cmd, err, werr, &w.stderr)
		}
	}
	st.Exit = time.Now()
	b.StopTimer()
	l, closeLedger := r.Ledger()
	defer closeLedger()
	st.Done, st.Takeovers = checkShared(b, l, r.Partitions, st.Results)
	took := st.Done.Sub(st.Release)
	if took <= 0 {
		b.Fatalf("the last partition finished at %v, before the release at %v", st.Done, st.Release)
	}
	b.ReportMetric(float64(r.Partitions)/took.Seconds(), "partitions/s")
	// Per partition, not per b.N (the case scales the backfill), from
	// the release to the last exit.
	b.ReportMetric(float64(st.Exit.Sub(st.Release).Nanoseconds())/float64(r.Partitions), "ns/op")
	b.ReportMetric(float64(st.Exit.Sub(st.Done).Milliseconds()), "tail-ms")
	b.ReportMetric(float64(st.Takeovers), "takeovers")
	return st
}

// checkShared checks that each of the n partitions of the shared
// backfill succeeded exactly once in l, that the workers' successes add
// up to n, and that every worker said the backfill is done; it returns
// the instant of the last finish and how many partitions succeeded at a
// later attempt (after a failure or a takeover).
func checkShared(b *testing.B, l ledger.Ledger, n int, results []SharedResult) (done time.Time, takeovers int) {
	b.Helper()
	ctx := context.Background()
	w, err := SharedWindow(n)
	if err != nil {
		b.Fatal(err)
	}
	dag := SharedDAGID(b)
	seen := 0
	var later []ledger.Attempt
	for a, err := range l.Latest(ctx, dag, w.Start(), w.End()) {
		if err != nil {
			b.Fatal(err)
		}
		seen++
		if a.State != ledger.StateSucceeded {
			b.Fatalf("partition %s: latest attempt %d by %s is %s (%s); want every partition succeeded", a.Key, a.Number, a.Worker, a.State, a.Err)
		}
		if a.Finished.After(done) {
			done = a.Finished
		}
		if a.Number > 1 {
			later = append(later, a)
		}
	}
	if seen != n {
		b.Fatalf("the ledger holds %d partitions of the backfill; want %d", seen, n)
	}
	for _, a := range later {
		h, err := l.History(ctx, dag, a.Start)
		if err != nil {
			b.Fatal(err)
		}
		if i := slices.IndexFunc(h, func(x ledger.Attempt) bool { return x.State == ledger.StateSucceeded }); i != len(h)-1 {
			b.Fatalf("partition %s: %d attempts, the first success at %d: want one success, the last", a.Key, len(h), i+1)
		}
	}
	succeeded := 0
	for _, r := range results {
		succeeded += r.Succeeded
		if !r.Done || len(r.Errors) > 0 && r.Failed == 0 {
			b.Fatalf("worker %s: %+v; want done", r.Worker, r)
		}
	}
	if succeeded != n {
		b.Fatalf("the workers report %d partitions succeeded; want %d: %+v", succeeded, n, results)
	}
	return done, len(later)
}

// SharedCase is a configuration of BenchmarkSharedBackfill: Procs
// processes of Concurrency each, sleeping Work in each partition.
type SharedCase struct {
	Name               string
	Work               time.Duration
	Procs, Concurrency int
}

// SharedCases are the configurations of BenchmarkSharedBackfill, in both
// ledgers: for each work (none, 10ms) and N of 1, 2, 4, 8 and 16, N
// processes of Concurrency 1 sharing the backfill (processes=N), and, for
// N above 1, one process of Concurrency N (concurrency=N), the same
// concurrency in all, the simplest alternative a user would write.
func SharedCases() []SharedCase {
	var out []SharedCase
	for _, work := range []time.Duration{0, 10 * time.Millisecond} {
		name := "work=none"
		if work > 0 {
			name = "work=" + work.String()
		}
		for _, n := range []int{1, 2, 4, 8, 16} {
			out = append(out, SharedCase{fmt.Sprintf("%s/processes=%d", name, n), work, n, 1})
			if n > 1 {
				out = append(out, SharedCase{fmt.Sprintf("%s/concurrency=%d", name, n), work, 1, n})
			}
		}
	}
	return out
}

// Partitions returns the size of the case's backfill for b.N = n: 10n
// partitions with no work (3 s at 1,000 a second for n = 300), n per unit
// of concurrency with work (n × 10 ms at perfect scaling), so that one
// -benchtime (300x) gives runs of a few seconds in every case.
func (c SharedCase) Partitions(n int) int {
	if c.Work == 0 {
		return 10 * n
	}
	return n * c.Procs * c.Concurrency
}

// Args returns the flags of the case's worker i in shared mode, over a
// backfill of n partitions.
func (c SharedCase) Args(i, n int) []string {
	return []string{"-mode", "shared", "-worker", fmt.Sprintf("bench-%d", i), "-partitions", fmt.Sprint(n),
		"-concurrency", fmt.Sprint(c.Concurrency), "-work", c.Work.String(), "-lease", "6s", "-heartbeat", "2s"}
}
