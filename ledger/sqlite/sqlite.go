// Package sqlite is tranche's embedded ledger: a [ledger.Ledger] in one
// SQLite file, needing no server, that any number of processes on one
// machine share safely. It runs on modernc.org/sqlite, in pure Go, and
// lives in its own module so that tranche itself does not carry the
// driver.
//
//	ledger, err := sqlite.Open(ctx, "tranche.db", nil)
//	if err != nil {
//		return err // names the file and what was wrong
//	}
//	defer ledger.Close()
//	b := &backfill.Backfill{DAG: dag, Window: w, Ledger: ledger}
//
// The database runs in WAL mode, so readers never wait for the writer.
// Every claim and transition is one immediate transaction: it takes the
// file's write lock as it begins, waiting up to the busy timeout for
// another process to release it. A process keeps one writing connection,
// so its own goroutines queue in Go rather than in SQLite's busy loop,
// and a few read-only connections.
//
// Durability: commits are written with synchronous=NORMAL, which keeps
// every commit through a crash or kill of any process; only a crash of
// the machine itself may roll back the last commits, never corrupting the
// file. Since every worker sharing the file runs on that machine, such a
// loss only makes partitions whose workers died too run again. Set
// [Options.Synchronous] to "FULL" to sync every commit to the disk.
//
// The schema is github.com/tranche-dev/tranche/ledger/sqlledger's, shared with
// the PostgreSQL ledger; the README shows how to inspect a ledger with the
// sqlite3 command. Nothing in a ledger ever needs repairing by hand: a
// partition whose worker died stays claimed only until its lease expires,
// and the next worker to run the backfill takes it over.
//
// # Destinations
//
// [NewDestination] writes assets' partitions into tables of the ledger's
// own file, committing each partition's rows in the transaction that
// records its success: exactly once, whatever happens to the worker.
// [OpenDestination] writes into another file, each write committing on
// its own with a fencing check. The tables, the checks and the
// guarantees are github.com/tranche-dev/tranche/destination/sqldest's.
package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/address"
	"github.com/tranche-dev/tranche/ledger/sqlledger"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver
)

// Options configure [Open]. A nil *Options means the defaults.
type Options struct {
	// BusyTimeout is how long a call waits for another process holding
	// the file's write lock before it fails with an error matching
	// [sqlledger.ErrLocked]. Zero means 10s.
	BusyTimeout time.Duration

	// Now, when not nil, is the clock that judges leases and stamps
	// attempts. Nil means SQLite's clock ('now'), which reads the
	// machine's clock, the same for every process sharing the file.
	Now func() time.Time

	// Synchronous is SQLite's synchronous setting: "NORMAL" (the
	// default, "" too) or "FULL". See the package documentation.
	Synchronous string

	// Readers is how many read-only connections serve Latest, History
	// and the other reads. Zero means 4.
	Readers int

	// Existing makes Open open only an existing ledger at this release's
	// schema version, creating and migrating nothing: a missing or
	// empty file, or a database without the ledger's tables, is refused
	// with an error matching [sqlledger.ErrNoLedger], a ledger at an
	// older version with a [*sqlledger.SchemaError], and the file is
	// left as it was. Tools that read or amend the ledger of workers set
	// it; a worker's Open, without it, creates or upgrades the ledger.
	// [OpenDestination] ignores it.
	Existing bool

	// Shared lets Open create a ledger in an existing database that
	// holds tables of its own and no ledger yet: an application's file
	// whose tables a destination then writes ([NewDestination]) in the
	// transactions that record partitions. Without it, Open refuses such
	// a database with an error matching [sqlledger.ErrNoLedger] and
	// leaves it as it was, so that a mistaken path does not add the
	// ledger's tranche_* tables beside another program's. A database
	// that holds a ledger opens either way.
	Shared bool
}

// DefaultBusyTimeout is the busy timeout of Options.BusyTimeout zero.
const DefaultBusyTimeout = 10 * time.Second

// Ledger is a [ledger.Ledger] in a SQLite file. Its methods are those of
// [sqlledger.Ledger]; Close it after its last use.
type Ledger struct {
	*sqlledger.Ledger
	path           string
	writer, reader *sql.DB
	classify       func(error) (error, string, bool) // the dialect's, for destinations sharing the file
}

