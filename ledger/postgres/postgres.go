// Package postgres is tranche's shared ledger: a [ledger.Ledger] in a
// PostgreSQL database, through which workers on any number of machines
// share one backfill, each partition landing exactly once. It runs on
// github.com/jackc/pgx/v5 through database/sql, and lives in its own
// module so that tranche itself does not carry the driver.
//
//	ledger, err := postgres.Open(ctx, "postgres://tranche@db.internal/warehouse", nil)
//	if err != nil {
//		return err // says what failed, never showing the password
//	}
//	defer ledger.Close()
//	b := &backfill.Backfill{DAG: dag, Window: w, Ledger: ledger}
//
// Scaling out is running the same program N times against the same
// connection string: a backfill's workers need no other coordination.
//
// # Claims, leases and fencing
//
// Every claim and transition is one transaction. A claim locks the rows
// of the partitions it asks for with FOR UPDATE SKIP LOCKED, so it never
// waits for another claim of the same partitions: a partition another
// transaction is claiming counts as held. Leases are judged by the
// database's clock (clock_timestamp()), read inside the transaction, so
// clock skew between the workers' machines can neither expire a live
// lease nor keep a dead one. A heartbeat or a finish changes a partition
// only while the lease's worker still runs the lease's attempt; a worker
// that lost its partition to a newer attempt gets
// [github.com/tranche-dev/tranche.ErrFenced] and records nothing.
//
// Claims and finishes of one DAG never take turns: a change's revision
// comes from a sequence, under an advisory lock that writers hold shared
// and only [sqlledger.Ledger.Revision], when a backfill plans, takes
// alone. A claim of one partition never claimed before is one statement,
// and so is a finish of one partition: 16 worker processes record about
// 1,300 partitions a second on 2 cores that also run the server (see
// BENCHMARKS.md). The workers of one backfill that ask for their next
// jobs through [sqlledger.Ledger.ClaimNext] take turns on the backfill's
// cursor instead of racing for the same partitions: a claim of 16 fresh
// jobs is four statements, BEGIN and COMMIT among them.
//
// # Schema
//
// The tables are github.com/tranche-dev/tranche/ledger/sqlledger's, shared with
// the SQLite ledger, in [Options.Schema] or the connection's current
// schema. [Open] creates or migrates them in one transaction under an
// advisory lock, so that workers starting at once migrate one after the
// other; a schema that a newer release of tranche migrated is refused
// with a [*sqlledger.SchemaError]. With [Options.Existing], Open creates
// and migrates nothing, and refuses a database without the ledger or
// with an older one, which the workers' next Open creates or upgrades. The role that opens the ledger first
// needs the CREATE privilege on the schema; once the tables exist,
// workers need only SELECT, INSERT, UPDATE and DELETE on them (a release
// deletes the attempts it withdraws) and USAGE on the sequence
// tranche_revisions. A migration that adds a table (version 6 adds
// tranche_cursors) needs the workers' privileges granted on it too,
// unless the schema's default privileges give them.
//
// # Destinations
//
// [NewDestination] writes assets' partitions into tables of the ledger's
// own database, with COPY, committing each partition's rows in the
// transaction that records its success, as river's JobCompleteTx
// completes a job: exactly once, whatever happens to the worker, its
// connection or the server. [OpenDestination] writes into another
// database, each write committing on its own with a fencing check. The
// tables, the checks and the guarantees are
// github.com/tranche-dev/tranche/destination/sqldest's.
//
// # Failures
//
// A wrong connection string, a server that cannot be reached or refuses
// the role, a role without the privileges the ledger needs: each is an
// error that says so, matching [ErrConnect] or [ErrPermission]. A
// connection lost mid-transaction (the server restarted, or the
// connection was terminated) fails that call with an error matching
// [ErrConnectionLost], and the transaction is rolled back: nothing is
// ever half-written. A claim whose outcome the worker could not learn
// leaves its partitions claimed only until the lease expires, when the
// next worker takes them over; the ledger's history shows the takeover.
// The next call reconnects.
package postgres

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/address"
	"github.com/tranche-dev/tranche/ledger/sqlledger"
)

