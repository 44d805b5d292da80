package postgres_test

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/internal/proctest"
	"github.com/tranche-dev/tranche/ledger"
)

// checkSQL checks what the workers' SQL destination holds against the
// ledger (proctest.CheckSQL) and that the ledger's tables agree, and
// returns the histories and how many partitions were written twice.
func (w *world) checkSQL(shared bool) (map[string][]ledger.Attempt, int) {
	w.t.Helper()
	hs := w.histories()
	window, err := tranche.NewTimePartitionWindow(tranche.Day, w.first, w.first.AddDate(0, 0, w.days-1))
	if err != nil {
		w.t.Fatal(err)
	}
	twice := proctest.CheckSQL(w.t, admin(w.t, withParams(w.t, w.url, "search_path", w.schema)), hs, window, 3, shared)
	w.checkTables()
	return hs, twice
}

// TestServerRestartSharedDestination restarts the server twice, after a
// fast shutdown (which ends every connection) and after an immediate one
// (a crash: the server recovers from its log), under four workers
// sharing a backfill whose asset writes into tables of the ledger's
// schema through a destination sharing the ledger's transactions. The
// workers ride it out; every partition lands exactly once, in the ledger
// and in the events table, and the audit table, which appends every
// write, holds one write of each: a finish lost with the server took its
// rows with it, and one whose acknowledgment was lost left both.
func TestServerRestartSharedDestination(t *testing.T) {
	dir := serverDir(t)
	for _, mode := range []string{"fast", "immediate"} {
		for rep := range repeat(1) {
			t.Run(fmt.Sprintf("%s/%d", mode, rep), func(t *testing.T) {
				const days = 500
				w := newWorld(t, days, "-sink", "sql", "-concurrency", "4", "-work", "20ms", "-lease", "2s", "-heartbeat", "500ms")
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
					out, err := exec.Command("./testserver.sh", "restart", dir, mode).CombinedOutput()
					if err != nil {
						t.Fatalf("testserver.sh restart %s: %v\n%s", mode, err, out)
					}
					t.Logf("restarted the server (%s shutdown) after %d executions, in %v", mode, at, time.Since(t0).Round(time.Millisecond))
				}
				lost, failed := 0, 0
				for _, p := range ps {
					s := p.report(t)
					lost += s.Lost
					failed += s.Failed
				}
				hs, _ := w.checkSQL(true)
				takeovers := 0
				for _, h := range hs {
					takeovers += len(h) - 1
				}
				if lost == 0 {
					t.Errorf("no worker saw the server go away")
				}
				t.Logf("%d partitions in %v; %d calls failed with the lost server, %d partitions failed in the workers' reports; %d takeovers in the history",
					days, time.Since(start).Round(time.Millisecond), lost, failed, takeovers)
			})
		}
	}
}

// TestChaosSharedDestination runs four workers writing through the
// PostgreSQL destination sharing the ledger, beside an audit table that
// appends every write, while a chaos loop SIGKILLs a random worker every
// few hundred milliseconds and starts a replacement. Every partition
// lands exactly once: no partition is written twice, however many
// workers died between a write and its finish.
func TestChaosSharedDestination(t *testing.T) {
	chaosFor := 6 * time.Second
	if s := os.Getenv("FAULT_CHAOS"); s != "" {
		chaosFor, _ = time.ParseDuration(s)
	}
	r := rng(t)
	for rep := range repeat(1) {
		t.Run(strconv.Itoa(rep), func(t *testing.T) {
			const days = 1500
			w := newWorld(t, days, "-sink", "sql", "-concurrency", "4", "-work", "20ms", "-lease", "1s", "-heartbeat", "250ms")
			live := map[int]*proc{}
			n := 0
			spawn := func(slot int) {
				n++
				live[slot] = w.start(fmt.Sprintf("w%d-%d", slot, n))
			}
			for slot := range 4 {
				spawn(slot)
			}
			kills := 0
			start := time.Now()
			for time.Since(start) < chaosFor && w.doneCount() < days*9/10 {
				time.Sleep(time.Duration(150+r.IntN(350)) * time.Millisecond)
				slot := r.IntN(4)
				p := live[slot]
				select {
				case <-p.done:
					continue
				default:
				}
				p.cmd.Process.Signal(syscall.SIGKILL)
				p.wait()
				kills++
				spawn(slot)
			}
			for _, p := range live {
				p.report(t)
			}
			hs, twice := w.checkSQL(true)
			if twice > 0 {
				audit := proctest.SQLRows(t, admin(t, withParams(t, w.url, "search_path", w.schema)), true)
				for key, h := range hs {
					ds := map[string]bool{}
					for _, r := range audit[key] {
						ds[r.Delivery] = true
					}
					if len(ds) > 1 {
						t.Logf("partition %s written %d times; history:\n%s", key, len(ds), formatHistory(h))
						for _, e := range w.executions() {
							if e.Key == key {
								t.Logf("\t%+v", e)
							}
						}
					}
				}
			}
			takeovers := 0
			for _, h := range hs {
				takeovers += len(h) - 1
			}
			if kills < 5 || takeovers == 0 {
				t.Errorf("%d workers killed, %d takeovers; want several kills, and partitions they held taken over", kills, takeovers)
			}
			t.Logf("%d partitions in %v; %d workers killed, %d takeovers; %d partitions written twice",
				days, time.Since(start).Round(time.Millisecond), kills, takeovers, twice)
		})
	}
}