var (
	_ ledger.Ledger       = (*Ledger)(nil)
	_ ledger.Reader       = (*Reader)(nil)
	_ ledger.LatestReader = (*Reader)(nil)
	_ ledger.BriefReader  = (*Reader)(nil)
	_ ledger.BriefReader  = (*Ledger)(nil)
)

// Errors of [Open] about the file itself, before SQLite opens it, match
// these with errors.Is, besides naming the file.
var (
	ErrNoFolder = errors.New("sqlite: folder does not exist")
)

// Open opens the ledger in the SQLite file at path, creating the file if
// it does not exist (its folder must exist), and creating or migrating the
// ledger's tables, unless [Options.Existing]. It refuses, with an error naming the file and writing
// nothing: a path in a missing folder, a file that is not a SQLite
// database, a read-only file, a database whose schema a newer release
// of tranche migrated ([*sqlledger.SchemaError]), and, unless
// [Options.Shared], a database of tables of its own and no ledger.
//
// A path beginning sqlite: is read as a ledger's address
// ([address.Parse]): sqlite:tranche.db is the file tranche.db.
func Open(ctx context.Context, path string, opts *Options) (*Ledger, error) {
	if len(path) > len("sqlite:") && strings.EqualFold(path[:len("sqlite:")], "sqlite:") {
		addr, err := address.Parse(path)
		if err != nil {
			return nil, fmt.Errorf("tranche: sqlite ledger: %w", err)
		}
		path = addr.Path
	}
	existing := opts != nil && opts.Existing
	f, err := openFile(ctx, "sqlite ledger", path, opts, existing, opts == nil || !opts.Shared)
	if err != nil {
		return nil, err
	}
	reader, err := sql.Open("sqlite", dsn(f.abs, f.common+"&_pragma=query_only(1)"))
	if err != nil {
		f.writer.Close()
		return nil, fmt.Errorf("tranche: %s: %w", f.name, err)
	}
	reader.SetMaxOpenConns(f.opts.Readers)
	reader.SetMaxIdleConns(f.opts.Readers)
	l, err := sqlledger.Open(ctx, f.writer, sqlledger.Options{Dialect: &f.dialect, Name: f.name, Now: f.opts.Now, Reader: reader, Existing: existing})
	if err != nil {
		reader.Close()
		f.writer.Close()
		return nil, err
	}
	return &Ledger{Ledger: l, path: f.abs, writer: f.writer, reader: reader, classify: f.dialect.Classify}, nil
}

// A Reader is a SQLite ledger opened for reading only ([OpenReader]): a
// [ledger.Reader] and a [ledger.LatestReader], with no method that
// writes. Its methods are those of [sqlledger.Reader]; Close it after
// its last use.
type Reader struct {
	*sqlledger.Reader
	path string
	db   *sql.DB
}