// Options configure [Open]. A nil *Options means the defaults.
type Options struct {
	// Schema is the PostgreSQL schema that holds the ledger's tables;
	// Open creates it if it does not exist. "" means the connection's
	// current schema: the first existing schema of its search_path,
	// usually public.
	Schema string

	// Now, when not nil, is the clock that judges leases and stamps
	// attempts in place of the database's. Tests inject one; workers
	// should keep the database's, the one clock they all share.
	Now func() time.Time

	// MaxConns bounds the connections the ledger opens to the server;
	// 0 means [DefaultMaxConns]. Every worker process opens its own, so
	// the server's max_connections must exceed the sum.
	MaxConns int

	// Existing makes Open open only an existing ledger at this release's
	// schema version, creating and migrating nothing: a missing schema,
	// or one without the ledger's tables, is refused with an error
	// matching [sqlledger.ErrNoLedger], a ledger at an older version with
	// a [*sqlledger.SchemaError], and nothing is written. Tools that read
	// or amend the ledger of workers set it, so that pointing them at the
	// wrong database creates no tables there; a worker's Open, without
	// it, creates or upgrades the ledger. [OpenDestination] ignores it.
	Existing bool
}

// DefaultMaxConns is the connection limit of Options.MaxConns zero.
const DefaultMaxConns = 4

// Errors of a PostgreSQL ledger beside sqlledger's kinds, matched with
// errors.Is; the message says what went wrong and what to do.
var (
	// ErrConnect: the server could not be reached, or refused the
	// connection (an unknown database, a failed authentication, no
	// connection slot left, a server starting up or shutting down).
	ErrConnect = errors.New("postgres: cannot connect to the server")

	// ErrConnectionLost: an open connection broke mid-call (the server
	// restarted or shut down, or the connection was terminated), or had
	// no reply before the call's deadline, which closes it (the network
	// went silent; the error matches context.DeadlineExceeded too). The
	// call's transaction was rolled back, or, if it was committing, may
	// have committed.
	ErrConnectionLost = errors.New("postgres: connection to the server lost")

	// ErrPermission: the role lacks a privilege the ledger needs.
	ErrPermission = errors.New("postgres: permission denied")
)

// Ledger is a [ledger.Ledger] in a PostgreSQL database. Its methods are
// those of [sqlledger.Ledger]; Close it after its last use.
type Ledger struct {
	*sqlledger.Ledger
	db       *sql.DB
	schema   string
	desc     string                            // user@host:port/database and the schema
	classify func(error) (error, string, bool) // the dialect's, for destinations sharing the database
}

var (
	_ ledger.Ledger       = (*Ledger)(nil)
	_ ledger.Reader       = (*Reader)(nil)
	_ ledger.LatestReader = (*Reader)(nil)
	_ ledger.BriefReader  = (*Reader)(nil)
	_ ledger.BriefReader  = (*Ledger)(nil)
)

// Open connects to the database of connString, a PostgreSQL URL
// (postgres://user:password@host:port/database?sslmode=...) or key=value
// string as libpq and pgx accept them, and creates or migrates the
// ledger's tables. Unset PG* environment variables fill in what the
// string leaves out, as with psql. It refuses, with an error naming the
// server, the database and the schema (never the password) and writing
// nothing: a connection string that does not parse, a server it cannot
// reach or that refuses it ([ErrConnect]), a role that may not create the
// tables ([ErrPermission]), and tables a newer release of tranche
// migrated ([*sqlledger.SchemaError]). With [Options.Existing] it creates
// and migrates nothing, and refuses too a schema without the ledger
// ([sqlledger.ErrNoLedger]) and an older one ([*sqlledger.SchemaError]).
//
// Unless the connection string sets them, the ledger's connections name
// themselves application_name=tranche (in pg_stat_activity), connect
// within 15s, and are ended by the server after 15s idle inside a
// transaction (idle_in_transaction_session_timeout), so that a worker
// paused mid-transaction cannot hold rows locked for long.
func Open(ctx context.Context, connString string, opts *Options) (*Ledger, error) {
	existing := opts != nil && opts.Existing
	c, err := connect(ctx, "postgres ledger", connString, opts, existing, false)
	if err != nil {
		return nil, err
	}
	l, err := sqlledger.Open(ctx, c.db, sqlledger.Options{Dialect: c.dialect, Name: c.name, Now: c.opts.Now, Existing: existing})
	if err != nil {
		return nil, c.fail(ctx, "opening", err)
	}
	return &Ledger{Ledger: l, db: c.db, schema: c.opts.Schema, desc: c.desc, classify: c.dialect.Classify}, nil
}

