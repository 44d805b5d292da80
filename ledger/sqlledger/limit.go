package sqlledger

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/ledger"
)

var _ ledger.Limiter = (*Ledger)(nil)

const (
	// qSetLimit sets the limit of DAG $1.
	qSetLimit = `INSERT INTO tranche_limits (dag_id, max_running, by_whom, note, since_ms, limit_group) VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (dag_id) DO UPDATE SET max_running = excluded.max_running, by_whom = excluded.by_whom,
			note = excluded.note, since_ms = excluded.since_ms, limit_group = excluded.limit_group`
	// qReadLimit reads the limit of DAG identity $2, with its runs
	// holding live leases (a run is a worker's run id: a lease) and the
	// demands that last, at $1's clock or, when NULL, the database's:
	// those of every DAG of its group under one (a run id is of one
	// DAG, so the count of each DAG's adds up).
	qReadLimit = `SELECT l.max_running, l.by_whom, l.note, l.since_ms, l.limit_group,
			(SELECT COUNT(DISTINCT a.dag_id || ' ' || a.worker || ' ' || a.run_id) FROM tranche_attempts a
				WHERE a.dag_id IN (SELECT g.dag_id FROM tranche_limits g WHERE g.dag_id = l.dag_id OR (l.limit_group <> '' AND g.limit_group = l.limit_group))
					AND a.state = 'running' AND a.lease_until_ms > c.now_ms),
			(SELECT COUNT(*) FROM tranche_demands m
				WHERE m.dag_id IN (SELECT g.dag_id FROM tranche_limits g WHERE g.dag_id = l.dag_id OR (l.limit_group <> '' AND g.limit_group = l.limit_group))
					AND m.until_ms > c.now_ms)
		FROM (SELECT COALESCE(CAST($1 AS BIGINT), {{now}}) AS now_ms) c, tranche_limits l
		JOIN tranche_dags d ON d.id = l.dag_id
		WHERE d.dag = $2`
	// qCountLimit counts the runs of DAG $1 holding leases live at $2,
	// and the demands of DAG $3 that last at $4.
	qCountLimit = `SELECT
		(SELECT COUNT(DISTINCT worker || ' ' || run_id) FROM tranche_attempts WHERE dag_id = $1 AND state = 'running' AND lease_until_ms > $2),
		(SELECT COUNT(*) FROM tranche_demands WHERE dag_id = $3 AND until_ms > $4)`
	// qCountGroupLimit counts the runs of the DAGs of limit group $1
	// holding leases live at $2, and their demands that last at $4 ($3:
	// the group again).
	qCountGroupLimit = `SELECT
		(SELECT COUNT(DISTINCT dag_id || ' ' || worker || ' ' || run_id) FROM tranche_attempts
			WHERE dag_id IN (SELECT dag_id FROM tranche_limits WHERE limit_group = $1) AND state = 'running' AND lease_until_ms > $2),
		(SELECT COUNT(*) FROM tranche_demands WHERE dag_id IN (SELECT dag_id FROM tranche_limits WHERE limit_group = $3) AND until_ms > $4)`
	// qDemand records, or renews, the demand of the slot of DAG $1
	// starting at $2, until $3.
	qDemand = `INSERT INTO tranche_demands (dag_id, start_s, until_ms) VALUES ($1, $2, $3)
		ON CONFLICT (dag_id, start_s) DO UPDATE SET until_ms = excluded.until_ms`
	// qLapsedDemands deletes the demands of DAG $1 that lapsed before $2.
	qLapsedDemands = `DELETE FROM tranche_demands WHERE dag_id = $1 AND until_ms <= $2`
)

// qLockLimit reads, and where the dialect locks rows, locks, the limit of
// DAG $1 (and $2) and, when it has a group, those of every DAG of the group, in
// the order of their ids: the claims of any DAG of a group take turns,
// and lock in one order, so that two never wait for each other.
func (d *Dialect) qLockLimit() string {
	return `SELECT dag_id, max_running, limit_group FROM tranche_limits
		WHERE dag_id = $1 OR limit_group = (SELECT limit_group FROM tranche_limits WHERE dag_id = $2 AND limit_group <> '')
		ORDER BY dag_id` + d.LimitLock
}

// qDropDemands deletes the demands of DAG $1 of the slots starting at n
// starts from $2.
func qDropDemands(n int) string {
	return `DELETE FROM tranche_demands WHERE dag_id = $1 AND start_s IN (` + params(2, n) + `)`
}

// SetLimit implements [ledger.Limiter].
func (l *Ledger) SetLimit(ctx context.Context, dag string, lim ledger.Limit) (ledger.Limit, error) {
	if err := lim.Check(); err != nil {
		return ledger.Limit{}, err
	}
	if err := ctx.Err(); err != nil {
		return ledger.Limit{}, err
	}
	var newDAG int64
	err := l.write(ctx, "setting the limit of "+dag, func(tx *sql.Tx) error {
		newDAG = 0
		dagID, created, err := l.ensureDAG(ctx, tx, dag)
		if err != nil {
			return err
		}
		if created {
			newDAG = dagID
		}
		now, err := l.now(ctx, tx)
		if err != nil {
			return err
		}
		_, err = l.exec(ctx, tx, qSetLimit, dagID, lim.Max, lim.By, lim.Note, now.UnixMilli(), lim.Group)
		return err
	})
	if err != nil {
		return ledger.Limit{}, err
	}
	if newDAG != 0 {
		l.dags.Store(dag, newDAG)
	}
	return l.Limit(ctx, dag)
}

