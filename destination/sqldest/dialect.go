package sqldest

import (
	"context"
	"database/sql"
	"time"

	"github.com/tranche-dev/tranche/destination/column"
	"github.com/tranche-dev/tranche/ledger/sqlledger"
)

// Dialect is what differs between the databases a [Destination] writes
// to. Its statements are written once, with $1, $2, ... placeholders,
// double-quoted identifiers, DELETE by bounds and INSERT ... ON CONFLICT
// ... RETURNING, which SQLite (3.35 and later) and PostgreSQL both take.
//
// [SQLite] is the dialect of SQLite through modernc.org/sqlite; the
// PostgreSQL dialect, which inserts with COPY through pgx, is in
// github.com/tranche-dev/tranche/ledger/postgres.
type Dialect struct {
	// Name names the database in errors: "sqlite", "postgres".
	Name string

	// Rebind rewrites a statement from $1, $2, ... placeholders to the
	// driver's; nil keeps it. The statements use each placeholder once,
	// in order, so [sqlledger.PositionalRebind] may replace them with ?.
	Rebind func(query string) string

	// Types are the SQL types of the column types (by [Type]), for [Table.DDL].
	Types [column.Bytes + 1]string

	// Time converts a time.Time for the driver, where the database has
	// no time type of its own; nil binds time.Time as it is.
	Time func(time.Time) any

	// Insert, when not nil, inserts rows into a table in tx, on conn,
	// faster than a prepared INSERT per row (PostgreSQL: COPY; DuckDB:
	// its appender). table is the table's schema (or "") and name,
	// columns the columns' names, unquoted. Insert reads the rows one
	// at a time with [Rows.Row], which gives each row's values in the
	// columns' order, checked and converted as it reads them, and
	// returns the first error Row returns, as it is: the destination
	// rolls the transaction back, so that a refused value leaves
	// nothing of the write. It may refuse a value that the table's
	// column cannot hold (DuckDB: a BIGINT for a TINYINT column) with a
	// [*ValueError] giving Row (the row's index in rows), Column,
	// Value, Err ([ErrOutOfRange], [ErrMistyped]) and Want; the
	// destination fills in its name, the table, the asset and the
	// partition. A transaction tried again calls Insert again, with
	// the same rows.
	Insert func(ctx context.Context, conn *sql.Conn, tx *sql.Tx, table [2]string, columns []string, rows *Rows) error

	// Integers, when set, has [Rows.Row] give an Int column's value as
	// the row holds it, of any of the Go integer types the column's type takes
	// (checked: a uint or uint64 up to math.MaxInt64), rather than
	// converted to an int64, which boxes most values anew: for a driver
	// that takes every Go integer type (DuckDB's appender).
	Integers bool

	// SelectToken, when set, has the token check read the partition's
	// row of the token table, then update or insert it, two plain
	// statements, in place of one INSERT ... ON CONFLICT DO UPDATE ...
	// RETURNING, which costs DuckDB twice as much. It is for a database
	// whose transactions are optimistic (DuckDB): of two writers that
	// read the same row, or both find it missing, the second to update
	// or insert it fails (a conflict, or a duplicate key once the first
	// has committed), and the destination tries its transaction again,
	// which then reads the first writer's token. A database that lets
	// both read and then makes one wait must not set it.
	SelectToken bool

	// RowsPerInsert, when above 1, is how many rows one prepared INSERT
	// of the default insert (Insert nil) takes at most, in one VALUES
	// list: where statements cost no round trip (SQLite), fewer of them
	// cost less of the driver's per-statement work. Each statement must
	// stay within the database's limit of parameters.
	RowsPerInsert int

	// UTF8 refuses strings that are not valid UTF-8 or hold NUL bytes,
	// with a [*ValueError] naming them, as PostgreSQL's text types
	// would with an error of their own.
	UTF8 bool

	// NoPartitionIndex leaves out the index on the partition column
	// that [Table.DDL] otherwise creates: DuckDB prunes the deletes by
	// range with the zone maps of its row groups, and an index would
	// slow every insert.
	NoPartitionIndex bool

	// TableOptions follow the token table's closing parenthesis: "
	// WITHOUT ROWID" for SQLite, or "".
	TableOptions string

	// HasTable, when not empty, is a query of one boolean telling
	// whether the table named $1 exists, asked before the token table
	// is created, so that a role without the privilege to create tables
	// writes to a database where it exists (PostgreSQL:
	// "SELECT to_regclass($1) IS NOT NULL").
	HasTable string

	// LockSchema, when not empty, runs first in the transaction that
	// creates tables, so that processes starting at once create them one
	// after the other (PostgreSQL: a transaction-scoped advisory lock).
	LockSchema string

	// Classify tells what a driver error means, as
	// [sqlledger.Dialect.Classify] does: a class (one of sqlledger's
	// sentinels, or the driver module's), a hint, and whether the whole
	// transaction may be tried again.
	Classify func(err error) (class error, hint string, retry bool)
}

// SQLite is the dialect of SQLite through modernc.org/sqlite. Times are
// stored as UTC text of a fixed width ([SQLiteTime]); booleans as 0 and 1.
var SQLite = Dialect{
	Name:   "sqlite",
	Rebind: sqlledger.PositionalRebind,
	Types: [column.Bytes + 1]string{column.Int: "INTEGER", column.Float: "REAL", column.String: "TEXT",
		column.Bool: "INTEGER", column.Time: "TEXT", column.Bytes: "BLOB"},
	Time:          SQLiteTime,
	TableOptions:  " WITHOUT ROWID",
	RowsPerInsert: 64,
	HasTable:      sqlledger.SQLite.HasTable,
	Classify:      sqlledger.SQLite.Classify,
}

// SQLiteTimeLayout is the layout of times in SQLite: UTC, to the
// nanosecond, of a fixed width, so that text order is time order.
const SQLiteTimeLayout = "2006-01-02T15:04:05.000000000Z"

// SQLiteTime returns t as SQLite stores a Time column's values:
// t.UTC().Format(SQLiteTimeLayout).
func SQLiteTime(t time.Time) any { return t.UTC().Format(SQLiteTimeLayout) }

func (d *Dialect) rebind(q string) string {
	if d.Rebind == nil {
		return q
	}
	return d.Rebind(q)
}

func (d *Dialect) classify(err error) (class error, hint string, retry bool) {
	if d.Classify == nil {
		return nil, "", false
	}
	return d.Classify(err)
}
