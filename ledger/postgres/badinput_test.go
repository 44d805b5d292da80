package postgres_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/ledgertest"
	"github.com/tranche-dev/tranche/ledger/postgres"
	"github.com/tranche-dev/tranche/ledger/sqlledger"
)

var day0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func day(i int) tranche.TimePartition {
	return tranche.PartitionOf(tranche.Day, day0.AddDate(0, 0, i))
}

func claimReq(worker string, ps ...tranche.TimePartition) ledger.ClaimRequest {
	return ledger.ClaimRequest{DAG: "dag-bad-input", Backfill: "bf", Worker: worker, RunID: "run",
		Partitions: ps, Lease: time.Minute, Policy: ledger.RerunFailed}
}

// wantError checks that err matches kind (when not nil) and says each of
// says, and that it never shows the password.
func wantError(t *testing.T, err error, kind error, says ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error; want one matching %v", kind)
	}
	t.Logf("error: %v", err)
	if kind != nil && !errors.Is(err, kind) {
		t.Errorf("error %q; want one matching %v", err, kind)
	}
	for _, s := range says {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q; want it to say %q", err, s)
		}
	}
	if strings.Contains(err.Error(), "s3cr3t") {
		t.Errorf("error %q shows the password", err)
	}
}

// tables lists the tranche_ tables of a schema.
func tables(t *testing.T, db *sql.DB, schema string) []string {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), `SELECT tablename FROM pg_tables WHERE schemaname = $1 AND tablename LIKE 'tranche%' ORDER BY 1`, schema)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		rows.Scan(&s)
		out = append(out, s)
	}
	return out
}

func TestBadConnectionString(t *testing.T) {
	for _, s := range []string{
		"postgres://tranche:s3cr3t@db.internal:notaport/warehouse",
		"host=db.internal port=5432 password=s3cr3t dbname",
		"mysql://tranche:s3cr3t@db.internal/warehouse",
		"postgres://tranche:s3cr3t@db.internal/warehouse?sslmode=sometimes",
	} {
		_, err := postgres.Open(t.Context(), s, nil)
		wantError(t, err, nil, "postgres ledger", "connection string is not valid", "postgres://user@host:5432/database")
	}
}

func TestServerUnreachable(t *testing.T) {
	// A port nothing listens on: one just closed.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	url := fmt.Sprintf("postgres://tranche:s3cr3t@127.0.0.1:%d/warehouse?sslmode=disable&connect_timeout=5", port)
	start := time.Now()
	_, err = postgres.Open(t.Context(), url, nil)
	wantError(t, err, postgres.ErrConnect, fmt.Sprintf("tranche@127.0.0.1:%d/warehouse", port), "connecting", "cannot be reached", "check the host and port")
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("Open gave up after %v", took)
	}
}

func TestUnknownDatabase(t *testing.T) {
	cfg, err := pgx.ParseConfig(serverURL(t))
	if err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("postgres://%s@%s:%d/no_such_database?sslmode=disable", cfg.User, cfg.Host, cfg.Port)
	_, err = postgres.Open(t.Context(), url, nil)
	wantError(t, err, postgres.ErrConnect, "database no_such_database does not exist", "createdb no_such_database")
}

// role creates a login role without privileges, dropped when the test
// ends, and returns its name and the server's URL for it.
func role(t *testing.T, url string) (string, string) {
	t.Helper()
	db := admin(t, url)
	name := fmt.Sprintf("tranche_role_%d", schemaSeq.Add(1)+time.Now().UnixNano()%1_000_000)
	if _, err := db.ExecContext(t.Context(), "CREATE ROLE "+name+" LOGIN"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		db.ExecContext(ctx, "DROP OWNED BY "+name)
		db.ExecContext(ctx, "DROP ROLE "+name)
	})
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	return name, fmt.Sprintf("postgres://%s@%s:%d/%s?sslmode=disable", name, cfg.Host, cfg.Port, cfg.Database)
}

