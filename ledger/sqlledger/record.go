package sqlledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tranche-dev/tranche/ledger"
)

func scanBackfill(row interface{ Scan(...any) error }) (ledger.BackfillRecord, error) {
	var b ledger.BackfillRecord
	var created int64
	var canceled, stopRunning int
	var canceledAt, resumedAt sql.NullInt64
	var partitions string
	if err := row.Scan(&b.ID, &b.DAG, &b.Window, &b.Chunk, &created, &canceled, &canceledAt, &resumedAt, &partitions, &stopRunning, &b.DAGName); err != nil {
		return b, err
	}
	b.Created, b.Canceled, b.StopRunning = time.UnixMilli(created).UTC(), canceled != 0, stopRunning != 0
	if canceledAt.Valid {
		b.CanceledAt = time.UnixMilli(canceledAt.Int64).UTC()
	}
	if resumedAt.Valid {
		b.ResumedAt = time.UnixMilli(resumedAt.Int64).UTC()
	}
	for f := range strings.FieldsSeq(partitions) {
		start, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return b, fmt.Errorf("backfill %s: partition start %q is not a Unix time: %w", b.ID, f, err)
		}
		b.Partitions = append(b.Partitions, time.Unix(start, 0).UTC())
	}
	return b, nil
}

// nullMillis is t in Unix milliseconds, NULL when zero.
func nullMillis(t time.Time) sql.NullInt64 {
	return sql.NullInt64{Int64: t.UnixMilli(), Valid: !t.IsZero()}
}

// PutBackfill implements [ledger.Ledger]. Created is kept to the
// millisecond.
func (l *Ledger) PutBackfill(ctx context.Context, b ledger.BackfillRecord) (ledger.BackfillRecord, error) {
	if err := ctx.Err(); err != nil {
		return ledger.BackfillRecord{}, err
	}
	if b.ID == "" {
		return ledger.BackfillRecord{}, fmt.Errorf("tranche: PutBackfill without an id")
	}
	var partitions strings.Builder
	for i, t := range b.Partitions {
		if t.Nanosecond() != 0 {
			return ledger.BackfillRecord{}, fmt.Errorf("tranche: PutBackfill of backfill %s with partition start %s: a SQL ledger keeps partition bounds to the second",
				b.ID, t.Format(time.RFC3339Nano))
		}
		if i > 0 {
			partitions.WriteByte(' ')
		}
		partitions.WriteString(strconv.FormatInt(t.Unix(), 10))
	}
	var stored ledger.BackfillRecord
	err := l.write(ctx, "recording backfill "+b.ID, func(tx *sql.Tx) error {
		var err error
		stored, err = scanBackfill(l.queryRow(ctx, tx, qBackfill, b.ID))
		if err == nil && b.DAGName != "" && b.DAGName != stored.DAGName {
			// A label: renaming it keeps the rest.
			if _, err := l.exec(ctx, tx, qRenameBackfill, b.DAGName, b.ID); err != nil {
				return err
			}
			stored.DAGName = b.DAGName
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		created := b.Created
		if created.IsZero() {
			if created, err = l.now(ctx, tx); err != nil {
				return err
			}
		}
		res, err := l.exec(ctx, tx, qInsertBackfill, b.ID, b.DAG, b.Window, b.Chunk, created.UnixMilli(), boolInt(b.Canceled),
			nullMillis(b.CanceledAt), nullMillis(b.ResumedAt), partitions.String(), boolInt(b.StopRunning), b.DAGName)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			// Another worker recorded it since our read: theirs stands.
			stored, err = scanBackfill(l.queryRow(ctx, tx, qBackfill, b.ID))
			return err
		}
		stored = b
		stored.Created = time.UnixMilli(created.UnixMilli()).UTC()
		stored.CanceledAt, stored.ResumedAt = millis(b.CanceledAt), millis(b.ResumedAt)
		stored.Partitions = nil
		for _, t := range b.Partitions {
			stored.Partitions = append(stored.Partitions, t.UTC())
		}
		return nil
	})
	return stored, err
}

// Backfill implements [ledger.Ledger].
func (l *Ledger) Backfill(ctx context.Context, id string) (ledger.BackfillRecord, error) {
	var b ledger.BackfillRecord
	err := l.read(ctx, "reading backfill "+id, func() error {
		var err error
		b, err = scanBackfill(l.readRow(ctx, qBackfill, id))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%w %q", ledger.ErrUnknownBackfill, id)
		}
		return err
	})
	return b, err
}

// Backfills implements [ledger.Ledger].
func (l *Ledger) Backfills(ctx context.Context) ([]ledger.BackfillRecord, error) {
	var out []ledger.BackfillRecord
	err := l.read(ctx, "reading the backfills", func() error {
		rows, err := l.readRows(ctx, qBackfills)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			b, err := scanBackfill(rows)
			if err != nil {
				return err
			}
			out = append(out, b)
		}
		return rows.Err()
	})
	return out, err
}

// boolInt is b as the 0 or 1 of an INTEGER column.
func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// CancelBackfill implements [ledger.Ledger].
func (l *Ledger) CancelBackfill(ctx context.Context, id string, opts ledger.CancelOptions) error {
	return l.markBackfill(ctx, "canceling backfill "+id, l.dialect.qCancelBackfill(), id, boolInt(opts.StopRunning))
}

// ResumeBackfill implements [ledger.Ledger].
func (l *Ledger) ResumeBackfill(ctx context.Context, id string) error {
	return l.markBackfill(ctx, "resuming backfill "+id, l.dialect.qResumeBackfill(), id)
}

// markBackfill runs query, qCancelBackfill or qResumeBackfill, on
// backfill id, with args before id (qCancelBackfill's stopRunning): one
// statement, a transaction of its own.
func (l *Ledger) markBackfill(ctx context.Context, op, query, id string, args ...any) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var clock any // nil: the database's
	if l.clock != nil {
		clock = l.clock().UnixMilli()
	}
	return l.write(ctx, op, func(tx *sql.Tx) error {
		res, err := l.exec(ctx, tx, query, append(append([]any{clock}, args...), id)...)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			if err == nil {
				err = fmt.Errorf("%w %q", ledger.ErrUnknownBackfill, id)
			}
			return err
		}
		return nil
	})
}
