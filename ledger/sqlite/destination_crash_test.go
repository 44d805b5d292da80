package sqlite_test

import (
	"bytes"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/internal/proctest"
)

// TestSharedDestinationChaos runs four worker processes on one backfill
// whose asset writes into two tables of the ledger's file, through a
// destination sharing the ledger's transactions: the events table, which
// each write replaces, and an audit table, which appends every write. A
// chaos loop SIGKILLs a random worker every few hundred milliseconds and
// starts a replacement, or stops one (SIGSTOP) past its lease and
// resumes it; then the survivors finish, and a last worker waits for the
// leases the killed workers held to expire and takes their partitions
// over. Every partition's rows are the successful attempt's, and
// the audit table holds exactly one write of each partition: a worker
// killed between its write and its finish leaves neither. The same chaos
// with the destination committing on its own (separate) keeps the data
// agreeing with the ledger, since the newest attempt replaces the
// partition, but may audit a partition written twice.
func TestSharedDestinationChaos(t *testing.T) {
	chaosFor := 5 * time.Second
	if s := os.Getenv("CRASH_CHAOS"); s != "" {
		chaosFor, _ = time.ParseDuration(s)
	}
	r := rng(t)
	for rep := range repeat(1) {
		for _, sink := range []string{"sql", "sql-separate"} {
			t.Run(sink+"/"+strconv.Itoa(rep), func(t *testing.T) { destinationChaos(t, r, sink, chaosFor) })
		}
	}
}

func destinationChaos(t *testing.T, r *rand.Rand, sink string, chaosFor time.Duration) {
	const days = 1500
	w := newWorld(t, days)
	args := []string{"-sink", sink, "-concurrency", "2", "-work", "20ms", "-lease", "1s", "-heartbeat", "250ms"}
	live := map[int]*proc{}
	n := 0
	spawn := func(slot int) {
		n++
		live[slot] = w.start(fmt.Sprintf("w%d-%d", slot, n), args...)
	}
	for slot := range 4 {
		spawn(slot)
	}
	done := func() int {
		data, _ := os.ReadFile(w.log)
		return bytes.Count(data, []byte("done "))
	}
	kills, stops := 0, 0
	start := time.Now()
	for time.Since(start) < chaosFor && done() < days*9/10 {
		time.Sleep(time.Duration(150+r.IntN(350)) * time.Millisecond)
		slot := r.IntN(4)
		p := live[slot]
		select {
		case <-p.done:
			continue // it ran out of partitions
		default:
		}
		if r.IntN(4) == 0 {
			// A worker merely slow, as a loaded machine makes any of
			// them: the others take over its expired leases, and it
			// must land nothing of those partitions when it resumes.
			p.signal(t, syscall.SIGSTOP)
			time.AfterFunc(2*time.Second, func() { p.cmd.Process.Signal(syscall.SIGCONT) })
			stops++
			continue
		}
		p.signal(t, syscall.SIGKILL)
		p.wait()
		kills++
		spawn(slot)
	}
	for _, p := range live {
		p.report(t)
	}
	// The last worker must run every partition left in one Run, alone:
	// it waits for the leases that others left, rather than sleeping
	// past them, and holds its own with a lease that a machine starved
	// of the CPU for a moment does not outlast (with the chaos's 1 s
	// lease, stopped for 1.5 s, it failed the partitions it was running,
	// and nothing ran them again).
	last := w.start("last", append(args, "-waitothers", "-lease", "10s", "-heartbeat", "3s")...).report(t)
	if last.Failed != 0 || last.Err != "" {
		t.Errorf("the last worker's report %+v; want no failure", last)
	}
	hs := w.histories()
	window, err := tranche.NewTimePartitionWindow(tranche.Day, w.first, w.first.AddDate(0, 0, days-1))
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+w.ledger+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	twice := proctest.CheckSQL(t, db, hs, window, 3, sink == "sql")
	takeovers, cut := 0, 0
	for _, h := range hs {
		takeovers += len(h) - 1
	}
	for _, e := range w.executions() {
		if e.What == "done" {
			cut--
		} else {
			cut++
		}
	}
	if kills < 5 || takeovers == 0 {
		t.Errorf("%d workers killed, %d takeovers; want several kills, and partitions they held taken over", kills, takeovers)
	}
	t.Logf("%s: %d partitions in %v; %d workers killed, %d stopped and resumed, %d executions cut short, %d takeovers; the last worker ran %d; %d partitions written twice",
		sink, days, time.Since(start).Round(time.Millisecond), kills, stops, cut, takeovers, last.Succeeded, twice)
}

// TestKilledBetweenWriteAndFinish SIGKILLs a worker right after its
// destination's Write of a partition returned, before the ledger
// recorded the partition, and lets another worker take the partition
// over. With the destination sharing the ledger's transactions the write
// was only handed to the ledger, and died with the worker: the partition
// is written once, by the newer attempt. Committing on its own, the dead
// attempt's write landed: the events table, which the newer attempt
// replaced, agrees with the ledger, but the audit table shows the
// partition written twice, the at-least-once delivery that an appending
// destination sees.
func TestKilledBetweenWriteAndFinish(t *testing.T) {
	r := rng(t)
	for rep := range repeat(2) {
		for _, sink := range []string{"sql", "sql-separate"} {
			t.Run(fmt.Sprintf("%s/%d", sink, rep), func(t *testing.T) {
				const days = 6
				w := newWorld(t, days)
				i := r.IntN(days)
				key := w.partition(i).Key()
				gate := filepath.Join(w.dir, "gate") // never created: the worker dies waiting
				a := w.start("killed", "-sink", sink, "-concurrency", "1", "-work", "5ms", "-lease", "500ms", "-heartbeat", "150ms",
					"-gate", key, "-gatefile", gate, "-gatepoint", "write")
				w.waitFor("the write of "+key, func(es []proctest.Execution) bool {
					return slices.ContainsFunc(es, func(e proctest.Execution) bool { return e.What == "wrote" && e.Key == key })
				})
				a.signal(t, syscall.SIGKILL)
				a.wait()
				time.Sleep(700 * time.Millisecond) // past the lease
				b := w.start("newer", "-sink", sink, "-concurrency", "2", "-work", "5ms", "-lease", "10s", "-heartbeat", "3s").report(t)
				if b.Failed != 0 || b.Err != "" {
					t.Errorf("the newer worker's report %+v; want no failure", b)
				}
				hs := w.histories()
				if h := hs[key]; len(h) != 2 || h[0].Worker != "killed" || h[1].Worker != "newer" {
					t.Errorf("partition %s: history\n%s\nwant the killed worker's attempt taken over by the newer one", key, formatHistory(h))
				}
				window, err := tranche.NewTimePartitionWindow(tranche.Day, w.first, w.first.AddDate(0, 0, days-1))
				if err != nil {
					t.Fatal(err)
				}
				db, err := sql.Open("sqlite", "file:"+w.ledger+"?_pragma=busy_timeout(10000)")
				if err != nil {
					t.Fatal(err)
				}
				defer db.Close()
				twice := proctest.CheckSQL(t, db, hs, window, 3, sink == "sql")
				if want := map[string]int{"sql": 0, "sql-separate": 1}[sink]; twice != want {
					t.Errorf("%d partitions written twice; want %d", twice, want)
				}
			})
		}
	}
}
