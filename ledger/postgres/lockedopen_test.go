package postgres_test

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tranche-dev/tranche/destination/column"
	"github.com/tranche-dev/tranche/destination/sqldest"
	"github.com/tranche-dev/tranche/internal/proctest"
	"github.com/tranche-dev/tranche/ledger/postgres"
)

// holdLocksEnv carries the connection string and schema of the child
// process of TestOpenWhileLocked (see TestMain).
const holdLocksEnv = "TRANCHE_POSTGRES_HOLD_LOCKS"

// holdLocks is the child process of TestOpenWhileLocked: in one
// transaction it takes what a worker holds while it opens the ledger
// (the advisory lock of migrations) and while it claims (the rows of the
// partitions and backfills), says so on stdout, and stops itself with
// SIGSTOP, as a worker paused in the middle of a transaction is. Its
// session never times out idle, so that only the test ends it.
func holdLocks(url, schema string) int {
	ctx := context.Background()
	db, err := sql.Open("pgx", withSearchPath(url, schema))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for _, stmt := range []string{
		"SET LOCAL idle_in_transaction_session_timeout = 0",
		fmt.Sprintf("SELECT pg_advisory_xact_lock(%d, hashtext(current_schema()))", postgres.LockClass),
		"SELECT count(*) FROM (SELECT 1 FROM tranche_partitions FOR UPDATE) AS locked",
		"UPDATE tranche_backfills SET canceled = canceled",
		"UPDATE tranche_dags SET released = released",
	} {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", stmt, err)
			return 1
		}
	}
	fmt.Println("held")
	syscall.Kill(os.Getpid(), syscall.SIGSTOP)
	select {} // until the test kills it
}

// withSearchPath returns url with the search_path set to schema.
func withSearchPath(url, schema string) string {
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	return url + sep + "search_path=" + schema
}

// heldTable is the destination's table of TestOpenWhileLocked.
var heldTable = sqldest.Table{Name: "held", Partition: "day", Columns: []sqldest.Column{
	{Name: "day", Type: column.Time},
	{Name: "n", Type: column.Int},
}}

// TestOpenWhileLocked opens a ledger whose schema is current while a
// paused process holds, in an open transaction, the advisory lock of
// migrations and the rows of a claim: Open reads the schema's version
// and, finding it current, takes no lock, so it neither waits for the
// paused process nor fails (when every Open migrated under the advisory
// lock, it waited for as long as the process was stopped). Nor does a
// destination sharing the ledger whose token table exists.
func TestOpenWhileLocked(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a process")
	}
	proctest.SkipRace(t)
	url := serverURL(t)
	schema := freshSchema(t, url)
	first, err := postgres.Open(t.Context(), url, &postgres.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := first.Claim(t.Context(), claimReq("w", day(0), day(1))); err != nil {
		t.Fatal(err)
	}
	if _, err := postgres.NewDestination(t.Context(), first, heldTable); err != nil {
		t.Fatal(err)
	}
	first.Close()

	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), holdLocksEnv+"="+url+"\n"+schema)
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
	// The premise: the advisory lock of migrations is held.
	var got bool
	if err := admin(t, url).QueryRowContext(t.Context(), "SELECT pg_try_advisory_lock($1, hashtext($2))", postgres.LockClass, schema).Scan(&got); err != nil || got {
		t.Fatalf("pg_try_advisory_lock of the migrations' lock = %v, %v; want it held by the paused process", got, err)
	}

	rctx, rcancel := context.WithTimeout(t.Context(), 5*time.Second)
	start := time.Now()
	r, err := postgres.OpenReader(rctx, url, &postgres.Options{Schema: schema})
	rcancel()
	if err != nil || time.Since(start) > time.Second {
		t.Errorf("OpenReader while a paused process holds the locks = %v after %v; want the reader under 1s", err, time.Since(start))
	}
	if err == nil {
		r.Close()
	}
	for _, opts := range []postgres.Options{{Schema: schema}, {Schema: schema, Existing: true}} {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		start := time.Now()
		l, err := postgres.Open(ctx, url, &opts)
		took := time.Since(start)
		cancel()
		if err != nil {
			t.Fatalf("Open(%+v) while a paused process holds the locks = %v after %v; want the ledger", opts, err, took)
		}
		if took > time.Second {
			t.Errorf("Open(%+v) took %v while a paused process holds the locks; want under 1s", opts, took)
		}
		if _, err := l.History(t.Context(), "dag-bad-input", day(0).Start); err != nil {
			t.Errorf("History on the ledger opened while the locks are held = %v", err)
		}
		if !opts.Existing {
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			start := time.Now()
			_, err := postgres.NewDestination(ctx, l, heldTable)
			cancel()
			if err != nil || time.Since(start) > time.Second {
				t.Errorf("NewDestination while a paused process holds the locks = %v after %v; want it under 1s", err, time.Since(start))
			}
		}
		l.Close()
	}
}
