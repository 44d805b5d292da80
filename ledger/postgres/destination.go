package postgres

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/tranche-dev/tranche/destination/column"
	"github.com/tranche-dev/tranche/destination/sqldest"
)

// Destination is a [github.com/tranche-dev/tranche.Destination] that
// replaces assets' partitions in tables of a PostgreSQL database, each write in one transaction with
// its fencing check, inserting the rows with COPY; see
// github.com/tranche-dev/tranche/destination/sqldest for the tables, the checks and
// what each mode guarantees. Close it after its last use.
//
// A destination made by [NewDestination] writes into the ledger's own
// database and commits the rows of a backfill's partition in the
// transaction that records the partition's success, as river's
// JobCompleteTx completes a job: exactly once, with no window in which
// the data and the ledger disagree, whatever happens to the worker, its
// connection or the server.
type Destination struct {
	*sqldest.Destination
	db *sql.DB // the destination's own connections; nil when they are the ledger's
}

// NewDestination returns a destination writing the tables into the
// ledger's database, on its connections (Options.MaxConns), sharing its
// transactions: a backfill's write commits with the ledger's record of
// the partition's success, or not at all. Writes outside a ledger
// (Runner.Run, whose batches have no token) commit on their own.
// Unqualified tables are in the ledger's schema. It creates the token
// table (sqldest.TokenTable) if missing; create the tables themselves
// with CreateTables, or before.
func NewDestination(ctx context.Context, l *Ledger, tables ...sqldest.Table) (*Destination, error) {
	d, err := sqldest.New(ctx, nil, sqldest.Options{Dialect: destDialect(l.classify), Name: "postgres " + l.desc, Ledger: l.Ledger}, tables...)
	if err != nil {
		return nil, err
	}
	return &Destination{Destination: d}, nil
}

// OpenDestination connects to the database of connString, as [Open]
// does with the same options (Schema is where unqualified tables are,
// and where the token table is created), for a destination apart from
// any ledger: each write commits in a transaction of its own, refusing a
// batch whose fencing token is older than its partition's last write.
func OpenDestination(ctx context.Context, connString string, opts *Options, tables ...sqldest.Table) (*Destination, error) {
	c, err := connect(ctx, "postgres", connString, opts, false, false)
	if err != nil {
		return nil, err
	}
	d, err := sqldest.New(ctx, c.db, sqldest.Options{Dialect: destDialect(c.dialect.Classify), Name: c.name}, tables...)
	if err != nil {
		c.db.Close()
		return nil, err
	}
	return &Destination{Destination: d, db: c.db}, nil
}

// Close closes the connections the destination opened; a destination
// sharing a ledger leaves the ledger's to the ledger.
func (d *Destination) Close() error {
	if d.db == nil {
		return nil
	}
	return d.db.Close()
}

// destDialect is the destinations' PostgreSQL dialect, its failures
// explained as the ledger's are.
func destDialect(classify func(error) (error, string, bool)) *sqldest.Dialect {
	return &sqldest.Dialect{
		Name: "postgres",
		Types: [column.Bytes + 1]string{column.Int: "BIGINT", column.Float: "DOUBLE PRECISION", column.String: "TEXT",
			column.Bool: "BOOLEAN", column.Time: "TIMESTAMPTZ", column.Bytes: "BYTEA"},
		Insert:   copyRows,
		UTF8:     true,
		HasTable: "SELECT to_regclass($1) IS NOT NULL",
		// The migrations' lock: tables are created one process at a
		// time, as the ledger's are.
		LockSchema: fmt.Sprintf("SELECT pg_advisory_xact_lock(%d, hashtext(current_schema()))", lockClass),
		Classify:   classify,
	}
}

// copyRows inserts rows with COPY, on the pgx connection under conn, in
// the transaction open on it: one round trip for the rows (and one for
// the columns' types, cached by pgx per connection), where a prepared
// INSERT costs one per row. Each row is checked as COPY reads it; a
// refused one aborts the COPY (pgx sends CopyFail, and the server's
// error says only that), so the refusal itself is returned, and the
// destination rolls the transaction back.
func copyRows(ctx context.Context, conn *sql.Conn, _ *sql.Tx, table [2]string, columns []string, rows *sqldest.Rows) error {
	return conn.Raw(func(dc any) error {
		c, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("COPY needs a pgx connection (github.com/jackc/pgx/v5/stdlib); the database's driver gave %T", dc)
		}
		ident := pgx.Identifier{table[1]}
		if table[0] != "" {
			ident = pgx.Identifier{table[0], table[1]}
		}
		// One slice of values for every row: pgx encodes a row before
		// it asks for the next. pgx reads the rows in a goroutine of its
		// own, which has ended when CopyFrom returns.
		vals := make([]any, len(columns))
		var refused error
		i := 0
		src := pgx.CopyFromFunc(func() ([]any, error) {
			if i == rows.Len() {
				return nil, nil
			}
			if err := rows.Row(i, vals); err != nil {
				refused = err
				return nil, err
			}
			i++
			return vals, nil
		})
		n, err := c.Conn().CopyFrom(ctx, ident, columns, src)
		if refused != nil {
			return refused
		}
		if err == nil && n != int64(rows.Len()) {
			err = fmt.Errorf("COPY into %s wrote %d of %d rows", ident.Sanitize(), n, rows.Len())
		}
		return err
	})
}
