package postgres_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/internal/proctest"
	"github.com/tranche-dev/tranche/internal/schematest"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/ledgertest"
	"github.com/tranche-dev/tranche/ledger/postgres"
	"github.com/tranche-dev/tranche/ledger/sqlledger"
)

// TestClaimNextConcurrent checks schematest.CheckClaimNextConcurrent:
// sixteen goroutines share one ledger of eight connections.
func TestClaimNextConcurrent(t *testing.T) {
	schematest.CheckClaimNextConcurrent(t, openFresh(t, serverURL(t), &postgres.Options{MaxConns: 8}), 16)
}

// TestRelease checks schematest.CheckRelease.
func TestRelease(t *testing.T) { schematest.CheckRelease(t, subjectOf(serverURL(t))) }

// The environment of the worker processes of TestClaimNextProcesses,
// beside schematest's: where their ledger is.
const (
	nextURLEnv    = "TRANCHE_NEXT_URL"
	nextSchemaEnv = "TRANCHE_NEXT_SCHEMA"
)

// runNextProcess is a worker process of TestClaimNextProcesses (see
// TestMain): schematest.RunNextProcess on the ledger its environment
// names.
func runNextProcess() int {
	return schematest.RunNextProcess(func(ctx context.Context) (ledger.Ledger, func() error, error) {
		l, err := postgres.Open(ctx, os.Getenv(nextURLEnv), &postgres.Options{Schema: os.Getenv(nextSchemaEnv)})
		if err != nil {
			return nil, nil, err
		}
		return l, l.Close, nil
	})
}

// TestClaimNextProcesses runs six worker processes on one schema, each
// with its own connections, sharing a backfill through ClaimNext, with
// and without releases, in both orders; schematest.CheckNextReports
// checks that every job was handed to one of them and landed once.
func TestClaimNextProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes")
	}
	proctest.SkipRace(t)
	url := serverURL(t)
	l := openFresh(t, url, nil)
	schema := schemaOf(l)
	for _, descending := range []bool{false, true} {
		for _, release := range []bool{false, true} {
			t.Run(fmt.Sprintf("descending=%v/release=%v", descending, release), func(t *testing.T) {
				plan := schematest.NewNextPlan(t, l, fmt.Sprintf("dag-processes-%v-%v", descending, release), 400, descending)
				reports := schematest.StartNextWorkers(t, plan, 6, release, nextURLEnv+"="+url, nextSchemaEnv+"="+schema)
				schematest.CheckNextReports(t, l, plan, reports)
			})
		}
	}
}

// schemaOf returns the schema of a ledger that openFresh opened, the
// last word of its name.
func schemaOf(l *postgres.Ledger) string { return l.Name()[strings.LastIndex(l.Name(), " ")+1:] }

// hours returns a job of one hourly partition for each of hours, from
// 2026-06-01.
func hours(hs ...int) []ledger.Job {
	var jobs []ledger.Job
	for _, h := range hs {
		p := tranche.PartitionOf(tranche.Hour, time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(h)*time.Hour))
		jobs = append(jobs, ledger.Job{RunID: fmt.Sprint("run-", h), Partitions: []tranche.TimePartition{p}})
	}
	return jobs
}

