package schematest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/ledger"
)

// The checks of ClaimNext and Release that the SQL ledgers share: workers
// handed the jobs of one backfill by the ledger's cursor, as goroutines
// of one process (CheckClaimNextConcurrent) or as processes
// (StartNextWorkers and RunNextWorker), the rules of Release
// (CheckRelease), and the answers of the in-memory ledger, which the SQL
// ledgers must give too (CheckNextSameAsMemory).

// NextPlan is a backfill of hourly partitions that workers share through
// ClaimNext, every worker's plan made at Revision, before any of them
// claimed: as workers started together do. It travels as JSON to worker
// processes.
type NextPlan struct {
	DAG, Backfill string
	From          time.Time
	Hours         int
	Descending    bool
	Revision      int64
}

// Jobs returns the plan's jobs in its order: an hour each, but every
// seventh a chunk of three hours (fewer at the end).
func (p NextPlan) Jobs() []ledger.Job {
	var jobs []ledger.Job
	for h := 0; h < p.Hours; {
		n := 1
		if len(jobs)%7 == 6 {
			n = min(3, p.Hours-h)
		}
		ps := make([]tranche.TimePartition, n)
		for k := range ps {
			ps[k] = tranche.PartitionOf(tranche.Hour, p.From.Add(time.Duration(h+k)*time.Hour))
		}
		jobs = append(jobs, ledger.Job{RunID: fmt.Sprintf("run-%d", h), Partitions: ps})
		h += n
	}
	if p.Descending {
		slices.Reverse(jobs)
	}
	return jobs
}

// NextWorker is one worker of a [NextPlan]: its name, how many jobs it
// asks ClaimNext for at a time, and whether, when a call grants it more
// than one, it releases the last instead of running it, as a worker that
// claimed ahead and stopped does.
type NextWorker struct {
	Name    string
	Want    int
	Release bool
}

// NextReport is what a worker of a [NextPlan] did: every lease it was
// granted, and the rules it saw broken.
type NextReport struct {
	Worker   string
	Calls    int
	Claims   []NextClaim
	Problems []string
}

// NextClaim is a lease a worker was granted, by the start of its job.
type NextClaim struct {
	Start    time.Time
	Attempts []int
	Settle   bool // claimed while the worker settled the jobs passed over, refused and released
	Released bool
}

