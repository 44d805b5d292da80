package sqlite_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/sqlite"
	"github.com/tranche-dev/tranche/ledger/sqlledger"
)

var day0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func day(i int) tranche.TimePartition {
	return tranche.PartitionOf(tranche.Day, day0.AddDate(0, 0, i))
}

func claimReq(worker string, ps ...tranche.TimePartition) ledger.ClaimRequest {
	return ledger.ClaimRequest{DAG: "dag-bad-files", Backfill: "bf", Worker: worker, RunID: "run",
		Partitions: ps, Lease: time.Minute, Policy: ledger.RerunFailed}
}

// state is everything a ledger holds about the test DAG, for comparing
// before and after a refused write.
func state(t *testing.T, l ledger.Ledger) string {
	t.Helper()
	ctx := context.Background()
	var b strings.Builder
	rev, err := l.Revision(ctx, "dag-bad-files")
	if err != nil {
		t.Fatalf("Revision = %v", err)
	}
	b.WriteString("revision " + time.Duration(rev).String() + "\n")
	for a, err := range l.Latest(ctx, "dag-bad-files", day0.AddDate(-1, 0, 0), day0.AddDate(10, 0, 0)) {
		if err != nil {
			t.Fatalf("Latest = %v", err)
		}
		h, err := l.History(ctx, "dag-bad-files", a.Start)
		if err != nil {
			t.Fatalf("History = %v", err)
		}
		for _, a := range h {
			b.WriteString(a.Key + " " + a.Worker + " " + string(a.State) + " " + a.Err + " " + a.LeaseUntil.String() + "\n")
		}
	}
	bs, err := l.Backfills(ctx)
	if err != nil {
		t.Fatalf("Backfills = %v", err)
	}
	for _, r := range bs {
		b.WriteString("backfill " + r.ID + "\n")
	}
	return b.String()
}

// wantFileError checks that err names path, says what, and matches kind.
func wantFileError(t *testing.T, err error, path string, kind error, says ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error; want one matching %v", kind)
	}
	t.Logf("error: %v", err)
	if !errors.Is(err, kind) {
		t.Errorf("error %q; want one matching %v", err, kind)
	}
	if !strings.Contains(err.Error(), path) {
		t.Errorf("error %q; want it to name the file %s", err, path)
	}
	for _, s := range says {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q; want it to say %q", err, s)
		}
	}
}

func TestMissingFolder(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "no-such-folder")
	path := filepath.Join(dir, "ledger.db")
	_, err := sqlite.Open(t.Context(), path, nil)
	wantFileError(t, err, path, sqlite.ErrNoFolder, "folder "+dir+" does not exist")
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Open created the missing folder: Stat = %v", err)
	}
}

func TestNotADatabase(t *testing.T) {
	for _, content := range []string{"hello, I am a text file\n", "SQLite format 2\x00 and then some", "x"} {
		path := filepath.Join(t.TempDir(), "notes.txt")
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := sqlite.Open(t.Context(), path, nil)
		wantFileError(t, err, path, sqlledger.ErrNotDatabase, "not a SQLite database", "nothing was written")
		if got, _ := os.ReadFile(path); string(got) != content {
			t.Errorf("Open changed the file to %q", got)
		}
		for _, suffix := range []string{"-wal", "-shm", "-journal"} {
			if _, err := os.Stat(path + suffix); err == nil {
				t.Errorf("Open created %s", path+suffix)
			}
		}
	}
	// A folder is not a ledger either.
	dir := t.TempDir()
	_, err := sqlite.Open(t.Context(), dir, nil)
	wantFileError(t, err, dir, sqlledger.ErrCantOpen, "is a folder")
}

func TestEmptyFileIsANewLedger(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.db")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := sqlite.Open(t.Context(), path, nil)
	if err != nil {
		t.Fatalf("Open of an empty file = %v; want a new ledger", err)
	}
	defer l.Close()
	if _, err := l.Claim(t.Context(), claimReq("w", day(0))); err != nil {
		t.Fatal(err)
	}
}

