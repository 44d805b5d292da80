package sqlite_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/internal/proctest"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/memledger"
	"github.com/tranche-dev/tranche/ledger/sqlite"
)

// Benchmarks of the SQLite ledger, beside the in-memory ledger; run them
// with
//
//	go test -run '^$' -bench 'ClaimFinish' -benchtime 2000x -count 5 ./ledger/sqlite
//	go test -run '^$' -bench 'Plan100k' -benchtime 5x -count 5 ./ledger/sqlite
//	go test -run '^$' -bench 'SharedBackfill' -benchtime 300x -count 3 ./ledger/sqlite
//
// and the file size of a million attempts with
//
//	TRANCHE_SQLITE_SIZE=1 go test -run TestFileSize -v ./ledger/sqlite
//
// BENCHMARKS.md holds the medians and the ratios.

// BenchmarkClaimFinishProcesses claims and finishes one partition at a
// time in 1, 2 and 4 worker processes sharing one file, b.N partitions
// each, and reports the median and 99th percentile latency of a claim
// plus finish, the median of the processes' own, and the throughput once
// all have started (see proctest.RunBench).
func BenchmarkClaimFinishProcesses(b *testing.B) {
	bin := crashworker(b)
	for _, n := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("procs=%d", n), func(b *testing.B) {
			dir := b.TempDir()
			path := filepath.Join(dir, "ledger.db")
			l, err := sqlite.Open(b.Context(), path, nil) // created before the processes race to
			if err != nil {
				b.Fatal(err)
			}
			l.Close()
			cmds := make([]*exec.Cmd, n)
			for i := range cmds {
				cmds[i] = exec.Command(bin, "-mode", "bench", "-ledger", path, "-worker", fmt.Sprintf("bench-%d", i),
					"-ops", strconv.Itoa(b.N), "-offset", strconv.Itoa(i*b.N), "-from", "1900-01-01")
			}
			proctest.RunBench(b, cmds)
		})
	}
}

// BenchmarkSharedBackfill is the PostgreSQL ledger's benchmark of the
// same name on one new SQLite file: one backfill of hourly partitions,
// doing nothing (10 × b.N partitions) or sleeping 10 ms (b.N per unit of
// concurrency), in N crashworker processes
// (-mode shared) of Concurrency 1, and beside them in one process of
// Concurrency N, for N of 1 to 16 (proctest.SharedCases), timed from
// when every process has its ledger open to the last partition's finish
// (proctest.RunShared), every partition checked to have succeeded once.
func BenchmarkSharedBackfill(b *testing.B) {
	bin := crashworker(b)
	for _, c := range proctest.SharedCases() {
		b.Run(c.Name, func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "ledger.db")
			l, err := sqlite.Open(b.Context(), path, nil) // created before the processes race to
			if err != nil {
				b.Fatal(err)
			}
			l.Close()
			n := c.Partitions(b.N)
			cmds := make([]*exec.Cmd, c.Procs)
			for i := range cmds {
				cmds[i] = exec.Command(bin, append([]string{"-ledger", path}, c.Args(i, n)...)...)
			}
			proctest.RunShared(b, proctest.SharedRun{Cmds: cmds, Partitions: n,
				Ledger: func() (ledger.Ledger, func()) {
					l, err := sqlite.Open(b.Context(), path, nil)
					if err != nil {
						b.Fatal(err)
					}
					return l, func() { l.Close() }
				}})
		})
	}
}

// BenchmarkClaimFinish claims and finishes one partition at a time in this
// process, on SQLite and on the in-memory ledger in alternation, so that
// both see the same load, and reports each one's time and their ratio.
func BenchmarkClaimFinish(b *testing.B) {
	ledgers := []ledger.Ledger{openTemp(b, nil), memledger.New(nil)}
	ctx := b.Context()
	first := time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC)
	var took [2]time.Duration
	i := 0
	for b.Loop() {
		p := tranche.PartitionOf(tranche.Day, first.AddDate(0, 0, i))
		i++
		for k, l := range ledgers {
			t0 := time.Now()
			lease, err := l.Claim(ctx, ledger.ClaimRequest{DAG: "bench", Backfill: "bench", Worker: "w", RunID: "r",
				Partitions: []tranche.TimePartition{p}, Lease: time.Minute})
			if err != nil {
				b.Fatal(err)
			}
			if err := l.Finish(ctx, lease, []ledger.Outcome{{State: ledger.StateSucceeded, Rows: 1}}); err != nil {
				b.Fatal(err)
			}
			took[k] += time.Since(t0)
		}
	}
	b.ReportMetric(float64(took[0].Microseconds())/float64(i), "sqlite-µs")
	b.ReportMetric(float64(took[1].Nanoseconds())/float64(i), "memory-ns")
	b.ReportMetric(float64(took[0])/float64(took[1]), "sqlite/memory")
}

