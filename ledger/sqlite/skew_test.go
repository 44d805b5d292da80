package sqlite_test

import (
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/destination/files"
	"github.com/tranche-dev/tranche/internal/proctest"
	"github.com/tranche-dev/tranche/ledger"
)

// openFile opens the world's ledger file for the test's own reads.
func (w *world) openFile() *sql.DB {
	w.t.Helper()
	db, err := sql.Open("sqlite", "file:"+w.ledger+"?_pragma=busy_timeout(10000)")
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() { db.Close() })
	return db
}

// runningOf returns the partitions whose latest attempt is worker's,
// running, with its number.
func runningOf(t *testing.T, db *sql.DB, worker string) map[string]int {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), `SELECT p.start_s, a.attempt FROM tranche_attempts a
		JOIN tranche_partitions p USING (dag_id, start_s) WHERE a.worker = ? AND a.state = 'running'`, worker)
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

// attemptOf returns the worker and the error of attempt n at the daily
// partition key, or "" when there is none.
func attemptOf(t *testing.T, db *sql.DB, key string, n int) (worker, msg string) {
	t.Helper()
	day, err := time.Parse(time.DateOnly, key)
	if err != nil {
		t.Fatal(err)
	}
	err = db.QueryRowContext(t.Context(), `SELECT a.worker, COALESCE(a.error, '') FROM tranche_attempts a
		JOIN tranche_partitions p USING (dag_id, start_s) WHERE p.start_s = ? AND a.attempt = ?`, day.Unix(), n).Scan(&worker, &msg)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		t.Fatal(err)
	}
	return worker, msg
}

// attemptsAt describes the attempts at the daily partition key, with
// the ledger's clock: why a partition was not taken over.
func attemptsAt(t *testing.T, db *sql.DB, key string) string {
	t.Helper()
	day, err := time.Parse(time.DateOnly, key)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := db.QueryContext(t.Context(), `SELECT a.attempt, a.worker, a.state, a.started_ms, a.lease_until_ms, CAST(unixepoch('subsec') * 1000 AS INTEGER)
		FROM tranche_attempts a WHERE a.start_s = ? ORDER BY a.attempt`, day.Unix())
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var b strings.Builder
	fmt.Fprintf(&b, "%s:", key)
	for rows.Next() {
		var attempt int
		var worker, state string
		var started, until, now int64
		if err := rows.Scan(&attempt, &worker, &state, &started, &until, &now); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, " attempt %d by %s %s, started %d ms ago, lease ended %d ms ago;", attempt, worker, state, now-started, now-until)
	}
	return b.String()
}

