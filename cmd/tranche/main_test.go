package main

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tranche-dev/tranche/internal/pagetest"
	"github.com/tranche-dev/tranche/internal/schematest"
	"github.com/tranche-dev/tranche/internal/testskip"
	"github.com/tranche-dev/tranche/ledger/address"
	"github.com/tranche-dev/tranche/ledger/postgres"
	"github.com/tranche-dev/tranche/ledger/sqlite"
	"github.com/tranche-dev/tranche/ledger/sqlledger"
)

// ErrLedgerURL is what a refused address matches.
var ErrLedgerURL = address.ErrInvalid

// secret is the password in the URLs of the tests, which no message may
// hold.
const secret = "hunter2-SECRET"

// closedPort returns a loopback port nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestOpenLedgerErrors(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.db")
	refused := closedPort(t)
	empty := filepath.Join(dir, "empty.db")
	if f, err := os.Create(empty); err != nil {
		t.Fatal(err)
	} else {
		f.Close()
	}
	v3 := filepath.Join(dir, "v3.db")
	func() {
		db, err := sql.Open("sqlite", "file:"+v3)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if err := schematest.WriteV3(t.Context(), db, "INTEGER PRIMARY KEY", " WITHOUT ROWID", nil); err != nil {
			t.Fatal(err)
		}
	}()
	type test = struct {
		url  string
		want []string
		is   error
	}
	var pgNone, pgEmpty string // schemas of the test server: missing, and empty
	var pgTests []test
	var pgAdmin *sql.DB
	if raw := os.Getenv("TRANCHE_POSTGRES_URL"); raw != "" {
		pgAdmin = openAdmin(t, raw)
		suffix := fmt.Sprintf("%d_%d", os.Getpid(), time.Now().UnixNano()%1_000_000)
		pgNone, pgEmpty = "cmd_none_"+suffix, "cmd_empty_"+suffix
		if _, err := pgAdmin.Exec("CREATE SCHEMA " + pgEmpty); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			pgAdmin.Exec("DROP SCHEMA IF EXISTS " + pgEmpty + " CASCADE")
			pgAdmin.Exec("DROP SCHEMA IF EXISTS " + pgNone + " CASCADE")
		})
		pgTests = []test{
			{withSchema(t, raw, pgNone), []string{"schema " + pgNone + " does not exist", "a worker's open", "never by a command"}, sqlledger.ErrNoLedger},
			{withSchema(t, raw, pgEmpty), []string{"no table tranche_schema", "a worker's open", "never by a command"}, sqlledger.ErrNoLedger},
		}
	} else if os.Getenv("CI") == "true" {
		t.Fatal("TRANCHE_POSTGRES_URL is not set under CI (see ledger/postgres/testserver.sh)")
	}
	tests := []struct {
		url  string
		want []string
		is   error
	}{
		{"tranche.db", []string{`"tranche.db" is not an address`, "did you mean sqlite:tranche.db?"}, ErrLedgerURL},
		{"/var/lib/tranche.db", []string{"is not an address"}, ErrLedgerURL},
		{"host=db password=" + secret, []string{"is not an address", "password=xxxxx"}, ErrLedgerURL},
		{"postgres:host=db password=" + secret + " schema=", []string{"an empty schema", "password=xxxxx"}, ErrLedgerURL},
		{"postgress://bob:" + secret + "@db/x", []string{`unknown kind of ledger "postgress"`, "bob:xxxxx@db"}, ErrLedgerURL},
		{"mysql://bob:" + secret + "@db/x", []string{`unknown kind of ledger "mysql"`}, ErrLedgerURL},
		{"sqlite:", []string{`"sqlite:" has no path`}, ErrLedgerURL},
		{"sqlite://", []string{`has no path`}, ErrLedgerURL},
		{"sqlite://db.example/x.db", []string{`names host "db.example"`}, ErrLedgerURL},
		{"sqlite:x.db?mode=ro", []string{"takes no query"}, ErrLedgerURL},
		{"sqlite:///x.db?mode=ro", []string{"takes no user, query"}, ErrLedgerURL},
		{"sqlite:" + missing, []string{missing + ": no such file", "never by a command that reads"}, sqlledger.ErrNoLedger},
		{"sqlite://" + missing, []string{missing + ": no such file"}, sqlledger.ErrNoLedger},
		{"sqlite:" + dir, []string{"is a folder", filepath.Join(dir, "tranche.db")}, nil},
		{"sqlite:" + empty, []string{"the file is empty", "a worker's open", "never by a command"}, sqlledger.ErrNoLedger},
		{"sqlite:" + v3, []string{"version 3, older than version", "migrates none", "running a worker built with this release"}, nil},
		{"postgres://bob:" + secret + "@" + refused + "/x", []string{"cannot be reached", "bob:xxxxx@" + refused}, nil},
		{"postgresql://bob@" + refused + "/x?password=" + secret, []string{"cannot be reached", "password=xxxxx"}, nil},
		{"postgres://bob:" + secret + "@db:notaport/x", []string{"not a valid URL", "bob:xxxxx@db"}, ErrLedgerURL},
		{"postgres://bob:" + secret + "@" + refused + "/x?schema=", []string{"an empty schema"}, ErrLedgerURL},
		{"postgres://bob:" + secret + "@" + refused + "/x?sslmode=bogus", []string{"sslmode"}, nil},
	}
	tests = append(tests, pgTests...)
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			l, err := openLedger(ctx, tt.url)
			if err == nil {
				l.(io.Closer).Close()
				t.Fatal("opened; want an error")
			}
			msg := err.Error()
			if strings.Contains(msg, secret) {
				t.Errorf("the error holds the password: %s", msg)
			}
			for _, s := range tt.want {
				if !strings.Contains(msg, s) {
					t.Errorf("the error lacks %q: %s", s, msg)
				}
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("the error does not match %v: %s", tt.is, msg)
			}
		})
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("opening sqlite:%s created it: %v", missing, err)
	}
	if info, err := os.Stat(empty); err != nil || info.Size() != 0 {
		t.Errorf("opening sqlite:%s wrote to it: %v, %v", empty, info, err)
	}
	if v := sqliteVersions(t, v3); v != "1 2 3" {
		t.Errorf("opening sqlite:%s migrated it: versions %q; want 1 2 3", v3, v)
	}
	if pgAdmin != nil {
		var schemas, tables int
		if err := pgAdmin.QueryRow(`SELECT (SELECT count(*) FROM information_schema.schemata WHERE schema_name = $1),
			(SELECT count(*) FROM information_schema.tables WHERE table_schema IN ($2, $3))`, pgNone, pgNone, pgEmpty).Scan(&schemas, &tables); err != nil {
			t.Fatal(err)
		}
		if schemas != 0 || tables != 0 {
			t.Errorf("opening schemas %s and %s created %d schemas and %d tables; want none", pgNone, pgEmpty, schemas, tables)
		}
	}
}