// BenchmarkPlan100k plans a backfill of 100,000 hourly partitions against
// a ledger holding an attempt at each, on SQLite and on the in-memory
// ledger in alternation, and reports each one's time and their ratio.
func BenchmarkPlan100k(b *testing.B) {
	const n = 100_000
	dag, w := proctest.Hourly(b, n)
	ledgers := []ledger.Ledger{openTemp(b, nil), memledger.New(nil)}
	var took, cpu [2]time.Duration
	runs := 0
	for _, l := range ledgers {
		proctest.Fill(b, l, backfill.DAGIdentity(dag, tranche.Hour, time.UTC), w, "host-12345")
	}
	for b.Loop() {
		runs++
		for k, l := range ledgers {
			t0, c0 := time.Now(), cpuTime()
			plan, err := (&backfill.Backfill{DAG: dag, Window: w, Ledger: l}).Plan(b.Context())
			if err != nil {
				b.Fatal(err)
			}
			took[k] += time.Since(t0)
			cpu[k] += cpuTime() - c0
			if plan.Counts.Total != n || plan.Counts.Run != n/10 {
				b.Fatalf("plan counts %+v", plan.Counts)
			}
		}
	}
	b.ReportMetric(float64(took[0].Milliseconds())/float64(runs), "sqlite-ms")
	b.ReportMetric(float64(took[1].Milliseconds())/float64(runs), "memory-ms")
	b.ReportMetric(float64(took[0])/float64(took[1]), "sqlite/memory")
	// CPU time, which other work on the machine inflates less than the
	// wall clock's.
	b.ReportMetric(float64(cpu[0].Milliseconds())/float64(runs), "sqlite-cpu-ms")
	b.ReportMetric(float64(cpu[1].Milliseconds())/float64(runs), "memory-cpu-ms")
}

