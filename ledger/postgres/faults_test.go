package postgres_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
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
	"github.com/tranche-dev/tranche/internal/proctest"
	"github.com/tranche-dev/tranche/internal/schematest"
	"github.com/tranche-dev/tranche/internal/testskip"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/postgres"
)

// The fault tests run real worker processes (internal/pgworker) against
// the test server, and SIGKILL them, terminate their connections and
// restart the server under them. Each worker runs the backfill again
// until every partition has succeeded, as the replicas of a scaled-out
// job do. Afterwards every partition must have succeeded exactly once,
// in the ledger and in the files destination, and every attempt that a
// fault interrupted must show in the ledger's history as taken over.
// FAULT_REPEAT multiplies the repetitions, FAULT_SEED replays a run's
// random points.

var worker = proctest.Binary{Pkg: "./internal/pgworker"}

func TestMain(m *testing.M) {
	if os.Getenv(schematest.NextWorkerEnv) != "" {
		os.Exit(runNextProcess()) // a worker of TestClaimNextProcesses
	}
	if v := os.Getenv(holdLocksEnv); v != "" {
		url, schema, _ := strings.Cut(v, "\n")
		os.Exit(holdLocks(url, schema)) // the paused process of TestOpenWhileLocked
	}
	code := testskip.Main(m)
	worker.Remove()
	os.Exit(code)
}

// pgworker builds the worker binary once per test binary.
func pgworker(t testing.TB) string {
	t.Helper()
	return worker.Path(t)
}

// rng returns the test's random source, seeded from FAULT_SEED or the
// clock, and logs the seed.
func rng(t *testing.T) *rand.Rand { return proctest.Rand(t, "FAULT") }

// repeat returns n times FAULT_REPEAT (default 1).
func repeat(n int) int { return proctest.Repeat("FAULT", n) }

// world is one scenario: a schema of the test server, the destination
// and the executions log that every worker appends to.
type world struct {
	t          *testing.T
	url        string
	schema     string
	dir, dest  string
	log        string
	first      time.Time
	days       int
	bin        string
	workerArgs []string

	mu    sync.Mutex
	procs []*proc
}

func newWorld(t *testing.T, days int, workerArgs ...string) *world {
	url := serverURL(t)
	dir := t.TempDir()
	w := &world{t: t, url: url, schema: freshSchema(t, url), dir: dir, dest: filepath.Join(dir, "warehouse"),
		log: filepath.Join(dir, "executions.log"), first: time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC), days: days,
		bin: pgworker(t), workerArgs: workerArgs}
	// Workers racing to create the tables is another test's business:
	// here the schema is ready before they start.
	l, err := postgres.Open(t.Context(), url, &postgres.Options{Schema: w.schema})
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	t.Cleanup(func() {
		for _, p := range w.all() {
			p.cmd.Process.Kill()
			p.wait()
		}
	})
	return w
}

func (w *world) all() []*proc {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]*proc(nil), w.procs...)
}

// proc is a running worker.
type proc struct {
	name           string
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer
	done           chan struct{}
	err            error
}