// A Reader is a PostgreSQL ledger opened for reading only
// ([OpenReader]): a [ledger.Reader] and a [ledger.LatestReader], with no
// method that writes. Its methods are those of [sqlledger.Reader]; Close
// it after its last use.
type Reader struct {
	*sqlledger.Reader
	db *sql.DB
}

// OpenReader connects to the ledger of connString for reading only: as
// [Options.Existing], it creates and migrates nothing and refuses a
// schema without the ledger, and its sessions are read-only
// (default_transaction_read_only), so that a role allowed only SELECT on
// the ledger's tables, or a standby, can read it. It refuses what [Open]
// refuses, saying so alike; opts may be nil.
func OpenReader(ctx context.Context, connString string, opts *Options) (*Reader, error) {
	c, err := connect(ctx, "postgres ledger", connString, opts, true, true)
	if err != nil {
		return nil, err
	}
	r, err := sqlledger.OpenReader(ctx, c.db, sqlledger.Options{Dialect: c.dialect, Name: c.name, Now: c.opts.Now})
	if err != nil {
		return nil, c.fail(ctx, "opening", err)
	}
	return &Reader{Reader: r, db: c.db}, nil
}

// Close closes the reader's connections. A reader must not be used
// after. Close of a nil *Reader does nothing and returns nil, as
// [Ledger.Close].
func (r *Reader) Close() error {
	if r == nil {
		return nil
	}
	return errors.Join(r.Reader.Close(), r.db.Close())
}

// OpenLedger opens the PostgreSQL ledger at addr, an address of kind
// "postgres" ([address.Parse]: its Conn and its Schema), for access:
// [address.AccessRead] as [OpenReader] (a *Reader, which has no method
// that writes), [address.AccessWrite] as [Options.Existing], and
// [address.AccessCreate] as a worker's Open, creating or migrating the
// ledger (a *Ledger). It is an [address.OpenFunc], for programs that
// open ledgers by address (tranchecli.Program.OpenLedger).
func OpenLedger(ctx context.Context, addr address.Address, access address.Access) (ledger.Reader, error) {
	if addr.Scheme != address.SchemePostgres {
		return nil, fmt.Errorf("tranche: ledger %s: %w: this program opens PostgreSQL ledgers only (postgres://…)", addr, address.ErrInvalid)
	}
	opts := Options{Schema: addr.Schema}
	switch access {
	case address.AccessRead:
		r, err := OpenReader(ctx, addr.Conn, &opts)
		if err != nil {
			return nil, err
		}
		return r, nil
	case address.AccessWrite:
		opts.Existing = true
	case address.AccessCreate:
	default:
		return nil, fmt.Errorf("tranche: postgres ledger: unknown access %v", access)
	}
	l, err := Open(ctx, addr.Conn, &opts)
	if err != nil {
		return nil, err
	}
	return l, nil
}

// conn is a database connected to by [Open] or [OpenDestination].
type conn struct {
	name, desc string // "postgres ledger " + desc; user@host:port/database and the schema
	opts       Options
	db         *sql.DB
	dialect    *sqlledger.Dialect
}

// fail closes the database after a failure of op, and explains it.
func (c *conn) fail(ctx context.Context, op string, err error) error {
	c.db.Close()
	if _, ok := errors.AsType[*sqlledger.Error](err); ok || errors.Is(err, ctx.Err()) && ctx.Err() != nil {
		return err
	}
	if _, ok := errors.AsType[*sqlledger.SchemaError](err); ok || errors.Is(err, sqlledger.ErrNoLedger) {
		return err
	}
	kind, hint, _ := c.dialect.Classify(err)
	return &sqlledger.Error{Name: c.name, Op: op, Class: kind, Hint: hint, Err: err}
}