// pauseUntilTakenOver stops the workers (SIGSTOP) once each holds
// partitions, waits until every partition they held then has been taken
// over (failing after limit), and resumes them (SIGCONT). It returns
// the partitions they held, each with the attempt that held it.
//
// A worker stopped inside a write transaction holds the file's write
// lock, and the others can write nothing, take nothing over, until it
// resumes: SQLite has no server to end its session. When the others
// make no progress for 3 s and the lock is held, the workers are resumed
// and stopped again a moment later, up to 10 times; so are they at once
// when one holds the files destination's lock of a partition's folder
// (see lockedFolders).
func (w *world) pauseUntilTakenOver(db *sql.DB, ps []*proc, limit time.Duration) map[string]int {
	w.t.Helper()
	probe, err := sql.Open("sqlite", "file:"+w.ledger+"?_pragma=busy_timeout(0)")
	if err != nil {
		w.t.Fatal(err)
	}
	defer probe.Close()
	locked := func() bool {
		c, err := probe.Conn(w.t.Context())
		if err != nil {
			w.t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.ExecContext(w.t.Context(), "BEGIN IMMEDIATE"); err != nil {
			return true
		}
		c.ExecContext(w.t.Context(), "ROLLBACK")
		return false
	}
	for tries := 0; ; tries++ {
		for start := time.Now(); ; time.Sleep(5 * time.Millisecond) {
			all := true
			for _, p := range ps {
				all = all && len(runningOf(w.t, db, p.name)) > 0
			}
			if all {
				break
			}
			if time.Since(start) > 60*time.Second {
				w.t.Fatal("the workers to stop held no partitions at once in 60 s")
			}
		}
		for _, p := range ps {
			p.signal(w.t, syscall.SIGSTOP)
		}
		stopped := time.Now()
		time.Sleep(100 * time.Millisecond)
		held := map[string]int{}
		stoppedNames := map[string]bool{}
		for _, p := range ps {
			stoppedNames[p.name] = true
			for k, n := range runningOf(w.t, db, p.name) {
				held[k] = n
			}
		}
		running := map[string]bool{}
		for _, p := range w.procs {
			if !stoppedNames[p.name] {
				running[p.name] = true
			}
		}
		for k, n := range held {
			// A partition a stopped worker ran again after the one
			// worker still running let its lease lapse by its own clock
			// (stalled under load) and recorded it failed itself: a
			// backfill does not run again in one run a partition it
			// failed (the next run does), so nothing takes it over here.
			// (With others running, they do.) One that worker was fenced
			// from, taken over by a worker stopped since, it waits for
			// (WaitForOthers) and takes over again.
			prev, msg := attemptOf(w.t, db, k, n-1)
			if n > 1 && len(running) == 1 && running[prev] && !strings.Contains(msg, "taken over") {
				w.t.Logf("%s: failed by %s, still running, and run again just before the stop; left to the next run", attemptsAt(w.t, db, k), prev)
				delete(held, k)
			}
		}
		resume := func() {
			for _, p := range ps {
				p.signal(w.t, syscall.SIGCONT)
			}
		}
		if keys := w.lockedFolders(held); len(keys) > 0 && tries < 10 {
			// Stopped inside the files destination's renames, holding
			// the folders' locks: the newer attempts of those
			// partitions wait for the stopped worker, and so do the
			// running worker's slots, as every writer waits for a
			// worker stopped inside SQLite's write transaction.
			w.t.Logf("stopped holding the files destination's locks of %v: again", keys)
			resume()
			time.Sleep(time.Duration(20+10*tries) * time.Millisecond)
			continue
		}
		for {
			left := 0
			for _, p := range ps {
				for k, n := range runningOf(w.t, db, p.name) {
					if held[k] == n {
						left++
					}
				}
			}
			if left == 0 {
				w.t.Logf("stopped %d workers holding %d partitions, taken over in %v (%d stops inside a write transaction or the files destination's lock before)",
					len(ps), len(held), time.Since(stopped).Round(time.Millisecond), tries)
				resume()
				return held
			}
			if left == len(held) && time.Since(stopped) > 3*time.Second && locked() && tries < 10 {
				break // stopped holding the write lock: try again
			}
			if time.Since(stopped) > limit {
				for _, p := range ps {
					for k, n := range runningOf(w.t, db, p.name) {
						if held[k] == n {
							w.t.Logf("not taken over: %s", attemptsAt(w.t, db, k))
						}
					}
				}
				w.t.Fatalf("%d of the %d partitions the stopped workers held not taken over %v after the stop; their leases are of a second by the ledger's clock (write lock held: %v)",
					left, len(held), limit, locked())
			}
			time.Sleep(20 * time.Millisecond)
		}
		resume()
		time.Sleep(time.Duration(20+10*tries) * time.Millisecond)
	}
}

// lockedFolders returns the keys of held whose folders in the files
// destination are locked: a worker stopped between the lock of a
// partition's folder and its release (the fence's check, the renames, a
// sync of the folder) holds the lock until it resumes, and the
// partition's newer attempt waits for it in its write, holding its slot
// meanwhile (flock(2) has no owner to end, as SQLite has no server to
// end a stopped worker's session). A worker that runs alone with every
// slot so waiting takes nothing else over: TestSkewedClocks saw its 2
// slots wait on the folders of 2 partitions a stopped worker was
// writing, and 11 other partitions whose leases had expired left alone
// for 30 s.
func (w *world) lockedFolders(held map[string]int) []string {
	w.t.Helper()
	var keys []string
	for k := range held {
		f, err := os.Open(filepath.Dir((&files.Destination{Dir: w.dest}).Path("events", "day", k)))
		if errors.Is(err, fs.ErrNotExist) {
			continue // not written yet, or the SQL destination's
		}
		if err != nil {
			w.t.Fatal(err)
		}
		switch err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); {
		case errors.Is(err, syscall.EWOULDBLOCK):
			keys = append(keys, k)
		case err != nil:
			w.t.Fatal(err)
		}
		f.Close() // releases the lock it took
	}
	slices.Sort(keys)
	return keys
}

