package postgres_test

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/internal/proctest"
	"github.com/tranche-dev/tranche/ledger"
)

// The clock skew tests run pgworker processes whose clocks
// (Backfill.Now, -skew) are minutes off the server's, which judges the
// leases. A Go program's wall clock cannot be shifted from outside
// (faketime's LD_PRELOAD does not reach it, a time namespace shifts only
// the monotonic clocks), so the worker shifts its own: every instant it
// reads of the time of day comes from that clock, and every duration
// (its own lease, its heartbeats) from the monotonic clock.

// skewed is a worker of the skew tests, with its run log.
type skewed struct {
	*proc
	runLog string
}

func (s skewed) entries(t *testing.T) []runLogEntry {
	return (&netWorker{proc: s.proc, runLog: s.runLog}).entries(t)
}

// startSkewed starts worker name with its clock skew ahead of the
// server's (behind when negative), logging its runs.
func (w *world) startSkewed(name string, skew time.Duration, args ...string) skewed {
	w.t.Helper()
	log := filepath.Join(w.dir, name+".runlog")
	return skewed{proc: w.start(name, append([]string{"-skew", skew.String(), "-runlog", log}, args...)...), runLog: log}
}

// runningOf returns the partitions whose latest attempt is worker's,
// running, with its number, read through db.
func (w *world) runningOf(db *sql.DB, worker string) map[string]int {
	w.t.Helper()
	rows, err := db.QueryContext(w.t.Context(), `SELECT p.start_s, a.attempt FROM `+w.schema+`.tranche_attempts a
		JOIN `+w.schema+`.tranche_partitions p USING (dag_id, start_s) WHERE a.worker = $1 AND a.state = 'running'`, worker)
	if err != nil {
		w.t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var start int64
		var n int
		if err := rows.Scan(&start, &n); err != nil {
			w.t.Fatal(err)
		}
		out[tranche.PartitionOf(tranche.Day, time.Unix(start, 0).UTC()).Key()] = n
	}
	if err := rows.Err(); err != nil {
		w.t.Fatal(err)
	}
	return out
}

