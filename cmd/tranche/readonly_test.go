package main

import (
	"bytes"
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tranche-dev/tranche/internal/pagetest"
	"github.com/tranche-dev/tranche/internal/testskip"
	"github.com/tranche-dev/tranche/ledger/postgres"
	"github.com/tranche-dev/tranche/ledger/sqlite"
)

// runTranche runs the command in process and returns its exit code,
// stdout and stderr.
func runTranche(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), args, strings.NewReader(""), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// checkReads lists, shows and serves the backfill of f on the ledger at
// address, and checks that cancel and resume are refused with why
// (want in their error) and change nothing.
func checkReads(t *testing.T, address string, f pagetest.Fixture, want string, cancel func()) {
	t.Helper()
	t.Setenv("TRANCHE_LEDGER", address)
	for _, args := range [][]string{{"ls"}, {"ls", "--format", "json"}, {"status", f.ID}, {"status", f.ID, "--partitions"}, {"history", f.ID, "2026-01-10"}} {
		if code, out, errs := runTranche(t, args...); code != 0 || !strings.Contains(out, f.ID[:8]) && !strings.Contains(out, "second try") {
			t.Errorf("tranche %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, out, errs)
		}
	}
	for _, cmd := range []string{"cancel", "resume"} {
		if cmd == "resume" && cancel != nil {
			cancel() // by its owner: resume has something to do
		}
		code, _, errs := runTranche(t, cmd, f.ID)
		t.Logf("tranche %s: %s", cmd, errs)
		if code != 1 || !strings.Contains(errs, want) {
			t.Errorf("tranche %s of a ledger it may only read: exit %d, want 1 saying %q:\n%s", cmd, code, want, errs)
		}
	}
	base := startServe(t, "--ledger", address)
	for _, path := range []string{"/", "/backfills/" + f.ID, "/dags/" + f.DAG} {
		res, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 || !strings.Contains(string(body), f.ID) && path != "/dags/"+f.DAG {
			t.Errorf("GET %s of a ledger it may only read: %d\n%.400s", path, res.StatusCode, body)
		}
	}
}

// TestReadOnlyFile lists, shows and serves a ledger file of mode 0444,
// as a backup copy is: the file and its folder are left byte for byte as
// they were, and cancel and resume are refused, saying the file is
// read-only.
func TestReadOnlyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.db")
	l, err := sqlite.Open(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	f := pagetest.New(t, l)
	if err := l.Close(); err != nil { // the last connection's checkpoint empties the WAL
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o444); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, filepath.Dir(path))
	checkReads(t, "sqlite:"+path, f, "the file is read-only (mode -r--r--r--)", nil)
	if after := snapshot(t, filepath.Dir(path)); after != before {
		t.Errorf("reading the read-only ledger changed its folder:\nbefore %s\nafter  %s", before, after)
	}
}

// snapshot names the files of dir with their sizes and modification
// times.
func snapshot(t *testing.T, dir string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s %d %x %s; ", e.Name(), info.Size(), len(data), info.ModTime().Format(time.RFC3339Nano))
	}
	return b.String()
}