// openAdmin opens a connection pool to the test server's database,
// closed when the test ends.
func openAdmin(t *testing.T, raw string) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", raw)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// withSchema returns the ledger URL raw with the parameter schema=NAME.
func withSchema(t *testing.T, raw, schema string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("schema", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// sqliteVersions returns the versions in tranche_schema of the SQLite
// file at path, read only.
func sqliteVersions(t *testing.T, path string) string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=query_only(1)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var v string
	if err := db.QueryRow(`SELECT group_concat(version, ' ') FROM (SELECT version FROM tranche_schema ORDER BY version)`).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// newLedgerFile makes a SQLite ledger in a new folder holding the
// fixture's backfill, and returns its path and the fixture.
func newLedgerFile(t *testing.T) (string, pagetest.Fixture) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ledger.db")
	l, err := sqlite.Open(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return path, pagetest.New(t, l)
}

func TestOpenLedgerForms(t *testing.T) {
	path, f := newLedgerFile(t)
	t.Chdir(filepath.Dir(path))
	for _, u := range []string{"sqlite:" + path, "sqlite://" + path, "sqlite://localhost" + path, "sqlite:ledger.db", "sqlite:./ledger.db", "SQLITE:ledger.db"} {
		l, err := openLedger(t.Context(), u)
		if err != nil {
			t.Errorf("%s: %v", u, err)
			continue
		}
		if _, err := l.Backfill(t.Context(), f.ID); err != nil {
			t.Errorf("%s: %v", u, err)
		}
		l.(io.Closer).Close()
	}
}

// TestOpenPostgres opens the ledger of the test server by URL, with the
// schema parameter, and checks that a wrong password is not echoed.
func TestOpenPostgres(t *testing.T) {
	raw := os.Getenv("TRANCHE_POSTGRES_URL")
	if raw == "" {
		testskip.Skip(t, testskip.PostgreSQL, "TRANCHE_POSTGRES_URL is not set: start a server with ledger/postgres/testserver.sh")
	}
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	// A worker creates the ledger; the command only opens it.
	created, err := postgres.Open(t.Context(), raw, &postgres.Options{Schema: "cmd_tranche_test"})
	if err != nil {
		t.Fatal(err)
	}
	created.Close()
	q := u.Query()
	q.Set("schema", "cmd_tranche_test")
	u.RawQuery = q.Encode()
	l, err := openLedger(t.Context(), u.String())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Backfills(t.Context()); err != nil {
		t.Error(err)
	}
	l.(io.Closer).Close()

	user := "tranche_wrong_" + fmt.Sprint(time.Now().UnixNano()%1e6)
	u.User = url.UserPassword(user, secret)
	_, err = openLedger(t.Context(), u.String())
	if err == nil || strings.Contains(err.Error(), secret) || !strings.Contains(err.Error(), user+":xxxxx@") {
		t.Errorf("a refused role: %v; want an error naming the URL with its password masked", err)
	}
}

func TestServeRefuses(t *testing.T) {
	path, _ := newLedgerFile(t)
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("  \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ledgerFlag := "--ledger=sqlite:" + path
	tests := []struct {
		name string
		args []string
		env  map[string]string
		code int
		want string
	}{
		{"writes without a token", []string{ledgerFlag, "--allow-writes"}, nil, 2, "--allow-writes needs a token"},
		{"a short token", []string{ledgerFlag, "--allow-writes"}, map[string]string{TokenEnv: "short"}, 2, "the write token has 5 characters; want 16 or more"},
		{"an empty token file", []string{ledgerFlag, "--allow-writes", "--token-file", tokenFile}, nil, 2, "is empty"},
		{"a missing token file", []string{ledgerFlag, "--token-file", filepath.Join(t.TempDir(), "nope")}, nil, 2, "no such file"},
		{"an argument", []string{ledgerFlag, "extra"}, nil, 2, `takes no arguments; got ["extra"]`},
		{"an unknown flag", []string{"--bogus"}, nil, 2, "flag provided but not defined: -bogus"},
		{"a bad name", []string{"--name", "nameless"}, nil, 2, "want IDENTITY=NAME"},
		{"no ledger", nil, nil, 2, "no ledger: give --ledger URL or set $TRANCHE_LEDGER"},
		{"zero cells", []string{ledgerFlag, "--max-cells", "0"}, nil, 2, "--max-cells 0"},
		{"a missing ledger", []string{"--ledger", "sqlite:" + path + ".missing"}, nil, 1, "no such file"},
		{"a bare path", []string{"--ledger", path}, nil, 2, "did you mean sqlite:" + path + "?"},
		{"a bad address", []string{ledgerFlag, "--addr", "127.0.0.1:notaport"}, nil, 1, "notaport"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("TRANCHE_LEDGER", "")
			t.Setenv(TokenEnv, "")
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			var stdout, stderr bytes.Buffer
			code := run(t.Context(), append([]string{"serve"}, tt.args...), nil, &stdout, &stderr)
			if code != tt.code || !strings.Contains(stderr.String(), tt.want) {
				t.Errorf("exit %d, stderr:\n%s\nwant exit %d and %q", code, stderr.String(), tt.code, tt.want)
			}
		})
	}
}

// startServe runs tranche serve with args until the test ends, and
// returns the address it serves.
func startServe(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	code := make(chan int, 1)
	go func() {
		code <- run(ctx, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...), nil, io.Discard, pw)
		pw.Close()
	}()
	lines := bufio.NewScanner(pr)
	if !lines.Scan() {
		cancel()
		t.Fatalf("serve exited %d before it served", <-code)
	}
	first := lines.Text()
	go io.Copy(io.Discard, pr) // the request log, if any
	t.Cleanup(func() {
		cancel()
		select {
		case c := <-code:
			if c != 0 {
				t.Errorf("serve exited %d after its context ended; want 0", c)
			}
		case <-time.After(10 * time.Second):
			t.Error("serve did not stop within 10s of its context's end")
		}
	})
	addr, _, ok := strings.Cut(strings.TrimPrefix(first, "tranche serve: http://"), "/ ")
	if !ok || !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Fatalf("serve's first line %q names no loopback address", first)
	}
	return "http://" + addr
}