// RunNextWorker runs worker w of plan over l: it asks ClaimNext for the
// jobs after those it was given, with the plan's revision, until none is
// left, finishing each lease succeeded (or releasing it, see
// [NextWorker]); then it settles the jobs it was passed over, refused or
// released as a backfill settles the partitions others held, claiming
// each with Claim until it claimed it or another worker's attempt
// succeeded.
// On the way it checks that each call's grants are a prefix of its jobs,
// that a call stops examining only when it granted Want, that each lease
// is its job's, and that the DAG's revision never falls.
func RunNextWorker(ctx context.Context, l ledger.Ledger, plan NextPlan, w NextWorker) (NextReport, error) {
	rep := NextReport{Worker: w.Name}
	jobs := plan.Jobs()
	var lastRev int64
	revision := func() (int64, error) {
		rev, err := l.Revision(ctx, plan.DAG)
		if err == nil && rev < lastRev {
			rep.Problems = append(rep.Problems, fmt.Sprintf("Revision fell from %d to %d", lastRev, rev))
		}
		lastRev = max(lastRev, rev)
		return rev, err
	}
	finish := func(lease *ledger.Lease) error {
		outcomes := make([]ledger.Outcome, len(lease.Partitions))
		for k := range outcomes {
			outcomes[k] = ledger.Outcome{State: ledger.StateSucceeded, Rows: 1}
		}
		if err := l.Finish(ctx, lease, outcomes); err != nil {
			return fmt.Errorf("finishing %s: %w", lease.Partitions[0].Key(), err)
		}
		return nil
	}
	// call asks for the next of jobs and runs what it was granted; it
	// returns the grants and the jobs not granted, and those released.
	call := func(jobs []ledger.Job, want int, rev int64) ([]ledger.Grant, []ledger.Job, error) {
		req := ledger.NextRequest{DAG: plan.DAG, Backfill: plan.Backfill, Worker: w.Name, Jobs: jobs, Descending: plan.Descending,
			Want: want, Lease: time.Minute, Policy: ledger.RerunFailed, Revision: rev}
		grants, err := l.ClaimNext(ctx, req)
		rep.Calls++
		if err != nil {
			return nil, nil, fmt.Errorf("asking for the next of %d jobs from %s: %w", len(jobs), jobs[0].Partitions[0].Key(), err)
		}
		rep.checkGrants(req, grants)
		var leases []*ledger.Lease
		var left []ledger.Job
		for i, g := range grants {
			if g.Lease == nil {
				// Every worker's plan is the same, made before any claim:
				// the cursor hands each job to one call, and passes the
				// others over it.
				if g.Err != nil && g.Err.Error() != ledger.PassedError(jobs[i]).Error() {
					rep.Problems = append(rep.Problems, fmt.Sprintf("call %d: job %s was examined again: %v", rep.Calls, jobs[i].Partitions[0].Key(), g.Err))
				}
				left = append(left, jobs[i])
				continue
			}
			leases = append(leases, g.Lease)
		}
		for i, lease := range leases {
			c := NextClaim{Start: lease.Partitions[0].Start, Attempts: lease.Attempts}
			if w.Release && len(leases) > 1 && i == len(leases)-1 {
				if err := l.Release(ctx, lease); err != nil {
					return nil, nil, fmt.Errorf("releasing %s: %w", lease.Partitions[0].Key(), err)
				}
				if _, err := revision(); err != nil {
					return nil, nil, err
				}
				c.Released = true
				left = append(left, jobs[slices.IndexFunc(jobs, func(j ledger.Job) bool { return j.Start().Equal(c.Start) })])
			} else if err := finish(lease); err != nil {
				return nil, nil, err
			}
			rep.Claims = append(rep.Claims, c)
		}
		return grants, left, nil
	}

	var left []ledger.Job // passed over or released, in the plan's order
	for pos := 0; pos < len(jobs); {
		grants, rest, err := call(jobs[pos:], w.Want, plan.Revision)
		if err != nil {
			return rep, err
		}
		left = append(left, rest...)
		pos += len(grants)
	}
	// Settle what is left as a backfill settles the partitions others
	// held: claim each, until it is claimed here or succeeded elsewhere.
	for tries := 0; len(left) > 0; tries++ {
		if tries == 10_000 {
			return rep, fmt.Errorf("%d jobs neither claimed nor succeeded after %d rounds", len(left), tries)
		}
		if tries > 0 {
			time.Sleep(5 * time.Millisecond) // for their holders to finish or release them
		}
		if _, err := revision(); err != nil {
			return rep, err
		}
		var again []ledger.Job
		for _, j := range left {
			// Read first, claim only what no one runs: claims take turns
			// with the workers still being handed jobs.
			h, err := l.History(ctx, plan.DAG, j.Start())
			if err != nil {
				return rep, err
			}
			if n := len(h); n > 0 && h[n-1].State != ledger.StateFailed {
				if h[n-1].State == ledger.StateRunning {
					again = append(again, j)
				}
				continue // running, or succeeded
			}
			lease, err := l.Claim(ctx, ledger.ClaimRequest{DAG: plan.DAG, Backfill: plan.Backfill, Worker: w.Name, RunID: j.RunID,
				Partitions: j.Partitions, Lease: time.Minute, Policy: ledger.RerunFailed})
			if errors.Is(err, ledger.ErrNotClaimable) {
				again = append(again, j) // claimed since the read: look again
				continue
			}
			if err != nil {
				return rep, fmt.Errorf("claiming %s: %w", j.Partitions[0].Key(), err)
			}
			if err := finish(lease); err != nil {
				return rep, err
			}
			rep.Claims = append(rep.Claims, NextClaim{Start: lease.Partitions[0].Start, Attempts: lease.Attempts, Settle: true})
		}
		left = again
	}
	return rep, nil
}

// checkGrants checks the grants of one ClaimNext call against its
// request.
func (rep *NextReport) checkGrants(req ledger.NextRequest, grants []ledger.Grant) {
	problem := func(format string, args ...any) {
		rep.Problems = append(rep.Problems, fmt.Sprintf("call %d (%d jobs from %s, want %d): ", rep.Calls, len(req.Jobs),
			req.Jobs[0].Partitions[0].Key(), req.Want)+fmt.Sprintf(format, args...))
	}
	if len(grants) == 0 || len(grants) > len(req.Jobs) {
		problem("%d grants", len(grants))
		return
	}
	leases := 0
	for i, g := range grants {
		j := req.Jobs[i]
		switch {
		case (g.Lease == nil) == (g.Err == nil):
			problem("grant %d has lease %v and error %v; want one of them", i, g.Lease, g.Err)
		case g.Err != nil && !errors.Is(g.Err, ledger.ErrNotClaimable):
			problem("grant %d: %v, which does not match ErrNotClaimable", i, g.Err)
		case g.Lease != nil:
			leases++
			if !slices.Equal(g.Lease.Partitions, j.Partitions) || g.Lease.RunID != j.RunID || g.Lease.Worker != req.Worker ||
				len(g.Lease.Attempts) != len(j.Partitions) {
				problem("grant %d is a lease of %v, run %s, worker %s, attempts %v; want job %d's, %v of run %s", i, g.Lease.Partitions,
					g.Lease.RunID, g.Lease.Worker, g.Lease.Attempts, i, j.Partitions, j.RunID)
			}
		}
	}
	if leases > req.Want || len(grants) < len(req.Jobs) && leases < req.Want {
		problem("%d leases in %d grants of %d jobs; want %d, or every job examined", leases, len(grants), len(req.Jobs), req.Want)
	}
}

