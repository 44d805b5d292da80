package sqlite_test

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/internal/proctest"
	"github.com/tranche-dev/tranche/internal/schematest"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/sqlite"
)

// The crash tests run real worker processes (internal/crashworker) against
// one SQLite file, and kill, interrupt, pause and resume them at random
// points. Each scenario runs several times; CRASH_REPEAT multiplies the
// repetitions, CRASH_SEED replays a run's random points.

var worker = proctest.Binary{Pkg: "./internal/crashworker"}

func TestMain(m *testing.M) {
	if os.Getenv(schematest.NextWorkerEnv) != "" {
		os.Exit(runNextProcess()) // a worker of TestClaimNextProcesses
	}
	if path := os.Getenv(holdLockEnv); path != "" {
		os.Exit(holdWriteLock(path)) // the paused process of TestOpenWhileLocked
	}
	code := m.Run()
	worker.Remove()
	os.Exit(code)
}

// crashworker builds the worker binary once per test binary.
func crashworker(t testing.TB) string {
	t.Helper()
	return worker.Path(t)
}

// rng returns the test's random source, seeded from CRASH_SEED or the
// clock, and logs the seed.
func rng(t *testing.T) *rand.Rand { return proctest.Rand(t, "CRASH") }

// repeat returns n times CRASH_REPEAT (default 1).
func repeat(n int) int { return proctest.Repeat("CRASH", n) }

// world is one scenario's files: the ledger, the destination and the
// executions log that every worker appends to.
type world struct {
	t                 *testing.T
	dir, ledger, dest string
	log               string
	first             time.Time
	days              int
	bin               string
	procs             []*proc
}

func newWorld(t *testing.T, days int) *world {
	dir := t.TempDir()
	w := &world{t: t, dir: dir, ledger: filepath.Join(dir, "ledger.db"), dest: filepath.Join(dir, "warehouse"),
		log: filepath.Join(dir, "executions.log"), first: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), days: days, bin: crashworker(t)}
	t.Cleanup(func() {
		for _, p := range w.procs {
			p.cmd.Process.Signal(syscall.SIGCONT)
			p.cmd.Process.Kill()
			p.wait()
		}
	})
	return w
}

// proc is a running worker.
type proc struct {
	name           string
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer
	done           chan struct{}
	err            error
	exited         time.Time
}

// start starts a worker; later flags override earlier ones.
// readDB opens the ledger's file for reading, closed when the test ends.
func (w *world) readDB(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+w.ledger+"?mode=ro&_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func (w *world) start(name string, args ...string) *proc {
	w.t.Helper()
	all := append([]string{"-ledger", w.ledger, "-dest", w.dest, "-log", w.log, "-worker", name,
		"-days", strconv.Itoa(w.days), "-from", w.first.Format(time.DateOnly)}, args...)
	p := &proc{name: name, cmd: exec.Command(w.bin, all...), done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	if err := p.cmd.Start(); err != nil {
		w.t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		p.exited = time.Now()
		close(p.done)
	}()
	w.procs = append(w.procs, p)
	return p
}

func (p *proc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v to %s: %v", sig, p.name, err)
	}
}

// wait waits for the worker to exit, at most a minute.
func (p *proc) wait() error {
	select {
	case <-p.done:
		return p.err
	case <-time.After(time.Minute):
		p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("worker %s still running after a minute; killed", p.name)
	}
}

// workerReport is crashworker's output in backfill mode.
type workerReport struct {
	Worker     string `json:"worker"`
	Total      int    `json:"total"`
	Succeeded  int    `json:"succeeded"`
	Failed     int    `json:"failed"`
	Skipped    int    `json:"skipped"`
	Superseded int    `json:"superseded"`
	Elsewhere  int    `json:"elsewhere"`
	Held       int    `json:"held"`
	NotRun     int    `json:"not_run"`
	Unclaimed  int    `json:"unclaimed"`
	Failures   []struct {
		Key    string `json:"key"`
		Err    string `json:"err"`
		Fenced bool   `json:"fenced"`
	} `json:"failures"`
	Err string `json:"err"`
}

