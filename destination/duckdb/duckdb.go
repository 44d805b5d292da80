package duckdb

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"

	duckdb "github.com/duckdb/duckdb-go/v2"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/destination/column"
	"github.com/tranche-dev/tranche/destination/sqldest"
	"github.com/tranche-dev/tranche/ledger/sqlledger"
)

var _ tranche.Destination = (*Destination)(nil)

// Destination is a [tranche.Destination] that replaces assets' partitions
// in tables of a DuckDB database, each write in one transaction with its
// fencing check, appending the rows with DuckDB's appender; see the
// package documentation, and github.com/tranche-dev/tranche/destination/sqldest for
// the tables and their checks. It is safe for concurrent use. Close it
// after its last use.
type Destination struct {
	*sqldest.Destination
	db  *sql.DB
	own bool // whether Close closes db
}

// Open opens the DuckDB file at path, which DuckDB creates if missing
// (its folder must exist), for a destination writing the tables, and
// creates the token table (sqldest.TokenTable) if missing; create the
// tables themselves with CreateTables, or before. "" or ":memory:" is a
// database in memory, gone at Close. DuckDB's settings may follow the
// path as a query string ("warehouse.duckdb?threads=4").
//
// DuckDB lets one process at a time open a file for writing: the
// destination holds the file from Open to Close, and Open fails, with an
// error matching [sqlledger.ErrLocked] that names the file, while
// another process (the duckdb shell, another program) has it open. The
// destination's connections use the UTC zone (SET TimeZone = 'UTC'), so
// that a TIMESTAMP column compares with the partitions' bounds as the
// UTC time the destination writes into it.
func Open(ctx context.Context, path string, tables ...sqldest.Table) (*Destination, error) {
	file, _, _ := strings.Cut(path, "?")
	name := "duckdb " + file
	if file == "" || file == ":memory:" {
		name = "duckdb :memory:"
	}
	connector, err := duckdb.NewConnector(path, func(c driver.ExecerContext) error {
		_, err := c.ExecContext(context.Background(), "SET TimeZone = 'UTC'", nil)
		return err
	})
	if err != nil {
		return nil, openError(name, file, err)
	}
	db := sql.OpenDB(connector)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, openError(name, file, err)
	}
	d, err := sqldest.New(ctx, db, sqldest.Options{Dialect: &Dialect, Name: name}, tables...)
	if err != nil {
		db.Close()
		return nil, err
	}
	return &Destination{Destination: d, db: db, own: true}, nil
}

// New returns a destination writing the tables into db, a database of
// the duckdb driver (github.com/duckdb/duckdb-go/v2) that the caller
// keeps and closes after the destination's last use: the way to write
// into a database the program also reads and writes otherwise, since
// DuckDB lets one process at a time have a file open. name names the
// destination in events and errors, such as "duckdb warehouse.duckdb".
// A TIMESTAMP column (without time zone) needs db's connections to use
// the UTC zone (SET TimeZone = 'UTC', as [Open] sets it): a write into
// one is refused otherwise, since DuckDB compares it with the
// partition's bounds in the connection's zone.
func New(ctx context.Context, db *sql.DB, name string, tables ...sqldest.Table) (*Destination, error) {
	if db == nil {
		return nil, errors.New("tranche: duckdb.New: no database")
	}
	if name == "" {
		name = "duckdb"
	}
	d, err := sqldest.New(ctx, db, sqldest.Options{Dialect: &Dialect, Name: name}, tables...)
	if err != nil {
		return nil, err
	}
	return &Destination{Destination: d, db: db}, nil
}

// DB returns the destination's database, to read what it wrote: in the
// same process, since the destination holds the file.
func (d *Destination) DB() *sql.DB { return d.db }

// Close closes the database that [Open] opened, releasing the file; a
// destination made by [New] leaves its database to the caller. Close on
// a nil destination does nothing.
func (d *Destination) Close() error {
	if d == nil || !d.own {
		return nil
	}
	return d.db.Close()
}