// TestSkewedClocks is the PostgreSQL ledger's TestSkewedClocks on the
// SQLite ledger, whose clock is the one its processes share, the
// machine's (SQLite's unixepoch), never a worker's: four workers, one 5
// minutes ahead (Backfill.Now, -skew) and three 5 minutes behind, wait
// for each other (WaitForOthers) over 1,000 daily partitions, with the
// files destination and with the SQL destination sharing the ledger's
// file. Stopped past its leases, the worker ahead is taken over by the
// three behind once its leases expire by the ledger's clock, not when
// their own clocks pass them 5 minutes later; the three behind, stopped
// (in a backfill of their own), are taken over by the one ahead, never
// before their leases expire. Resumed, no stopped worker lands a write
// over a newer attempt's, and each knows it lost what it held (fenced);
// every partition lands exactly once, and the ledger and the data agree.
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
	w := newWorld(t, days)
	audit := filepath.Join(w.dir, "audit.log")
	args := []string{"-sink", sink, "-concurrency", "2", "-work", "5ms", "-lease", "1s", "-heartbeat", "250ms", "-waitothers", "-audit", audit}
	start := time.Now()
	ahead := w.start("ahead", append(args, "-skew", skew.String())...)
	behind := make([]*proc, 3)
	for i := range behind {
		behind[i] = w.start(fmt.Sprintf("behind%d", i), append(args, "-skew", (-skew).String())...)
	}
	db := w.openFile()
	stopped, by := []*proc{ahead}, "behind"
	if stop == "behind" {
		stopped, by = behind, "ahead"
	}
	w.waitFor("200 executions", func(es []proctest.Execution) bool { return len(es) >= 2*days/5 })
	held := w.pauseUntilTakenOver(db, stopped, 30*time.Second)
	reports := map[string]workerReport{}
	for _, p := range append([]*proc{ahead}, behind...) {
		reports[p.name] = p.report(t)
	}
	hs := w.histories()
	var twice int
	if sink == "files" {
		w.checkLanded()
		checkWrites(t, hs, audit)
	} else {
		window, err := tranche.NewTimePartitionWindow(tranche.Day, w.first, w.first.AddDate(0, 0, days-1))
		if err != nil {
			t.Fatal(err)
		}
		twice = proctest.CheckSQL(t, db, hs, window, 3, true)
	}
	takeovers := map[string]int{}
	for k, h := range hs {
		for i, a := range h[:max(len(h)-1, 0)] {
			if strings.Contains(a.Err, "taken over") {
				takeovers[h[i+1].Worker]++
				if a.Finished.Before(a.LeaseUntil) {
					t.Errorf("partition %s: attempt %d by %s taken over by %s at %s, before its lease expired at %s by the ledger's clock",
						k, a.Number, a.Worker, h[i+1].Worker, a.Finished.Format(time.StampMilli), a.LeaseUntil.Format(time.StampMilli))
				}
			}
		}
	}
	var late time.Duration
	for k, n := range held {
		h := hs[k]
		if n >= len(h) {
			t.Errorf("partition %s: attempt %d held at the stop is the latest:\n%s", k, n, formatHistory(h))
			continue
		}
		a, next := h[n-1], h[n]
		if !strings.Contains(a.Err, "taken over") || !strings.HasPrefix(next.Worker, by) {
			t.Errorf("partition %s: attempt %d by %s %s %q, then %s's; want it taken over by a worker %s", k, n, a.Worker, a.State, a.Err, next.Worker, by)
		}
		late = max(late, a.Finished.Sub(a.LeaseUntil))
	}
	// A stopped worker, resumed, knows it lost what it held: each
	// failure is fenced (of a partition held at the stop, or at an
	// earlier stop inside a write transaction, which lasted 3 s).
	for name, r := range reports {
		for _, f := range r.Failures {
			if !f.Fenced {
				t.Errorf("worker %s: partition %s failed with %q; want only partitions its stops cost it failed, fenced", name, f.Key, f.Err)
			}
		}
	}
	if len(held) == 0 {
		t.Error("the stopped workers held no partition")
	}
	t.Logf("%s: %d partitions in %v; the workers %s (by %v), stopped, held %d, taken over by the workers %s at most %v after their leases expired by the ledger's clock; takeovers by worker %v; %d written twice",
		sink, days, time.Since(start).Round(time.Millisecond), stop, skew, len(held), by, late.Round(time.Millisecond), takeovers, twice)
}