// report waits for the worker and decodes its report, checking that it
// adds up.
func (p *proc) report(t *testing.T) workerReport {
	t.Helper()
	if err := p.wait(); err != nil {
		t.Fatalf("worker %s: %v\nstderr:\n%s", p.name, err, p.stderr.String())
	}
	var r workerReport
	if err := json.Unmarshal(p.stdout.Bytes(), &r); err != nil {
		t.Fatalf("worker %s printed %q: %v\nstderr:\n%s", p.name, p.stdout.String(), err, p.stderr.String())
	}
	if sum := r.Succeeded + r.Failed + r.Skipped + r.Elsewhere + r.Held + r.NotRun + r.Unclaimed; sum != r.Total {
		t.Errorf("worker %s's report does not add up: %d succeeded + %d failed + %d skipped + %d elsewhere + %d held + %d not run + %d unclaimed = %d; total %d",
			p.name, r.Succeeded, r.Failed, r.Skipped, r.Elsewhere, r.Held, r.NotRun, r.Unclaimed, sum, r.Total)
	}
	return r
}

// executions reads the executions log.
func (w *world) executions() []proctest.Execution { return proctest.Executions(w.t, w.log) }

// waitFor polls the executions log until ok holds of it.
func (w *world) waitFor(what string, ok func([]proctest.Execution) bool) []proctest.Execution {
	w.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if e := w.executions(); ok(e) {
			return e
		}
		time.Sleep(2 * time.Millisecond)
	}
	w.t.Fatalf("timed out waiting for %s; executions:\n%v", what, w.executions())
	return nil
}

func (w *world) partition(i int) tranche.TimePartition {
	return tranche.PartitionOf(tranche.Day, w.first.AddDate(0, 0, i))
}

// histories opens the ledger and returns every partition's history.
func (w *world) histories() map[string][]ledger.Attempt {
	w.t.Helper()
	l, err := sqlite.Open(w.t.Context(), w.ledger, nil)
	if err != nil {
		w.t.Fatal(err)
	}
	defer l.Close()
	window, err := tranche.NewTimePartitionWindow(tranche.Day, w.first, w.first.AddDate(0, 0, w.days-1))
	if err != nil {
		w.t.Fatal(err)
	}
	return proctest.Histories(w.t, l, window)
}

// rows reads the rows of partition key in the files destination.
func (w *world) rows(key string) []proctest.Row { return proctest.Rows(w.t, w.dest, key) }

// checkLanded checks that every partition succeeded exactly once, as its
// latest attempt, that every attempt before it failed, and that the files
// destination holds the partition's rows exactly once, written by the
// attempt that succeeded. It returns the histories.
func (w *world) checkLanded() map[string][]ledger.Attempt {
	w.t.Helper()
	hs := w.histories()
	for i := range w.days {
		key := w.partition(i).Key()
		h := hs[key]
		succeeded := 0
		for _, a := range h {
			if a.State == ledger.StateSucceeded {
				succeeded++
			}
		}
		if succeeded != 1 || len(h) == 0 || h[len(h)-1].State != ledger.StateSucceeded {
			w.t.Errorf("partition %s: %d successes; want exactly one, the latest attempt:\n%s", key, succeeded, formatHistory(h))
			continue
		}
		for _, a := range h[:len(h)-1] {
			if a.State != ledger.StateFailed {
				w.t.Errorf("partition %s: attempt %d %s; want every attempt before the success failed", key, a.Number, a.State)
			}
		}
		last := h[len(h)-1]
		rows := w.rows(key)
		if len(rows) != 3 {
			w.t.Errorf("partition %s: %d rows in the files destination; want 3, once each", key, len(rows))
		}
		seen := map[int]bool{}
		for _, r := range rows {
			if r.Day != key || seen[r.N] || r.Worker != last.Worker || r.Attempt != last.Number {
				w.t.Errorf("partition %s: row %+v; want day %s, n unique, written by %s attempt %d (the success)", key, r, key, last.Worker, last.Number)
			}
			seen[r.N] = true
		}
	}
	return hs
}

func formatHistory(h []ledger.Attempt) string {
	var b strings.Builder
	for _, a := range h {
		fmt.Fprintf(&b, "\tattempt %d by %s: %s %q\n", a.Number, a.Worker, a.State, a.Err)
	}
	return b.String()
}

// starts counts the executions started per partition.
func starts(es []proctest.Execution) map[string]int {
	n := map[string]int{}
	for _, e := range es {
		if e.What == "start" {
			n[e.Key]++
		}
	}
	return n
}