// openError explains a failure to open the file.
func openError(name, file string, err error) error {
	kind, hint, _ := classify(err)
	if kind == nil {
		kind = sqlledger.ErrCantOpen
	}
	if hint == "" {
		hint = "the file cannot be opened"
	}
	return &sqlledger.Error{Name: name, Op: fmt.Sprintf("opening %s", file), Class: kind, Hint: hint, Err: err}
}

// Dialect is the dialect of DuckDB through github.com/duckdb/duckdb-go/v2,
// for sqldest.New: Time columns are TIMESTAMPTZ (time.Time binds as
// one), the rows go in through DuckDB's appender, on the write's
// connection and in its transaction, each value checked as it is
// appended against the column's type as the table declares it (the
// integers as the rows hold them, which the appender takes), and a
// write that meets a concurrent one (DuckDB's transactions are
// optimistic: the second writer of a row fails at once) is tried again.
var Dialect = sqldest.Dialect{
	Name: "duckdb",
	Types: [column.Bytes + 1]string{column.Int: "BIGINT", column.Float: "DOUBLE", column.String: "VARCHAR",
		column.Bool: "BOOLEAN", column.Time: "TIMESTAMPTZ", column.Bytes: "BLOB"},
	Insert:           appendRows,
	SelectToken:      true,
	Integers:         true,
	NoPartitionIndex: true,
	Classify:         classify,
}

// classify tells what a DuckDB error means. DuckDB's errors carry a type
// (duckdb.ErrorType) and a message that begins with it.
func classify(err error) (kind error, hint string, retry bool) {
	var de *duckdb.Error
	if !errors.As(err, &de) {
		return nil, "", false
	}
	msg := de.Msg
	switch {
	case de.Type == duckdb.ErrorTypeTransaction && strings.Contains(msg, "Conflict"):
		return sqlledger.ErrLocked, "a concurrent transaction wrote the same rows, and it was tried again until the tries ran out", true
	case de.Type == duckdb.ErrorTypeTransaction && strings.Contains(msg, "Failed to commit") && strings.Contains(msg, "duplicate key"):
		// Two first writes of a partition both inserted its token row,
		// and the other committed first: the next try reads its token.
		return sqlledger.ErrLocked, "a concurrent transaction inserted the same key first, and it was tried again until the tries ran out", true
	case de.Type == duckdb.ErrorTypeConstraint && strings.Contains(msg, "Duplicate key"):
		// The same, seen at the insert of the token row: the other
		// first write committed before this one inserted.
		return sqlledger.ErrLocked, "a concurrent first write of the partition inserted its token row first, and it was tried again until the tries ran out", true
	case strings.Contains(msg, "Could not set lock on file"):
		return sqlledger.ErrLocked, "another process has the DuckDB file open, and DuckDB lets one process at a time open a file for writing: close it there (a duckdb shell, another program), or write through that process", false
	case strings.Contains(msg, "read-only mode"):
		return sqlledger.ErrReadOnly, "the database is open read-only", false
	case strings.Contains(msg, "No space left on device"):
		return sqlledger.ErrFull, "the disk is full", false
	case strings.Contains(msg, "not a valid DuckDB database file") || strings.Contains(msg, "database file with version number"):
		return sqlledger.ErrNotDatabase, "the file is not a DuckDB database, or one of a DuckDB version this driver cannot read", false
	case de.Type == duckdb.ErrorTypeCatalog && strings.Contains(msg, "does not exist"):
		return nil, "a table is missing: create the tables first (Destination.CreateTables, or the statements of Table.DDL)", false
	case de.Type == duckdb.ErrorTypeIO && (strings.Contains(msg, "No such file or directory") || strings.Contains(msg, "Permission denied")):
		return sqlledger.ErrCantOpen, "the file cannot be opened: its folder must exist and be writable", false
	case de.Type == duckdb.ErrorTypeIO:
		return sqlledger.ErrIO, "", false
	case de.Type == duckdb.ErrorTypeConstraint:
		return nil, "the table refused a row (a constraint of its own that the table spec does not declare)", false
	}
	return nil, "", false
}
