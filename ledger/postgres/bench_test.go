package postgres_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/internal/proctest"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/postgres"
)

// Benchmarks of the PostgreSQL ledger, beside the SQLite ledger with the
// same workers; run them against a test server with
//
//	eval "$(ledger/postgres/testserver.sh start)"
//	go test -run '^$' -bench . -benchtime 400x -count 5 github.com/tranche-dev/tranche/ledger/postgres
//
// BENCHMARKS.md holds the medians and the scaling curve.

var (
	sqliteOnce sync.Once
	sqliteBin  string
	sqliteErr  error
)

// sqliteWorker builds the SQLite ledger's crash worker, whose bench mode
// is pgworker's: one process claiming and finishing partitions one at a
// time. It needs the workspace (go.work), which holds both modules.
func sqliteWorker(b *testing.B) string {
	b.Helper()
	dir := filepath.Dir(pgworker(b))
	sqliteOnce.Do(func() {
		sqliteBin = filepath.Join(dir, "crashworker")
		out, err := exec.Command("go", "build", "-o", sqliteBin, "github.com/tranche-dev/tranche/ledger/sqlite/internal/crashworker").CombinedOutput()
		if err != nil {
			sqliteErr = fmt.Errorf("go build of the SQLite ledger's crashworker (in the workspace only): %v\n%s", err, out)
		}
	})
	if sqliteErr != nil {
		b.Skip(sqliteErr)
	}
	return sqliteBin
}

// BenchmarkThroughput claims and finishes partitions with no-op work in 1,
// 4 and 16 worker processes at once, each with its own connections (a
// pool of 4 to PostgreSQL; SQLite's one writing connection), b.N claims
// and finishes each: the aggregate throughput of a backfill whose assets
// cost nothing, on PostgreSQL and on SQLite, timed from when all workers
// have their ledger open (proctest.RunBench). With chunk=10, each claim
// and finish covers 10 partitions, as a backfill with ChunkSize 10 does.
func BenchmarkThroughput(b *testing.B) {
	url := serverURL(b)
	pg := pgworker(b)
	for _, kind := range []string{"postgres", "postgres-chunk=10", "sqlite", "sqlite-chunk=10"} {
		for _, n := range []int{1, 4, 16} {
			b.Run(fmt.Sprintf("%s/workers=%d", kind, n), func(b *testing.B) {
				chunk := 1
				if strings.HasSuffix(kind, "-chunk=10") {
					chunk = 10
				}
				perProc := b.N * chunk
				cmds := make([]*exec.Cmd, n)
				var base []string
				if strings.HasPrefix(kind, "sqlite") {
					path := filepath.Join(b.TempDir(), "ledger.db")
					base = []string{sqliteWorker(b), "-mode", "bench", "-ledger", path}
				} else {
					base = []string{pg, "-mode", "bench", "-url", url, "-schema", freshSchema(b, url)}
				}
				base = append(base, "-from", "1900-01-01", "-chunk", strconv.Itoa(chunk))
				// One process creates the tables before the others race.
				if out, err := exec.Command(base[0], append(base[1:], "-worker", "setup", "-ops", strconv.Itoa(chunk), "-offset", "-20")...).CombinedOutput(); err != nil {
					b.Fatalf("%v: %s", err, out)
				}
				for i := range cmds {
					cmds[i] = exec.Command(base[0], append(base[1:], "-worker", fmt.Sprintf("bench-%d", i),
						"-ops", strconv.Itoa(perProc), "-offset", strconv.Itoa(i*perProc))...)
				}
				proctest.RunBench(b, cmds)
			})
		}
	}
}

// BenchmarkThroughputInProcess is BenchmarkThroughput's postgres case
// with the workers as goroutines of one process sharing one ledger, a
// connection each, as one process running a backfill with Concurrency n
// does: the same claims and finishes, without n Go runtimes competing for
// the machine's cores.
func BenchmarkThroughputInProcess(b *testing.B) {
	url := serverURL(b)
	for _, n := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("goroutines=%d", n), func(b *testing.B) {
			l := openFresh(b, url, &postgres.Options{MaxConns: n})
			ctx := b.Context()
			first := time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC)
			var wg sync.WaitGroup
			b.ResetTimer()
			for w := range n {
				wg.Go(func() {
					for i := range b.N {
						p := tranche.PartitionOf(tranche.Hour, first.Add(time.Duration(w*b.N+i)*time.Hour))
						lease, err := l.Claim(ctx, ledger.ClaimRequest{DAG: "bench-dag", Backfill: "bench", Worker: fmt.Sprint("bench-", w),
							RunID: "bench", Partitions: []tranche.TimePartition{p}, Lease: time.Minute})
						if err != nil {
							b.Error(err)
							return
						}
						if err := l.Finish(ctx, lease, []ledger.Outcome{{State: ledger.StateSucceeded, Rows: 1}}); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "partitions/s")
		})
	}
}