// TestKillMidPartition kills a worker with SIGKILL at a random point and
// runs the same backfill again, waiting for the short lease to expire:
// every partition lands exactly once.
func TestKillMidPartition(t *testing.T) {
	r := rng(t)
	for rep := range repeat(5) {
		t.Run(strconv.Itoa(rep), func(t *testing.T) {
			w := newWorld(t, 60)
			args := []string{"-concurrency", "2", "-work", "20ms", "-lease", "500ms", "-heartbeat", "150ms"}
			a := w.start("killed", args...)
			delay := time.Duration(50+r.IntN(650)) * time.Millisecond
			time.Sleep(delay)
			a.signal(t, syscall.SIGKILL)
			a.wait()
			before := w.executions()
			// The rerun waits for the killed worker's leases to expire,
			// and must run every partition left in one Run: under a
			// lease that a machine starved of the CPU for a moment does
			// not outlast, which the killed worker's 500 ms is not.
			b := w.start("rerun", append(args, "-waitothers", "-lease", "10s", "-heartbeat", "3s")...).report(t)
			if b.Failed != 0 || b.NotRun != 0 || b.Elsewhere != 0 || b.Err != "" {
				t.Errorf("rerun report %+v; want every partition succeeded or skipped", b)
			}
			hs := w.checkLanded()
			n, takeovers := starts(w.executions()), 0
			for key, h := range hs {
				if len(h) > 1 {
					takeovers++
				}
				if n[key] > len(h) || len(h) == 1 && n[key] != 1 {
					t.Errorf("partition %s executed %d times with %d attempts; want once per attempt at most, once when never interrupted",
						key, n[key], len(h))
				}
			}
			t.Logf("killed after %v, %d executions started; the rerun ran %d, skipped %d; %d partitions taken over",
				delay, len(starts(before)), b.Succeeded, b.Skipped, takeovers)
		})
	}
}

// TestWorkersShareABackfill runs two and four workers on one backfill at
// once, each waiting for the others: every partition executes exactly
// once, and each report adds up, with nothing left held elsewhere.
func TestWorkersShareABackfill(t *testing.T) {
	for _, n := range []int{2, 4} {
		for rep := range repeat(3) {
			t.Run(fmt.Sprintf("%d-workers/%d", n, rep), func(t *testing.T) {
				w := newWorld(t, 120)
				ps := make([]*proc, n)
				for i := range ps {
					ps[i] = w.start(fmt.Sprintf("w%d", i), "-concurrency", "2", "-work", "10ms", "-lease", "5s", "-heartbeat", "1s", "-waitothers")
				}
				ran := 0
				var summary []string
				for _, p := range ps {
					r := p.report(t)
					if r.Failed != 0 || r.NotRun != 0 || r.Held != 0 || r.Unclaimed != 0 || r.Err != "" || r.Total != w.days {
						t.Errorf("worker %s: report %+v; want no failure, every partition done, here or elsewhere", p.name, r)
					}
					ran += r.Succeeded
					summary = append(summary, fmt.Sprintf("%s ran %d, %d elsewhere, %d skipped", r.Worker, r.Succeeded, r.Elsewhere, r.Skipped))
				}
				if ran != w.days {
					t.Errorf("the workers ran %d partitions between them; want %d", ran, w.days)
				}
				w.checkLanded()
				for key, c := range starts(w.executions()) {
					if c != 1 {
						t.Errorf("partition %s executed %d times; want once", key, c)
					}
				}
				if got := len(starts(w.executions())); got != w.days {
					t.Errorf("%d partitions executed; want %d", got, w.days)
				}
				t.Log(strings.Join(summary, "; "))
			})
		}
	}
}

