package sqlledger

import (
	"context"
	"database/sql"
	"iter"
	"time"

	"github.com/tranche-dev/tranche/ledger"
)

// A Reader is a ledger over database/sql opened for reading only
// ([OpenReader]): a [ledger.Reader] and a [ledger.LatestReader], with no
// method that writes, so that a program which only reads (a status, a
// page) cannot write by mistake, and a database it may only read (a
// read-only file, a role allowed only SELECT) serves it.
type Reader struct{ l *Ledger }

var (
	_ ledger.Reader       = (*Reader)(nil)
	_ ledger.LatestReader = (*Reader)(nil)
	_ ledger.LimitReader  = (*Reader)(nil)
)

// Limit implements [ledger.LimitReader].
func (r *Reader) Limit(ctx context.Context, dag string) (ledger.Limit, error) {
	return r.l.Limit(ctx, dag)
}

// OpenReader returns a reader of the ledger in db, which must hold it at
// [SchemaVersion], as [Options.Existing] opens it: nothing is created,
// migrated or written. Options.Reader is ignored: db serves every read.
// The caller keeps db and closes it when done.
func OpenReader(ctx context.Context, db *sql.DB, opts Options) (*Reader, error) {
	opts.Existing, opts.Reader = true, nil
	l, err := Open(ctx, db, opts)
	if err != nil {
		return nil, err
	}
	return &Reader{l}, nil
}

// Name returns the ledger's name, as its errors give it.
func (r *Reader) Name() string { return r.l.name }

// Latest implements [ledger.Reader].
func (r *Reader) Latest(ctx context.Context, dag string, from, to time.Time) iter.Seq2[ledger.Attempt, error] {
	return r.l.Latest(ctx, dag, from, to)
}

// History implements [ledger.Reader].
func (r *Reader) History(ctx context.Context, dag string, start time.Time) ([]ledger.Attempt, error) {
	return r.l.History(ctx, dag, start)
}

// Revision implements [ledger.Reader].
func (r *Reader) Revision(ctx context.Context, dag string) (int64, error) {
	return r.l.Revision(ctx, dag)
}

// RevisionIn implements [ledger.Reader].
func (r *Reader) RevisionIn(ctx context.Context, dag string, from, to time.Time, after int64) (int64, error) {
	return r.l.RevisionIn(ctx, dag, from, to, after)
}

// RecentSuccesses implements [ledger.Reader].
func (r *Reader) RecentSuccesses(ctx context.Context, dag string, n int) ([]ledger.Attempt, error) {
	return r.l.RecentSuccesses(ctx, dag, n)
}

// Backfill implements [ledger.Reader].
func (r *Reader) Backfill(ctx context.Context, id string) (ledger.BackfillRecord, error) {
	return r.l.Backfill(ctx, id)
}

// Backfills implements [ledger.Reader].
func (r *Reader) Backfills(ctx context.Context) ([]ledger.BackfillRecord, error) {
	return r.l.Backfills(ctx)
}

// SchedulePause implements [ledger.Reader].
func (r *Reader) SchedulePause(ctx context.Context, dag string) (ledger.SchedulePause, error) {
	return r.l.SchedulePause(ctx, dag)
}

// CountLatest implements [ledger.LatestReader].
func (r *Reader) CountLatest(ctx context.Context, req ledger.CountRequest) ([]ledger.LatestCount, error) {
	return r.l.CountLatest(ctx, req)
}

// FindLatest implements [ledger.LatestReader].
func (r *Reader) FindLatest(ctx context.Context, req ledger.FindRequest) iter.Seq2[ledger.Attempt, error] {
	return r.l.FindLatest(ctx, req)
}

// ChangedIn implements [ledger.LatestReader].
func (r *Reader) ChangedIn(ctx context.Context, dag string, from, to time.Time, after int64) ([]time.Time, error) {
	return r.l.ChangedIn(ctx, dag, from, to, after)
}

// LatestBriefs implements [ledger.BriefReader].
func (r *Reader) LatestBriefs(ctx context.Context, dag string, from, to time.Time) iter.Seq2[ledger.Brief, error] {
	return r.l.LatestBriefs(ctx, dag, from, to)
}

// Close closes the statements the reader prepared; the caller closes
// the database after.
func (r *Reader) Close() error { return r.l.Close() }