// TestSelectOnlyRole lists, shows and serves a PostgreSQL ledger as a
// role allowed only SELECT on its tables: cancel and resume are refused
// naming the role and what it lacks, and the backfill is unchanged.
func TestSelectOnlyRole(t *testing.T) {
	raw := os.Getenv("TRANCHE_POSTGRES_URL")
	if raw == "" {
		testskip.Skip(t, testskip.PostgreSQL, "TRANCHE_POSTGRES_URL is not set: start a server with ledger/postgres/testserver.sh")
	}
	admin := openAdmin(t, raw)
	suffix := fmt.Sprintf("%d_%d", os.Getpid(), time.Now().UnixNano()%1_000_000)
	schema, role := "cmd_ro_"+suffix, "tranche_reader_"+suffix
	t.Cleanup(func() {
		admin.Exec("DROP SCHEMA IF EXISTS " + schema + " CASCADE")
		admin.Exec("DROP OWNED BY " + role)
		admin.Exec("DROP ROLE IF EXISTS " + role)
	})
	l, err := postgres.Open(t.Context(), raw, &postgres.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	f := pagetest.New(t, l)
	l.Close()
	for _, stmt := range []string{"CREATE ROLE " + role + " LOGIN", "GRANT USAGE ON SCHEMA " + schema + " TO " + role,
		"GRANT SELECT ON ALL TABLES IN SCHEMA " + schema + " TO " + role} {
		if _, err := admin.Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(role)
	canceled := func() int {
		var n int
		if err := admin.QueryRow("SELECT canceled FROM "+schema+".tranche_backfills WHERE id = $1", f.ID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	checkReads(t, withSchema(t, u.String(), schema), f, "role "+role+" lacks a privilege", func() {
		if canceled() != 0 {
			t.Error("a refused cancel canceled the backfill")
		}
		if _, err := admin.Exec("UPDATE "+schema+".tranche_backfills SET canceled = 1 WHERE id = $1", f.ID); err != nil {
			t.Fatal(err)
		}
	})
	if canceled() != 1 {
		t.Error("a refused resume resumed the backfill")
	}
}

// TestServeNames serves a ledger whose backfill recorded its DAG's name:
// the index shows the DAG by it without a --name flag, and a --name flag
// overrides it; ls and status show it too.
func TestServeNames(t *testing.T) {
	path, f := newLedgerFile(t)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{nil, "events"},
		{[]string{"--name", f.DAG + "=Event loads"}, "Event loads"},
	} {
		base := startServe(t, append([]string{"--ledger", "sqlite:" + path}, tt.args...)...)
		res, err := http.Get(base + "/")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if want := `<h2><a class="dag" href="/dags/` + f.DAG + `">` + tt.want + `</a></h2>`; !strings.Contains(string(body), want) {
			t.Errorf("serve %v: the index lacks %s:\n%s", tt.args, want, body)
		}
	}
	t.Setenv("TRANCHE_LEDGER", "sqlite:"+path)
	if code, out, errs := runTranche(t, "ls"); code != 0 || !strings.Contains(out, "events ("+f.DAG+")") {
		t.Errorf("ls: exit %d\n%s%s", code, out, errs)
	}
	if code, out, errs := runTranche(t, "ls", "--format", "json"); code != 0 || !strings.Contains(out, `"dag_name": "events"`) {
		t.Errorf("ls --format json: exit %d\n%s%s", code, out, errs)
	}
	if code, out, errs := runTranche(t, "status", f.ID); code != 0 || !strings.Contains(out, "  dag         events ("+f.DAG+")\n") {
		t.Errorf("status: exit %d\n%s%s", code, out, errs)
	}
}

// TestKeyValueAddress lists a PostgreSQL ledger named by a postgres:
// key=value address, whose host, port, database, user and schema are
// all taken (the host was once left for the default), and refuses one
// whose server cannot be reached, naming it.
func TestKeyValueAddress(t *testing.T) {
	raw := os.Getenv("TRANCHE_POSTGRES_URL")
	if raw == "" {
		testskip.Skip(t, testskip.PostgreSQL, "TRANCHE_POSTGRES_URL is not set: start a server with ledger/postgres/testserver.sh")
	}
	admin := openAdmin(t, raw)
	schema := fmt.Sprintf("cmd_kv_%d_%d", os.Getpid(), time.Now().UnixNano()%1_000_000)
	t.Cleanup(func() { admin.Exec("DROP SCHEMA IF EXISTS " + schema + " CASCADE") })
	l, err := postgres.Open(t.Context(), raw, &postgres.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	f := pagetest.New(t, l)
	l.Close()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	kv := fmt.Sprintf("postgres:host=%s port=%s dbname=%s user=%s sslmode=disable schema=%s", u.Hostname(), u.Port(), strings.TrimPrefix(u.Path, "/"), u.User.Username(), schema)
	if code, out, errs := runTranche(t, "ls", "--ledger", kv); code != 0 || !strings.Contains(out, f.ID) {
		t.Errorf("ls --ledger %q: exit %d\n%s%s", kv, code, out, errs)
	}
	bad := "postgres:host=127.0.0.1 port=1 dbname=x connect_timeout=2"
	if code, _, errs := runTranche(t, "ls", "--ledger", bad); code != 1 || !strings.Contains(errs, "127.0.0.1:1") || !strings.Contains(errs, "cannot be reached") {
		t.Errorf("ls --ledger %q: exit %d, %s; want 1 naming the server", bad, code, errs)
	}
}

// TestReadsLeaveNoFiles points ls, status and history at files that hold
// no ledger, in WAL mode as a ledger's is: another program's database,
// and a ledger whose schema page was overwritten. Each is refused, and
// the folder is left byte for byte as it was: no -wal or -shm file beside
// it (SQLite's WAL readers create both and cannot remove them).
func TestReadsLeaveNoFiles(t *testing.T) {
	foreign := func(t *testing.T, path string) {
		db, err := sql.Open("sqlite", "file:"+path)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		for _, q := range []string{`PRAGMA journal_mode = WAL`, `CREATE TABLE orders (id INTEGER PRIMARY KEY)`, `INSERT INTO orders VALUES (1)`} {
			if _, err := db.Exec(q); err != nil {
				t.Fatal(err)
			}
		}
	}
	damaged := func(t *testing.T, path string) {
		l, err := sqlite.Open(t.Context(), path, nil)
		if err != nil {
			t.Fatal(err)
		}
		pagetest.New(t, l)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		// Past the 100-byte header, page 1 holds the schema.
		if _, err := f.WriteAt(bytes.Repeat([]byte{0xa5}, 3000), 100); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	for _, tc := range []struct {
		name string
		make func(t *testing.T, path string)
	}{{"another program's database", foreign}, {"a damaged ledger", damaged}} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "ledger.db")
			tc.make(t, path)
			before := snapshot(t, filepath.Dir(path))
			if strings.Contains(before, "-wal") || strings.Contains(before, "-shm") {
				t.Fatalf("the WAL files are there before: %s", before)
			}
			for _, args := range [][]string{{"ls"}, {"status", "0123456789abcdef"}, {"history", "0123456789abcdef", "2026-01-10"}} {
				code, _, errs := runTranche(t, append(args, "--ledger", "sqlite:"+path)...)
				if code != 1 || !strings.Contains(errs, path) {
					t.Errorf("tranche %s: exit %d; want 1 naming the file:\n%s", args[0], code, errs)
				}
				if after := snapshot(t, filepath.Dir(path)); after != before {
					t.Fatalf("tranche %s changed the folder:\nbefore %s\nafter  %s", args[0], before, after)
				}
			}
		})
	}
}