// TestInterrupt sends SIGINT to a worker with partitions in flight: they
// are recorded failed, cause canceled, and the worker exits promptly.
func TestInterrupt(t *testing.T) {
	r := rng(t)
	for rep := range repeat(3) {
		t.Run(strconv.Itoa(rep), func(t *testing.T) {
			w := newWorld(t, 30)
			p := w.start("interrupted", "-concurrency", "3", "-work", "3s", "-lease", "10s", "-heartbeat", "2s")
			k := 1 + r.IntN(3)
			w.waitFor(fmt.Sprintf("%d executions", k), func(es []proctest.Execution) bool { return len(es) >= k })
			time.Sleep(time.Duration(r.IntN(200)) * time.Millisecond)
			sent := time.Now()
			p.signal(t, syscall.SIGINT)
			rep := p.report(t)
			took := p.exited.Sub(sent)
			if took > 2*time.Second {
				t.Errorf("the worker exited %v after SIGINT; want within 2s", took)
			}
			inFlight := map[string]bool{}
			for _, e := range w.executions() {
				switch e.What {
				case "start":
					inFlight[e.Key] = true
				case "done":
					delete(inFlight, e.Key)
				}
			}
			if len(inFlight) == 0 || rep.Failed < len(inFlight) || rep.Succeeded+rep.Failed+rep.NotRun != w.days {
				t.Errorf("report %+v with %d partitions in flight; want them failed, the rest not run", rep, len(inFlight))
			}
			for key, h := range w.histories() {
				for _, a := range h {
					switch {
					case a.State == ledger.StateRunning:
						t.Errorf("partition %s: attempt %d still running after the worker exited", key, a.Number)
					case a.State == ledger.StateFailed && !strings.Contains(a.Err, "canceled"):
						t.Errorf("partition %s: attempt %d failed with %q; want the cause, canceled", key, a.Number, a.Err)
					}
				}
				if inFlight[key] && (len(h) != 1 || h[0].State != ledger.StateFailed) {
					t.Errorf("partition %s was in flight; history:\n%s\nwant one failed attempt", key, formatHistory(h))
				}
			}
			t.Logf("SIGINT with %d partitions in flight; exited after %v", len(inFlight), took.Round(time.Millisecond))
		})
	}
}

// TestPausedPastLease pauses a worker (SIGSTOP) mid-partition past its
// lease, lets another take the partition over, and resumes it (SIGCONT):
// the late result is fenced and the newer attempt's data stands.
func TestPausedPastLease(t *testing.T) {
	r := rng(t)
	variants := []string{"resumed-after-takeover-finished", "resumed-during-takeover", "stale-finish"}
	for rep := range repeat(2) {
		for _, variant := range variants {
			t.Run(fmt.Sprintf("%s/%d", variant, rep), func(t *testing.T) {
				pausedPastLease(t, r, variant)
			})
		}
	}
}

