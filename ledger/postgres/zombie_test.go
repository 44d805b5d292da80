package postgres_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/tranche-dev/tranche/internal/proctest"
)

// TestZombieWorkers makes a worker a zombie at each point of a
// partition's execution (proctest.PausePoints): it stops itself (SIGSTOP)
// inside its materializer, after the materializer returned and before
// the write, inside the destination's write, or between the write and
// the ledger's record of it, past its lease; another worker takes the
// partition over and finishes the backfill; the first resumes (SIGCONT).
// For every destination the workers can write into (files, the
// PostgreSQL destination sharing the ledger's transactions, and the one
// committing on its own), no stale write reaches it
// (proctest.CheckZombie) and the ledger and the data agree. The SQLite
// ledger's test of the same name runs the same matrix.
func TestZombieWorkers(t *testing.T) { proctest.Zombies(t, "FAULT", zombie) }

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
	if b.Failed != 0 {
		t.Errorf("the newer worker's summary %+v; want no failure", b)
	}
	a.cmd.Process.Signal(syscall.SIGCONT)
	za := a.report(t)
	// Its 300 ms lease may also lapse on a partition before key when a
	// loaded machine starves it: that one it stops too, fenced, and the
	// newer worker runs it.
	if !slices.Contains(za.FencedKeys, key) || za.Failed != za.Fenced {
		t.Errorf("the zombie's summary %+v; want %s among its failures, each fenced", za, key)
	}
	z := proctest.Zombie{Sink: sink, At: at, Key: key, Worker: "zombie", Log: proctest.Writes(t, audit)}
	if sink == "files" {
		z.Histories = w.checkLanded().histories
	} else {
		z.Histories, _ = w.checkSQL(sink == "sql")
		z.SQLAudit = proctest.SQLRows(t, admin(t, withParams(t, w.url, "search_path", w.schema)), true)
	}
	proctest.CheckZombie(t, z)
	t.Logf("zombie stopped %s on %s; the newer worker ran %d; the zombie's summary %+v\n%s", at, key, b.Succeeded, za, a.stderr.String())
}

