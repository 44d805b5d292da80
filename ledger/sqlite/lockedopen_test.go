package sqlite_test

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/tranche-dev/tranche/destination/column"
	"github.com/tranche-dev/tranche/destination/sqldest"
	"github.com/tranche-dev/tranche/internal/proctest"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/sqlite"
	"github.com/tranche-dev/tranche/ledger/sqlledger"
)

// holdLockEnv names the file whose write lock a child process of
// TestOpenWhileLocked takes (see TestMain).
const holdLockEnv = "TRANCHE_SQLITE_HOLD_LOCK"

// holdWriteLock is the child process of TestOpenWhileLocked: it begins
// an immediate transaction on the file, as every claim and finish of a
// worker does, writes in it, says so on stdout, and stops itself with
// SIGSTOP, as a worker paused in the middle of a transaction is.
func holdWriteLock(path string) int {
	ctx := context.Background()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for _, stmt := range []string{
		"BEGIN IMMEDIATE",
		"INSERT INTO tranche_dags (dag) VALUES ('held by a paused worker')",
	} {
		if _, err := conn.ExecContext(ctx, stmt); err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", stmt, err)
			return 1
		}
	}
	fmt.Println("held")
	syscall.Kill(os.Getpid(), syscall.SIGSTOP)
	select {} // until the test kills it
}

// heldTable is the destination's table of TestOpenWhileLocked.
var heldTable = sqldest.Table{Name: "held", Partition: "day", Columns: []sqldest.Column{
	{Name: "day", Type: column.Time},
	{Name: "n", Type: column.Int},
}}

// TestOpenWhileLocked opens a ledger whose schema is current while
// another process holds the file's write lock: Open reads the schema's
// version and, finding it current, writes nothing, so it neither waits
// for the lock nor fails at the busy timeout (a second worker failed to
// open after 10 s while a paused worker held the lock, when every Open
// migrated in a write transaction). So does a destination sharing the
// ledger whose token table exists. The open ledger reads; its writes wait
// for the lock as they must.
func TestOpenWhileLocked(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a process")
	}
	proctest.SkipRace(t)
	path := filepath.Join(t.TempDir(), "ledger.db")
	first, err := sqlite.Open(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sqlite.NewDestination(t.Context(), first, heldTable); err != nil {
		t.Fatal(err)
	}
	first.Close()

	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), holdLockEnv+"="+path)
	child.Stderr = os.Stderr
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		child.Process.Signal(syscall.SIGCONT)
		child.Process.Kill()
		child.Wait()
	})
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "held\n" {
		t.Fatalf("the child process said %q, %v; want held", line, err)
	}

	const busy = 3 * time.Second
	for _, opts := range []sqlite.Options{{BusyTimeout: busy}, {BusyTimeout: busy, Existing: true}} {
		start := time.Now()
		l, err := sqlite.Open(t.Context(), path, &opts)
		took := time.Since(start)
		if err != nil {
			t.Fatalf("Open(Existing: %v) while another process holds the write lock = %v after %v; want the ledger", opts.Existing, err, took)
		}
		if took > time.Second {
			t.Errorf("Open(Existing: %v) took %v while another process holds the write lock; want under 1s", opts.Existing, took)
		}
		if _, err := l.Backfills(t.Context()); err != nil {
			t.Errorf("Backfills on the ledger opened while the lock is held = %v", err)
		}
		if !opts.Existing {
			start := time.Now()
			if _, err := sqlite.NewDestination(t.Context(), l, heldTable); err != nil || time.Since(start) > time.Second {
				t.Errorf("NewDestination while another process holds the write lock = %v after %v; want it under 1s", err, time.Since(start))
			}
		}
		// The premise: the lock is held, so a write waits for the busy
		// timeout and fails.
		start = time.Now()
		err = l.CancelBackfill(t.Context(), "no such backfill", ledger.CancelOptions{})
		if !errors.Is(err, sqlledger.ErrLocked) || time.Since(start) < busy/2 {
			t.Errorf("a write while the lock is held = %v after %v; want ErrLocked after the busy timeout (%v)", err, time.Since(start), busy)
		}
		l.Close()
	}
}