func pausedPastLease(t *testing.T, r *rand.Rand, variant string) {
	const days = 6
	w := newWorld(t, days)
	gate := filepath.Join(w.dir, "gate")
	var a *proc
	var key string
	if variant == "stale-finish" {
		i := r.IntN(days)
		key = w.partition(i).Key()
		a = w.start("paused", "-mode", "stale", "-offset", strconv.Itoa(i), "-work", "300ms", "-lease", "500ms")
		w.waitFor("the claim", func(es []proctest.Execution) bool { return len(es) > 0 })
	} else {
		a = w.start("paused", "-concurrency", "1", "-work", "400ms", "-lease", "500ms", "-heartbeat", "150ms")
		k := 1 + r.IntN(2)
		es := w.waitFor(fmt.Sprintf("%d starts", k), func(es []proctest.Execution) bool { return len(startsOf(es, "paused")) >= k })
		key = startsOf(es, "paused")[k-1]
	}
	time.Sleep(time.Duration(r.IntN(100)) * time.Millisecond)
	a.signal(t, syscall.SIGSTOP)
	time.Sleep(800 * time.Millisecond) // past the lease

	bArgs := []string{"-concurrency", "2", "-work", "20ms", "-lease", "10s", "-heartbeat", "3s"}
	if variant == "resumed-during-takeover" {
		bArgs = append(bArgs, "-gate", key, "-gatefile", gate)
	}
	b := w.start("newer", bArgs...)
	if variant == "resumed-during-takeover" {
		w.waitFor("the takeover", func(es []proctest.Execution) bool { return slices.Contains(startsOf(es, "newer"), key) })
		a.signal(t, syscall.SIGCONT)
		checkPaused(t, a, key, variant)
		if err := os.WriteFile(gate, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		b.report(t)
	} else {
		b.report(t)
		a.signal(t, syscall.SIGCONT)
		checkPaused(t, a, key, variant)
	}
	hs := w.checkLanded()
	h := hs[key]
	if len(h) != 2 || h[0].Worker != "paused" || h[1].Worker != "newer" || !strings.Contains(h[0].Err, "taken over by worker newer") {
		t.Errorf("partition %s: history\n%s\nwant the paused worker's attempt taken over by the newer one, which succeeded", key, formatHistory(h))
	}
	for _, e := range w.executions() {
		if e.Worker == "paused" && e.What == "done" && e.Key == key {
			t.Errorf("the paused worker finished executing %s after it was fenced", key)
		}
	}
}

// checkPaused waits for the resumed worker and checks that its result for
// key was fenced.
func checkPaused(t *testing.T, a *proc, key, variant string) {
	t.Helper()
	if variant == "stale-finish" {
		if err := a.wait(); err != nil {
			t.Fatalf("paused worker: %v\n%s", err, a.stderr.String())
		}
		var res struct {
			Attempt   int    `json:"attempt"`
			FinishErr string `json:"finish_err"`
			Fenced    bool   `json:"fenced"`
		}
		if err := json.Unmarshal(a.stdout.Bytes(), &res); err != nil {
			t.Fatalf("paused worker printed %q: %v", a.stdout.String(), err)
		}
		if !res.Fenced {
			t.Errorf("the paused worker's late Finish of %s = %q; want an error matching ErrFenced", key, res.FinishErr)
		}
		t.Logf("late Finish of %s: %s", key, res.FinishErr)
		return
	}
	rep := a.report(t)
	for _, f := range rep.Failures {
		if f.Key == key {
			if !f.Fenced {
				t.Errorf("the paused worker's failure of %s: %q; want an error matching ErrFenced", key, f.Err)
			}
			t.Logf("resumed worker's failure of %s: %s", key, f.Err)
			return
		}
	}
	t.Errorf("the paused worker's report %+v has no failure of %s; want it fenced", rep, key)
}

func startsOf(es []proctest.Execution, worker string) []string {
	var keys []string
	for _, e := range es {
		if e.What == "start" && e.Worker == worker {
			keys = append(keys, e.Key)
		}
	}
	return keys
}

// TestZombieWorkers makes a worker a zombie at each point of a
// partition's execution (proctest.PausePoints): it stops itself (SIGSTOP)
// inside its materializer, after the materializer returned and before
// the write, inside the destination's write, or between the write and
// the ledger's record of it, past its lease; another worker takes the
// partition over and finishes the backfill; the first resumes (SIGCONT).
// For every destination the workers can write into, no stale write
// reaches it (proctest.CheckZombie) and the ledger and the data agree.
func TestZombieWorkers(t *testing.T) { proctest.Zombies(t, "CRASH", zombie) }

func zombie(t *testing.T, r *rand.Rand, sink, at string) {
	const days = 3
	w := newWorld(t, days)
	audit := filepath.Join(w.dir, "audit.log")
	// The zombie runs one partition at a time, newest first, up to the
	// one it stops on.
	key := w.partition(r.IntN(days)).Key()
	a := w.start("zombie", proctest.ZombieArgs(sink, at, key, audit)...)
	proctest.AwaitPause(t, a.cmd.Process.Pid, w.log, key)

	b := w.start("newer", proctest.TakeoverArgs(sink, audit)...).report(t)
	if b.Failed != 0 || b.Held != 0 || b.Err != "" {
		t.Errorf("the newer worker's report %+v; want every partition done", b)
	}
	a.signal(t, syscall.SIGCONT)
	ra := a.report(t)
	refused := ""
	for _, f := range ra.Failures {
		if f.Key == key && f.Fenced {
			refused = f.Err
		}
	}
	if refused == "" || ra.Succeeded+ra.Failed+ra.Elsewhere+ra.Skipped != days {
		t.Errorf("the zombie's report %+v; want %s failed, fenced, and the rest done", ra, key)
	}
	z := proctest.Zombie{Sink: sink, At: at, Key: key, Worker: "zombie", Log: proctest.Writes(t, audit)}
	if sink == "files" {
		z.Histories = w.checkLanded()
	} else {
		db, err := sql.Open("sqlite", "file:"+w.ledger+"?_pragma=busy_timeout(10000)")
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		window, err := tranche.NewTimePartitionWindow(tranche.Day, w.first, w.first.AddDate(0, 0, days-1))
		if err != nil {
			t.Fatal(err)
		}
		z.Histories = w.histories()
		proctest.CheckSQL(t, db, z.Histories, window, 3, sink == "sql")
		z.SQLAudit = proctest.SQLRows(t, db, true)
	}
	proctest.CheckZombie(t, z)
	t.Logf("zombie stopped %s on %s; the newer worker ran %d; the zombie then reported %d done elsewhere; its %s: %s\n%s",
		at, key, b.Succeeded, ra.Elsewhere, key, refused, a.stderr.String())
}

// TestZombieAcrossDeploy is the zombie scenario with a deploy between
// the two workers: the zombie runs the first DAG and stops itself inside
// its write of its last partition, past its lease; a worker of the
// changed DAG (an asset added: another identity, whose attempts the
// ledger numbers from 1) writes every partition; the zombie resumes. The
// fence compares the tokens of the two identities' claims (the deployed
// worker's are the later), so no write of the zombie lands after the
// deployed worker's, and every partition ends with its rows, in every
// sink. (With tokens compared only within one identity, the zombie's
// rows replaced the deployed worker's on the files destination.)
func TestZombieAcrossDeploy(t *testing.T) {
	r := rng(t)
	for _, sink := range proctest.Sinks {
		for rep := range repeat(2) {
			t.Run(fmt.Sprintf("%s/%d", sink, rep), func(t *testing.T) { zombieAcrossDeploy(t, r, sink) })
		}
	}
}

// TestDeployDuringBackfill is issue 23's deploy with the old code's
// backfill still to run: the old DAG's worker stops itself inside the
// write of its first partition (newest first), the deployed worker (a
// new DAG identity of the same name) lands every partition, and the old
// worker resumes and goes on with its backfill. Its held write is
// refused by the fence, and it skips every other partition as landed by
// a newer version: every partition keeps the deployed worker's rows, on
// the files destination and the SQL destination sharing the ledger.
// (Without the rule, the old worker claimed and replaced the partitions
// the new code had landed: 17 to 54 partitions in 5 trials.)
func TestDeployDuringBackfill(t *testing.T) {
	r := rng(t)
	for _, sink := range []string{"files", "sql"} {
		for rep := range repeat(2) {
			t.Run(fmt.Sprintf("%s/%d", sink, rep), func(t *testing.T) { deployDuringBackfill(t, r, sink) })
		}
	}
}

func deployDuringBackfill(t *testing.T, r *rand.Rand, sink string) {
	const days = 8
	w := newWorld(t, days)
	audit := filepath.Join(w.dir, "audit.log")
	key := w.partition(days - 1).Key() // the old worker's first, newest first
	at := proctest.PauseWrite
	if r.IntN(2) == 0 && sink != "files" {
		at = proctest.PauseStaged
	}
	a := w.start("zombie", append(proctest.ZombieArgs(sink, at, key, audit), "-name", "events")...)
	proctest.AwaitPause(t, a.cmd.Process.Pid, w.log, key)
	b := w.start("deployed", append(proctest.TakeoverArgs(sink, audit), "-version", "2", "-name", "events")...).report(t)
	if b.Succeeded != days || b.Err != "" {
		t.Errorf("the deployed worker's report %+v; want every partition run", b)
	}
	a.signal(t, syscall.SIGCONT)
	ra := a.report(t)
	if ra.Superseded != days-1 || ra.Succeeded != 0 {
		t.Errorf("the old worker's report %+v; want %d partitions skipped as landed by a newer version, none succeeded", ra, days-1)
	}
	holders := map[string][]string{}
	if sink == "files" {
		for i := range days {
			k := w.partition(i).Key()
			for _, row := range w.rows(k) {
				holders[k] = append(holders[k], row.Worker)
			}
		}
	} else {
		db, err := sql.Open("sqlite", "file:"+w.ledger+"?_pragma=busy_timeout(10000)")
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		for k, rows := range proctest.SQLRows(t, db, false) {
			for _, row := range rows {
				holders[k] = append(holders[k], row.Worker)
			}
		}
	}
	old := 0
	for i := range days {
		k := w.partition(i).Key()
		if got := holders[k]; !slices.Equal(got, []string{"deployed", "deployed", "deployed"}) {
			old++
			t.Errorf("partition %s holds rows of %v; want the deployed worker's 3", k, got)
		}
	}
	proctest.CheckRefusedNotSucceeded(t, w.readDB(t), key)
	t.Logf("%s, old worker stopped %s on %s: %d partitions of %d with the old code's rows; its report %+v", sink, at, key, old, days, ra)
}

// TestDeployUnnamed is issue 30's deploy that adds an asset, both
// versions under NewDAG's default name ("events", then
// "deploy_2+events"): the old code's worker stops itself inside the
// write of its first partition; the deployed worker, under its default
// name, refuses to run (backfill.ErrUnnamedDAG) and lands nothing; named
// as the old version is ("events"), it lands every partition; the old
// worker resumes and leaves them, its held write refused by the fence.
// (Before the refusal the deployed worker ran, unlinked, and the old
// code's backfill replaced what it landed: 27 to 52 partitions a trial.)
func TestDeployUnnamed(t *testing.T) {
	for _, sink := range []string{"files", "sql"} {
		t.Run(sink, func(t *testing.T) {
			const days = 8
			w := newWorld(t, days)
			audit := filepath.Join(w.dir, "audit.log")
			key := w.partition(days - 1).Key()
			a := w.start("zombie", proctest.ZombieArgs(sink, proctest.PauseWrite, key, audit)...)
			proctest.AwaitPause(t, a.cmd.Process.Pid, w.log, key)
			refused := w.start("deployed", append(proctest.TakeoverArgs(sink, audit), "-version", "2")...).report(t)
			if refused.Succeeded != 0 || !strings.Contains(refused.Err, "set DAG.Name to \"events\"") {
				t.Errorf("the deployed worker under its default name: %+v; want it refused, naming \"events\", nothing run", refused)
			}
			b := w.start("deployed", append(proctest.TakeoverArgs(sink, audit), "-version", "2", "-name", "events")...).report(t)
			if b.Succeeded != days || b.Err != "" {
				t.Errorf("the deployed worker named as the old version: %+v; want every partition run", b)
			}
			a.signal(t, syscall.SIGCONT)
			ra := a.report(t)
			if ra.Succeeded != 0 {
				t.Errorf("the old worker's report %+v; want nothing succeeded", ra)
			}
			holders := map[string][]string{}
			if sink == "files" {
				for i := range days {
					k := w.partition(i).Key()
					for _, row := range w.rows(k) {
						holders[k] = append(holders[k], row.Worker)
					}
				}
			} else {
				for k, rows := range proctest.SQLRows(t, w.readDB(t), false) {
					for _, row := range rows {
						holders[k] = append(holders[k], row.Worker)
					}
				}
			}
			old := 0
			for i := range days {
				k := w.partition(i).Key()
				if got := holders[k]; !slices.Equal(got, []string{"deployed", "deployed", "deployed"}) {
					old++
					t.Errorf("partition %s holds rows of %v; want the deployed worker's 3", k, got)
				}
			}
			proctest.CheckRefusedNotSucceeded(t, w.readDB(t), key)
			t.Logf("%s: %d partitions of %d with the old code's rows; the refusal: %s", sink, old, days, refused.Err)
		})
	}
}

func zombieAcrossDeploy(t *testing.T, r *rand.Rand, sink string) {
	const days = 3
	w := newWorld(t, days)
	audit := filepath.Join(w.dir, "audit.log")
	// The zombie runs newest first: it stops on its last partition, and
	// has nothing to run after it resumes.
	key := w.partition(0).Key()
	at := proctest.PauseWrite
	if r.IntN(2) == 0 && sink != "files" {
		at = proctest.PauseStaged
	}
	a := w.start("zombie", proctest.ZombieArgs(sink, at, key, audit)...)
	proctest.AwaitPause(t, a.cmd.Process.Pid, w.log, key)
	// Another name: the versions are not linked, and only the fence
	// stands between the zombie and the deployed rows. (Under NewDAG's
	// default names the deployed worker would refuse to run:
	// TestDeployUnnamed.)
	b := w.start("deployed", append(proctest.TakeoverArgs(sink, audit), "-version", "2", "-name", "events-2")...).report(t)
	if b.Succeeded != days || b.Err != "" {
		t.Errorf("the deployed worker's report %+v; want every partition run", b)
	}
	a.signal(t, syscall.SIGCONT)
	ra := a.report(t)
	// What every partition holds: the deployed worker's rows.
	var holders map[string][]string
	if sink == "files" {
		holders = map[string][]string{}
		for i := range days {
			k := w.partition(i).Key()
			for _, row := range w.rows(k) {
				holders[k] = append(holders[k], row.Worker)
			}
		}
	} else {
		db, err := sql.Open("sqlite", "file:"+w.ledger+"?_pragma=busy_timeout(10000)")
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		holders = map[string][]string{}
		for k, rows := range proctest.SQLRows(t, db, false) {
			for _, row := range rows {
				holders[k] = append(holders[k], row.Worker)
			}
		}
	}
	stale := 0
	for i := range days {
		k := w.partition(i).Key()
		if got := holders[k]; !slices.Equal(got, []string{"deployed", "deployed", "deployed"}) {
			stale++
			t.Errorf("partition %s holds rows of %v; want the deployed worker's 3", k, got)
		}
	}
	// The audit of the writes that returned: none of the zombie's after
	// the deployed worker's of the same partition. (A destination
	// sharing the ledger only stages its writes there; what landed is
	// the audit table's, where the zombie landed nothing of key.)
	deployedWrote := map[string]bool{}
	for _, wr := range proctest.Writes(t, audit) {
		switch {
		case sink == "sql":
		case wr.Worker == "deployed":
			deployedWrote[wr.Key] = true
		case deployedWrote[wr.Key]:
			t.Errorf("the zombie wrote %s (token %d) after the deployed worker", wr.Key, wr.Token)
		}
	}
	if sink == "sql" {
		db, err := sql.Open("sqlite", "file:"+w.ledger+"?_pragma=busy_timeout(10000)")
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		for _, row := range proctest.SQLRows(t, db, true)[key] {
			if row.Worker == "zombie" {
				t.Errorf("the audit table holds the zombie's write of %s: %+v", key, row)
			}
		}
	}
	// Paused after a write that commits on its own (files,
	// sql-separate), the zombie landed its rows before the deploy's,
	// which replaced them: no fence refused it.
	if at == proctest.PauseWrite || sink == "sql" {
		proctest.CheckRefusedNotSucceeded(t, w.readDB(t), key)
	}
	t.Logf("%s, zombie stopped %s on %s: %d stale partitions of %d; the zombie's report %+v", sink, at, key, stale, days, ra)
}

// TestKillCostsOnlyInFlight kills a worker of Concurrency 1 with SIGKILL
// while the third of five daily partitions runs, and runs the same
// backfill again: the two partitions that ran before it are recorded
// succeeded (a success counts once it is recorded, before the next
// partition starts), and neither runs again; only the one in flight
// does.
func TestKillCostsOnlyInFlight(t *testing.T) {
	for rep := range repeat(20) {
		t.Run(strconv.Itoa(rep), func(t *testing.T) {
			w := newWorld(t, 5)
			third := w.partition(2).Key() // newest first: days 4 and 3 run before it
			args := []string{"-concurrency", "1", "-work", "5ms", "-lease", "500ms", "-heartbeat", "150ms"}
			a := w.start("killed", append(args, "-gate", third, "-gatefile", filepath.Join(w.dir, "never"))...)
			w.waitFor("the third partition's start", func(es []proctest.Execution) bool {
				return slices.ContainsFunc(es, func(e proctest.Execution) bool { return e.What == "start" && e.Key == third })
			})
			a.signal(t, syscall.SIGKILL)
			a.wait()
			hs := w.histories()
			before := []string{w.partition(4).Key(), w.partition(3).Key()}
			for _, key := range before {
				if h := hs[key]; len(h) != 1 || h[0].State != ledger.StateSucceeded {
					t.Errorf("partition %s, run before the kill: history\n%s want one attempt, succeeded", key, formatHistory(h))
				}
			}
			w.start("rerun", append(args, "-waitothers")...).report(t)
			n := starts(w.executions())
			for _, key := range before {
				if n[key] != 1 {
					t.Errorf("partition %s executed %d times; want once: it succeeded before the kill", key, n[key])
				}
			}
			if n[third] != 2 {
				t.Errorf("partition %s, in flight at the kill, executed %d times; want twice", third, n[third])
			}
			w.checkLanded()
		})
	}
}