// start starts a worker, its connections named after it
// (application_name); later flags override earlier ones.
func (w *world) start(name string, args ...string) *proc {
	w.t.Helper()
	all := append([]string{"-url", withParams(w.t, w.url, "application_name", "pgworker-"+name), "-schema", w.schema,
		"-dest", w.dest, "-log", w.log, "-worker", name, "-days", strconv.Itoa(w.days), "-from", w.first.Format(time.DateOnly)},
		w.workerArgs...)
	all = append(all, args...)
	p := &proc{name: name, cmd: exec.Command(w.bin, all...), done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	if err := p.cmd.Start(); err != nil {
		w.t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	w.mu.Lock()
	w.procs = append(w.procs, p)
	w.mu.Unlock()
	return p
}

// wait waits for the worker to exit, at most two minutes.
func (p *proc) wait() error {
	select {
	case <-p.done:
		return p.err
	case <-time.After(2 * time.Minute):
		p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("worker %s still running after two minutes; killed", p.name)
	}
}

// summary is pgworker's output.
type summary struct {
	Worker    string   `json:"worker"`
	Runs      int      `json:"runs"`
	Succeeded int      `json:"succeeded"`
	Failed    int      `json:"failed"`
	Fenced    int      `json:"fenced"`
	Lost      int      `json:"lost"`
	Errors    []string `json:"errors"`
	Done      bool     `json:"done"`
	// Superseded counts the partitions skipped as landed by a newer
	// version of the DAG.
	Superseded int `json:"superseded"`
	// FencedKeys are the partitions the worker knew it no longer held.
	FencedKeys []string `json:"fenced_keys"`
}

// report waits for the worker and decodes its summary.
func (p *proc) report(t *testing.T) summary {
	t.Helper()
	if err := p.wait(); err != nil {
		t.Fatalf("worker %s: %v\nstderr:\n%s", p.name, err, p.stderr.String())
	}
	var s summary
	if err := json.Unmarshal(p.stdout.Bytes(), &s); err != nil {
		t.Fatalf("worker %s printed %q: %v\nstderr:\n%s", p.name, p.stdout.String(), err, p.stderr.String())
	}
	if !s.Done {
		t.Errorf("worker %s stopped before the backfill was done: %+v", p.name, s)
	}
	return s
}

// executions reads the executions log.
func (w *world) executions() []proctest.Execution { return proctest.Executions(w.t, w.log) }

// doneCount counts the executions that ended, cheaply enough to poll.
func (w *world) doneCount() int {
	data, _ := os.ReadFile(w.log)
	return bytes.Count(data, []byte("done "))
}

func (w *world) partition(i int) tranche.TimePartition {
	return tranche.PartitionOf(tranche.Day, w.first.AddDate(0, 0, i))
}

// histories returns every partition's history.
func (w *world) histories() map[string][]ledger.Attempt {
	w.t.Helper()
	l, err := postgres.Open(w.t.Context(), w.url, &postgres.Options{Schema: w.schema})
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

// outcome is what checkLanded found.
type outcome struct {
	histories map[string][]ledger.Attempt
	takeovers int                 // attempts failed by a takeover
	byWorker  map[string][]string // the partitions taken over, by the taken-over worker
	stopped   int                 // attempts their workers stopped, unable to renew their leases in time
}

// checkLanded checks that every partition succeeded exactly once, as its
// latest attempt; that every attempt before it was taken over after its
// lease expired, or was stopped by its worker, which could not renew the
// lease in time (a server restarting, a machine too busy) and recorded it
// failed (the only ways a worker in these tests loses a partition);
// that no takeover came before the lease it ended had expired, by the
// ledger's clock;
// that the files destination holds the partition's rows exactly once,
// written by the attempt that succeeded; that no attempt executed twice;
// and that the tables agree with each other.
func (w *world) checkLanded() outcome {
	w.t.Helper()
	o := outcome{histories: w.histories(), byWorker: map[string][]string{}}
	started := map[string]int{} // key/worker/attempt -> executions started
	for _, e := range w.executions() {
		if e.What == "start" {
			started[fmt.Sprintf("%s/%s/%d", e.Key, e.Worker, e.Attempt)]++
		}
	}
	for k, n := range started {
		if n > 1 {
			w.t.Errorf("execution %s started %d times; want once per attempt", k, n)
		}
	}
	for i := range w.days {
		key := w.partition(i).Key()
		h := o.histories[key]
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
			switch {
			case a.State == ledger.StateFailed && strings.Contains(a.Err, "taken over by worker "):
				// By the next attempt's worker, or by a worker that then
				// released its claim unstarted: Release withdraws the
				// taking attempt and steps the partition back to this one,
				// failed as the takeover recorded it, naming a worker whose
				// attempt the history no longer holds (seen once in
				// TestChaos and once in TestServerRestart). That worker
				// must not have started it.
				by := a.Err[strings.LastIndex(a.Err, "taken over by worker ")+len("taken over by worker "):]
				if by != h[a.Number].Worker && started[fmt.Sprintf("%s/%s/%d", key, by, a.Number+1)] > 0 {
					w.t.Errorf("partition %s: attempt %d by %s taken over by %s, whose attempt %d started but is not in the history, where %s's is",
						key, a.Number, a.Worker, by, a.Number+1, h[a.Number].Worker)
				}
				o.takeovers++
				o.byWorker[a.Worker] = append(o.byWorker[a.Worker], key)
				if a.Finished.Before(a.LeaseUntil) {
					w.t.Errorf("partition %s: attempt %d by %s taken over at %s, before its lease expired at %s",
						key, a.Number, a.Worker, a.Finished.Format(time.StampMilli), a.LeaseUntil.Format(time.StampMilli))
				}
			case a.State == ledger.StateFailed && strings.Contains(a.Err, "lease not renewed"):
				o.stopped++
			default:
				w.t.Errorf("partition %s: attempt %d by %s %s %q; want it failed, taken over (the next attempt's worker is %s), or stopped by its own",
					key, a.Number, a.Worker, a.State, a.Err, h[a.Number].Worker)
			}
		}
		last := h[len(h)-1]
		if started[fmt.Sprintf("%s/%s/%d", key, last.Worker, last.Number)] != 1 {
			w.t.Errorf("partition %s: the success, attempt %d by %s, has no execution in the log", key, last.Number, last.Worker)
		}
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
	w.checkTables()
	return o
}

// checkTables checks, in SQL, that the ledger's tables agree: each
// partition's latest is its newest attempt, attempts are numbered 1, 2,
// ... without a gap, at most the latest is running, and no revision is
// ahead of the sequence they come from.
func (w *world) checkTables() {
	w.t.Helper()
	db := admin(w.t, w.url)
	checks := []struct{ what, query string }{
		{"partitions whose latest is not their newest attempt",
			`SELECT count(*) FROM %[1]s.tranche_partitions p WHERE p.latest <>
				(SELECT COALESCE(max(attempt), 0) FROM %[1]s.tranche_attempts a WHERE a.dag_id = p.dag_id AND a.start_s = p.start_s)`},
		{"partitions whose attempts are not numbered 1 to n",
			`SELECT count(*) FROM (SELECT dag_id, start_s FROM %[1]s.tranche_attempts GROUP BY dag_id, start_s
				HAVING count(*) <> max(attempt) OR min(attempt) <> 1) x`},
		{"running attempts that are not the latest",
			`SELECT count(*) FROM %[1]s.tranche_attempts a JOIN %[1]s.tranche_partitions p USING (dag_id, start_s)
				WHERE a.state = 'running' AND a.attempt <> p.latest`},
		{"attempts whose revision is ahead of the sequence of revisions",
			`SELECT count(*) FROM %[1]s.tranche_attempts a WHERE a.revision > (SELECT last_value FROM %[1]s.tranche_revisions)`},
	}
	for _, c := range checks {
		var n int
		if err := db.QueryRowContext(w.t.Context(), fmt.Sprintf(c.query, w.schema)).Scan(&n); err != nil {
			w.t.Fatalf("%s: %v", c.what, err)
		}
		if n != 0 {
			w.t.Errorf("%d %s", n, c.what)
		}
	}
}

func formatHistory(h []ledger.Attempt) string {
	var b strings.Builder
	for _, a := range h {
		fmt.Fprintf(&b, "\tattempt %d by %s: %s %q\n", a.Number, a.Worker, a.State, a.Err)
	}
	return b.String()
}

// interrupted returns the attempts (key/worker/attempt) that started
// executing but whose worker never saw them finish: killed, or cut off
// from the server.
func interrupted(es []proctest.Execution, workers map[string]bool) map[string]bool {
	out := map[string]bool{}
	for _, e := range es {
		if !workers[e.Worker] {
			continue
		}
		k := fmt.Sprintf("%s/%s/%d", e.Key, e.Worker, e.Attempt)
		switch e.What {
		case "start":
			out[k] = true
		case "done":
			delete(out, k)
		}
	}
	return out
}

// TestChaos runs four workers on one backfill of 2,000 partitions while a
// chaos loop SIGKILLs a random worker every few hundred milliseconds and
// starts a replacement, and now and then stops a fifth (SIGSTOP) past its
// lease and resumes it. Every partition lands exactly once; every
// partition a killed worker held is taken over, and its history says so;
// a worker never killed, the slow one or another that a loaded machine
// starved, loses a partition only after its lease expired, and then
// knows it.
func TestChaos(t *testing.T) {
	chaosFor := 8 * time.Second
	if s := os.Getenv("FAULT_CHAOS"); s != "" {
		chaosFor, _ = time.ParseDuration(s)
	}
	r := rng(t)
	for rep := range repeat(1) {
		t.Run(strconv.Itoa(rep), func(t *testing.T) {
			const days = 2000
			w := newWorld(t, days, "-concurrency", "4", "-work", "20ms", "-lease", "1s", "-heartbeat", "250ms")
			live := map[int]*proc{}
			n := 0
			spawn := func(slot int) {
				n++
				live[slot] = w.start(fmt.Sprintf("w%d-%d", slot, n))
			}
			for slot := range 4 {
				spawn(slot)
			}
			laggard := w.start("slow")
			var stopped atomic.Bool
			killed, stalls := map[string]bool{}, 0
			start := time.Now()
			// Kill for a while, then let the survivors finish.
			for time.Since(start) < chaosFor && w.doneCount() < days*9/10 {
				time.Sleep(time.Duration(150+r.IntN(350)) * time.Millisecond)
				if r.IntN(4) == 0 && !stopped.Load() {
					// A worker merely slow, as a loaded machine makes any
					// of them: its leases expire while the chaos goes on,
					// and the workers started meanwhile take its
					// partitions over.
					stopped.Store(true)
					laggard.cmd.Process.Signal(syscall.SIGSTOP)
					time.AfterFunc(2*time.Second, func() {
						laggard.cmd.Process.Signal(syscall.SIGCONT)
						stopped.Store(false)
					})
					stalls++
					continue
				}
				slot := r.IntN(4)
				p := live[slot]
				select {
				case <-p.done: // finished: the backfill is done
					continue
				default:
				}
				p.cmd.Process.Signal(syscall.SIGKILL)
				p.wait()
				killed[p.name] = true
				spawn(slot)
			}
			reports := map[string]summary{}
			for _, p := range append(slices.Collect(maps.Values(live)), laggard) {
				reports[p.name] = p.report(t)
			}
			o := w.checkLanded()
			// Every execution a kill cut short was taken over; a killed
			// worker may also have lost partitions it had claimed but not
			// started, or finished but not recorded.
			lostExecutions := interrupted(w.executions(), killed)
			for k := range lostExecutions {
				f := strings.Split(k, "/")
				h := o.histories[f[0]]
				n, _ := strconv.Atoi(f[2])
				if n < 1 || n > len(h) || h[n-1].Worker != f[1] || n == len(h) {
					t.Errorf("execution %s was cut short by a kill; want its attempt taken over in the history:\n%s", k, formatHistory(h))
				}
			}
			// A worker never killed loses a partition only when its lease
			// expired (checkLanded), stopped by the loop or starved of the
			// CPU by a loaded machine; then it saw the lease lost, and
			// landed nothing of the partition (checkLanded).
			slow := 0
			for wk, keys := range o.byWorker {
				if killed[wk] {
					continue
				}
				slow += len(keys)
				for _, key := range keys {
					if !slices.Contains(reports[wk].FencedKeys, key) {
						t.Errorf("worker %s, never killed, lost partition %s to a takeover without seeing its lease lost; its summary: %+v",
							wk, key, reports[wk])
					}
				}
			}
			if len(killed) < 5 || o.takeovers < len(lostExecutions) || len(lostExecutions) == 0 {
				t.Errorf("%d workers killed, %d executions cut short, %d takeovers; want several kills, each cut-short execution taken over",
					len(killed), len(lostExecutions), o.takeovers)
			}
			t.Logf("%d partitions in %v; %d workers killed, %d executions cut short, %d takeovers in the history (%d of workers never killed, the slow one stopped %d times), %d attempts stopped by their workers",
				days, time.Since(start).Round(time.Millisecond), len(killed), len(lostExecutions), o.takeovers, slow, stalls, o.stopped)
		})
	}
}

// TestTerminateConnections runs two workers on one backfill while a loop
// terminates, with pg_terminate_backend, the connections of one of them
// that are in the middle of a statement or a transaction, every hundred
// milliseconds or so: claims, heartbeats and finishes cut off halfway.
// Nothing is half-written, every partition lands exactly once, and every
// partition whose worker lost its claim or its finish is taken over once
// its lease expires.
func TestTerminateConnections(t *testing.T) {
	r := rng(t)
	for rep := range repeat(1) {
		t.Run(strconv.Itoa(rep), func(t *testing.T) {
			const days = 300
			w := newWorld(t, days, "-concurrency", "4", "-work", "20ms", "-lease", "1s", "-heartbeat", "250ms")
			victim := w.start("victim")
			db := admin(t, w.url)
			// The victim lands a partition before the other starts, which
			// would otherwise be quick enough to leave it none.
			for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				var n int
				err := db.QueryRowContext(t.Context(), "SELECT count(*) FROM "+w.schema+".tranche_attempts WHERE worker = 'victim' AND state = 'succeeded'").Scan(&n)
				if err == nil && n > 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the victim landed no partition in 20 s alone (%v)", err)
				}
			}
			other := w.start("other")
			terminated := 0
			start := time.Now()
			for {
				select {
				case <-victim.done:
				default:
					// Often: a victim's statement or transaction lasts a
					// millisecond or two of each 20 ms partition, so on a
					// quiet machine a look every 100 ms found none in a
					// whole run (CI, once: 0 in 1.4 s).
					time.Sleep(time.Duration(10+r.IntN(30)) * time.Millisecond)
					var n int
					err := db.QueryRowContext(t.Context(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
						WHERE application_name = 'pgworker-victim' AND state IN ('active', 'idle in transaction')`).Scan(&n)
					if err != nil {
						t.Fatal(err)
					}
					terminated += n
					continue
				}
				break
			}
			vs, os := victim.report(t), other.report(t)
			o := w.checkLanded()
			if terminated == 0 || vs.Succeeded == 0 {
				t.Errorf("%d connections terminated; the victim succeeded %d partitions; want both", terminated, vs.Succeeded)
			}
			// The other worker's connections are never terminated, but a
			// loaded machine may starve it past a lease: then it saw the
			// lease lost, and landed nothing of the partition.
			for _, key := range o.byWorker["other"] {
				if !slices.Contains(os.FencedKeys, key) {
					t.Errorf("the other worker, whose connections were never terminated, lost partition %s to a takeover without seeing its lease lost; its summary: %+v", key, os)
				}
			}
			t.Logf("%d partitions in %v; %d of the victim's connections terminated mid-statement or mid-transaction; it ran %d partitions in %d runs, %d calls failing with the lost connection; %d takeovers of its partitions",
				days, time.Since(start).Round(time.Millisecond), terminated, vs.Succeeded, vs.Runs, vs.Lost, o.takeovers)
			t.Logf("the other worker ran %d partitions in %d runs", os.Succeeded, os.Runs)
		})
	}
}

// TestServerRestart restarts the server (pg_ctl restart -m fast, which
// ends every connection) twice under four workers sharing a backfill.
// The workers ride it out, and every partition lands exactly once; a
// partition whose worker lost its finish is taken over once its lease
// expires.
func TestServerRestart(t *testing.T) {
	dir := serverDir(t)
	for rep := range repeat(1) {
		t.Run(strconv.Itoa(rep), func(t *testing.T) {
			const days = 500
			w := newWorld(t, days, "-concurrency", "4", "-work", "20ms", "-lease", "2s", "-heartbeat", "500ms")
			ps := make([]*proc, 4)
			for i := range ps {
				ps[i] = w.start(fmt.Sprintf("w%d", i))
			}
			start := time.Now()
			for _, at := range []int{days / 4, days / 2} {
				for w.doneCount() < at && time.Since(start) < time.Minute {
					time.Sleep(10 * time.Millisecond)
				}
				t0 := time.Now()
				out, err := exec.Command("./testserver.sh", "restart", dir).CombinedOutput()
				if err != nil {
					t.Fatalf("testserver.sh restart: %v\n%s", err, out)
				}
				t.Logf("restarted the server after %d executions, in %v", at, time.Since(t0).Round(time.Millisecond))
			}
			lost := 0
			for _, p := range ps {
				s := p.report(t)
				lost += s.Lost
			}
			o := w.checkLanded()
			if lost == 0 {
				t.Errorf("no worker saw the server go away")
			}
			t.Logf("%d partitions in %v; %d calls failed with the lost server; %d takeovers in the history, %d attempts stopped by their workers",
				days, time.Since(start).Round(time.Millisecond), lost, o.takeovers, o.stopped)
		})
	}
}

// TestKillCostsOnlyInFlight kills a worker of Concurrency 1 with SIGKILL
// while the third of five daily partitions runs (stopped there by
// itself), and runs the same backfill again: the two partitions that
// ran before it are recorded succeeded (a success counts once it is
// recorded, before the next partition starts), and neither runs again;
// only the one in flight does.
func TestKillCostsOnlyInFlight(t *testing.T) {
	for rep := range repeat(20) {
		t.Run(strconv.Itoa(rep), func(t *testing.T) {
			w := newWorld(t, 5, "-concurrency", "1", "-work", "5ms", "-lease", "500ms", "-heartbeat", "150ms")
			third := w.partition(2).Key() // newest first: days 4 and 3 run before it
			a := w.start("killed", "-pause", proctest.PauseMaterialize, "-pausekey", third)
			deadline := time.Now().Add(30 * time.Second)
			for !slices.ContainsFunc(w.executions(), func(e proctest.Execution) bool { return e.What == "start" && e.Key == third }) {
				if time.Now().After(deadline) {
					t.Fatalf("the third partition never started; executions: %v", w.executions())
				}
				time.Sleep(2 * time.Millisecond)
			}
			a.cmd.Process.Signal(syscall.SIGKILL)
			a.wait()
			hs := w.histories()
			before := []string{w.partition(4).Key(), w.partition(3).Key()}
			for _, key := range before {
				if h := hs[key]; len(h) != 1 || h[0].State != ledger.StateSucceeded {
					t.Errorf("partition %s, run before the kill: history\n%s want one attempt, succeeded", key, formatHistory(h))
				}
			}
			w.start("rerun").report(t)
			n := map[string]int{}
			for _, e := range w.executions() {
				if e.What == "start" {
					n[e.Key]++
				}
			}
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