// OpenReader opens the ledger in the SQLite file at path for reading
// only: as [Options.Existing], it creates and migrates nothing and
// refuses a missing file or one without a ledger, and it opens the file
// read-only, so that a file of mode 0444, or a copy in a folder the
// process may not write, can be read, and nothing is left beside it.
// Of opts it reads BusyTimeout, Readers and Now; opts may be nil.
func OpenReader(ctx context.Context, path string, opts *Options) (*Reader, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if len(path) > len("sqlite:") && strings.EqualFold(path[:len("sqlite:")], "sqlite:") {
		addr, err := address.Parse(path)
		if err != nil {
			return nil, fmt.Errorf("tranche: sqlite ledger: %w", err)
		}
		path = addr.Path
	}
	if o.BusyTimeout == 0 {
		o.BusyTimeout = DefaultBusyTimeout
	}
	if o.Readers == 0 {
		o.Readers = 4
	}
	switch {
	case path == "":
		return nil, fmt.Errorf("tranche: sqlite ledger: empty path; give the file, such as tranche.db")
	case o.BusyTimeout < 0 || o.Readers < 0:
		return nil, fmt.Errorf("tranche: sqlite ledger %s: busy timeout %v, %d readers; want positive values", path, o.BusyTimeout, o.Readers)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("tranche: sqlite ledger %s: %w", path, err)
	}
	name := "sqlite ledger " + abs
	if err := checkFile(abs, name, fileRead); err != nil {
		return nil, err
	}
	// mode=ro: SQLite opens the file without asking to write it, which
	// a file of mode 0444 refuses to anyone but root; query_only: not
	// even root's connection writes. A file no one may write, and whose
	// WAL holds nothing, no worker writes either (Open refuses such a
	// file): immutable=1 reads it without the shared-memory file that
	// WAL readers otherwise create beside it, so that a copy in a folder
	// the process may not write can be read, and nothing is left beside
	// the file. A WAL holding commits must be read, through that file.
	query := fmt.Sprintf("mode=ro&_pragma=busy_timeout(%d)&_pragma=query_only(1)", o.BusyTimeout.Milliseconds())
	if frozen(abs) {
		query += "&immutable=1"
	}
	if err := checkUnopened(ctx, abs, name); err != nil {
		return nil, err
	}
	reader, err := sql.Open("sqlite", dsn(abs, query))
	if err != nil {
		return nil, fmt.Errorf("tranche: %s: %w", name, err)
	}
	reader.SetMaxOpenConns(o.Readers)
	reader.SetMaxIdleConns(o.Readers)
	if err := checkLedger(ctx, reader, name); err != nil {
		reader.Close()
		return nil, err
	}
	r, err := sqlledger.OpenReader(ctx, reader, sqlledger.Options{Dialect: &sqlledger.SQLite, Name: name, Now: o.Now})
	if err != nil {
		reader.Close()
		return nil, err
	}
	return &Reader{Reader: r, path: abs, db: reader}, nil
}

// Path returns the absolute path of the ledger's file.
func (r *Reader) Path() string { return r.path }

// Close closes the reader's connections. A reader must not be used
// after. Close of a nil *Reader does nothing and returns nil, as
// [Ledger.Close].
func (r *Reader) Close() error {
	if r == nil {
		return nil
	}
	return errors.Join(r.Reader.Close(), r.db.Close())
}

// frozen reports whether the file at abs is one no one may write, with
// no commits in a WAL beside it.
func frozen(abs string) bool {
	info, err := os.Stat(abs)
	if err != nil || info.Mode().Perm()&0o222 != 0 {
		return false
	}
	wal, err := os.Stat(abs + "-wal")
	return errors.Is(err, fs.ErrNotExist) || err == nil && wal.Size() == 0
}

// OpenLedger opens the SQLite ledger at addr, an address of kind
// "sqlite" ([address.Parse]), for access: [address.AccessRead] as
// [OpenReader] (a *Reader, which has no method that writes),
// [address.AccessWrite] as [Options.Existing], and [address.AccessCreate]
// as a worker's Open, creating or migrating the ledger (a *Ledger). It is
// an [address.OpenFunc], for programs that open ledgers by address
// (tranchecli.Program.OpenLedger).
func OpenLedger(ctx context.Context, addr address.Address, access address.Access) (ledger.Reader, error) {
	if addr.Scheme != address.SchemeSQLite {
		return nil, fmt.Errorf("tranche: ledger %s: %w: this program opens SQLite ledgers only (sqlite:PATH)", addr, address.ErrInvalid)
	}
	var opts Options
	switch access {
	case address.AccessRead:
		r, err := OpenReader(ctx, addr.Path, nil)
		if err != nil {
			return nil, err
		}
		return r, nil
	case address.AccessWrite:
		opts.Existing = true
	case address.AccessCreate:
	default:
		return nil, fmt.Errorf("tranche: sqlite ledger %s: unknown access %v", addr.Path, access)
	}
	l, err := Open(ctx, addr.Path, &opts)
	if err != nil {
		return nil, err
	}
	return l, nil
}

// file is a SQLite file opened for writing, by [Open] or [OpenDestination].
type file struct {
	abs, name string
	opts      Options // with the defaults filled in
	common    string  // the DSN's query for every connection
	dialect   sqlledger.Dialect
	writer    *sql.DB // its one writing connection, in WAL mode
}