// connect checks the options and the connection string, connects, and
// creates the schema if missing, or with existing refuses it; what names
// it in errors ("postgres ledger"). With readOnly its sessions are
// read-only.
func connect(ctx context.Context, what, connString string, opts *Options, existing, readOnly bool) (*conn, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.MaxConns == 0 {
		o.MaxConns = DefaultMaxConns
	}
	if o.MaxConns < 0 {
		return nil, fmt.Errorf("tranche: %s: %d connections; want 1 or more (0 means %d)", what, o.MaxConns, DefaultMaxConns)
	}
	if strings.ContainsRune(o.Schema, 0) {
		return nil, fmt.Errorf("tranche: %s: schema %q contains a NUL byte", what, o.Schema)
	}
	cfg, err := pgx.ParseConfig(connString)
	if err != nil {
		// pgx's message quotes the string with its password redacted.
		return nil, fmt.Errorf("tranche: %s: the connection string is not valid; want a URL such as postgres://user@host:5432/database or key=value pairs such as host=db dbname=warehouse: %w", what, err)
	}
	desc := describe(cfg, o.Schema)
	name := what + " " + desc
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = 15 * time.Second
	}
	setDefault(cfg.RuntimeParams, "application_name", "tranche")
	// A worker stopped mid-transaction (a paused process, a network
	// partition) must not hold its rows locked for long.
	setDefault(cfg.RuntimeParams, "idle_in_transaction_session_timeout", "15s")
	// The ledger's queries are short, and the counts of a backfill's
	// grid, a SELECT per cell, cost enough for the planner to compile
	// them (jit_above_cost): 86 s of compiling for a grid of 1,369 cells
	// read in 30 ms.
	setDefault(cfg.RuntimeParams, "jit", "off")
	if o.Schema != "" {
		cfg.RuntimeParams["search_path"] = quoteIdent(o.Schema)
	}
	if readOnly {
		// Nothing but reads, whatever the role may do.
		cfg.RuntimeParams["default_transaction_read_only"] = "on"
	}

	db := stdlib.OpenDB(*cfg)
	db.SetMaxOpenConns(o.MaxConns)
	db.SetMaxIdleConns(o.MaxConns)
	db.SetConnMaxIdleTime(5 * time.Minute)
	c := &conn{name: name, desc: desc, opts: o, db: db, dialect: dialectFor(cfg, o.Schema)}
	if err := db.PingContext(ctx); err != nil {
		return nil, c.fail(ctx, "connecting", err)
	}
	if o.Schema != "" && existing {
		var found bool
		if err := db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, o.Schema).Scan(&found); err != nil {
			return nil, c.fail(ctx, "reading schema "+o.Schema, err)
		}
		if !found {
			c.db.Close()
			return nil, fmt.Errorf("tranche: %s: %w: schema %s does not exist in database %s; a ledger is created by a worker's open (a program running a backfill), never by a command that reads or amends one; nothing was created",
				name, sqlledger.ErrNoLedger, o.Schema, cfg.Database)
		}
	} else if o.Schema != "" {
		if err := createSchema(ctx, db, o.Schema); err != nil {
			return nil, c.fail(ctx, "creating schema "+o.Schema, err)
		}
	}
	return c, nil
}

// Close closes the ledger's connections. A ledger must not be used after.
// Close of a nil *Ledger does nothing and returns nil, so that a deferred
// Close placed before the check of Open's error hides nothing: the error
// of Open is what the caller sees.
func (l *Ledger) Close() error {
	if l == nil {
		return nil
	}
	return errors.Join(l.Ledger.Close(), l.db.Close())
}

func setDefault(m map[string]string, key, value string) {
	if _, ok := m[key]; !ok {
		m[key] = value
	}
}

// describe names a database as errors give it: user@host:port/database,
// and the schema; never the password.
func describe(cfg *pgx.ConnConfig, schema string) string {
	host := cfg.Host
	if strings.HasPrefix(host, "/") {
		host = "[" + host + "]" // a Unix socket's folder
	}
	s := fmt.Sprintf("%s@%s:%d/%s", cfg.User, host, cfg.Port, cfg.Database)
	if schema != "" {
		s += " schema " + schema
	}
	return s
}

// quoteIdent quotes a PostgreSQL identifier.
func quoteIdent(s string) string {
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}

// lockClass is the first key of the ledger's advisory locks on its
// schema, "tran"; revisionClass, "revs", of those on a DAG's revisions.
const (
	lockClass     = 0x7472616e
	revisionClass = 0x72657673
)

// revisionLock names the advisory lock on the revisions of the DAG whose
// id is $1, in the connection's current schema.
var revisionLock = fmt.Sprintf("%d, hashtext(current_schema() || '.' || CAST(CAST($1 AS BIGINT) AS TEXT))", revisionClass)