func TestServe(t *testing.T) {
	path, f := newLedgerFile(t)
	const token = "the-operators-token-0123456789"
	t.Setenv(TokenEnv, token)
	base := startServe(t, "--ledger", "sqlite:"+path, "--allow-writes", "--name", f.DAG+"=events")
	res, err := http.Get(base + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || !strings.Contains(string(body), `<h2><a class="dag" href="/dags/`+f.DAG+`">events</a></h2>`) || !strings.Contains(string(body), f.ID) {
		t.Fatalf("index: %d\n%s", res.StatusCode, body)
	}
	for _, tt := range []struct {
		form   url.Values
		status int
	}{
		{url.Values{"token": {"wrong"}}, 403},
		{url.Values{"token": {token}, "stop_running": {"on"}}, 200}, // followed to the page
	} {
		res, err := http.PostForm(base+"/backfills/"+f.ID+"/cancel", tt.form)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != tt.status {
			t.Errorf("cancel with %v: %d; want %d", tt.form, res.StatusCode, tt.status)
		}
	}
	l, err := sqlite.Open(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	rec, err := l.Backfill(t.Context(), f.ID)
	if err != nil || !rec.Canceled || !rec.StopRunning {
		t.Errorf("after the page's cancel: %+v, %v; want canceled, stopping running partitions", rec, err)
	}
}

// TestCommands runs the subcommands tranchecli gives the command over a
// ledger named by $TRANCHE_LEDGER.
func TestCommands(t *testing.T) {
	path, f := newLedgerFile(t)
	t.Setenv("TRANCHE_LEDGER", "sqlite:"+path)
	tests := []struct {
		args []string
		code int
		out  string // in stdout
		err  string // in stderr
	}{
		{[]string{"ls"}, 0, f.ID, ""},
		{[]string{"ls", "--format", "json"}, 0, `"` + f.ID + `"`, ""},
		{[]string{"status", f.ID}, 0, "2026-01  . . . - X . . . > X # # # #", ""},
		{[]string{"history", f.ID, "2026-01-10"}, 0, "second try", ""},
		{[]string{"status", "nope"}, 1, "", "nope"},
		{[]string{"bogus"}, 2, "", `unknown command "bogus"`},
		{[]string{"help"}, 0, "serve", ""},
		{nil, 2, "", "serve"},
		{[]string{"help", "serve"}, 0, "-allow-writes", ""},
		{[]string{"ls", "--ledger", "sqlite:" + path + ".missing"}, 1, "", "no such file"},
		// --ledger before the subcommand, as a global flag.
		{[]string{"--ledger", "sqlite:" + path + ".missing", "ls"}, 1, "", "no such file"},
		{[]string{"--ledger=sqlite:" + path, "status", f.ID}, 0, "2026-01  . . . - X . . . > X # # # #", ""},
		{[]string{"--ledger", "sqlite:" + path + ".missing", "serve", "--addr", "127.0.0.1:0"}, 1, "", "no such file"},
		{[]string{"serve", "--bogus"}, 2, "", "tranche serve: flag provided but not defined: -bogus\nusage: tranche serve [flags] (see 'tranche help serve')\n"},
		{[]string{"cancel", f.ID}, 0, "", ""},
		{[]string{"resume", f.ID}, 0, "", ""},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(t.Context(), tt.args, strings.NewReader(""), &stdout, &stderr)
			if code != tt.code || !strings.Contains(stdout.String(), tt.out) || !strings.Contains(stderr.String(), tt.err) {
				t.Errorf("exit %d; want %d\nstdout:\n%s\nstderr:\n%s\nwant %q in stdout, %q in stderr", code, tt.code, stdout.String(), stderr.String(), tt.out, tt.err)
			}
		})
	}
	if _, err := os.Stat(path + ".missing"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ls created the missing ledger: %v", err)
	}
}
