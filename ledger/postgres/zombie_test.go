package postgres_test

import (
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