// Limit implements [ledger.Limiter].
func (l *Ledger) Limit(ctx context.Context, dag string) (ledger.Limit, error) {
	var lim ledger.Limit
	err := l.read(ctx, "reading the limit of "+dag, func() error {
		var clock any // nil: the database's
		if l.clock != nil {
			clock = l.clock().UnixMilli()
		}
		var since int64
		err := l.reader.QueryRowContext(ctx, l.q(strings.ReplaceAll(qReadLimit, "{{now}}", l.dialect.Now)), clock, dag).
			Scan(&lim.Max, &lim.By, &lim.Note, &since, &lim.Group, &lim.Running, &lim.Waiting)
		if errors.Is(err, sql.ErrNoRows) {
			lim = ledger.Limit{}
			return nil
		}
		lim.Since = time.UnixMilli(since).UTC()
		return err
	})
	return lim, err
}

// admitLimit applies, in tx, the limit of req's DAG, which the claim's
// first statement read as st.limit (0: none), to req at st.now: it
// locks the limit's row where the dialect locks rows, so that the
// claims of the DAG take turns from here to their commit, and counts its
// runs and the demands that last.
func (l *Ledger) admitLimit(ctx context.Context, tx *sql.Tx, dagID int64, req ledger.ClaimRequest, st txStart) error {
	if st.limit <= 0 || req.Record {
		return nil
	}
	running, demand, limit, err := l.countLimit(ctx, tx, dagID, st.now)
	if err != nil {
		return err
	}
	return req.AdmitsLimit(limit, running, demand)
}

// countLimitLock locks and reads, in tx, the limit of DAG dagID (0 for
// none) and its group ("" for none), locking those of its group too.
func (l *Ledger) countLimitLock(ctx context.Context, tx *sql.Tx, dagID int64) (limit int, group string, _ error) {
	rows, err := l.query(ctx, tx, l.dialect.qLockLimit(), dagID, dagID)
	if err != nil {
		return 0, "", err
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var max int
		var g string
		if err := rows.Scan(&id, &max, &g); err != nil {
			return 0, "", err
		}
		if id == dagID {
			limit, group = max, g
		}
	}
	return limit, group, rows.Err()
}

// countLimit locks and reads, in tx, the limit of DAG dagID, and counts
// its runs and the demands that last at now: those of every DAG of its
// group under one.
func (l *Ledger) countLimit(ctx context.Context, tx *sql.Tx, dagID int64, now time.Time) (running int, demand bool, limit int, _ error) {
	limit, group, err := l.countLimitLock(ctx, tx, dagID)
	if err != nil || limit == 0 {
		return 0, false, 0, err
	}
	var waiting int
	ms := now.UnixMilli()
	q, args := qCountLimit, []any{dagID, ms, dagID, ms}
	if group != "" {
		q, args = qCountGroupLimit, []any{group, ms, group, ms}
	}
	if err := l.queryRow(ctx, tx, q, args...).Scan(&running, &waiting); err != nil {
		return 0, false, 0, err
	}
	return running, waiting > 0, limit, nil
}

// demand records, in a transaction of its own, the demand of the slots
// of req, a scheduler's claim refused for the limit at now: it lasts as
// the claim's lease would have. Lapsed demands of the DAG go.
func (l *Ledger) demand(ctx context.Context, req ledger.ClaimRequest, now time.Time) error {
	until := now.Add(req.Lease).UnixMilli()
	return l.write(ctx, "recording the demand of "+describe(req.Partitions), func(tx *sql.Tx) error {
		dagID, err := l.dagID(ctx, tx, req.DAG)
		if err != nil || dagID == 0 {
			return err
		}
		if _, err := l.exec(ctx, tx, qLapsedDemands, dagID, now.UnixMilli()); err != nil {
			return err
		}
		for _, p := range req.Partitions {
			if _, err := l.exec(ctx, tx, qDemand, dagID, p.Start.Unix(), until); err != nil {
				return err
			}
		}
		return nil
	})
}

// dropDemands deletes, in tx, the demands of the partitions ps of a DAG
// under a limit, which a claim granted: their slots no longer wait.
func (l *Ledger) dropDemands(ctx context.Context, tx *sql.Tx, dagID int64, ps []tranche.TimePartition) error {
	for batch := range slices.Chunk(ps, batchRows) {
		args := append(make([]any, 0, len(batch)+1), dagID)
		for _, p := range batch {
			args = append(args, p.Start.Unix())
		}
		if _, err := l.exec(ctx, tx, qDropDemands(len(batch)), args...); err != nil {
			return err
		}
	}
	return nil
}