// TestWithoutPermission opens a ledger as a role that may use a schema
// but not create tables in it, and then one that may not create the
// schema: refused, naming the role, the schema and what to grant, with
// nothing written. Once the schema's owner has created the tables and
// granted the role the use of them, the role opens the ledger and works.
func TestWithoutPermission(t *testing.T) {
	url := serverURL(t)
	db := admin(t, url)
	name, roleURL := role(t, url)
	schema := freshSchema(t, url)
	if _, err := db.ExecContext(t.Context(), "GRANT USAGE ON SCHEMA "+schema+" TO "+name); err != nil {
		t.Fatal(err)
	}
	_, err := postgres.Open(t.Context(), roleURL, &postgres.Options{Schema: schema})
	wantError(t, err, postgres.ErrPermission, "role "+name, "schema "+schema, "grant it CREATE on the schema", "nothing was written", "permission denied")
	if got := tables(t, db, schema); len(got) != 0 {
		t.Errorf("a refused Open left tables %v", got)
	}

	_, err = postgres.Open(t.Context(), roleURL, &postgres.Options{Schema: "tranche_not_there"})
	wantError(t, err, postgres.ErrPermission, "creating schema tranche_not_there", "may not create schema tranche_not_there", "CREATE on the database", "permission denied")
	var n int
	db.QueryRowContext(t.Context(), `SELECT count(*) FROM pg_namespace WHERE nspname = 'tranche_not_there'`).Scan(&n)
	if n != 0 {
		t.Errorf("a refused Open created the schema")
	}

	// The owner creates the tables once; the role needs no more than
	// the use of them.
	owner, err := postgres.Open(t.Context(), url, &postgres.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	owner.Close()
	for _, grant := range []string{"SELECT, INSERT, UPDATE, DELETE ON ALL TABLES", "USAGE ON ALL SEQUENCES"} {
		if _, err := db.ExecContext(t.Context(), "GRANT "+grant+" IN SCHEMA "+schema+" TO "+name); err != nil {
			t.Fatal(err)
		}
	}
	l, err := postgres.Open(t.Context(), roleURL, &postgres.Options{Schema: schema})
	if err != nil {
		t.Fatalf("Open as a role that may use the tables = %v", err)
	}
	defer l.Close()
	lease, err := l.Claim(t.Context(), claimReq("w", day(0)))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Finish(t.Context(), lease, []ledger.Outcome{{State: ledger.StateSucceeded}}); err != nil {
		t.Fatal(err)
	}
	next := ledger.NextRequest{DAG: "dag-bad-input", Backfill: "bf", Worker: "w", Want: 1, Lease: time.Minute,
		Jobs: []ledger.Job{{RunID: "r", Partitions: []tranche.TimePartition{day(2)}}}}
	grants, err := l.ClaimNext(t.Context(), next)
	if err != nil || grants[0].Lease == nil {
		t.Fatalf("ClaimNext as a role that may use the tables = %v, %v", grants, err)
	}
	if err := l.Release(t.Context(), grants[0].Lease); err != nil {
		t.Fatalf("Release as a role that may use the tables = %v", err)
	}

	// A privilege taken back fails the call, naming it, and writes
	// nothing.
	if _, err := db.ExecContext(t.Context(), "REVOKE INSERT ON "+schema+".tranche_attempts FROM "+name); err != nil {
		t.Fatal(err)
	}
	_, err = l.Claim(t.Context(), claimReq("w", day(1)))
	wantError(t, err, postgres.ErrPermission, "claiming partition "+day(1).Key(), "SELECT, INSERT, UPDATE and DELETE")
	if h, err := l.History(t.Context(), "dag-bad-input", day(1).Start); err != nil || len(h) != 0 {
		t.Errorf("History after a refused claim = %v, %v; want nothing", h, err)
	}
}

func TestNewerSchemaRefused(t *testing.T) {
	url := serverURL(t)
	schema := freshSchema(t, url)
	l, err := postgres.Open(t.Context(), url, &postgres.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Claim(t.Context(), claimReq("w", day(0))); err != nil {
		t.Fatal(err)
	}
	l.Close()
	db := admin(t, url)
	var before int
	if err := db.QueryRowContext(t.Context(), "SELECT count(*) FROM "+schema+".tranche_schema").Scan(&before); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(t.Context(), "INSERT INTO "+schema+".tranche_schema (version, description, applied_ms) VALUES (99, 'from the future', 0)"); err != nil {
		t.Fatal(err)
	}
	_, err = postgres.Open(t.Context(), url, &postgres.Options{Schema: schema})
	se, ok := errors.AsType[*sqlledger.SchemaError](err)
	if !ok || se.Found != 99 || se.Known != sqlledger.SchemaVersion {
		t.Fatalf("Open of a newer schema = %v; want a *SchemaError found 99, known %d", err, sqlledger.SchemaVersion)
	}
	wantError(t, err, nil, "schema "+schema, "version 99", fmt.Sprintf("newer than version %d,", sqlledger.SchemaVersion))
	var versions int
	db.QueryRowContext(t.Context(), "SELECT count(*) FROM "+schema+".tranche_schema").Scan(&versions)
	if want := before + 1; versions != want {
		t.Errorf("tranche_schema holds %d versions after a refused Open; want the %d it had", versions, want)
	}
}

// TestConcurrentOpen opens a fresh schema from many goroutines at once,
// each with its own connections, as workers starting together do: the
// advisory lock makes them migrate one after the other.
func TestConcurrentOpen(t *testing.T) {
	url := serverURL(t)
	schema := fmt.Sprintf("t_open_%d", time.Now().UnixNano()%1_000_000_000)
	db := admin(t, url)
	t.Cleanup(func() { db.ExecContext(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE") })
	const n = 12
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			l, err := postgres.Open(t.Context(), url, &postgres.Options{Schema: schema})
			if err == nil {
				_, err = l.Claim(t.Context(), claimReq(fmt.Sprintf("w%d", i), day(i)))
				l.Close()
			}
			errs[i] = err
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("worker %d: %v", i, err)
		}
	}
	var versions int
	if err := db.QueryRowContext(t.Context(), "SELECT count(*) FROM "+schema+".tranche_schema").Scan(&versions); err != nil || versions != len(sqlledger.SchemaVersions()) {
		t.Errorf("tranche_schema holds %d versions, %v; want %d, each applied once", versions, err, len(sqlledger.SchemaVersions()))
	}
}

// proxy is a TCP proxy to the test server that the test can cut off, as
// a server that goes away and comes back.
type proxy struct {
	t      *testing.T
	target string
	ln     net.Listener
	addr   string
	mu     sync.Mutex
	conns  []net.Conn
}

func newProxy(t *testing.T, target string) *proxy {
	p := &proxy{t: t, target: target}
	p.listen("127.0.0.1:0")
	t.Cleanup(p.down)
	return p
}

func (p *proxy) listen(addr string) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		p.t.Fatal(err)
	}
	p.mu.Lock()
	p.ln, p.addr = ln, ln.Addr().String()
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, s)
			p.mu.Unlock()
			go func() { io.Copy(s, c); s.Close() }()
			go func() { io.Copy(c, s); c.Close() }()
		}
	}()
}