// pauseUntilTakenOver stops the workers (SIGSTOP) once each holds
// partitions and at least done executions have ended, waits until every
// partition they held then has been taken over (failing after limit),
// and resumes them (SIGCONT). It returns the partitions they held, each
// with the attempt that held it, and when they were stopped.
func (w *world) pauseUntilTakenOver(ps []*proc, done int, limit time.Duration) (map[string]int, time.Time) {
	w.t.Helper()
	db := admin(w.t, w.url)
	var stopped time.Time
	held := map[string]int{}
	for start := time.Now(); ; time.Sleep(5 * time.Millisecond) {
		all := w.doneCount() >= done
		for _, p := range ps {
			all = all && len(w.runningOf(db, p.name)) > 0
		}
		if time.Since(start) > 60*time.Second {
			w.t.Fatalf("%d executions in 60 s; want %d, and each of the workers to pause holding partitions", w.doneCount(), done)
		}
		if !all {
			continue
		}
		for _, p := range ps {
			p.cmd.Process.Signal(syscall.SIGSTOP)
		}
		stopped = time.Now()
		// What they sent before the stop is served meanwhile.
		time.Sleep(100 * time.Millisecond)
		for _, p := range ps {
			for k, n := range w.runningOf(db, p.name) {
				held[k] = n
			}
		}
		if len(held) > 0 {
			break
		}
		// The finishes they had sent landed every partition they held
		// (2 of 40 trials under load): stop them again later.
		for _, p := range ps {
			p.cmd.Process.Signal(syscall.SIGCONT)
		}
	}
	told := false
	for {
		left := 0
		for _, p := range ps {
			for k, n := range w.runningOf(db, p.name) {
				if held[k] == n {
					left++
				}
			}
		}
		if left == 0 {
			break
		}
		if !told && time.Since(stopped) > 20*time.Second {
			// Past the server's idle_in_transaction_session_timeout
			// (15 s): say what the stopped workers' sessions hold.
			told = true
			w.logSessions(db)
		}
		if time.Since(stopped) > limit {
			w.t.Fatalf("%d of the %d partitions the stopped workers held not taken over %v after the stop; their leases are of a second by the server's clock",
				left, len(held), limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, p := range ps {
		p.cmd.Process.Signal(syscall.SIGCONT)
	}
	return held, stopped
}

// logSessions logs the workers' sessions: their state, what they wait
// for, whom they wait for and their last statement.
func (w *world) logSessions(db *sql.DB) {
	w.t.Helper()
	rows, err := db.QueryContext(w.t.Context(), `SELECT application_name, pid, state, coalesce(wait_event_type, ''), coalesce(wait_event, ''),
		pg_blocking_pids(pid)::text, now() - state_change, left(query, 200) FROM pg_stat_activity WHERE application_name LIKE 'pgworker-%' ORDER BY 1, 2`)
	if err != nil {
		w.t.Log(err)
		return
	}
	defer rows.Close()
	for rows.Next() {
		var app, state, wtype, wev, blockers, since, query string
		var pid int
		if err := rows.Scan(&app, &pid, &state, &wtype, &wev, &blockers, &since, &query); err != nil {
			w.t.Log(err)
			return
		}
		w.t.Logf("session %s %d: %s for %s, waiting %s/%s, blocked by %s: %q", app, pid, state, since, wtype, wev, blockers, query)
	}
}

// TestSkewedClocks runs four workers, one 5 minutes ahead of the server
// and three 5 minutes behind it, over a backfill of 1,000 daily
// partitions, with the files destination and with the SQL destination
// sharing the ledger. Stopped past its leases, holding partitions, the
// worker ahead is taken over by the three behind once its leases expire
// by the server's clock, not 5 minutes later, when their own clocks
// would pass them; the three behind, stopped (in a backfill of their
// own), are taken over by the one ahead, never before their leases
// expire by the server's clock, whatever the worker's clock says.
// Resumed, each stopped worker, whose clock says its lease has minutes
// left (behind) or ended long ago (ahead), lands nothing after the lease
// expired by the server's clock (its run log): its own lease is counted
// on the monotonic clock. Every partition lands exactly once, the ledger
// and the data agree.
func TestSkewedClocks(t *testing.T) {
	proctest.SkipRace(t)
	for _, sink := range []string{"files", "sql"} {
		for _, stop := range []string{"ahead", "behind"} {
			for rep := range repeat(1) {
				t.Run(fmt.Sprintf("%s/%s-stopped/%d", sink, stop, rep), func(t *testing.T) { skewedClocks(t, sink, stop) })
			}
		}
	}
}

func skewedClocks(t *testing.T, sink, stop string) {
	const days = 1000
	const skew = 5 * time.Minute
	const lease = time.Second
	w := newWorld(t, days, "-sink", sink, "-concurrency", "2", "-work", "5ms", "-lease", lease.String(), "-heartbeat", "250ms")
	audit := filepath.Join(w.dir, "audit.log")
	ahead := w.startSkewed("ahead", skew, "-audit", audit)
	behind := make([]skewed, 3)
	for i := range behind {
		behind[i] = w.startSkewed(fmt.Sprintf("behind%d", i), -skew, "-audit", audit)
	}
	all := append([]skewed{ahead}, behind...)
	start := time.Now()
	stopped, by := []*proc{ahead.proc}, "behind"
	if stop == "behind" {
		stopped, by = nil, "ahead"
		for _, b := range behind {
			stopped = append(stopped, b.proc)
		}
	}
	// The takeovers come when the others' runs reach the end of the
	// window and settle what others hold (see TestNetCut): within a
	// run of the backfill, far less than the skew.
	held, stoppedAt := w.pauseUntilTakenOver(stopped, days/5, 60*time.Second)
	took := time.Since(stoppedAt)
	for _, p := range all {
		p.report(t)
	}
	hs, again := w.checkData(sink)
	if sink == "files" {
		w.checkAudit(hs, audit)
	}
	takeovers := map[string]int{}
	for k, h := range hs {
		for i, a := range h[:max(len(h)-1, 0)] {
			if a.State != ledger.StateFailed {
				t.Errorf("partition %s: attempt %d by %s %s; want every attempt before the success failed", k, a.Number, a.Worker, a.State)
			}
			if strings.Contains(a.Err, "taken over") {
				takeovers[takenOverBy(a, h[i+1])]++
				if a.Finished.Before(a.LeaseUntil) {
					t.Errorf("partition %s: attempt %d by %s taken over by %s at %s, before its lease expired at %s by the server's clock",
						k, a.Number, a.Worker, h[i+1].Worker, a.Finished.Format(time.StampMilli), a.LeaseUntil.Format(time.StampMilli))
				}
			}
		}
	}
	// Each partition a stopped worker held was taken over by a worker
	// running then, after its lease.
	var late time.Duration
	for k, n := range held {
		h := hs[k]
		if n >= len(h) {
			t.Errorf("partition %s: attempt %d held at the stop is the latest:\n%s", k, n, formatHistory(h))
			continue
		}
		a, next := h[n-1], h[n]
		if !strings.Contains(a.Err, "taken over") || !strings.HasPrefix(takenOverBy(a, next), by) {
			t.Errorf("partition %s: attempt %d by %s %s %q, then %s's; want it taken over by a worker %s", k, n, a.Worker, a.State, a.Err, next.Worker, by)
		}
		late = max(late, a.Finished.Sub(a.LeaseUntil))
	}
	for _, p := range all {
		for _, s := range staleWrites(p.entries(t), p.name, hs) {
			t.Errorf("a write of %s passed its check of its lease after the lease expired by the server's clock: %s", p.name, s)
		}
	}
	if len(held) == 0 {
		t.Error("the stopped workers held no partition")
	}
	t.Logf("%s: %d partitions in %v; the workers %s (by %v), stopped, held %d, taken over by the workers %s in %v, at most %v after their leases expired by the server's clock; "+
		"takeovers by worker %v; %d partitions executed more than once",
		sink, days, time.Since(start).Round(time.Millisecond), stop, skew, len(held), by, took.Round(time.Millisecond), late.Round(time.Millisecond), takeovers, again)
}

// takenOverBy is the worker that took attempt a over: the one its error
// names, else the one of the attempt after it. They differ when the
// taker claimed the partition ahead of running it and released it
// unstarted (the release withdraws its attempt), as a worker held up by
// a stopped one inside a claim's transaction does, and another worker
// claimed it after.
func takenOverBy(a, next ledger.Attempt) string {
	if _, by, ok := strings.Cut(a.Err, "taken over by worker "); ok {
		return strings.Fields(by + " ")[0]
	}
	return next.Worker
}