// openFile checks the options and the file at path and opens its writing
// connection; what names it in errors ("sqlite ledger"). With existing,
// it refuses a file that holds no ledger before it writes anything; with
// alone, one that holds other tables and no ledger.
func openFile(ctx context.Context, what, path string, opts *Options, existing, alone bool) (*file, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.BusyTimeout == 0 {
		o.BusyTimeout = DefaultBusyTimeout
	}
	if o.Readers == 0 {
		o.Readers = 4
	}
	syncMode := strings.ToUpper(o.Synchronous)
	if syncMode == "" {
		syncMode = "NORMAL"
	}
	switch {
	case path == "":
		return nil, fmt.Errorf("tranche: %s: empty path; give the file, such as tranche.db", what)
	case o.BusyTimeout < 0:
		return nil, fmt.Errorf("tranche: %s %s: busy timeout %v; want a positive duration (0 means %v)", what, path, o.BusyTimeout, DefaultBusyTimeout)
	case o.Readers < 0:
		return nil, fmt.Errorf("tranche: %s %s: %d readers; want 1 or more (0 means 4)", what, path, o.Readers)
	case syncMode != "NORMAL" && syncMode != "FULL":
		return nil, fmt.Errorf("tranche: %s %s: synchronous %q; accepted: NORMAL, FULL", what, path, o.Synchronous)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("tranche: %s %s: %w", what, path, err)
	}
	name := what + " " + abs
	mode := fileCreate
	if existing {
		mode = fileWrite
	}
	if err := checkFile(abs, name, mode); err != nil {
		return nil, err
	}
	dialect := sqlledger.SQLite
	dialect.Classify = func(err error) (error, string, bool) {
		kind, hint, retry := sqlledger.SQLite.Classify(err)
		if errors.Is(kind, sqlledger.ErrLocked) {
			hint = fmt.Sprintf("another process held the file's write lock for longer than the busy timeout of %v; nothing was written; try again, or give the ledger a longer busy timeout", o.BusyTimeout)
		}
		return kind, hint, retry
	}

	common := fmt.Sprintf("_pragma=busy_timeout(%d)&_pragma=foreign_keys(1)", o.BusyTimeout.Milliseconds())
	writer, err := sql.Open("sqlite", dsn(abs, common+"&_pragma=synchronous("+syncMode+")&_txlock=immediate"))
	if err != nil {
		return nil, fmt.Errorf("tranche: %s: %w", name, err)
	}
	// One writing connection: the process's writers queue for it in Go,
	// and only other processes meet SQLite's busy timeout.
	writer.SetMaxOpenConns(1)
	writer.SetMaxIdleConns(1)
	writer.SetConnMaxLifetime(0)
	writer.SetConnMaxIdleTime(0)
	if existing {
		// Before WAL journaling, which a database in another mode would
		// keep: a file that is no ledger must be left as it was.
		if err := checkUnopened(ctx, abs, name); err != nil {
			writer.Close()
			return nil, err
		}
		if err := checkLedger(ctx, writer, name); err != nil {
			writer.Close()
			return nil, err
		}
	} else if alone {
		if err := checkNotOthers(ctx, writer, name); err != nil {
			writer.Close()
			return nil, err
		}
	}
	if err := turnOnWAL(ctx, writer, o.BusyTimeout); err != nil {
		writer.Close()
		kind, hint, _ := dialect.Classify(err)
		return nil, &sqlledger.Error{Name: name, Op: "turning on WAL journaling", Class: kind, Hint: hint, Err: err}
	}
	return &file{abs: abs, name: name, opts: o, common: common, dialect: dialect, writer: writer}, nil
}

// turnOnWAL switches the database to WAL journaling, which it keeps. On a
// new file that several processes open at once, the switch can fail at
// once with SQLITE_BUSY rather than wait (SQLite will not make a reader
// wait for a writer that waits for it): it is tried again until the busy
// timeout has passed.
func turnOnWAL(ctx context.Context, db *sql.DB, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for try := 1; ; try++ {
		var mode string
		err := db.QueryRowContext(ctx, "PRAGMA journal_mode = WAL").Scan(&mode)
		switch {
		case err == nil && strings.EqualFold(mode, "wal"):
			return nil
		case err == nil:
			return fmt.Errorf("SQLite kept journal mode %q instead of WAL; the file system may lack the shared memory WAL needs", mode)
		}
		kind, _, _ := sqlledger.SQLite.Classify(err)
		if !errors.Is(kind, sqlledger.ErrLocked) || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		time.Sleep(time.Duration(min(try, 20)) * time.Millisecond)
	}
}

