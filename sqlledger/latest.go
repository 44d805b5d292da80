package sqlledger

import (
	"context"
	"iter"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tranche-dev/tranche/ledger"
)

var _ ledger.LatestReader = (*Ledger)(nil)

// rangesPerQuery bounds the ranges one query of CountLatest or FindLatest
// names, so that a statement stays a few hundred kilobytes.
const rangesPerQuery = 4096

// rangeValues returns ranges, the i-th from index first+i, as the rows
// (index, from, to) of a VALUES list, in Unix seconds. They are integer
// literals, not parameters: a grid's two thousand cells would be six
// thousand parameters, and integers formatted here carry no SQL.
func rangeValues(first int, ranges []ledger.Range) string {
	var b strings.Builder
	b.WriteString("(VALUES ")
	for i, r := range ranges {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('(')
		b.WriteString(strconv.Itoa(first + i))
		b.WriteString(", ")
		b.WriteString(strconv.FormatInt(ceilUnix(r.From), 10))
		b.WriteString(", ")
		b.WriteString(strconv.FormatInt(ceilUnix(r.To), 10))
		b.WriteByte(')')
	}
	b.WriteString(") AS v")
	return b.String()
}

// latestOfRanges joins the ranges of VALUES list v (index column1, from
// column2, to column3) to the latest attempts a of the partitions of the
// DAG named by $dag starting in each: per range, a range of the primary key
// of tranche_partitions, then one attempt by its primary key per
// partition. Its DAG is a subquery, not a join, as in qAttempts.
func latestOfRanges(v string, dag int) string {
	return ` FROM ` + v + `
		JOIN tranche_partitions p ON p.dag_id = (SELECT id FROM tranche_dags WHERE dag = $` + strconv.Itoa(dag) + `)
			AND p.start_s >= v.column2 AND p.start_s < v.column3
		JOIN tranche_attempts a ON a.dag_id = p.dag_id AND a.start_s = p.start_s AND a.attempt = p.latest`
}

// qCountLatest counts the latest attempts of the ranges of v grouped by
// what ledger.ClaimRequest.Judge reads: the state, a lease live at $1
// (Unix milliseconds, rounded down: a lease until L is live at an
// instant before L, and L is whole milliseconds) and a revision above
// $2; the DAG is $3. The rule itself is Judge's, applied in Go to one
// sample per group.
func qCountLatest(v string) string {
	return `SELECT v.column1, a.state,
			CASE WHEN a.lease_until_ms > CAST($1 AS BIGINT) THEN 1 ELSE 0 END,
			CASE WHEN a.revision > CAST($2 AS BIGINT) THEN 1 ELSE 0 END,
			COUNT(*)` + latestOfRanges(v, 3) + `
		GROUP BY v.column1, a.state, 3, 4`
}

// CountLatest implements [ledger.LatestReader] with one aggregate query
// per rangesPerQuery ranges.
func (l *Ledger) CountLatest(ctx context.Context, req ledger.CountRequest) ([]ledger.LatestCount, error) {
	var out []ledger.LatestCount
	for first := 0; first < len(req.Ranges); first += rangesPerQuery {
		ranges := req.Ranges[first:min(first+rangesPerQuery, len(req.Ranges))]
		err := l.read(ctx, "counting the latest attempts of DAG "+req.DAG, func() error {
			rows, err := l.reader.QueryContext(ctx, l.q(qCountLatest(rangeValues(first, ranges))), req.Now.UnixMilli(), req.Revision, req.DAG)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var c ledger.LatestCount
				var state string
				var live, above int
				if err := rows.Scan(&c.Range, &state, &live, &above, &c.N); err != nil {
					return err
				}
				c.State, c.Live, c.Above = ledger.State(state), live != 0, above != 0
				out = append(out, c)
			}
			return rows.Err()
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// qFindLatest reads the latest attempts of DAG $1 in the ranges of v in
// n states (from $2), oldest partition first, or with newest the newest of them
// by their finish, an attempt without one last.
func qFindLatest(v string, n int, newest bool) string {
	q := `SELECT ` + attemptColumns + latestOfRanges(v, 1) + `
		WHERE a.state IN (` + params(2, n) + `)`
	if newest {
		return q + ` ORDER BY CASE WHEN a.finished_ms IS NULL THEN 0 ELSE 1 END DESC, a.finished_ms DESC, a.start_s DESC
			LIMIT $` + strconv.Itoa(2+n)
	}
	return q + ` ORDER BY a.start_s`
}

// FindLatest implements [ledger.LatestReader]. It reads the answer
// before it yields, so that the loop body may call the ledger: it is for
// few attempts (the running ones, the newest failure), not every one.
func (l *Ledger) FindLatest(ctx context.Context, req ledger.FindRequest) iter.Seq2[ledger.Attempt, error] {
	return func(yield func(ledger.Attempt, error) bool) {
		var found []ledger.Attempt
		for first := 0; first < len(req.Ranges) && len(req.States) > 0; first += rangesPerQuery {
			ranges := req.Ranges[first:min(first+rangesPerQuery, len(req.Ranges))]
			args := []any{req.DAG}
			for _, s := range req.States {
				args = append(args, string(s))
			}
			if req.Newest > 0 {
				args = append(args, req.Newest)
			}
			err := l.read(ctx, "reading the latest attempts of DAG "+req.DAG, func() error {
				rows, err := l.reader.QueryContext(ctx, l.q(qFindLatest(rangeValues(first, ranges), len(req.States), req.Newest > 0)), args...)
				if err != nil {
					return err
				}
				defer rows.Close()
				for rows.Next() {
					a, err := scanAttempt(rows, req.DAG)
					if err != nil {
						return err
					}
					found = append(found, a)
				}
				return rows.Err()
			})
			if err != nil {
				yield(ledger.Attempt{}, err)
				return
			}
		}
		if req.Newest > 0 {
			// Each query kept its newest; these are the newest of all.
			slices.SortStableFunc(found, ledger.FinishedLater)
			found = found[:min(req.Newest, len(found))]
		}
		for _, a := range found {
			if !yield(a, nil) {
				return
			}
		}
	}
}

// qChangedIn reads the starts of the partitions of DAG $1 starting in
// [$3, $4) with an attempt changed after revision $2, through the index
// of revisions, as qRevisionIn does.
const qChangedIn = `SELECT DISTINCT a.start_s FROM tranche_attempts a
	WHERE a.dag_id = (SELECT id FROM tranche_dags WHERE dag = $1) AND a.revision > $2
		AND +a.start_s >= $3 AND +a.start_s < $4
	ORDER BY a.start_s`

// ChangedIn implements [ledger.LatestReader].
func (l *Ledger) ChangedIn(ctx context.Context, dag string, from, to time.Time, after int64) ([]time.Time, error) {
	var out []time.Time
	err := l.read(ctx, "reading the changes of DAG "+dag+" from "+from.Format(time.RFC3339)+" to "+to.Format(time.RFC3339), func() error {
		rows, err := l.readRows(ctx, qChangedIn, dag, after, ceilUnix(from), ceilUnix(to))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var s int64
			if err := rows.Scan(&s); err != nil {
				return err
			}
			out = append(out, time.Unix(s, 0).UTC())
		}
		return rows.Err()
	})
	return out, err
}