// BenchmarkThroughputClaimNext is BenchmarkThroughputInProcess's
// workers sharing one backfill of n times b.N hourly partitions, as the
// workers of a backfill do, all their plans made at once: through
// ClaimNext ("next"), each asking for the next 16 jobs among the next
// 32 times n+1 of its plan (twice what the cursor may have passed it
// over for the others since its last call, and some), finishing each
// lease as it comes; and, for the
// issue ClaimNext answers, through Claim ("claim-shared"), each walking
// every partition in the same order and claiming each, the losers
// refused.
func BenchmarkThroughputClaimNext(b *testing.B) {
	url := serverURL(b)
	for _, mode := range []string{"next", "claim-shared"} {
		for _, n := range []int{1, 4, 16} {
			b.Run(fmt.Sprintf("%s/goroutines=%d", mode, n), func(b *testing.B) {
				l := openFresh(b, url, &postgres.Options{MaxConns: n})
				ctx := b.Context()
				first := time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC)
				jobs := make([]ledger.Job, n*b.N)
				for i := range jobs {
					jobs[i] = ledger.Job{RunID: "bench", Partitions: []tranche.TimePartition{tranche.PartitionOf(tranche.Hour, first.Add(time.Duration(i)*time.Hour))}}
				}
				if _, err := l.PutBackfill(ctx, ledger.BackfillRecord{ID: "bench", DAG: "bench-dag", Window: "1900"}); err != nil {
					b.Fatal(err)
				}
				plan, err := l.Revision(ctx, "bench-dag")
				if err != nil {
					b.Fatal(err)
				}
				const want = 16
				window := 2 * want * (n + 1)
				var done atomic.Int64
				finish := func(lease *ledger.Lease) error {
					done.Add(1)
					return l.Finish(ctx, lease, []ledger.Outcome{{State: ledger.StateSucceeded, Rows: 1}})
				}
				b.ResetTimer()
				var wg sync.WaitGroup
				for w := range n {
					worker := fmt.Sprint("bench-", w)
					wg.Go(func() {
						if mode == "claim-shared" {
							for _, j := range jobs {
								lease, err := l.Claim(ctx, ledger.ClaimRequest{DAG: "bench-dag", Backfill: "bench", Worker: worker, RunID: j.RunID,
									Partitions: j.Partitions, Lease: time.Minute, Revision: plan})
								if errors.Is(err, ledger.ErrNotClaimable) {
									continue
								}
								if err == nil {
									err = finish(lease)
								}
								if err != nil {
									b.Error(err)
									return
								}
							}
							return
						}
						for pos := 0; pos < len(jobs); {
							grants, err := l.ClaimNext(ctx, ledger.NextRequest{DAG: "bench-dag", Backfill: "bench", Worker: worker,
								Jobs: jobs[pos:min(len(jobs), pos+window)], Want: want, Lease: time.Minute, Revision: plan})
							if err != nil {
								b.Error(err)
								return
							}
							for _, g := range grants {
								if g.Lease != nil {
									if err := finish(g.Lease); err != nil {
										b.Error(err)
										return
									}
								}
							}
							pos += len(grants)
						}
					})
				}
				wg.Wait()
				if got := done.Load(); got != int64(len(jobs)) && !b.Failed() {
					b.Fatalf("%d partitions finished; want %d", got, len(jobs))
				}
				b.ReportMetric(float64(len(jobs))/b.Elapsed().Seconds(), "partitions/s")
			})
		}
	}
}

// BenchmarkPlan100k plans a backfill of 100,000 hourly partitions against
// a ledger holding an attempt at each (the SQLite ledger's benchmark of
// the same name is its twin).
func BenchmarkPlan100k(b *testing.B) {
	const n = 100_000
	l := openFresh(b, serverURL(b), nil)
	dag, w := proctest.Hourly(b, n)
	proctest.Fill(b, l, backfill.DAGIdentity(dag, tranche.Hour, time.UTC), w, "host-12345")
	bf := &backfill.Backfill{DAG: dag, Window: w, Ledger: l}
	runs, c0 := 0, cpuTime()
	for b.Loop() {
		runs++
		plan, err := bf.Plan(b.Context())
		if err != nil {
			b.Fatal(err)
		}
		if plan.Counts.Total != n || plan.Counts.Run != n/10 {
			b.Fatalf("plan counts %+v", plan.Counts)
		}
	}
	// The CPU time of this process (the server's is not counted), which
	// other work on the machine inflates less than the wall clock's.
	b.ReportMetric(float64((cpuTime()-c0).Milliseconds())/float64(runs), "client-cpu-ms")
}