// CheckNextReports checks the reports of every worker of plan, run to
// their end over l: each rule a worker saw broken; each job granted by
// ClaimNext once (the cursor handed every job to one worker, and every
// job to some worker), claimed again while settling once for each
// release, and finished once. The
// ledger must hold one attempt at each partition, the first, succeeded
// (a job released is claimed again at attempt 1), and the DAG's revision
// must be above the plan's.
func CheckNextReports(t testing.TB, l ledger.Ledger, plan NextPlan, reports []NextReport) {
	t.Helper()
	type count struct{ finished, granted, settled, released int }
	counts := map[int64]*count{}
	released, calls := 0, 0
	for _, r := range reports {
		for _, p := range r.Problems {
			t.Errorf("worker %s: %s", r.Worker, p)
		}
		calls += r.Calls
		for _, c := range r.Claims {
			n := counts[c.Start.Unix()]
			if n == nil {
				n = &count{}
				counts[c.Start.Unix()] = n
			}
			n.granted++
			if c.Settle {
				n.settled++
			}
			if c.Released {
				released++
				n.released++
			} else {
				n.finished++
			}
			if slices.ContainsFunc(c.Attempts, func(a int) bool { return a != 1 }) {
				t.Errorf("worker %s was granted %s at attempts %v; want 1 at each partition", r.Worker, c.Start.Format(time.RFC3339), c.Attempts)
			}
		}
	}
	jobs := plan.Jobs()
	for _, j := range jobs {
		n := counts[j.Start().Unix()]
		if n == nil {
			n = &count{}
		}
		if n.finished != 1 || n.granted-n.settled != 1 || n.settled != n.released {
			t.Errorf("job %s: %d leases, %d claimed while settling, %d released, %d finished; want one lease from ClaimNext, one claim while settling for each release, and one finish",
				j.Partitions[0].Key(), n.granted, n.settled, n.released, n.finished)
		}
	}
	if len(counts) != len(jobs) {
		t.Errorf("leases of %d jobs; the plan has %d", len(counts), len(jobs))
	}
	ctx := context.Background()
	for _, j := range jobs {
		for _, p := range j.Partitions {
			h, err := l.History(ctx, plan.DAG, p.Start)
			if err != nil {
				t.Fatalf("History(%s) = %v", p.Key(), err)
			}
			if len(h) != 1 || h[0].Number != 1 || h[0].State != ledger.StateSucceeded || h[0].RunID != j.RunID {
				t.Errorf("History(%s) = %+v; want attempt 1 of run %s, succeeded", p.Key(), h, j.RunID)
			}
		}
	}
	if rev, err := l.Revision(ctx, plan.DAG); err != nil || rev <= plan.Revision {
		t.Errorf("Revision = %d, %v; want above the plan's, %d", rev, err, plan.Revision)
	}
	var each []int
	for _, r := range reports {
		each = append(each, len(r.Claims))
	}
	t.Logf("%d workers, %d jobs, %d ClaimNext calls, %d leases released; leases of each worker %v", len(reports), len(jobs), calls, released, each)
}

// NewNextPlan records a backfill of hours hourly partitions of DAG dag in
// l and returns its plan, made at the DAG's revision now.
func NewNextPlan(t testing.TB, l ledger.Ledger, dag string, hours int, descending bool) NextPlan {
	t.Helper()
	ctx := context.Background()
	plan := NextPlan{DAG: dag, Backfill: dag + "-bf", From: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), Hours: hours, Descending: descending}
	if _, err := l.PutBackfill(ctx, ledger.BackfillRecord{ID: plan.Backfill, DAG: dag, Window: "2026-03"}); err != nil {
		t.Fatalf("PutBackfill = %v", err)
	}
	rev, err := l.Revision(ctx, dag)
	if err != nil {
		t.Fatalf("Revision = %v", err)
	}
	plan.Revision = rev
	return plan
}

// nextWorkers returns n workers asking for 1, 4 and 16 jobs in turn,
// every other one releasing if release.
func nextWorkers(n int, release bool) []NextWorker {
	ws := make([]NextWorker, n)
	for i := range ws {
		ws[i] = NextWorker{Name: fmt.Sprintf("w%d", i), Want: []int{1, 4, 16}[i%3], Release: release && i%2 == 1}
	}
	return ws
}

