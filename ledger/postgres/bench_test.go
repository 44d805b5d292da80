package postgres_test

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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
//	go test -run '^$' -bench SharedBackfill -benchtime 300x -count 3 github.com/tranche-dev/tranche/ledger/postgres
//	go test -run '^$' -bench Throughput -benchtime 400x -count 5 github.com/tranche-dev/tranche/ledger/postgres
//
// and the statements a partition of BenchmarkSharedBackfill with the
// server logging every statement (which slows it: take the throughput
// from a run without):
//
//	psql "$TRANCHE_POSTGRES_URL" -c "ALTER SYSTEM SET log_statement = 'all'" \
//	  -c "ALTER SYSTEM SET log_line_prefix = '%m [%p] %a '" -c 'SELECT pg_reload_conf()'
//	go test -run '^$' -bench 'SharedBackfill/work=none' -benchtime 300x github.com/tranche-dev/tranche/ledger/postgres
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
	for _, kind := range []string{"postgres", "postgres-chunk=10", "postgres-ahead=64", "sqlite", "sqlite-chunk=10", "sqlite-ahead=64"} {
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
				if strings.HasSuffix(kind, "-ahead=64") {
					base = append(base, "-ahead", "64")
				}
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

// BenchmarkSharedBackfill runs one backfill of hourly partitions of one
// asset, doing nothing (10 × b.N partitions) or sleeping 10 ms (b.N per
// unit of concurrency), in N pgworker processes
// (-mode shared: backfill.Backfill.Run with WaitForOthers, again until
// StatusOf says done, as the README's replicas do) of Concurrency 1, and
// beside them in one process of Concurrency N, for N of 1 to 16
// (proctest.SharedCases), each with the ledger's default pool (4
// connections), on a new schema: the throughput a user gets from scaling
// a backfill out, timed from when every process has its ledger open to
// the last partition's finish (proctest.RunShared), every partition
// checked to have succeeded once. When the server logs every statement
// (log_statement = 'all', and %a in log_line_prefix) into
// TRANCHE_STATEMENT_LOG, or $TRANCHE_POSTGRES_DIR/server.log, it also
// reports the statements the workers' sessions logged per partition
// (BEGIN and COMMIT count; the statements of opening the ledger, before
// the release, do not); -v prints why it does not.
func BenchmarkSharedBackfill(b *testing.B) {
	url := serverURL(b)
	bin := pgworker(b)
	stmts := statementLog(b, url)
	for _, c := range proctest.SharedCases() {
		b.Run(c.Name, func(b *testing.B) {
			schema := freshSchema(b, url)
			l, err := postgres.Open(b.Context(), url, &postgres.Options{Schema: schema}) // the tables, before the workers race
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { l.Close() })
			// The workers' sessions alone carry this name, in the log
			// (no name is another's prefix).
			tag := fmt.Sprintf("trbench_%d_%d_workers", os.Getpid(), schemaSeq.Add(1))
			wurl := withParams(b, url, "application_name", tag)
			n := c.Partitions(b.N)
			cmds := make([]*exec.Cmd, c.Procs)
			for i := range cmds {
				cmds[i] = exec.Command(bin, append([]string{"-url", wurl, "-schema", schema}, c.Args(i, n)...)...)
			}
			var from int64
			proctest.RunShared(b, proctest.SharedRun{Cmds: cmds, Partitions: n,
				Ledger: func() (ledger.Ledger, func()) { return l, func() {} },
				OnRelease: func() {
					if stmts != nil {
						from = stmts.size(b)
					}
				}})
			if stmts != nil {
				count, kinds := stmts.count(b, from, tag)
				b.ReportMetric(float64(count)/float64(n), "statements/partition")
				b.Logf("%d partitions, %d statements: %s", n, count, kinds)
			}
		})
	}
}

// stmtLog is the server's log, when it logs every statement with the
// session's application name.
type stmtLog struct{ path string }

// statementLog returns the server's log of every statement, or nil, with
// the reason logged, when the server does not keep one this benchmark
// can read.
func statementLog(b *testing.B, url string) *stmtLog {
	b.Helper()
	path := os.Getenv("TRANCHE_STATEMENT_LOG")
	if dir := os.Getenv("TRANCHE_POSTGRES_DIR"); path == "" && dir != "" {
		path = filepath.Join(dir, "server.log")
	}
	var logStatement, prefix string
	db := admin(b, url)
	err := db.QueryRowContext(b.Context(), "SELECT current_setting('log_statement'), current_setting('log_line_prefix')").Scan(&logStatement, &prefix)
	why := ""
	switch {
	case err != nil:
		why = err.Error()
	case path == "":
		why = "neither TRANCHE_STATEMENT_LOG nor TRANCHE_POSTGRES_DIR names the server's log"
	case logStatement != "all" || !strings.Contains(prefix, "%a"):
		why = fmt.Sprintf("the server has log_statement = %q and log_line_prefix = %q; want 'all' and a prefix with %%a", logStatement, prefix)
	}
	if why == "" {
		if _, err := os.Stat(path); err != nil {
			why = err.Error()
		}
	}
	if why != "" {
		b.Logf("statements/partition not measured: %s", why)
		return nil
	}
	return &stmtLog{path}
}

// size returns the log's size: where the statements of a run start.
func (s *stmtLog) size(b *testing.B) int64 {
	info, err := os.Stat(s.path)
	if err != nil {
		b.Fatal(err)
	}
	return info.Size()
}

// count counts the statements sessions named tag logged after offset
// from, and returns them with the most frequent kinds (their first
// words) summarized.
func (s *stmtLog) count(b *testing.B, from int64, tag string) (int, string) {
	f, err := os.Open(s.path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		b.Fatal(err)
	}
	kinds := map[string]int{}
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, tag) {
			continue
		}
		// Simple queries log "statement: SQL", the extended protocol's
		// executions "execute NAME: SQL"; parameters follow in DETAIL
		// lines, which are not statements.
		var text string
		if _, after, ok := strings.Cut(line, "LOG:  statement: "); ok {
			text = after
		} else if _, after, ok := strings.Cut(line, "LOG:  execute "); ok {
			_, text, _ = strings.Cut(after, ": ")
		} else {
			continue
		}
		n++
		words := strings.Fields(text)
		kinds[strings.Join(words[:min(len(words), 4)], " ")]++
	}
	if err := sc.Err(); err != nil {
		b.Fatal(err)
	}
	top := slices.SortedFunc(maps.Keys(kinds), func(x, y string) int { return cmp.Or(kinds[y]-kinds[x], strings.Compare(x, y)) })
	var sum []string
	for _, k := range top[:min(len(top), 8)] {
		sum = append(sum, fmt.Sprintf("%d× %q", kinds[k], k))
	}
	return n, strings.Join(sum, ", ")
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