// TestClaimNextNeverWaits holds, in another transaction, the rows of
// jobs behind the cursor under an UPDATE (an INSERT of one of them would
// wait for it) and locks the rows of two claimable jobs after it: a
// worker whose plan is older than the cursor's move is passed over the
// first without reading them, and over the second as jobs another
// transaction is claiming, without waiting, and is granted the fresh
// ones after them.
func TestClaimNextNeverWaits(t *testing.T) {
	url := serverURL(t)
	l := openFresh(t, url, nil)
	schema := schemaOf(l)
	ctx := t.Context()
	const dag, bf = "dag-never-waits", "bf-never-waits"
	plan, err := l.Revision(ctx, dag)
	if err != nil {
		t.Fatal(err)
	}
	req := ledger.NextRequest{DAG: dag, Backfill: bf, Worker: "w1", Jobs: hours(0, 1, 2, 3), Want: 4, Lease: time.Minute,
		Policy: ledger.RerunFailed, Revision: plan}
	grants, err := l.ClaimNext(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range grants {
		if err := l.Finish(ctx, g.Lease, []ledger.Outcome{{State: ledger.StateSucceeded}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, j := range hours(4, 5) { // failed: a worker reruns them
		lease, err := l.Claim(ctx, req.Claim(j))
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Finish(ctx, lease, []ledger.Outcome{{State: ledger.StateFailed, Err: "boom"}}); err != nil {
			t.Fatal(err)
		}
	}

	db := admin(t, url)
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	starts := func(hs ...int) string {
		var s []string
		for _, j := range hours(hs...) {
			s = append(s, fmt.Sprint(j.Start().Unix()))
		}
		return strings.Join(s, ", ")
	}
	for _, stmt := range []string{
		`UPDATE ` + schema + `.tranche_partitions SET latest = latest WHERE start_s IN (` + starts(0, 1, 2, 3) + `)`,
		`SELECT start_s FROM ` + schema + `.tranche_partitions WHERE start_s IN (` + starts(4, 5) + `) FOR UPDATE`,
	} {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}

	waitCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req.Worker, req.Jobs = "w2", hours(0, 1, 2, 3, 4, 5, 6, 7)
	began := time.Now()
	grants, err = l.ClaimNext(waitCtx, req)
	took := time.Since(began)
	if err != nil {
		t.Fatalf("ClaimNext beside the other transaction's locks = %v after %v; want no wait", err, took)
	}
	var got []string
	for i, g := range grants {
		switch {
		case g.Lease != nil:
			got = append(got, "granted")
		case g.Err.Error() == ledger.PassedError(req.Jobs[i]).Error():
			got = append(got, "passed")
		default:
			got = append(got, g.Err.Error())
		}
	}
	want := []string{"passed", "passed", "passed", "passed", "passed", "passed", "granted", "granted"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("ClaimNext beside the other transaction's locks: %q; want %q", got, want)
	}
	t.Logf("ClaimNext took %v beside the locks", took)
}

// countingTracer counts the statements a pgx connection runs (Exec,
// Query and QueryRow, BEGIN and COMMIT among them: each a round trip).
type countingTracer struct{ n atomic.Int64 }

func (c *countingTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (*countingTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// countedLedger opens a sqlledger.Ledger in a fresh schema with the
// PostgreSQL dialect, over a pool of conns connections whose statements
// tracer counts.
func countedLedger(t testing.TB, conns int) (*sqlledger.Ledger, *countingTracer) {
	t.Helper()
	url := serverURL(t)
	schema := freshSchema(t, url)
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["search_path"] = schema
	tracer := &countingTracer{}
	cfg.Tracer = tracer
	db := stdlib.OpenDB(*cfg)
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	t.Cleanup(func() { db.Close() })
	l, err := sqlledger.Open(t.Context(), db, sqlledger.Options{Dialect: postgres.DialectFor(cfg, schema), Name: "counted ledger " + schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l, tracer
}

// finishAll records every lease of grants succeeded.
func finishAll(t testing.TB, l ledger.Ledger, grants []ledger.Grant) int {
	t.Helper()
	n := 0
	for _, g := range grants {
		if g.Lease == nil {
			continue
		}
		outcomes := make([]ledger.Outcome, len(g.Lease.Partitions))
		for i := range outcomes {
			outcomes[i] = ledger.Outcome{State: ledger.StateSucceeded, Rows: 1}
		}
		if err := l.Finish(context.Background(), g.Lease, outcomes); err != nil {
			t.Fatal(err)
		}
		n += len(g.Lease.Partitions)
	}
	return n
}

// TestClaimNextStatements counts, through a pgx tracer on the ledger's
// connections, the statements of ClaimNext of 16 fresh jobs (BEGIN and
// COMMIT included): the lock of the cursor, and one statement for the
// partitions' rows, their attempts and the cursor's move, four whatever
// the jobs' sizes and however many jobs behind the cursor it passed
// over; then of 16 workers
// as goroutines, each with its connection, sharing a backfill through
// ClaimNext of 16 jobs at a time and finishing each partition: at most 2
// statements a partition in all.
func TestClaimNextStatements(t *testing.T) {
	l, tracer := countedLedger(t, 16)
	ctx := t.Context()
	const dag, bf = "dag-counted", "bf-counted"
	if _, err := l.PutBackfill(ctx, ledger.BackfillRecord{ID: bf, DAG: dag, Window: "2026"}); err != nil {
		t.Fatal(err)
	}
	from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	// jobs returns n jobs of size hours each from hour.
	jobs := func(hour, n, size int) []ledger.Job {
		out := make([]ledger.Job, n)
		for i := range out {
			out[i].RunID = "run"
			for k := range size {
				out[i].Partitions = append(out[i].Partitions, tranche.PartitionOf(tranche.Hour, from.Add(time.Duration(hour+i*size+k)*time.Hour)))
			}
		}
		return out
	}
	req := ledger.NextRequest{DAG: dag, Backfill: bf, Worker: "w", Want: 16, Lease: time.Minute, Policy: ledger.RerunFailed}
	claim := func(what string, req ledger.NextRequest, want int) {
		t.Helper()
		before := tracer.n.Load()
		grants, err := l.ClaimNext(ctx, req)
		n := tracer.n.Load() - before
		if err != nil {
			t.Fatal(err)
		}
		leases := 0
		for _, g := range grants {
			if g.Lease != nil {
				leases++
			}
		}
		if leases != 16 {
			t.Fatalf("%s: %d leases; want 16", what, leases)
		}
		t.Logf("%s: %d statements", what, n)
		if n > int64(want) {
			t.Errorf("%s: %d statements; want at most %d", what, n, want)
		}
		finishAll(t, l, grants)
	}
	req.Jobs = jobs(0, 16, 1) // the first: the DAG's row, the statements prepared
	grants, err := l.ClaimNext(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	finishAll(t, l, grants)
	req.Jobs = jobs(16, 16, 1)
	claim("16 fresh jobs of one partition", req, 4)
	req.Jobs = jobs(32, 16, 3)
	claim("16 fresh jobs of three partitions", req, 4)

	// Another worker is handed 16 jobs after the plan of this one.
	plan, err := l.Revision(ctx, dag)
	if err != nil {
		t.Fatal(err)
	}
	other := req
	other.Worker, other.Jobs, other.Revision = "other", jobs(80, 16, 3), plan
	if grants, err = l.ClaimNext(ctx, other); err != nil {
		t.Fatal(err)
	}
	finishAll(t, l, grants)
	stale := req
	stale.Jobs, stale.Revision = jobs(80, 32, 3), plan
	claim("16 jobs passed over and 16 fresh ones", stale, 4)

	// 16 workers, each its connection, sharing one backfill.
	const workers, per = 16, 64
	if plan, err = l.Revision(ctx, dag); err != nil {
		t.Fatal(err)
	}
	all := jobs(1000, workers*per, 1)
	before := tracer.n.Load()
	var wg sync.WaitGroup
	var partitions atomic.Int64
	for w := range workers {
		wg.Go(func() {
			for pos := 0; pos < len(all); {
				r := req
				r.Worker, r.Jobs, r.Revision = fmt.Sprint("w", w), all[pos:], plan
				grants, err := l.ClaimNext(ctx, r)
				if err != nil {
					t.Error(err)
					return
				}
				partitions.Add(int64(finishAll(t, l, grants)))
				pos += len(grants)
			}
		})
	}
	wg.Wait()
	n := tracer.n.Load() - before
	per1 := float64(n) / float64(partitions.Load())
	t.Logf("%d workers: %d statements for %d partitions claimed and finished, %.2f a partition", workers, n, partitions.Load(), per1)
	if partitions.Load() != int64(len(all)) || per1 > 2 {
		t.Errorf("%d partitions, %.2f statements a partition; want %d, at most 2", partitions.Load(), per1, len(all))
	}
}

// TestClaimNextSameAsMemoryLedger checks
// schematest.CheckNextSameAsMemory on one schema: ClaimNext, Release and
// the rest answer as the in-memory ledger does.
func TestClaimNextSameAsMemoryLedger(t *testing.T) {
	clock := ledgertest.NewClock(time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC))
	schematest.CheckNextSameAsMemory(t, openFresh(t, serverURL(t), &postgres.Options{Now: clock.Now}), clock)
}