// dsn returns the modernc.org/sqlite data source name of the file at the
// absolute path abs with the given query.
func dsn(abs, query string) string {
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}
	return u.String() + "?" + query
}

// sqliteHeader starts every SQLite database file.
var sqliteHeader = []byte("SQLite format 3\x00")

// How checkFile judges a file: for a ledger to be created if missing,
// amended, or read only.
const (
	fileCreate = iota
	fileWrite
	fileRead
)

// checkFile refuses, before SQLite touches anything, a path that cannot
// be a ledger; unless mode is fileCreate, one that holds none yet.
func checkFile(abs, name string, mode int) error {
	existing := mode != fileCreate
	dir := filepath.Dir(abs)
	switch info, err := os.Stat(dir); {
	case errors.Is(err, fs.ErrNotExist):
		return refuse(ErrNoFolder, "tranche: %s: the folder %s does not exist; create it first, or give a path in an existing folder", name, dir)
	case err != nil:
		return fmt.Errorf("tranche: %s: %w", name, err)
	case !info.IsDir():
		return refuse(ErrNoFolder, "tranche: %s: %s is not a folder", name, dir)
	}
	info, err := os.Stat(abs)
	switch {
	case errors.Is(err, fs.ErrNotExist) && existing:
		return refuse(sqlledger.ErrNoLedger, "tranche: %s: no such file; a ledger is created by a worker's open (a program running a backfill), never by a command that reads or amends one; nothing was created", name)
	case errors.Is(err, fs.ErrNotExist):
		return nil // a new ledger
	case err != nil:
		return fmt.Errorf("tranche: %s: %w", name, err)
	case info.IsDir():
		return refuse(sqlledger.ErrCantOpen, "tranche: %s: it is a folder; give the path of a file in it, such as %s",
			name, filepath.Join(abs, "tranche.db"))
	case !info.Mode().IsRegular():
		return refuse(sqlledger.ErrCantOpen, "tranche: %s: not a regular file", name)
	case info.Mode().Perm()&0o200 == 0 && mode != fileRead:
		return refuse(sqlledger.ErrReadOnly, "tranche: %s: the file is read-only (mode %v); a ledger records every claim, cancel and resume, so it must be writable for them (reading it needs no write access)",
			name, info.Mode().Perm())
	case info.Size() == 0 && existing:
		return refuse(sqlledger.ErrNoLedger, "tranche: %s: the file is empty, so it holds no ledger; a ledger is created by a worker's open (a program running a backfill), never by a command that reads or amends one; nothing was written to it", name)
	case info.Size() == 0:
		return nil // an empty file is an empty database
	}
	f, err := os.Open(abs)
	if err != nil {
		return fmt.Errorf("tranche: %s: %w", name, err)
	}
	defer f.Close()
	head := make([]byte, len(sqliteHeader))
	if _, err := io.ReadFull(f, head); err != nil || !bytes.Equal(head, sqliteHeader) {
		return refuse(sqlledger.ErrNotDatabase, "tranche: %s: the file is not a SQLite database (it does not start with SQLite's header); give the path of a ledger, or of a new file; nothing was written to it",
			name)
	}
	return nil
}

// checkLedger refuses, reading only, a database without a ledger or with
// one at another schema version than [sqlledger.SchemaVersion], as
// [sqlledger.Open] with Existing would, but before the database is
// switched to WAL journaling.
func checkLedger(ctx context.Context, db *sql.DB, name string) error {
	var exists bool
	found := 0
	err := db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'tranche_schema')`).Scan(&exists)
	if err == nil && exists {
		err = db.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM tranche_schema`).Scan(&found)
	}
	switch {
	case err != nil:
		kind, hint, _ := sqlledger.SQLite.Classify(err)
		return &sqlledger.Error{Name: name, Op: "reading the schema version", Class: kind, Hint: hint, Err: err}
	case !exists:
		return refuse(sqlledger.ErrNoLedger, "tranche: %s: the database has no table tranche_schema, so it holds no ledger; a ledger is created by a worker's open (a program running a backfill), never by a command that reads or amends one; nothing was written to it", name)
	case found == 0:
		return refuse(sqlledger.ErrNoLedger, "tranche: %s: the table tranche_schema records no version, so the database holds no ledger; a ledger is created by a worker's open (a program running a backfill), never by a command that reads or amends one; nothing was written to it", name)
	case found != sqlledger.SchemaVersion:
		return &sqlledger.SchemaError{Ledger: name, Found: found, Known: sqlledger.SchemaVersion}
	}
	return nil
}

