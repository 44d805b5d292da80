package postgres_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/internal/netfault"
	"github.com/tranche-dev/tranche/internal/proctest"
	"github.com/tranche-dev/tranche/ledger"
)

// The network fault tests run pgworker processes whose connection
// strings point at proxies of internal/netfault, one per worker, and
// break the network between a worker and the server: a cut that
// black-holes both directions past the lease, then heals (what the
// worker sent meanwhile reaches the server late), and replies dropped at
// random moments, each drop healed by resetting the connections that lost
// a reply. They check the ledger and the data as the other fault tests
// do, and, from each worker's -runlog, what the worker saw and when.
// FAULT_SEED replays a run's random points, FAULT_REPEAT repeats them.

// netProxy starts a proxy to the test server for worker name and
// returns it with the connection string that reaches the server through
// it, naming the connections after the worker.
func (w *world) netProxy(name string) (*netfault.Proxy, string) {
	w.t.Helper()
	u, err := url.Parse(w.url)
	if err != nil || u.Host == "" {
		w.t.Fatalf("the network fault tests need TRANCHE_POSTGRES_URL as a URL with a host:port (%v)", err)
	}
	p, err := netfault.Listen(u.Host)
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() { p.Close() })
	u.Host = p.Addr()
	return p, withParams(w.t, u.String(), "application_name", "pgworker-"+name)
}

// netWorker is a worker started through a proxy of its own.
type netWorker struct {
	*proc
	proxy  *netfault.Proxy
	runLog string
}

// startNet starts worker name through a proxy of its own, logging its
// runs (-runlog).
func (w *world) startNet(name string, args ...string) *netWorker {
	w.t.Helper()
	p, u := w.netProxy(name)
	log := filepath.Join(w.dir, name+".runlog")
	return &netWorker{proc: w.start(name, append([]string{"-url", u, "-runlog", log}, args...)...), proxy: p, runLog: log}
}

// runLogEntry is a line of pgworker's -runlog.
type runLogEntry struct {
	Ev        string    `json:"ev"`
	Run       int       `json:"run"`
	Key       string    `json:"key"`
	Attempt   int       `json:"attempt"`
	At        time.Time `json:"at"`
	End       time.Time `json:"end"`
	Succeeded int       `json:"succeeded"`
	Failed    int       `json:"failed"`
	Unclaimed int       `json:"unclaimed"`
	Held      int       `json:"held"`
	Err       string    `json:"err"`
	Fenced    bool      `json:"fenced"`
	Lost      bool      `json:"lost"`
	Stale     bool      `json:"stale"`
	Claim     bool      `json:"claim"`
}