// cpuTime returns the CPU time this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// readsLedger opens the ledger the benchmarks of reads fill: in the
// schema TRANCHE_BENCH_SCHEMA names, kept and filled once across runs
// (-count), or in a fresh one.
func readsLedger(t testing.TB, schema string) ledger.Ledger {
	t.Helper()
	url := serverURL(t)
	if schema == "" {
		return openFresh(t, url, nil)
	}
	if _, err := admin(t, url).ExecContext(t.Context(), "CREATE SCHEMA IF NOT EXISTS "+schema); err != nil {
		t.Fatal(err)
	}
	l, err := postgres.Open(t.Context(), url, &postgres.Options{Schema: schema})
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
// attempt (the old path); the SQLite ledger's benchmark of the same
// name is its twin:
//
//	TRANCHE_BENCH_SCHEMA=reads go test -run '^$' -bench Reads100k -benchmem -count 5 ./ledger/postgres
func BenchmarkReads100k(b *testing.B) {
	proctest.BenchReads(b, readsLedger(b, os.Getenv("TRANCHE_BENCH_SCHEMA")), 100_000)
}

// BenchmarkScheduleReadsMillion is BenchmarkReads100k of a backfill of
// 1,000,000 slots of the cron schedule "*/5 * * * *" (nine and a half
// years from 2010), which the ledger counts as it counts any partitions;
// the schema TRANCHE_BENCH_SCHEMA names is filled once:
//
//	TRANCHE_BENCH_SCHEMA=reads go test -run '^$' -bench 'ScheduleReadsMillion/(StatusOf|Grid)' -benchmem -count 5 ./ledger/postgres
func BenchmarkScheduleReadsMillion(b *testing.B) {
	proctest.BenchScheduleReads(b, readsLedger(b, os.Getenv("TRANCHE_BENCH_SCHEMA")), "*/5 * * * *", 5*time.Minute, 1_000_000)
}

// BenchmarkHourlyScheduleReads100k is BenchmarkReads100k of a backfill
// of 100,000 slots of "5 * * * *", an hourly schedule: its identity is
// shared by the hourly schedules of other minutes, whose attempts a plan
// matches by their hour, so that counting first looks for them, a range
// of the count per slot.
func BenchmarkHourlyScheduleReads100k(b *testing.B) {
	proctest.BenchScheduleReads(b, readsLedger(b, os.Getenv("TRANCHE_BENCH_SCHEMA")), "5 * * * *", time.Hour, 100_000)
}

// TestScheduleChosenReads measures StatusOf, Grid and the newest failure
// of backfills of every 10th and 1,000th of the 1,000,000 slots of
// BenchmarkScheduleReadsMillion, counted, in the schema
// TRANCHE_CHOSEN_READS names (filled first if it is new), as the SQLite
// ledger's test of the same name does:
//
//	TRANCHE_CHOSEN_READS=cron go test -run 'TestScheduleChosenReads$' -v ./ledger/postgres
func TestScheduleChosenReads(t *testing.T) {
	schema := os.Getenv("TRANCHE_CHOSEN_READS")
	if schema == "" {
		t.Skip("set TRANCHE_CHOSEN_READS to a schema to measure reads of chosen slots")
	}
	proctest.MeasureChosenReads(t, readsLedger(t, schema), 1_000_000, []int{10, 1000}, []string{"counted"})
}

// TestReadsMillion runs StatusOf, Grid and Plan once each on a backfill
// of 1,000,000 hourly partitions in the schema TRANCHE_READS_MILLION
// names (filled first if it is new, which takes minutes), counted by the
// ledger or, with TRANCHE_READS_PATH=every-attempt, read from every
// latest attempt; run its binary under /usr/bin/time -v for the peak
// RSS of this process (the server's is its own).
func TestReadsMillion(t *testing.T) {
	schema := os.Getenv("TRANCHE_READS_MILLION")
	if schema == "" {
		t.Skip("set TRANCHE_READS_MILLION to a schema to measure reads of a million partitions")
	}
	mode := os.Getenv("TRANCHE_READS_PATH")
	if mode == "" {
		mode = "counted"
	}
	proctest.MeasureReads(t, readsLedger(t, schema), 1_000_000, mode)
}

// TestScheduleReadsMillion is TestReadsMillion of the backfill of
// BenchmarkScheduleReadsMillion, 1,000,000 slots of "*/5 * * * *", in the
// schema TRANCHE_READS_MILLION names (filled first if it is new):
//
//	TRANCHE_READS_MILLION=cron /usr/bin/time -v /tmp/pg.test -test.run 'TestScheduleReadsMillion$' -test.v
func TestScheduleReadsMillion(t *testing.T) {
	schema := os.Getenv("TRANCHE_READS_MILLION")
	if schema == "" {
		t.Skip("set TRANCHE_READS_MILLION to a schema to measure reads of a million slots")
	}
	mode := os.Getenv("TRANCHE_READS_PATH")
	if mode == "" {
		mode = "counted"
	}
	proctest.MeasureScheduleReads(t, readsLedger(t, schema), 1_000_000, mode)
}