// checkNotOthers refuses a database that holds tables or views of its
// own and none of a ledger's, before WAL journaling, which the database
// would keep: it is another program's, and is left as it was.
func checkNotOthers(ctx context.Context, db *sql.DB, name string) error {
	rows, err := db.QueryContext(ctx, `SELECT name FROM sqlite_master WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite\_%' ESCAPE '\' ORDER BY name`)
	if err != nil {
		kind, hint, _ := sqlledger.SQLite.Classify(err)
		return &sqlledger.Error{Name: name, Op: "reading the database's tables", Class: kind, Hint: hint, Err: err}
	}
	defer rows.Close()
	var others []string
	for rows.Next() {
		var t string
		if err := rows.Scan(&t); err != nil {
			return fmt.Errorf("tranche: %s: reading the database's tables: %w", name, err)
		}
		if strings.HasPrefix(t, "tranche_") {
			return nil // a ledger, or one begun: Open completes or judges it
		}
		others = append(others, strconv.Quote(t))
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("tranche: %s: reading the database's tables: %w", name, err)
	}
	if len(others) == 0 {
		return nil
	}
	list := strings.Join(others[:min(len(others), 5)], ", ")
	if len(others) > 5 {
		list += fmt.Sprintf(" and %d more", len(others)-5)
	}
	return refuse(sqlledger.ErrNoLedger, "tranche: %s: the database holds tables of its own (%s) and no ledger; nothing was written to it. Give the path of a ledger, or of a new file; to add a ledger beside these tables on purpose, set Options.Shared", name, list)
}

// checkUnopened refuses, as checkLedger, a file that holds no ledger,
// when no process has it open in WAL mode (no WAL file beside it):
// reading it as immutable leaves nothing beside it, where opening a
// database in WAL mode, even for reading, creates its WAL and
// shared-memory files and a reader cannot remove them, so that a command
// pointed at a foreign or damaged file would leave two files there. A
// ledger that passes is then opened as usual. (A worker that opened the
// file since the check is harmless: it writes into its WAL, and the
// main file changes only at a checkpoint, which a torn read here would
// turn into a refusal to retry, never into a wrong answer.)
func checkUnopened(ctx context.Context, abs, name string) error {
	if _, err := os.Lstat(abs + "-wal"); !errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if _, err := os.Stat(abs); err != nil {
		return nil // a new file, created by the caller
	}
	db, err := sql.Open("sqlite", dsn(abs, "mode=ro&immutable=1&_pragma=query_only(1)"))
	if err != nil {
		return fmt.Errorf("tranche: %s: %w", name, err)
	}
	defer db.Close()
	return checkLedger(ctx, db, name)
}

// fileError is a refusal of a file, whose message says it all and which
// matches its kind with errors.Is.
type fileError struct {
	msg  string
	kind error
}

func (e *fileError) Error() string { return e.msg }
func (e *fileError) Unwrap() error { return e.kind }

func refuse(kind error, format string, args ...any) error {
	return &fileError{msg: fmt.Sprintf(format, args...), kind: kind}
}

// Path returns the absolute path of the ledger's file.
func (l *Ledger) Path() string { return l.path }

// Close closes the ledger's connections. A ledger must not be used after.
// Close of a nil *Ledger does nothing and returns nil, so that a deferred
// Close placed before the check of Open's error hides nothing: the error
// of Open is what the caller sees.
func (l *Ledger) Close() error {
	if l == nil {
		return nil
	}
	return errors.Join(l.Ledger.Close(), l.reader.Close(), l.writer.Close())
}