// checkWrites checks the files destination's audit: per partition,
// tokens never go down, so that no write landed after a newer attempt's,
// and the last write is the success's.
func checkWrites(t *testing.T, hs map[string][]ledger.Attempt, audit string) {
	t.Helper()
	proctest.CheckWrites(t, hs, audit)
}

// TestNotBeforeByDatabaseClock claims partitions bounded by NotBefore on
// a ledger with no clock of its own given: SQLite's clock, the machine's,
// judges the bound. A claim bounded a minute after now is refused, with
// an *ledger.EarlyError carrying that clock, for a fresh partition and
// for one with a failed attempt; one bounded a second before now is
// granted, its attempt starting after the bound.
func TestNotBeforeByDatabaseClock(t *testing.T) {
	l := openTemp(t, nil)
	now := time.Now()
	early := func(r ledger.ClaimRequest, what string) {
		t.Helper()
		r.NotBefore = now.Add(time.Minute)
		_, err := l.Claim(t.Context(), r)
		var e *ledger.EarlyError
		if !errors.As(err, &e) || !errors.Is(err, ledger.ErrNotClaimable) {
			t.Fatalf("%s a minute before its NotBefore = %v; want an *ledger.EarlyError matching ErrNotClaimable", what, err)
		}
		if d := e.Now.Sub(now); d < -time.Second || d > 30*time.Second || !e.NotBefore.Equal(r.NotBefore) {
			t.Errorf("%s: refused at %v (%v after now), bound %v; want SQLite's clock, about now, and the bound %v", what, e.Now, d, e.NotBefore, r.NotBefore)
		}
	}
	early(claimReq("w", day(0)), "the first claim of a DAG")
	lease, err := l.Claim(t.Context(), claimReq("w", day(1)))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Finish(t.Context(), lease, []ledger.Outcome{{State: ledger.StateFailed, Err: "boom"}}); err != nil {
		t.Fatal(err)
	}
	early(claimReq("w", day(0)), "a claim of a fresh partition")
	early(claimReq("w", day(1)), "a rerun of a failed partition")
	for _, p := range []tranche.TimePartition{day(0), day(1)} {
		r := claimReq("w", p)
		r.NotBefore = now.Add(-time.Second)
		lease, err := l.Claim(t.Context(), r)
		if err != nil {
			t.Fatalf("claim of %s after its NotBefore = %v", p.Key(), err)
		}
		if lease.Claimed.Before(r.NotBefore) {
			t.Errorf("claim of %s granted at %v; want after its NotBefore %v", p.Key(), lease.Claimed, r.NotBefore)
		}
	}
}
