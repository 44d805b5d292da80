package proctest

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/tranche-dev/tranche/ledger"
)

// Sinks are the destinations the workers can write into (their -sink
// flag): the files destination, the SQL destination sharing the ledger's
// transactions, and the SQL destination committing on its own.
var Sinks = []string{"files", "sql", "sql-separate"}

// ZombieArgs are the flags of a worker that stops itself at point at on
// partition key and audits its writes into audit: one partition at a
// time, a short lease, and work that goes on through a canceled context,
// so that the zombie reaches the write when it resumes.
func ZombieArgs(sink, at, key, audit string) []string {
	return []string{"-sink", sink, "-concurrency", "1", "-work", "10ms", "-lease", "300ms", "-heartbeat", "100ms",
		"-pause", at, "-pausekey", key, "-audit", audit, "-ignorectx"}
}

// TakeoverArgs are the flags of the worker that takes a zombie's
// partition over: a lease long enough not to expire on a busy machine.
func TakeoverArgs(sink, audit string) []string {
	return []string{"-sink", sink, "-concurrency", "2", "-work", "10ms", "-lease", "5s", "-heartbeat", "1s", "-audit", audit}
}

// Zombies runs zombie, the scenario of a ledger's tests, for every sink
// and pause point, 5 times each (PREFIX_REPEAT times as often), with one
// random source seeded from PREFIX_SEED.
func Zombies(t *testing.T, prefix string, zombie func(t *testing.T, r *rand.Rand, sink, at string)) {
	r := Rand(t, prefix)
	for _, sink := range Sinks {
		for _, at := range PausePoints {
			for rep := range Repeat(prefix, 5) {
				t.Run(fmt.Sprintf("%s/%s/%d", sink, at, rep), func(t *testing.T) { zombie(t, r, sink, at) })
			}
		}
	}
}

// AwaitPause waits until the worker process pid has logged its pause on
// key in the executions log at log and stopped, then past its lease
// (ZombieArgs'), by the ledger's clock too.
func AwaitPause(t testing.TB, pid int, log, key string) {
	t.Helper()
	paused := func() bool {
		for _, e := range Executions(t, log) {
			if e.What == "pause" && e.Key == key {
				return true
			}
		}
		return false
	}
	for deadline := time.Now().Add(30 * time.Second); !paused(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for the pause on %s; executions:\n%v", key, Executions(t, log))
		}
	}
	WaitStopped(t, pid)
	time.Sleep(400 * time.Millisecond)
}

// AuditTo opens the audit log at path as e.Audit (none when path is
// "") and returns what closes it.
func (e *Events) AuditTo(path string) (func() error, error) {
	if path == "" {
		return func() error { return nil }, nil
	}
	f, err := OpenLog(path)
	if err != nil {
		return nil, err
	}
	e.Audit = f
	return f.Close, nil
}

// OpenLog opens the log at path for appending, creating it: the
// executions log or the audit log, which every worker appends to.
func OpenLog(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
}

// WaitStopped waits until process pid is stopped (state T in /proc),
// where /proc exists.
func WaitStopped(t testing.TB, pid int) {
	t.Helper()
	stat := fmt.Sprintf("/proc/%d/stat", pid)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		data, err := os.ReadFile(stat)
		if err != nil {
			time.Sleep(50 * time.Millisecond) // no /proc: give the signal a moment
			return
		}
		// pid (comm) state ...: comm may hold spaces, so read after the last ')'.
		if i := bytes.LastIndexByte(data, ')'); i > 0 && i+2 < len(data) && data[i+2] == 'T' {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatalf("worker process %d did not stop", pid)
}

// Zombie is what a zombie scenario left, for CheckZombie.
type Zombie struct {
	Sink, At, Key string
	Worker        string                      // the zombie's name
	Histories     map[string][]ledger.Attempt // the ledger's, by key
	Log           []Write                     // the audit log (Events.Audit) of every worker
	SQLAudit      map[string][]SQLRow         // AuditTable, for the SQL sinks
}

// CheckZombie checks that no stale write reached the destination: the
// zombie's attempt at its partition failed and the next worker's
// succeeded; per partition, the writes that landed come in the order of
// their tokens and the last is the success's; and the zombie landed
// nothing for its partition, except a write that landed before it
// stopped (PauseStaged, with a destination committing on its own),
// which the newer attempt then replaced. For the destination sharing
// the ledger, the audit log holds the writes staged, not landed: what
// landed is AuditTable's, which CheckSQL checks holds the success's
// write alone.
func CheckZombie(t testing.TB, z Zombie) {
	t.Helper()
	if h := z.Histories[z.Key]; len(h) != 2 || h[0].Worker != z.Worker || h[0].State != ledger.StateFailed || h[1].Worker == z.Worker || h[1].State != ledger.StateSucceeded {
		t.Errorf("partition %s: history\n%s\nwant the zombie's attempt failed, then another worker's success", z.Key, formatAttempts(h))
	}
	mayLand := z.At == PauseStaged && z.Sink != "sql"
	if z.Sink != "sql" {
		last := map[string]Write{}
		for _, wr := range z.Log {
			if prev, ok := last[wr.Key]; ok && wr.Token < prev.Token {
				t.Errorf("partition %s: %s wrote token %d after %s wrote token %d: a stale write landed", wr.Key, wr.Worker, wr.Token, prev.Worker, prev.Token)
			}
			if wr.Key == z.Key && wr.Worker == z.Worker && !mayLand {
				t.Errorf("the zombie landed %s (token %d); it stopped %s", z.Key, wr.Token, z.At)
			}
			last[wr.Key] = wr
		}
		for k, h := range z.Histories {
			if len(h) == 0 {
				continue // reported by the data's check
			}
			won := h[len(h)-1]
			if wr := last[k]; wr.Worker != won.Worker || ledger.TokenAttempt(wr.Token) != won.Number {
				t.Errorf("partition %s: last written by %q, token %d; the ledger says %s attempt %d succeeded", k, wr.Worker, wr.Token, won.Worker, won.Number)
			}
		}
	}
	for _, r := range z.SQLAudit[z.Key] {
		if r.Worker == z.Worker && !mayLand {
			t.Errorf("table events_audit holds the zombie's write of %s (token %d, delivery %s); it stopped %s", z.Key, r.Token, r.Delivery, z.At)
		}
	}
}