// TestZombieAcrossDeploy is the zombie scenario with a deploy between
// the two workers, as the SQLite ledger's test of the same name runs it:
// the zombie of the first DAG stops itself inside its write of its last
// partition, past its lease; a worker of the changed DAG (another
// identity) writes every partition; the zombie resumes and lands nothing
// over it, in every sink. The zombie runs its backfill once (-loop=false).
func TestZombieAcrossDeploy(t *testing.T) {
	r := proctest.Rand(t, "FAULT")
	for _, sink := range proctest.Sinks {
		for rep := range proctest.Repeat("FAULT", 2) {
			t.Run(fmt.Sprintf("%s/%d", sink, rep), func(t *testing.T) {
				const days = 3
				w := newWorld(t, days)
				audit := filepath.Join(w.dir, "audit.log")
				key := w.partition(0).Key() // the zombie's last, newest first
				at := proctest.PauseWrite
				if r.IntN(2) == 0 && sink != "files" {
					at = proctest.PauseStaged
				}
				// One run of the old backfill: a replica that ran it again
				// after the deploy (-loop) would claim the partition anew,
				// and its newer claim's rows would replace the deployed
				// worker's, the case docs/destinations.md leaves to the
				// deploy (stop the old identity's backfills).
				a := w.start("zombie", append(proctest.ZombieArgs(sink, at, key, audit), "-loop=false")...)
				proctest.AwaitPause(t, a.cmd.Process.Pid, w.log, key)
				// Another name: not linked, only the fence stands
				// between them (under NewDAG's default names the
				// deployed worker would refuse to run).
				b := w.start("deployed", append(proctest.TakeoverArgs(sink, audit), "-version", "2", "-name", "events-2")...).report(t)
				if b.Failed != 0 || b.Succeeded != days {
					t.Errorf("the deployed worker's summary %+v; want every partition run", b)
				}
				a.cmd.Process.Signal(syscall.SIGCONT)
				if err := a.wait(); err != nil {
					t.Fatalf("the zombie: %v\n%s", err, a.stderr.String())
				}
				var za summary // not done: its one run failed the partition it was fenced on
				if err := json.Unmarshal(a.stdout.Bytes(), &za); err != nil || !slices.Contains(za.FencedKeys, key) {
					t.Errorf("the zombie's summary %q (%v); want %s fenced", a.stdout.String(), err, key)
				}
				holders := map[string][]string{}
				if sink == "files" {
					for i := range days {
						k := w.partition(i).Key()
						for _, row := range proctest.Rows(t, w.dest, k) {
							holders[k] = append(holders[k], row.Worker)
						}
					}
				} else {
					db := admin(t, withParams(t, w.url, "search_path", w.schema))
					for k, rows := range proctest.SQLRows(t, db, false) {
						for _, row := range rows {
							holders[k] = append(holders[k], row.Worker)
						}
					}
					for _, row := range proctest.SQLRows(t, db, true)[key] {
						if row.Worker == "zombie" && sink == "sql" {
							t.Errorf("the audit table holds the zombie's write of %s: %+v", key, row)
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
				// Paused after a write that commits on its own (files,
				// sql-separate), the zombie landed its rows before the deploy's,
				// which replaced them: no fence refused it.
				if at == proctest.PauseWrite || sink == "sql" {
					proctest.CheckRefusedNotSucceeded(t, admin(t, withParams(t, w.url, "search_path", w.schema)), key)
				}
				t.Logf("%s, zombie stopped %s on %s: %d stale partitions of %d; the zombie's summary %+v", sink, at, key, stale, days, za)
			})
		}
	}
}

// TestDeployDuringBackfill is issue 23's deploy with the old code's
// backfill still to run, as the SQLite ledger's test of the same name
// runs it: the old DAG's worker stops itself inside the write of its
// first partition (newest first), a worker of the new DAG of the same
// name (another identity) lands every partition, and the old worker
// resumes and goes on, running its backfill until its status says done.
// It lands nothing: every partition keeps the deployed worker's rows, on
// the files destination and the PostgreSQL destination sharing the
// ledger.
func TestDeployDuringBackfill(t *testing.T) {
	r := proctest.Rand(t, "FAULT")
	for _, sink := range []string{"files", "sql"} {
		for rep := range proctest.Repeat("FAULT", 2) {
			t.Run(fmt.Sprintf("%s/%d", sink, rep), func(t *testing.T) {
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
				if b.Failed != 0 || b.Succeeded != days {
					t.Errorf("the deployed worker's summary %+v; want every partition run", b)
				}
				a.cmd.Process.Signal(syscall.SIGCONT)
				if err := a.wait(); err != nil {
					t.Fatalf("the old worker: %v\n%s", err, a.stderr.String())
				}
				var za summary
				if err := json.Unmarshal(a.stdout.Bytes(), &za); err != nil {
					t.Fatalf("the old worker's summary %q: %v", a.stdout.String(), err)
				}
				if za.Succeeded != 0 || za.Superseded < days-1 || !za.Done {
					t.Errorf("the old worker's summary %+v; want nothing succeeded, %d or more skipped as landed by a newer version, done", za, days-1)
				}
				holders := map[string][]string{}
				if sink == "files" {
					for i := range days {
						k := w.partition(i).Key()
						for _, row := range proctest.Rows(t, w.dest, k) {
							holders[k] = append(holders[k], row.Worker)
						}
					}
				} else {
					db := admin(t, withParams(t, w.url, "search_path", w.schema))
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
				proctest.CheckRefusedNotSucceeded(t, admin(t, withParams(t, w.url, "search_path", w.schema)), key)
				t.Logf("%s, old worker stopped %s on %s: %d partitions of %d with the old code's rows; its summary %+v", sink, at, key, old, days, za)
			})
		}
	}
}