// cpuTime returns the CPU time the process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestFileSize records a million attempts and reports the file's size.
// It runs only with TRANCHE_SQLITE_SIZE set: it takes a minute or more.
func TestFileSize(t *testing.T) {
	if os.Getenv("TRANCHE_SQLITE_SIZE") == "" {
		t.Skip("set TRANCHE_SQLITE_SIZE=1 to measure the file of a million attempts")
	}
	const n = 1_000_000
	l := openTemp(t, nil)
	dag, w := proctest.Hourly(t, n/2) // two attempts per partition: a failure, then a success
	id := backfill.DAGIdentity(dag, tranche.Hour, time.UTC)
	start := time.Now()
	proctest.Fill(t, l, id, w, "host-12345")
	ctx := context.Background()
	for chunk := range w.Chunks(500) { // every partition again, under RerunAll
		ps := slices.Collect(chunk.OldestFirst())
		rev, err := l.Revision(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		lease, err := l.Claim(ctx, ledger.ClaimRequest{DAG: id, Backfill: "0123456789ab", Worker: "host-67890",
			RunID: backfill.RunID(id, chunk.Start(), chunk.End()), Partitions: ps, Lease: time.Hour, Policy: ledger.RerunAll, Revision: rev})
		if err != nil {
			t.Fatal(err)
		}
		outcomes := make([]ledger.Outcome, len(ps))
		for i := range outcomes {
			outcomes[i] = ledger.Outcome{State: ledger.StateSucceeded, Rows: 1000}
		}
		if err := l.Finish(ctx, lease, outcomes); err != nil {
			t.Fatal(err)
		}
	}
	took := time.Since(start)
	if _, err := l.Writer().ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(l.Path())
	if err != nil {
		t.Fatal(err)
	}
	var pages, pageSize int64
	l.Writer().QueryRowContext(ctx, "PRAGMA page_count").Scan(&pages)
	l.Writer().QueryRowContext(ctx, "PRAGMA page_size").Scan(&pageSize)
	t.Logf("%d attempts at %d partitions recorded in %v: file %d bytes (%.1f MB), %.0f bytes per attempt; %d pages of %d bytes",
		n, n/2, took.Round(time.Second), info.Size(), float64(info.Size())/1e6, float64(info.Size())/n, pages, pageSize)
}

// readsLedger opens the ledger the benchmarks of reads fill: the file
// TRANCHE_BENCH_LEDGER names, kept and filled once across runs (-count),
// or a fresh one.
func readsLedger(t testing.TB) ledger.Ledger {
	t.Helper()
	path := os.Getenv("TRANCHE_BENCH_LEDGER")
	if path == "" {
		return openTemp(t, nil)
	}
	l, err := sqlite.Open(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// BenchmarkReads100k times StatusOf, Grid (StatusOf, then Status.Grid of
// 2,000 cells at most) and Plan of a backfill of 100,000 hourly
// partitions against a ledger holding an attempt at each, counted by
// the ledger and, beside it in the same run, read from every latest
// attempt (the old path):
//
//	TRANCHE_BENCH_LEDGER=/tmp/reads.db go test -run '^$' -bench Reads100k -benchmem -count 5 ./ledger/sqlite
func BenchmarkReads100k(b *testing.B) {
	proctest.BenchReads(b, readsLedger(b), 100_000)
}

// BenchmarkScheduleReadsMillion is BenchmarkReads100k of a backfill of
// 1,000,000 slots of the cron schedule "*/5 * * * *" (nine and a half
// years from 2010), which the ledger counts as it counts any partitions;
// the file TRANCHE_BENCH_LEDGER names is filled once, which takes a
// minute or two:
//
//	TRANCHE_BENCH_LEDGER=/tmp/reads.db go test -run '^$' -bench 'ScheduleReadsMillion/(StatusOf|Grid)' -benchmem -count 5 ./ledger/sqlite
func BenchmarkScheduleReadsMillion(b *testing.B) {
	proctest.BenchScheduleReads(b, readsLedger(b), "*/5 * * * *", 5*time.Minute, 1_000_000)
}

// BenchmarkHourlyScheduleReads100k is BenchmarkReads100k of a backfill
// of 100,000 slots of "5 * * * *", an hourly schedule: its identity is
// shared by the hourly schedules of other minutes, whose attempts a plan
// matches by their hour, so that counting first looks for them, a range
// of the count per slot.
func BenchmarkHourlyScheduleReads100k(b *testing.B) {
	proctest.BenchScheduleReads(b, readsLedger(b), "5 * * * *", time.Hour, 100_000)
}

// TestScheduleChosenReads measures StatusOf and Grid of backfills of
// every 2nd, 10th and 1,000th of the 1,000,000 slots of
// BenchmarkScheduleReadsMillion in the file TRANCHE_CHOSEN_READS names
// (filled first if it is new), counted and, but for every 2nd, read
// from every latest attempt:
//
//	TRANCHE_CHOSEN_READS=/tmp/reads.db go test -run 'TestScheduleChosenReads$' -v ./ledger/sqlite
func TestScheduleChosenReads(t *testing.T) {
	path := os.Getenv("TRANCHE_CHOSEN_READS")
	if path == "" {
		t.Skip("set TRANCHE_CHOSEN_READS to a file to measure reads of chosen slots")
	}
	l, err := sqlite.Open(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	proctest.MeasureChosenReads(t, l, 1_000_000, []int{2}, []string{"counted"})
	proctest.MeasureChosenReads(t, l, 1_000_000, []int{10, 1000}, []string{"counted", "every-attempt"})
}

// TestReadsMillion runs StatusOf, Grid and Plan once each on a backfill
// of 1,000,000 hourly partitions in the file TRANCHE_READS_MILLION names
// (filled first if it is new, which takes minutes), counted by the
// ledger or, with TRANCHE_READS_PATH=every-attempt, read from every
// latest attempt; run its binary under /usr/bin/time -v for the peak
// RSS (BENCHMARKS.md has the commands).
func TestReadsMillion(t *testing.T) {
	path := os.Getenv("TRANCHE_READS_MILLION")
	if path == "" {
		t.Skip("set TRANCHE_READS_MILLION to a file to measure reads of a million partitions")
	}
	l, err := sqlite.Open(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	mode := cmpOr(os.Getenv("TRANCHE_READS_PATH"), "counted")
	proctest.MeasureReads(t, l, 1_000_000, mode)
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// TestScheduleReadsMillion is TestReadsMillion of the backfill of
// BenchmarkScheduleReadsMillion, 1,000,000 slots of "*/5 * * * *", in the
// file TRANCHE_READS_MILLION names (filled first if it is new):
//
//	TRANCHE_READS_MILLION=/tmp/reads.db /usr/bin/time -v /tmp/sqlite.test -test.run 'TestScheduleReadsMillion$' -test.v
func TestScheduleReadsMillion(t *testing.T) {
	path := os.Getenv("TRANCHE_READS_MILLION")
	if path == "" {
		t.Skip("set TRANCHE_READS_MILLION to a file to measure reads of a million slots")
	}
	l, err := sqlite.Open(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	proctest.MeasureScheduleReads(t, l, 1_000_000, cmpOr(os.Getenv("TRANCHE_READS_PATH"), "counted"))
}