// createSchema creates the schema unless it exists, under the advisory
// lock of migrations: CREATE SCHEMA IF NOT EXISTS would need the
// privilege to create it even when it exists, and races with itself.
func createSchema(ctx context.Context, db *sql.DB, schema string) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var exists bool
	if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, schema).Scan(&exists); err != nil {
		return err
	}
	if exists {
		return nil
	}
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1, hashtext($2))`, lockClass, schema); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `CREATE SCHEMA IF NOT EXISTS `+quoteIdent(schema)); err != nil {
		return err
	}
	return tx.Commit()
}

// widthBucket is the PostgreSQL dialect's BucketOf: width_bucket over an
// array of the bounds, which it searches by bisection.
func widthBucket(expr, bounds string) string {
	return "width_bucket(" + expr + ", CAST(" + bounds + " AS BIGINT[]))"
}

// dialectFor returns the PostgreSQL dialect, its hints naming the role
// and the schema of cfg.
func dialectFor(cfg *pgx.ConnConfig, schema string) *sqlledger.Dialect {
	where := "the connection's current schema"
	if schema != "" {
		where = "schema " + schema
	}
	return &sqlledger.Dialect{
		Name:     "postgres",
		BucketOf: widthBucket,
		Now:      "CAST(FLOOR(EXTRACT(EPOCH FROM clock_timestamp()) * 1000) AS BIGINT)",
		IDColumn: "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY",
		// Claims never wait for each other: a partition row another
		// transaction has locked is being claimed there.
		ClaimLock: " FOR UPDATE OF p SKIP LOCKED",
		// A heartbeat or a finish waits for a claim of its partitions
		// to decide, and judges the fence on the outcome.
		LeaseLock: " FOR UPDATE OF p",
		// The session whose transaction holds the attempt's row (its
		// xmax) and that waits for its client inside a statement, when
		// this role may end it.
		EndStalled: `SELECT pg_terminate_backend(a.pid) FROM pg_stat_activity a
			WHERE a.backend_xid = (SELECT xmax FROM tranche_attempts WHERE dag_id = $1 AND start_s = $2 AND attempt = $3)
				AND a.state = 'active' AND a.wait_event_type = 'Client' AND a.wait_event = 'ClientRead'
				AND a.pid <> pg_backend_pid() AND pg_has_role(a.usesysid, 'MEMBER')`,
		// Claims of a DAG under a limit take turns on its row.
		LimitLock: " FOR UPDATE",
		// The migration's lock, per schema: the schema is the first
		// of the search_path, the one the tables go to.
		LockSchema: fmt.Sprintf("SELECT pg_advisory_xact_lock(%d, hashtext(current_schema()))", lockClass),
		// Revisions come from a sequence, so that writers of one DAG
		// never take turns on a counter; a writer holds the DAG's
		// revision lock shared from before it takes one until it
		// commits, and Revision takes the lock alone, waiting for
		// them, so that no revision lower than the one it reads is
		// committed after it. The sequence caches no numbers: a
		// session's cached numbers would be lower than others'.
		NextRevision:    "(SELECT nextval('tranche_revisions') FROM (SELECT pg_advisory_xact_lock_shared(" + revisionLock + ")) AS fence)",
		RevisionBarrier: "SELECT pg_advisory_xact_lock(" + revisionLock + ")",
		RevisionSchema: []string{
			`CREATE SEQUENCE tranche_revisions AS BIGINT CACHE 1`,
			`SELECT setval('tranche_revisions', (SELECT COALESCE(MAX(revision), 0) + 1 FROM tranche_attempts), false)`,
		},
		InsertInWith: true,
		// A worker without the privilege to create tables opens a
		// ledger whose tables exist.
		HasTable: "SELECT to_regclass($1) IS NOT NULL",
		Classify: func(err error) (error, string, bool) {
			return classify(err, cfg.User, cfg.Database, where)
		},
	}
}

// classify tells what a pgx error means; see [sqlledger.Dialect].
func classify(err error, role, database, where string) (kind error, hint string, retry bool) {
	if pe, ok := errors.AsType[*pgconn.PgError](err); ok {
		switch code := pe.Code; {
		case code == "40001", code == "40P01":
			return nil, "", true // a serialization failure, a deadlock: try again
		case code == "42501":
			return ErrPermission, permissionHint(pe.Message, role, where, database), false
		case code == "3F000":
			return ErrPermission, fmt.Sprintf("%s does not exist in database %s (the search_path names no existing schema); name an existing schema (schema=NAME in the ledger's address), or create it; nothing was written", where, database), false
		case code == "3D000":
			return ErrConnect, fmt.Sprintf("database %s does not exist on the server; create it (createdb %s), or correct the connection string", database, database), false
		case code == "28P01", code == "28000":
			return ErrConnect, fmt.Sprintf("the server refused role %s: check the user and password of the connection string (or PGPASSWORD, ~/.pgpass) and the server's pg_hba.conf", role), false
		case code == "53300":
			return ErrConnect, "the server has no connection slot left: raise its max_connections, or open fewer connections per worker", false
		case code == "57P03":
			return ErrConnect, "the server is starting up or shutting down; try again in a moment", false
		case code == "25P03":
			// The server ended the session idle inside a transaction, as
			// it does a worker cut off in one (Options' idle timeout):
			// idle, it had not read a COMMIT, so the transaction was
			// rolled back for certain and may be tried again on a new
			// connection, which finds the truth (a finish whose lease was
			// taken over meanwhile is fenced, not lost).
			return ErrConnectionLost, lostHint, true
		case code == "57P01", code == "57P02", code == "57P05", strings.HasPrefix(code, "08"):
			return ErrConnectionLost, lostHint, false
		case code == "25006":
			return sqlledger.ErrReadOnly, "the server is a read-only standby, or the database is read-only (default_transaction_read_only): point the ledger at the primary; nothing was written", false
		case code == "53100":
			return sqlledger.ErrFull, "the server's disk is full; free space and run again: the transaction was rolled back", false
		case code == "55P03":
			return sqlledger.ErrLocked, "a lock wait exceeded the session's lock_timeout; try again; nothing was written", false
		case code == "XX001", code == "XX002":
			return sqlledger.ErrCorrupt, "the server reports damaged data; see its log", false
		case code == "58030":
			return sqlledger.ErrIO, "the server failed a read or a write; see its log", false
		}
		return nil, "", false
	}
	if _, ok := errors.AsType[*pgconn.ConnectError](err); ok {
		return ErrConnect, "the server cannot be reached: check the host and port of the connection string, and that the server runs and accepts TCP connections from this machine", false
	}
	if pgconn.Timeout(err) || errors.Is(err, context.DeadlineExceeded) && err != context.DeadlineExceeded {
		// No reply before the call's deadline (the caller's, or the
		// connection's), as the driver reports it (database/sql's own
		// is the context's error alone, for a call that waited for a
		// connection and sent nothing): pgx closes a connection
		// interrupted mid-call, whose state it no longer knows, so the
		// call is as lost as on a connection that broke, its outcome as
		// unknown.
		return ErrConnectionLost, noReplyHint, false
	}
	if errors.Is(err, driver.ErrBadConn) {
		// database/sql found every connection it tried dead before it
		// sent the call (the driver says bad only when nothing reached
		// the server), as after a network fault ends a pool's
		// connections at once: the call may simply be made again.
		return ErrConnectionLost, lostHint, true
	}
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || strings.Contains(err.Error(), "conn closed") {
		return ErrConnectionLost, lostHint, false
	}
	return nil, "", false
}

// permissionHint says what to grant, by what the server refused.
func permissionHint(msg, role, where, database string) string {
	switch {
	case strings.Contains(msg, "for database"):
		return fmt.Sprintf("role %s may not create %s in database %s: create the schema for it (CREATE SCHEMA ... AUTHORIZATION %s), or grant it CREATE on the database; nothing was written",
			role, where, database, role)
	case strings.Contains(msg, "for schema"):
		return fmt.Sprintf("role %s may not create the ledger's tables in %s of database %s: grant it CREATE on the schema, or have the schema's owner open the ledger once to create them (workers then need only SELECT, INSERT, UPDATE and DELETE on the tranche_ tables and USAGE on the sequence tranche_revisions); nothing was written",
			role, where, database)
	}
	return fmt.Sprintf("role %s lacks a privilege on the ledger's tables in %s of database %s: workers need SELECT, INSERT, UPDATE and DELETE on the tranche_ tables and USAGE on the sequence tranche_revisions; nothing was written",
		role, where, database)
}

const noReplyHint = "no reply from the server before the call's deadline (the network to it went silent, or the server, or a lock the call waited for, held it that long): the connection was closed with the call in flight, so the transaction was rolled back, or, if it was committing, may have committed; partitions a lost claim holds are taken over once its lease expires; the next call reconnects"

const lostHint = "the connection to the server was lost (the server restarted or shut down, or the connection was terminated): the transaction was rolled back, or, if it was committing, may have committed; partitions a lost claim holds are taken over once its lease expires; the next call reconnects"