// seeded returns the path of a closed ledger holding some attempts, and
// its state.
func seeded(t *testing.T) (path, before string) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "ledger.db")
	l, err := sqlite.Open(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.PutBackfill(t.Context(), ledger.BackfillRecord{ID: "bf", DAG: "dag-bad-files", Window: "2026-01", Chunk: 1}); err != nil {
		t.Fatal(err)
	}
	lease, err := l.Claim(t.Context(), claimReq("w1", day(0), day(1)))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Finish(t.Context(), lease, []ledger.Outcome{{State: ledger.StateSucceeded, Rows: 3}, {State: ledger.StateFailed, Err: "boom"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Claim(t.Context(), claimReq("w2", day(2))); err != nil {
		t.Fatal(err)
	}
	before = state(t, l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return path, before
}

func reopen(t *testing.T, path string, opts *sqlite.Options) *sqlite.Ledger {
	t.Helper()
	l, err := sqlite.Open(t.Context(), path, opts)
	if err != nil {
		t.Fatalf("Open(%s) = %v", path, err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func TestReadOnlyFile(t *testing.T) {
	path, before := seeded(t)
	content, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o444); err != nil {
		t.Fatal(err)
	}
	_, err = sqlite.Open(t.Context(), path, nil)
	wantFileError(t, err, path, sqlledger.ErrReadOnly, "read-only", "must be writable")
	if got, _ := os.ReadFile(path); !bytes.Equal(got, content) {
		t.Errorf("Open of a read-only file changed it")
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := state(t, reopen(t, path, nil)); got != before {
		t.Errorf("state after a refused Open:\n%s\nwant:\n%s", got, before)
	}
}

// lock holds the write lock of the database at path until the test ends
// or release is called.
func lock(t *testing.T, path string) (release func()) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(t.Context(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	done := false
	release = func() {
		if done {
			return
		}
		done = true
		if _, err := conn.ExecContext(context.Background(), "ROLLBACK"); err != nil {
			t.Error(err)
		}
		conn.Close()
		db.Close()
	}
	t.Cleanup(release)
	return release
}

func TestLockedLongerThanBusyTimeout(t *testing.T) {
	path, before := seeded(t)
	opts := &sqlite.Options{BusyTimeout: 300 * time.Millisecond}
	l := reopen(t, path, opts)
	release := lock(t, path)

	start := time.Now()
	_, err := l.Claim(t.Context(), claimReq("w3", day(3)))
	took := time.Since(start)
	wantFileError(t, err, path, sqlledger.ErrLocked, "busy timeout of 300ms", "claiming partition "+day(3).Key(), "nothing was written")
	if took < 250*time.Millisecond || took > 5*time.Second {
		t.Errorf("Claim gave up after %v; want about the busy timeout, 300ms", took)
	}
	_, err = l.Claim(t.Context(), claimReq("w1", day(1)))
	wantFileError(t, err, path, sqlledger.ErrLocked)
	// An open of the current ledger writes nothing, so the lock does not
	// stop it (TestOpenWhileLocked); its writes wait as the others do.
	second, err := sqlite.Open(t.Context(), path, opts)
	if err != nil {
		t.Fatalf("Open while locked = %v; want the ledger", err)
	}
	_, err = second.Claim(t.Context(), claimReq("w2", day(2)))
	wantFileError(t, err, path, sqlledger.ErrLocked)
	second.Close()
	// Reads go on: WAL readers do not wait for the writer.
	if got := state(t, l); got != before {
		t.Errorf("state while locked:\n%s\nwant:\n%s", got, before)
	}

	release()
	if got := state(t, l); got != before {
		t.Errorf("state after the lock was released:\n%s\nwant:\n%s", got, before)
	}
	lease, err := l.Claim(t.Context(), claimReq("w3", day(3)))
	if err != nil {
		t.Fatalf("Claim after the lock was released = %v", err)
	}
	if err := l.Finish(t.Context(), lease, []ledger.Outcome{{State: ledger.StateSucceeded}}); err != nil {
		t.Fatal(err)
	}
}

func TestDiskFull(t *testing.T) {
	path, _ := seeded(t)
	l := reopen(t, path, nil)
	ctx := t.Context()
	// SQLite's page limit stands in for the disk: a few pages more than
	// the file has.
	w := l.Writer()
	var pages int
	if err := w.QueryRowContext(ctx, "PRAGMA page_count").Scan(&pages); err != nil {
		t.Fatal(err)
	}
	if _, err := w.ExecContext(ctx, "PRAGMA max_page_count = "+itoa(pages+2)); err != nil {
		t.Fatal(err)
	}
	var full error
	var landed []tranche.TimePartition
	for i := 10; i < 2000 && full == nil; i += 50 {
		chunk := make([]tranche.TimePartition, 50)
		for j := range chunk {
			chunk[j] = day(i + j)
		}
		lease, err := l.Claim(ctx, claimReq("w-full", chunk...))
		if err != nil {
			full = err
			break
		}
		landed = append(landed, chunk...)
		outcomes := make([]ledger.Outcome, len(chunk))
		for j := range outcomes {
			outcomes[j] = ledger.Outcome{State: ledger.StateSucceeded, Rows: 1, Err: strings.Repeat("x", 200)}
		}
		if err := l.Finish(ctx, lease, outcomes); err != nil {
			full = err
			break
		}
	}
	wantFileError(t, full, path, sqlledger.ErrFull, "full", "rolled back")
	mid := state(t, l)
	// Nothing half-written: every landed chunk is whole, and the refused
	// claim or finish left nothing.
	for _, p := range landed {
		h, err := l.History(ctx, "dag-bad-files", p.Start)
		if err != nil || len(h) != 1 {
			t.Fatalf("History of %s = %v, %v; want one attempt", p.Key(), h, err)
		}
	}
	if len(landed) == 0 {
		t.Fatal("the first claim filled the page limit; raise it")
	}
	// Room again: the ledger goes on where it stopped.
	if _, err := w.ExecContext(ctx, "PRAGMA max_page_count = 1000000"); err != nil {
		t.Fatal(err)
	}
	var check string
	if err := w.QueryRowContext(ctx, "PRAGMA integrity_check").Scan(&check); err != nil || check != "ok" {
		t.Fatalf("integrity_check = %q, %v", check, err)
	}
	if got := state(t, l); got != mid {
		t.Errorf("state changed after raising the limit")
	}
	if _, err := l.Claim(ctx, claimReq("w-full", day(5000))); err != nil {
		t.Fatalf("Claim after room was made = %v", err)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func TestNewerSchemaRefused(t *testing.T) {
	path, before := seeded(t)
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("INSERT INTO tranche_schema (version, description, applied_ms) VALUES (99, 'from the future', 0)"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	_, err = sqlite.Open(t.Context(), path, nil)
	se, ok := errors.AsType[*sqlledger.SchemaError](err)
	if !ok || se.Found != 99 || se.Known != sqlledger.SchemaVersion {
		t.Fatalf("Open of a newer schema = %v; want a *SchemaError found 99, known %d", err, sqlledger.SchemaVersion)
	}
	for _, s := range []string{path, "version 99", fmt.Sprintf("version %d,", sqlledger.SchemaVersion)} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q; want it to say %q", err, s)
		}
	}
	db, _ = sql.Open("sqlite", "file:"+path)
	defer db.Close()
	if _, err := db.Exec("DELETE FROM tranche_schema WHERE version = 99"); err != nil {
		t.Fatal(err)
	}
	if got := state(t, reopen(t, path, nil)); got != before {
		t.Errorf("state after a refused Open:\n%s\nwant:\n%s", got, before)
	}
}

func TestBadOptions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.db")
	for _, c := range []struct {
		path string
		opts *sqlite.Options
		says string
	}{
		{"", nil, "empty path"},
		{path, &sqlite.Options{Synchronous: "sometimes"}, `synchronous "sometimes"; accepted: NORMAL, FULL`},
		{path, &sqlite.Options{BusyTimeout: -time.Second}, "busy timeout -1s"},
		{path, &sqlite.Options{Readers: -1}, "-1 readers"},
	} {
		_, err := sqlite.Open(t.Context(), c.path, c.opts)
		if err == nil || !strings.Contains(err.Error(), c.says) || !strings.Contains(err.Error(), c.path) {
			t.Errorf("Open(%q, %+v) = %v; want an error naming the file and saying %q", c.path, c.opts, err, c.says)
		}
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused Open created the file: %v", err)
	}
	l, err := sqlite.Open(t.Context(), path, &sqlite.Options{Synchronous: "full"})
	if err != nil {
		t.Fatalf("Open with synchronous full = %v", err)
	}
	l.Close()
}