// down cuts every connection and stops listening: the server is gone.
func (p *proxy) down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// up listens again on the same address.
func (p *proxy) up() { p.listen(p.addr) }

// TestServerGoesAway cuts a ledger off from the server between calls and
// in the middle of a lease: each call fails with an error saying what
// happened (ErrConnectionLost while connections break, ErrConnect while
// the server cannot be reached), nothing is half-written, the ledger
// reconnects when the server is back, and the partition whose worker was
// cut off is taken over once its lease expires.
func TestServerGoesAway(t *testing.T) {
	url := serverURL(t)
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	p := newProxy(t, fmt.Sprintf("%s:%d", cfg.Host, cfg.Port))
	proxied := fmt.Sprintf("postgres://%s@%s/%s?sslmode=disable&connect_timeout=3", cfg.User, p.addr, cfg.Database)
	schema := freshSchema(t, url)
	clock := ledgertest.NewClock(day0)
	cut, err := postgres.Open(t.Context(), proxied, &postgres.Options{Schema: schema, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer cut.Close()
	other, err := postgres.Open(t.Context(), url, &postgres.Options{Schema: schema, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()

	lease, err := cut.Claim(t.Context(), claimReq("cut-off", day(0)))
	if err != nil {
		t.Fatal(err)
	}
	p.down()
	// Every call fails, with an error that says the server went away or
	// cannot be reached, and the ledger as the other worker sees it is
	// unchanged.
	for i := 1; i <= 3; i++ {
		_, err := cut.Claim(t.Context(), claimReq("cut-off", day(i)))
		var lost, unreachable = errors.Is(err, postgres.ErrConnectionLost), errors.Is(err, postgres.ErrConnect)
		if !lost && !unreachable {
			t.Errorf("Claim with the server gone = %v; want an error matching ErrConnectionLost or ErrConnect", err)
		}
		t.Logf("Claim %d: %v", i, err)
	}
	err = cut.Finish(t.Context(), lease, []ledger.Outcome{{State: ledger.StateSucceeded}})
	if !errors.Is(err, postgres.ErrConnectionLost) && !errors.Is(err, postgres.ErrConnect) {
		t.Errorf("Finish with the server gone = %v; want an error matching ErrConnectionLost or ErrConnect", err)
	}
	for i := 1; i <= 3; i++ {
		if h, err := other.History(t.Context(), "dag-bad-input", day(i).Start); err != nil || len(h) != 0 {
			t.Errorf("History of %s = %v, %v; want nothing written", day(i).Key(), h, err)
		}
	}
	h, err := other.History(t.Context(), "dag-bad-input", day(0).Start)
	if err != nil || len(h) != 1 || h[0].State != ledger.StateRunning {
		t.Fatalf("History of %s = %v, %v; want the cut-off worker's attempt, still running", day(0).Key(), h, err)
	}
	// Held until its lease expires, then taken over.
	if _, err := other.Claim(t.Context(), claimReq("other", day(0))); !errors.Is(err, ledger.ErrNotClaimable) {
		t.Errorf("Claim within the lease = %v; want ErrNotClaimable", err)
	}
	clock.Advance(time.Minute)
	taken, err := other.Claim(t.Context(), claimReq("other", day(0)))
	if err != nil {
		t.Fatalf("Claim after the lease expired = %v", err)
	}
	if err := other.Finish(t.Context(), taken, []ledger.Outcome{{State: ledger.StateSucceeded}}); err != nil {
		t.Fatal(err)
	}

	// The server comes back: the cut-off ledger reconnects, and its
	// late Finish is fenced.
	p.up()
	var back error
	for range 20 {
		if _, back = cut.Revision(t.Context(), "dag-bad-input"); back == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if back != nil {
		t.Fatalf("the ledger did not reconnect: %v", back)
	}
	if err := cut.Finish(t.Context(), lease, []ledger.Outcome{{State: ledger.StateSucceeded}}); !errors.Is(err, tranche.ErrFenced) {
		t.Errorf("late Finish = %v; want ErrFenced", err)
	}
	h, _ = other.History(t.Context(), "dag-bad-input", day(0).Start)
	if len(h) != 2 || h[0].State != ledger.StateFailed || !strings.Contains(h[0].Err, "taken over by worker other") || h[1].State != ledger.StateSucceeded {
		t.Errorf("History of %s:\n%s\nwant the cut-off attempt taken over, the other worker's succeeded", day(0).Key(), formatHistory(h))
	}
	if _, err := cut.Claim(t.Context(), claimReq("cut-off", day(5))); err != nil {
		t.Errorf("Claim after the server came back = %v", err)
	}
}