// CheckClaimNextConcurrent runs n workers as goroutines sharing l, in
// subtests: in both orders, with and without releases, each a backfill
// of 300 hours of a DAG of its own, all workers started at once; then
// [CheckNextReports].
func CheckClaimNextConcurrent(t *testing.T, l ledger.Ledger, n int) {
	for _, descending := range []bool{false, true} {
		for _, release := range []bool{false, true} {
			name := fmt.Sprintf("descending=%v/release=%v", descending, release)
			t.Run(name, func(t *testing.T) {
				plan := NewNextPlan(t, l, "dag-next-"+strings.NewReplacer("/", "-", "=", "-").Replace(name), 300, descending)
				workers := nextWorkers(n, release)
				reports := make([]NextReport, n)
				var wg sync.WaitGroup
				start := make(chan struct{})
				for i, w := range workers {
					wg.Go(func() {
						<-start
						var err error
						if reports[i], err = RunNextWorker(t.Context(), l, plan, w); err != nil {
							t.Errorf("worker %s: %v", w.Name, err)
						}
					})
				}
				close(start)
				wg.Wait()
				CheckNextReports(t, l, plan, reports)
			})
		}
	}
}

// The environment of a worker process (see [StartNextWorkers]).
const (
	// NextWorkerEnv holds the JSON of a worker process's plan and
	// worker; a test binary's TestMain that finds it set runs
	// [RunNextProcess] instead of the tests.
	NextWorkerEnv = "TRANCHE_NEXT_WORKER"
	// nextGoEnv names the file whose creation starts the workers.
	nextGoEnv = "TRANCHE_NEXT_GO"
)

// nextJob is what a worker process reads of NextWorkerEnv.
type nextJob struct {
	Plan   NextPlan
	Worker NextWorker
}

// StartNextWorkers runs n workers of plan as processes, the test binary
// started again with env added to its environment (where the worker's
// ledger is: the caller's TestMain reads it, see [RunNextProcess]),
// asking for 1, 4 and 16 jobs in turn, every other one releasing if
// release; they open their ledgers, then start together. It returns their reports, for
// [CheckNextReports].
func StartNextWorkers(t *testing.T, plan NextPlan, n int, release bool, env ...string) []NextReport {
	t.Helper()
	goFile := filepath.Join(t.TempDir(), "go")
	type proc struct {
		cmd            *exec.Cmd
		stdout, stderr strings.Builder
	}
	procs := make([]*proc, n)
	for i, w := range nextWorkers(n, release) {
		job, err := json.Marshal(nextJob{Plan: plan, Worker: w})
		if err != nil {
			t.Fatal(err)
		}
		p := &proc{cmd: exec.Command(os.Args[0], "-test.run=^$")}
		p.cmd.Env = append(os.Environ(), append(env, NextWorkerEnv+"="+string(job), nextGoEnv+"="+goFile)...)
		p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
		if err := p.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		procs[i] = p
	}
	t.Cleanup(func() {
		for _, p := range procs {
			if p.cmd.ProcessState == nil {
				p.cmd.Process.Kill()
				p.cmd.Wait()
			}
		}
	})
	if err := os.WriteFile(goFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	reports := make([]NextReport, n)
	for i, p := range procs {
		if err := p.cmd.Wait(); err != nil {
			t.Fatalf("worker process %d: %v\n%s", i, err, p.stderr.String())
		}
		if err := json.Unmarshal([]byte(p.stdout.String()), &reports[i]); err != nil {
			t.Fatalf("the report of worker process %d: %v\n%s\n%s", i, err, p.stdout.String(), p.stderr.String())
		}
	}
	return reports
}

// RunNextProcess is the body of a worker process of [StartNextWorkers],
// for the TestMain of a test binary that finds NextWorkerEnv set: it
// opens its ledger with open, waits for the others, runs its worker
// ([RunNextWorker]) and writes its report on stdout as JSON. It returns
// the process's exit code.
func RunNextProcess(open func(ctx context.Context) (ledger.Ledger, func() error, error)) int {
	var job nextJob
	if err := json.Unmarshal([]byte(os.Getenv(NextWorkerEnv)), &job); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", NextWorkerEnv, err)
		return 2
	}
	ctx := context.Background()
	l, closeLedger, err := open(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer closeLedger()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
		if _, err := os.Stat(os.Getenv(nextGoEnv)); err == nil {
			break
		}
		if time.Now().After(deadline) {
			fmt.Fprintln(os.Stderr, "the other workers did not start within a minute")
			return 1
		}
	}
	rep, err := RunNextWorker(ctx, l, job.Plan, job.Worker)
	if err != nil {
		fmt.Fprintf(os.Stderr, "worker %s: %v\n", job.Worker.Name, err)
		return 1
	}
	if err := json.NewEncoder(os.Stdout).Encode(rep); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}
