package sqlledger

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/tranche-dev/tranche/ledger"
)

const (
	qSchedulePause = `SELECT paused, by_whom, note, since_ms, paused_ms FROM tranche_schedule_pauses WHERE dag = $1`
	// qPauseSchedule pauses DAG $1's schedule at $4 (and $5, the same
	// instant), by $2 for $3, unless it is paused: a pause in force keeps
	// who and since when. (SQLite numbers the parameters in the order
	// they first appear, so each query names them in that order.)
	qPauseSchedule = `INSERT INTO tranche_schedule_pauses (dag, paused, by_whom, note, since_ms, paused_ms)
		VALUES ($1, 1, $2, $3, $4, $5)
		ON CONFLICT (dag) DO UPDATE SET paused = 1, by_whom = excluded.by_whom, note = excluded.note,
			since_ms = excluded.since_ms, paused_ms = excluded.since_ms
		WHERE tranche_schedule_pauses.paused = 0`
	// qResumeSchedule resumes DAG $4's schedule at $3, by $1 for $2,
	// if it is paused.
	qResumeSchedule = `UPDATE tranche_schedule_pauses SET paused = 0, by_whom = $1, note = $2, since_ms = $3
		WHERE dag = $4 AND paused = 1`
)

// SetSchedulePause implements [ledger.Ledger].
func (l *Ledger) SetSchedulePause(ctx context.Context, dag string, p ledger.SchedulePause) (ledger.SchedulePause, error) {
	if err := ctx.Err(); err != nil {
		return ledger.SchedulePause{}, err
	}
	op := "resuming the schedule of " + dag
	if p.Paused {
		op = "pausing the schedule of " + dag
	}
	var stored ledger.SchedulePause
	err := l.write(ctx, op, func(tx *sql.Tx) error {
		now, err := l.now(ctx, tx)
		if err != nil {
			return err
		}
		ms := now.UnixMilli()
		if p.Paused {
			_, err = l.exec(ctx, tx, qPauseSchedule, dag, p.By, p.Note, ms, ms)
		} else {
			_, err = l.exec(ctx, tx, qResumeSchedule, p.By, p.Note, ms, dag)
		}
		if err != nil {
			return err
		}
		stored, err = scanPause(l.queryRow(ctx, tx, qSchedulePause, dag))
		return err
	})
	return stored, err
}

// SchedulePause implements [ledger.Ledger].
func (l *Ledger) SchedulePause(ctx context.Context, dag string) (ledger.SchedulePause, error) {
	var p ledger.SchedulePause
	err := l.read(ctx, "reading the pause of the schedule of "+dag, func() error {
		var err error
		p, err = scanPause(l.readRow(ctx, qSchedulePause, dag))
		return err
	})
	return p, err
}

// scanPause reads a row of qSchedulePause: the zero value for none.
func scanPause(row *sql.Row) (ledger.SchedulePause, error) {
	var p ledger.SchedulePause
	var paused int
	var since int64
	var pausedAt sql.NullInt64
	switch err := row.Scan(&paused, &p.By, &p.Note, &since, &pausedAt); {
	case errors.Is(err, sql.ErrNoRows):
		return ledger.SchedulePause{}, nil
	case err != nil:
		return p, err
	}
	p.Paused, p.Since = paused != 0, time.UnixMilli(since).UTC()
	if pausedAt.Valid {
		p.PausedAt = time.UnixMilli(pausedAt.Int64).UTC()
	}
	return p, nil
}
