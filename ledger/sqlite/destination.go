package sqlite

import (
	"context"
	"database/sql"

	"github.com/tranche-dev/tranche/destination/sqldest"
)

// Destination is a [github.com/tranche-dev/tranche.Destination] that
// replaces assets' partitions in tables of a SQLite file, each write in one transaction with its
// fencing check; see github.com/tranche-dev/tranche/destination/sqldest for the
// tables, the checks and what each mode guarantees. Close it after its
// last use.
//
// A destination made by [NewDestination] writes into the ledger's own
// file and commits the rows of a backfill's partition in the
// transaction that records the partition's success: exactly once, with
// no window in which the data and the ledger disagree.
type Destination struct {
	*sqldest.Destination
	db *sql.DB // the file's writing connection when the destination opened it; nil when it is the ledger's
}

// NewDestination returns a destination writing the tables into the
// ledger's file, sharing its transactions: a backfill's write commits
// with the ledger's record of the partition's success, or not at all.
// Writes outside a ledger (Runner.Run, whose batches have no token)
// commit on their own. It creates the token table (sqldest.TokenTable)
// if missing; create the tables themselves with CreateTables, or before.
func NewDestination(ctx context.Context, l *Ledger, tables ...sqldest.Table) (*Destination, error) {
	d, err := sqldest.New(ctx, nil, sqldest.Options{Dialect: destDialect(l.classify), Name: "sqlite " + l.path, Ledger: l.Ledger}, tables...)
	if err != nil {
		return nil, err
	}
	return &Destination{Destination: d}, nil
}

// OpenDestination opens a destination in the SQLite file at path, which
// it creates if missing (its folder must exist), apart from any ledger:
// each write commits in a transaction of its own, refusing a batch whose
// fencing token is older than its partition's last write. opts are the
// ledger's options, of which the destination takes BusyTimeout and
// Synchronous. The file refused by [Open] is refused alike.
func OpenDestination(ctx context.Context, path string, opts *Options, tables ...sqldest.Table) (*Destination, error) {
	f, err := openFile(ctx, "sqlite", path, opts, false, false)
	if err != nil {
		return nil, err
	}
	d, err := sqldest.New(ctx, f.writer, sqldest.Options{Dialect: destDialect(f.dialect.Classify), Name: f.name}, tables...)
	if err != nil {
		f.writer.Close()
		return nil, err
	}
	return &Destination{Destination: d, db: f.writer}, nil
}

// destDialect is sqldest's SQLite dialect, its failures explained as the
// ledger's dialect explains them (the busy timeout, the file).
func destDialect(classify func(error) (error, string, bool)) *sqldest.Dialect {
	d := sqldest.SQLite
	d.Classify = classify
	return &d
}

// Close closes the file the destination opened; a destination sharing a
// ledger leaves the ledger's file to the ledger.
func (d *Destination) Close() error {
	if d.db == nil {
		return nil
	}
	return d.db.Close()
}