// entries reads the worker's run log, up to its last whole line: a
// worker still running may be writing the next, and a reader can see a
// write in part, up to a page's end (TestFullDisk read half a line).
func (n *netWorker) entries(t *testing.T) []runLogEntry {
	t.Helper()
	data, err := os.ReadFile(n.runLog)
	if err != nil {
		t.Fatal(err)
	}
	data = data[:bytes.LastIndexByte(data, '\n')+1]
	var out []runLogEntry
	s := bufio.NewScanner(bytes.NewReader(data))
	s.Buffer(nil, 1<<20)
	for s.Scan() {
		var e runLogEntry
		if err := json.Unmarshal(s.Bytes(), &e); err != nil {
			t.Fatalf("%s: %q: %v", n.runLog, s.Text(), err)
		}
		out = append(out, e)
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// attemptKey names an attempt: partition/worker/number.
func attemptKey(key, worker string, n int) string { return fmt.Sprintf("%s/%s/%d", key, worker, n) }

// checkExecutions checks, for any sink, that no attempt executed twice,
// that every execution belongs to an attempt the ledger recorded for its
// worker, and that none belongs to an attempt after the partition's
// success: a partition whose success committed never runs again. It
// returns how many partitions executed more than once, each earlier
// execution one whose outcome never committed.
func (w *world) checkExecutions(hs map[string][]ledger.Attempt) (again int) {
	w.t.Helper()
	started := map[string]int{}
	byKey := map[string]map[int]bool{}
	for _, e := range w.executions() {
		if e.What != "start" {
			continue
		}
		started[attemptKey(e.Key, e.Worker, e.Attempt)]++
		if byKey[e.Key] == nil {
			byKey[e.Key] = map[int]bool{}
		}
		byKey[e.Key][e.Attempt] = true
		h := hs[e.Key]
		if e.Attempt < 1 || e.Attempt > len(h) || h[e.Attempt-1].Worker != e.Worker {
			w.t.Errorf("partition %s executed by %s as attempt %d, which the ledger does not record for it:\n%s", e.Key, e.Worker, e.Attempt, formatHistory(h))
			continue
		}
		for _, a := range h[:e.Attempt-1] {
			if a.State == ledger.StateSucceeded {
				w.t.Errorf("partition %s executed by %s as attempt %d after attempt %d succeeded:\n%s", e.Key, e.Worker, e.Attempt, a.Number, formatHistory(h))
			}
		}
	}
	for k, n := range started {
		if n > 1 {
			w.t.Errorf("execution %s started %d times; want once per attempt", k, n)
		}
	}
	for _, as := range byKey {
		if len(as) > 1 {
			again++
		}
	}
	return again
}

// checkData checks the ledger and the data of sink as the other fault
// tests do, and the executions (checkExecutions), and returns the
// histories and how many partitions executed more than once.
func (w *world) checkData(sink string) (map[string][]ledger.Attempt, int) {
	w.t.Helper()
	var hs map[string][]ledger.Attempt
	if sink == "files" {
		hs = w.checkLanded().histories
	} else {
		hs, _ = w.checkSQL(true)
	}
	return hs, w.checkExecutions(hs)
}

// checkAudit checks, for the files destination, the writes it took (the
// -audit log): no write landed after a newer attempt's, and the newest
// is the success's (proctest.CheckWrites).
func (w *world) checkAudit(hs map[string][]ledger.Attempt, audit string) {
	w.t.Helper()
	proctest.CheckWrites(w.t, hs, audit)
}

// staleWrites returns, by partition, the writes of the run log of worker
// that passed the worker's last check of its lease after the lease had
// expired by the ledger's clock: the attempt ran on without a lease,
// past what fences a worker by its own clock. A write is announced
// before that check, whose refusals all match ErrFenced (the lease
// lapsed by the worker's clock, or a heartbeat was fenced); a write that
// succeeded, or failed otherwise than so (a destination refused it: as
// stale, matching ErrFenced too, or otherwise), passed it.
func staleWrites(entries []runLogEntry, worker string, hs map[string][]ledger.Attempt) map[string]string {
	out := map[string]string{}
	for _, e := range entries {
		if e.Ev != "write" || e.Err != "" && e.Fenced && !e.Stale {
			continue
		}
		h := hs[e.Key]
		if e.Attempt < 1 || e.Attempt > len(h) {
			continue
		}
		if a := h[e.Attempt-1]; a.Worker == worker && e.At.After(a.LeaseUntil) {
			out[e.Key] = fmt.Sprintf("%s attempt %d: write at %s, its lease expired at %s (%s %q); the write: %q",
				e.Key, e.Attempt, e.At.Format("15:04:05.000"), a.LeaseUntil.Format("15:04:05.000"), a.State, a.Err, e.Err)
		}
	}
	return out
}

// TestNetCut cuts one worker's network, both directions, while it holds
// partitions, through the ends of their leases and until the other
// workers have taken every one of them over; then heals it. The others
// take its partitions over without waiting for it (the takeovers come
// before the heal), and what the cut worker sent meanwhile, delivered
// late, is refused: the heartbeats changed no lease after its takeover
// (checkLanded's lease check, and the histories), the finishes of the
// partitions it had run were fenced (its run log), and no write of
// them outlived a newer one (the files destination's audit; the SQL
// destination sharing the ledger committed none). Every partition lands
// exactly once, the ledger and the data agree, and the cut worker goes
// on without a restart: its run returns, and its later calls find the
// backfill done.
func TestNetCut(t *testing.T) {
	for _, sink := range []string{"files", "sql"} {
		for rep := range repeat(1) {
			t.Run(fmt.Sprintf("%s/%d", sink, rep), func(t *testing.T) { netCut(t, cutCase{sink: sink, strictStale: true}) })
		}
	}
}

// TestNetCutInTransaction is TestNetCut of the files destination, the
// cut catching the worker inside a claim's transaction, holding the
// backfill's cursor. The cut worker gives up its claim with the rest
// once it finds it lost the ledger, and returns within two leases,
// naming the lost connection; the server holds the cursor for the
// session idle in its transaction until idle_in_transaction_session_timeout
// ends it (15 s by the ledger's default), which the others wait for, no
// longer, without taking their claims' wait for a lost connection: a
// read answers them. (It used to assert that the others stalled at
// least 10 s: that held the scenario to a cost, not to a promise, and
// failed a change that made the wait shorter; the cut's catching the
// lock is what pg_blocking_pids checks.)
func TestNetCutInTransaction(t *testing.T) {
	netCut(t, cutCase{sink: "files", inTx: true, strictNamed: true})
}

// TestNetCutReturns cuts one worker's network, both directions, for
// 30 s while it holds partitions under leases of 2 s, beside a worker
// whose network is whole. The cut worker gets no answer from the
// ledger, neither a reply nor an error, until the heal; it must not
// wait for it: its leases lapse by its own clock, a read that gets no
// answer either tells it that it lost the ledger, and its Run returns
// within a lease and a lease's grace of the cut, with an error that
// names the lost connection (postgres.ErrConnectionLost, or ErrConnect
// when the read waited for a new connection). Its renewals stop at the
// cut; the other worker takes each partition it held over within a
// lease of the lease's end, long before the heal, and what the cut
// worker sent meanwhile, delivered at the heal, is refused. Every
// partition lands once, no write of the cut worker lands after its
// lease expired, and the cut worker, healed, finds the backfill done.
// (Before, its Run returned just after the heal, 30 s later.)
func TestNetCutReturns(t *testing.T) {
	for _, sink := range []string{"files", "sql"} {
		for rep := range repeat(1) {
			t.Run(fmt.Sprintf("%s/%d", sink, rep), func(t *testing.T) { cutReturns(t, sink) })
		}
	}
}

func cutReturns(t *testing.T, sink string) {
	const days = 600
	const lease, cutFor = 2 * time.Second, 30 * time.Second
	w := newWorld(t, days, "-sink", sink, "-concurrency", "4", "-work", "20ms", "-lease", lease.String(), "-heartbeat", "500ms")
	audit := filepath.Join(w.dir, "audit.log")
	db := admin(t, w.url)
	cut := w.startNet("cut", "-audit", audit)
	other := w.startNet("other", "-audit", audit)
	start := time.Now()
	for w.doneCount() < days/4 || len(w.runningOf(db, "cut")) == 0 {
		if time.Since(start) > 40*time.Second {
			t.Fatalf("%d executions in 40 s, the cut worker holding %d partitions; want %d, and some held", w.doneCount(), len(w.runningOf(db, "cut")), days/4)
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Cut it outside a transaction: one the cut caught holds its locks
	// until the server ends the session (TestNetCutInTransaction),
	// which a takeover may wait for. What the worker had sent before
	// the cut is served meanwhile.
	r := rng(t)
	var cutAt time.Time
	for tries := 0; ; tries++ {
		cut.proxy.Cut(netfault.Both, 0)
		cutAt = time.Now()
		time.Sleep(100 * time.Millisecond)
		var n int
		if err := db.QueryRowContext(t.Context(), `SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pgworker-cut' AND xact_start IS NOT NULL`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 && len(w.runningOf(db, "cut")) > 0 {
			break
		}
		if tries == 100 {
			t.Fatal("100 cuts caught the worker inside a transaction, or holding no partition")
		}
		cut.proxy.Heal()
		time.Sleep(time.Duration(r.IntN(50)) * time.Millisecond)
	}
	held := w.runningOf(db, "cut")
	time.Sleep(time.Until(cutAt.Add(cutFor)))
	healAt := time.Now()
	cut.proxy.Heal()
	cs := cut.report(t)
	other.report(t)
	hs, again := w.checkData(sink)
	if sink == "files" {
		w.checkAudit(hs, audit)
	}
	if len(held) == 0 {
		t.Fatal("the cut worker held no partition at the cut")
	}
	// Grace for a loaded machine, beyond what the promises allow.
	const slack = time.Second
	var lateTakeover time.Duration
	for key, n := range held {
		h := hs[key]
		if n >= len(h) || h[n-1].Worker != "cut" {
			t.Errorf("partition %s: the cut worker's attempt %d is not in the history, or is the last:\n%s", key, n, formatHistory(h))
			continue
		}
		a, next := h[n-1], h[n]
		lateTakeover = max(lateTakeover, a.Finished.Sub(a.LeaseUntil))
		switch {
		case a.State != ledger.StateFailed || !strings.Contains(a.Err, "taken over") || takenOverBy(a, next) != "other":
			t.Errorf("partition %s: the cut worker's attempt %d %s %q, then %s's; want it taken over by the other worker", key, n, a.State, a.Err, next.Worker)
		case a.Finished.Before(a.LeaseUntil) || a.Finished.After(a.LeaseUntil.Add(lease+slack)):
			t.Errorf("partition %s: the cut worker's lease ended at %s, taken over at %s; want within a lease after its end",
				key, a.LeaseUntil.Format("15:04:05.000"), a.Finished.Format("15:04:05.000"))
		case a.LeaseUntil.After(cutAt.Add(lease + slack)):
			t.Errorf("partition %s: the cut worker's lease runs until %s, renewed past the cut at %s", key, a.LeaseUntil.Format("15:04:05.000"), cutAt.Format("15:04:05.000"))
		}
	}
	entries := cut.entries(t)
	var inFlight []runLogEntry
	for _, e := range entries {
		if e.Ev == "run" && e.At.Before(cutAt) && e.End.After(cutAt) {
			inFlight = append(inFlight, e)
		}
	}
	if len(inFlight) != 1 {
		t.Fatalf("%d runs of the cut worker in flight at the cut; want 1", len(inFlight))
	}
	run := inFlight[0]
	returned := run.End.Sub(cutAt)
	if limit := 2*lease + slack; returned > limit {
		t.Errorf("the cut worker's run returned %v after the cut; want within %v (the lease, a lease's grace and a second of slack)", returned.Round(time.Millisecond), limit)
	}
	if !run.Lost {
		t.Errorf("the cut worker's run returned %q; want the lost connection named (postgres.ErrConnectionLost or ErrConnect)", run.Err)
	}
	stale := staleWrites(entries, "cut", hs)
	for _, k := range slices.Sorted(maps.Keys(stale)) {
		t.Errorf("a write of the cut worker passed its check of its lease after the lease expired by the ledger's clock: %s", stale[k])
	}
	t.Logf("%s: cut the worker after %d executions, holding %d partitions, for %v: its run returned %v after the cut (%d succeeded, %d failed, %d not claimed): %s; "+
		"the other worker took them over at most %v after their leases ended; %d partitions executed more than once; the cut worker ran %d partitions in %d runs, %d fenced",
		sink, days/4, len(held), healAt.Sub(cutAt).Round(time.Millisecond), returned.Round(time.Millisecond), run.Succeeded, run.Failed, run.Unclaimed, run.Err,
		lateTakeover.Round(time.Millisecond), again, cs.Succeeded, cs.Runs, cs.Fenced)
}

// cutCase is a scenario of netCut: the sink; whether the cut catches the
// worker inside a transaction that holds a lock the others wait for;
// whether to fail on the writes of the bug of TestNetCutStaleRun, and on
// claims failing after the heal with an error that names no lost
// connection (TestNetCutInTransactionNamed).
type cutCase struct {
	sink                     string
	inTx                     bool
	strictStale, strictNamed bool
}

func netCut(t *testing.T, c cutCase) {
	sink, strict, inTx := c.sink, c.strictStale, c.inTx
	const days = 1200
	const lease = time.Second
	const concurrency = 4
	w := newWorld(t, days, "-sink", sink, "-concurrency", fmt.Sprint(concurrency), "-work", "20ms", "-lease", lease.String(), "-heartbeat", "250ms")
	audit := filepath.Join(w.dir, "audit.log")
	db := admin(t, w.url)
	running := func(worker string) map[string]int {
		rows, err := db.QueryContext(t.Context(), `SELECT p.start_s, a.attempt FROM `+w.schema+`.tranche_attempts a
			JOIN `+w.schema+`.tranche_partitions p USING (dag_id, start_s) WHERE a.worker = $1 AND a.state = 'running'`, worker)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		out := map[string]int{}
		for rows.Next() {
			var start int64
			var n int
			if err := rows.Scan(&start, &n); err != nil {
				t.Fatal(err)
			}
			out[tranche.PartitionOf(tranche.Day, time.Unix(start, 0).UTC()).Key()] = n
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	cut := w.startNet("cut", "-audit", audit)
	others := make([]*netWorker, 3)
	for i := range others {
		others[i] = w.startNet(fmt.Sprintf("w%d", i), "-audit", audit)
	}
	start := time.Now()
	// It holds more than it runs: partitions claimed ahead, waiting for a
	// slot, whose leases it renews meanwhile.
	for w.doneCount() < days/3 || len(running("cut")) <= concurrency {
		if time.Since(start) > 40*time.Second {
			t.Fatalf("%d executions in 40 s, the cut worker holding %d partitions; want %d, and more held than it runs", w.doneCount(), len(running("cut")), days/3)
		}
		time.Sleep(5 * time.Millisecond)
	}
	cut.proxy.Cut(netfault.Both, 0)
	if inTx {
		r := rng(t)
		// Cut until the cut catches it inside a transaction holding a
		// lock the others wait for: the backfill's cursor, inside a
		// claim. The cut holds its next statement, or the reply it
		// waits for before it sends it.
		for tries := 0; ; tries++ {
			time.Sleep(50 * time.Millisecond)
			var n int
			if err := db.QueryRowContext(t.Context(), `SELECT count(*) FROM pg_stat_activity a WHERE a.application_name LIKE 'pgworker-w%' AND EXISTS
				(SELECT 1 FROM pg_stat_activity c WHERE c.application_name = 'pgworker-cut' AND c.pid = ANY(pg_blocking_pids(a.pid)))`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n > 0 && len(running("cut")) > 0 {
				t.Logf("the cut caught the worker holding a lock %d sessions of the others wait for, after %d tries", n, tries+1)
				break
			}
			if tries == 500 {
				t.Fatal("500 cuts caught the worker holding no lock the others wait for")
			}
			cut.proxy.Heal()
			time.Sleep(time.Duration(r.IntN(20)) * time.Millisecond)
			cut.proxy.Cut(netfault.Both, 0)
		}
	}
	cutAt := time.Now()
	// What the worker had sent before the cut is served meanwhile: then
	// its partitions running in the ledger are those it holds.
	time.Sleep(100 * time.Millisecond)
	held := running("cut")
	doneAtCut := w.doneCount()
	// The others' progress during the cut, sampled: the longest time
	// they ran nothing new, which a worker cut off inside a transaction
	// holding a lock they need makes the server's
	// idle_in_transaction_session_timeout.
	var stalled time.Duration
	last, lastAt := doneAtCut, time.Now()
	for {
		left := 0
		for key, n := range running("cut") {
			if held[key] == n {
				left++
			}
		}
		if left == 0 {
			break
		}
		if time.Since(cutAt) > 50*time.Second {
			t.Fatalf("%d of the %d partitions the cut worker held not taken over after %v", left, len(held), time.Since(cutAt))
		}
		time.Sleep(20 * time.Millisecond)
		if n := w.doneCount(); n != last {
			last, lastAt = n, time.Now()
		}
		stalled = max(stalled, time.Since(lastAt))
	}
	healAt := time.Now()
	lateBefore := cut.proxy.Stats().Late
	cut.proxy.Heal()
	t.Logf("cut the worker after %d executions, holding %d partitions; the others ran %d executions in the %v it lasted, stalling %v at most",
		doneAtCut, len(held), w.doneCount()-doneAtCut, healAt.Sub(cutAt).Round(time.Millisecond), stalled.Round(time.Millisecond))

	cs := cut.report(t)
	for _, o := range others {
		o.report(t)
	}
	cutDone := time.Now()
	hs, again := w.checkData(sink)
	if sink == "files" {
		w.checkAudit(hs, audit)
	}
	if len(held) == 0 {
		t.Fatal("the cut worker held no partition at the cut")
	}
	// Every partition it held was taken over during the cut, once its
	// lease had expired, and kept the lease it had: no heartbeat
	// delivered late extended it.
	for key, n := range held {
		h := hs[key]
		if n > len(h) || h[n-1].Worker != "cut" {
			t.Errorf("partition %s: the cut worker's attempt %d is not in the history:\n%s", key, n, formatHistory(h))
			continue
		}
		a := h[n-1]
		if a.State != ledger.StateFailed || !strings.Contains(a.Err, "taken over") || !a.Finished.Before(healAt) || a.Finished.Before(a.LeaseUntil) {
			t.Errorf("partition %s: the cut worker's attempt %d %s %q at %s, its lease until %s; want it taken over after its lease, before the heal at %s",
				key, n, a.State, a.Err, a.Finished.Format("15:04:05.000"), a.LeaseUntil.Format("15:04:05.000"), healAt.Format("15:04:05.000"))
		}
		if a.LeaseUntil.After(cutAt.Add(lease + time.Second)) {
			t.Errorf("partition %s: the cut worker's lease runs until %s, renewed past the cut at %s", key, a.LeaseUntil.Format("15:04:05.000"), cutAt.Format("15:04:05.000"))
		}
	}
	entries := cut.entries(t)
	stale := staleWrites(entries, "cut", hs)
	var renewals, refusedFinishes, lateFailures, lateRuns int
	for _, e := range entries {
		switch {
		case e.Ev == "renew" && e.At.After(cutAt) && e.At.Before(healAt):
			renewals++
		case e.Ev == "failure" && !e.Claim && held[e.Key] != 0:
			// A partition it held: it lost it, and knows it, unless it
			// ran it on without a lease (the bug of TestNetCutStaleRun),
			// when the SQL destination sharing the ledger refuses the
			// write as leased by no ledger: stopped, but not fenced.
			lateFailures++
			if _, ran := stale[e.Key]; !e.Fenced && (strict || !ran) {
				t.Errorf("the cut worker's failure of partition %s it held: %q; want it fenced", e.Key, e.Err)
			}
			if strings.Contains(e.Err, "recording") {
				refusedFinishes++
			}
		case e.Ev == "failure" && e.Claim && e.At.After(healAt) || e.Ev == "run" && e.Err != "" && e.End.After(healAt):
			t.Logf("the cut worker after the heal: %s %s: %q (lost %v, fenced %v)", e.Ev, e.Key, e.Err, e.Lost, e.Fenced)
			if c.strictNamed && e.Ev == "failure" && !e.Lost {
				t.Errorf("the cut worker's claim of %s failed after the heal with %q; want the lost connection named", e.Key, e.Err)
			}
			if e.Ev == "run" {
				lateRuns++
			}
		case e.Ev == "run" && e.End.After(healAt):
			lateRuns++
			if e.Err != "" && e.Failed == 0 && e.Unclaimed == 0 && e.Held == 0 {
				t.Errorf("the cut worker's run %d after the heal failed: %q", e.Run, e.Err)
			}
		}
	}
	late := cut.proxy.Stats().Late
	// A run ends after the heal when the heal came before the worker
	// could find the ledger lost; after a longer cut, the run in flight
	// returns within two leases of it (below), and the worker's next
	// run, if the others left it any partition, ends after the heal.
	shortCut := healAt.Sub(cutAt) < 2*lease+time.Second
	if late.Total() == lateBefore.Total() || lateFailures == 0 || shortCut && lateRuns == 0 || !cs.Done {
		t.Errorf("after the cut, %d bytes it held were delivered late, %d partitions it held failed, %d runs ended; done %v; want each",
			late.Total()-lateBefore.Total(), lateFailures, lateRuns, cs.Done)
	}
	// The cut worker's run in flight at the cut returned within two
	// leases of it (a heartbeat's lease to find no answer, a read's to
	// confirm it), slack for a loaded machine aside, naming the lost
	// connection.
	var inFlight []runLogEntry
	for _, e := range entries {
		if e.Ev == "run" && e.At.Before(cutAt) && e.End.After(cutAt) {
			inFlight = append(inFlight, e)
		}
	}
	switch {
	case shortCut:
		// Healed before the worker could find the ledger lost: the
		// ledger answered it.
	case len(inFlight) != 1:
		t.Errorf("%d runs of the cut worker in flight at the cut; want 1", len(inFlight))
	case inFlight[0].End.Sub(cutAt) > 2*lease+time.Second || !inFlight[0].Lost:
		run := inFlight[0]
		t.Errorf("the cut worker's run returned %v after the cut: %q; want within %v, naming the lost connection",
			run.End.Sub(cutAt).Round(time.Millisecond), run.Err, 2*lease+time.Second)
	}
	// The others never took a slow claim for a lost connection.
	for _, o := range others {
		for _, e := range o.entries(t) {
			if e.Ev == "failure" && e.Claim || e.Ev == "run" && e.Lost {
				t.Errorf("worker %s: %s of %s: %q; want no failure of a worker whose network was whole", o.name, e.Ev, e.Key, e.Err)
			}
		}
	}
	// The server ends a session idle inside a transaction after
	// idle_in_transaction_session_timeout, 15 s by the ledger's default:
	// a worker cut off holding a lock the others wait for (the cursor,
	// inside a claim) holds them up no longer, slack for a loaded
	// machine aside.
	if stalled > 20*time.Second {
		t.Errorf("the others ran nothing for %v during the cut; want no longer than the server's idle_in_transaction_session_timeout of 15 s", stalled.Round(time.Millisecond))
	}
	var staleText []string
	for _, k := range slices.Sorted(maps.Keys(stale)) {
		staleText = append(staleText, stale[k])
	}
	if strict && len(stale) > 0 {
		t.Errorf("%d writes of the cut worker passed its check of its lease after the lease expired by the ledger's clock:\n\t%s", len(stale), strings.Join(staleText, "\n\t"))
	}
	t.Logf("%d partitions in %v; %d held at the cut, %d of their finishes refused after the heal (fenced); %d bytes of requests and %d of replies held by the cut, delivered late; "+
		"%d renewals failed during the cut; %d partitions executed more than once; %d writes of the cut worker after its leases expired; the cut worker ran %d partitions in %d runs, %d fenced",
		days, cutDone.Sub(start).Round(time.Millisecond), len(held), refusedFinishes, late.Up, late.Down, renewals, again, len(stale), cs.Succeeded, cs.Runs, cs.Fenced)
	if !strict && len(stale) > 0 {
		t.Logf("writes of the cut worker after its leases expired (TestNetCutStaleRun):\n\t%s", strings.Join(staleText, "\n\t"))
	}
}

// TestNetLostReplies drops the replies of every worker's connections,
// server to client only, for a moment at random moments: the requests
// reach the server, which commits claims, finishes and, with the SQL
// destination sharing the ledger, partitions' rows with their success,
// and their replies are lost; each drop heals by resetting the
// connections that lost a reply. Nothing runs again once its success
// committed, nothing lands twice, every partition ends succeeded exactly
// once in the ledger and the data, and every failure a worker reported
// names the lost connection (a finish whose commit it never learned)
// or, for a partition that it stopped itself, its lease: never a
// partition failing that it did not run.
func TestNetLostReplies(t *testing.T) {
	r := rng(t)
	for _, sink := range []string{"files", "sql"} {
		for rep := range repeat(1) {
			t.Run(fmt.Sprintf("%s/%d", sink, rep), func(t *testing.T) { lostReplies(t, r, sink, true) })
		}
	}
}

// badConn is database/sql's driver.ErrBadConn, as its text shows in a
// worker's failure.
const badConn = "driver: bad connection"

func lostReplies(t *testing.T, r *rand.Rand, sink string, strict bool) {
	const days = 1000
	w := newWorld(t, days, "-sink", sink, "-concurrency", "4", "-work", "20ms", "-lease", "2s", "-heartbeat", "500ms")
	audit := filepath.Join(w.dir, "audit.log")
	ws := make([]*netWorker, 4)
	for i := range ws {
		ws[i] = w.startNet(fmt.Sprintf("w%d", i), "-audit", audit)
	}
	start := time.Now()
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	chaos := make([]chan []netfault.Fault, len(ws))
	for i, nw := range ws {
		chaos[i] = make(chan []netfault.Fault, 1)
		cr := rand.New(rand.NewPCG(r.Uint64(), r.Uint64()))
		go func() {
			chaos[i] <- nw.proxy.Chaos(ctx, cr, netfault.Chaos{
				Faults: []netfault.Fault{{Kind: netfault.KindDrop, Dir: netfault.Down, For: 150 * time.Millisecond}},
				Calm:   600 * time.Millisecond,
			})
		}()
	}
	for w.doneCount() < days*9/10 && time.Since(start) < 45*time.Second {
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	drops := 0
	for i := range ws {
		drops += len(<-chaos[i])
	}
	healAt := time.Now()
	for _, nw := range ws {
		nw.report(t)
	}
	hs, again := w.checkData(sink)
	if sink == "files" {
		w.checkAudit(hs, audit)
	}
	var dropped, resets int64
	var lost, claimsLost, committedLost, neverRan, badConns int
	for _, nw := range ws {
		s := nw.proxy.Stats()
		dropped += s.Dropped.Down
		resets += int64(s.Resets)
		ran := map[string]bool{} // partition/attempt
		ranKey := map[string]bool{}
		entries := nw.entries(t)
		for _, e := range entries {
			if e.Ev == "start" {
				ran[fmt.Sprintf("%s/%d", e.Key, e.Attempt)] = true
				ranKey[e.Key] = true
			}
		}
		for _, e := range entries {
			if e.Ev != "failure" {
				continue
			}
			h := hs[e.Key]
			switch {
			case e.Lost:
				lost++
			case e.Fenced && !e.Claim:
				// It stopped the partition itself, its lease not
				// renewed in time: the ledger shows it failed or taken
				// over (checkLanded, CheckSQL).
			case !strict && strings.HasSuffix(e.Err, badConn):
				badConns++ // TestNetLostRepliesNamed
			default:
				t.Errorf("worker %s: partition %s failed with %q; want the lost connection named", nw.name, e.Key, e.Err)
			}
			if e.Claim {
				claimsLost++
				continue
			}
			if !ranKey[e.Key] {
				t.Errorf("worker %s reported partition %s failed (%q), which it never ran", nw.name, e.Key, e.Err)
			}
			// A failure of a partition whose success by this worker
			// committed: the finish's reply was lost.
			for _, a := range h {
				if a.Worker == nw.name && a.State == ledger.StateSucceeded && ran[fmt.Sprintf("%s/%d", e.Key, a.Number)] {
					committedLost++
					if !e.Lost && (strict || !strings.HasSuffix(e.Err, badConn)) {
						t.Errorf("worker %s: partition %s, whose success committed, reported failed with %q; want the lost connection named", nw.name, e.Key, e.Err)
					}
				}
			}
		}
		// Attempts it claimed and never ran: claims whose commit it did
		// not learn, or releases whose commit it did not learn, taken
		// over.
		for key, h := range hs {
			for _, a := range h {
				if a.Worker == nw.name && !ran[fmt.Sprintf("%s/%d", key, a.Number)] {
					neverRan++
					if a.State == ledger.StateSucceeded {
						t.Errorf("partition %s: attempt %d by %s succeeded, and never ran", key, a.Number, nw.name)
					}
				}
			}
		}
	}
	if drops == 0 || dropped == 0 || resets == 0 || lost == 0 || committedLost == 0 {
		t.Errorf("%d drops, %d bytes of replies dropped, %d connections reset, %d failures naming the lost connection, %d of them finishes that committed; want each",
			drops, dropped, resets, lost, committedLost)
	}
	takeovers := 0
	for _, h := range hs {
		takeovers += len(h) - 1
	}
	t.Logf("%d partitions in %v (chaos for %v): %d drops, %d bytes of replies dropped, %d connections reset; %d failures naming the lost connection, %d failures of claims, %d of finishes that committed; "+
		"%d attempts claimed and never run, %d takeovers, %d partitions executed more than once (their earlier outcome never committed); %d failures with %q alone (TestNetLostRepliesNamed)",
		days, time.Since(start).Round(time.Millisecond), healAt.Sub(start).Round(time.Millisecond), drops, dropped, resets, lost, claimsLost, committedLost, neverRan, takeovers, again, badConns, badConn)
	if t.Failed() {
		for _, nw := range ws {
			t.Logf("worker %s: stderr %s", nw.name, nw.stderr.String())
		}
	}
}
