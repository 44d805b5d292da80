package sqlledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tranche-dev/tranche/ledger"
)

var _ ledger.LatestReader = (*Ledger)(nil)

// rangesPerQuery bounds the ranges one statement of CountLatest or
// FindLatest names: each is a SELECT or two of a UNION ALL, and SQLite
// takes at most 500 of them (SQLITE_MAX_COMPOUND_SELECT).
const rangesPerQuery = 200

// bucketsPerQuery bounds the ranges one statement of CountLatest names
// through the dialect's BucketOf: their bounds, the statement's one
// parameter.
const bucketsPerQuery = 10000

// The statements of CountLatest and FindLatest are built for their
// ranges, one SELECT per range joined by UNION ALL, with every value but
// BucketOf's bounds an integer literal formatted here (the DAG's id,
// instants, revisions), which carries no SQL: a VALUES list of ranges joined to the attempts
// would be one statement too, but SQLite then reads every attempt of the
// DAG for each range (ten times slower for 137 ranges of 100,000
// partitions), while a SELECT per range is a range of the primary key.

// countOfRange counts the latest attempts of the partitions of DAG dag
// starting in [lo, hi), reported as range i, by what
// ledger.ClaimRequest.Judge reads: the state, whether a running
// attempt's lease is live at nowMS (Unix milliseconds rounded down: a
// lease until L, a whole millisecond, is live at the instants before
// it) and whether a success's revision is above rev. It returns two rows
// of counts in the columns of rangeCounts: those of every attempt of the
// range, read in the primary key's order (a partition has few), and,
// negated, those of the attempts that are not their partition's latest,
// which only partitions with more than one attempt have; cheaper than
// seeking each partition's latest attempt, as qAttempts explains. Filtered
// counts in one pass, not a GROUP BY, which SQLite sorts (six times
// slower at a million attempts). The rule itself is Judge's, applied in
// Go to one sample per group.
func countOfRange(i int, dag, lo, hi, nowMS, rev int64) string {
	counts := func(sign string) string {
		return `SELECT ` + strconv.Itoa(i) + `, ` + sign + `COUNT(*),
			` + sign + `COUNT(*) FILTER (WHERE a.state = 'running'),
			` + sign + `COUNT(*) FILTER (WHERE a.state = 'running' AND a.lease_until_ms > ` + itoa(nowMS) + `),
			` + sign + `COUNT(*) FILTER (WHERE a.state = 'succeeded'),
			` + sign + `COUNT(*) FILTER (WHERE a.state = 'succeeded' AND a.revision > ` + itoa(rev) + `),
			` + sign + `COUNT(*) FILTER (WHERE a.state = 'failed')`
	}
	return counts("") + `
		FROM tranche_attempts a
		WHERE a.dag_id = ` + itoa(dag) + ` AND a.start_s >= ` + itoa(lo) + ` AND a.start_s < ` + itoa(hi) + `
		UNION ALL ` + counts("-") + `
		FROM tranche_partitions p
		JOIN tranche_attempts a ON a.dag_id = p.dag_id AND a.start_s = p.start_s AND a.attempt < p.latest
		WHERE p.dag_id = ` + itoa(dag) + ` AND p.start_s >= ` + itoa(lo) + ` AND p.start_s < ` + itoa(hi) + ` AND p.latest > 1`
}

// countOfEach is countOfRange for many small ranges, as a chunked
// plan's chunks are, without the dialect's BucketOf (SQLite): one
// statement whose rows are the ranges, from json_each over their bounds,
// each counted by two correlated subqueries that seek its span of the
// primary key, their counts joined in one text of rangeCounts' six.
// SQLite compiles a SELECT per range of a UNION ALL in about as long as
// it takes to count ten partitions, so for ranges by the thousand this
// one statement, compiled once, costs a fraction of it; a join of the
// ranges to the attempts would be grouped by range, which SQLite sorts.
func countOfEach(dag int64, bounds [][2]int64, nowMS, rev int64) string {
	var js strings.Builder
	js.WriteByte('[')
	for i, b := range bounds {
		if i > 0 {
			js.WriteByte(',')
		}
		js.WriteString("[" + itoa(b[0]) + "," + itoa(b[1]) + "]")
	}
	js.WriteByte(']')
	counts := `COUNT(*) || ' ' || COUNT(*) FILTER (WHERE a.state = 'running')
			|| ' ' || COUNT(*) FILTER (WHERE a.state = 'running' AND a.lease_until_ms > ` + itoa(nowMS) + `)
			|| ' ' || COUNT(*) FILTER (WHERE a.state = 'succeeded')
			|| ' ' || COUNT(*) FILTER (WHERE a.state = 'succeeded' AND a.revision > ` + itoa(rev) + `)
			|| ' ' || COUNT(*) FILTER (WHERE a.state = 'failed')`
	return `WITH r(i, lo, hi) AS MATERIALIZED (SELECT CAST(key AS INTEGER), value->>0, value->>1 FROM json_each('` + js.String() + `'))
		SELECT r.i,
		(SELECT ` + counts + `
			FROM tranche_attempts a
			WHERE a.dag_id = ` + itoa(dag) + ` AND a.start_s >= r.lo AND a.start_s < r.hi),
		(SELECT ` + counts + `
			FROM tranche_partitions p
			JOIN tranche_attempts a ON a.dag_id = p.dag_id AND a.start_s = p.start_s AND a.attempt < p.latest
			WHERE p.dag_id = ` + itoa(dag) + ` AND p.start_s >= r.lo AND p.start_s < r.hi AND p.latest > 1)
		FROM r`
}

// parseCounts reads a text of countOfEach: six counts apart by spaces.
func parseCounts(s string) (rangeCounts, error) {
	var c rangeCounts
	f := strings.Fields(s)
	if len(f) != 6 {
		return c, fmt.Errorf("tranche: counts %q: want six integers", s)
	}
	var err error
	for i, p := range []*int{&c.all, &c.running, &c.live, &c.succeeded, &c.above, &c.failed} {
		if *p, err = strconv.Atoi(f[i]); err != nil {
			return c, fmt.Errorf("tranche: counts %q: %w", s, err)
		}
	}
	return c, nil
}

// rangeCounts are the counts of countOfRange's columns after the range's
// index: every attempt, running, running under a live lease, succeeded,
// succeeded above the revision, failed; the rest are canceled, the one
// state left (the attempts table's CHECK).
type rangeCounts struct{ all, running, live, succeeded, above, failed int }

// groups returns c as the groups of ledger.LatestReader.CountLatest.
func (c rangeCounts) groups(i int) []ledger.LatestCount {
	return []ledger.LatestCount{
		{Range: i, State: ledger.StateRunning, Live: true, N: c.live},
		{Range: i, State: ledger.StateRunning, N: c.running - c.live},
		{Range: i, State: ledger.StateSucceeded, Above: true, N: c.above},
		{Range: i, State: ledger.StateSucceeded, N: c.succeeded - c.above},
		{Range: i, State: ledger.StateFailed, N: c.failed},
		{Range: i, State: ledger.StateCanceled, N: c.all - c.running - c.succeeded - c.failed},
	}
}

// countOfBuckets is countOfRange for the ranges between bounds, through
// the dialect's BucketOf: one scan of [bounds[0], bounds[len-1]) grouped
// by bucket, its first column the bucket. The statement's one parameter
// is bounds.
func (d *Dialect) countOfBuckets(dag int64, bounds []int64, nowMS, rev int64) string {
	counts := func(sign, start string) string {
		return `SELECT ` + d.BucketOf(start, "$1") + `, ` + sign + `COUNT(*),
			` + sign + `COUNT(*) FILTER (WHERE a.state = 'running'),
			` + sign + `COUNT(*) FILTER (WHERE a.state = 'running' AND a.lease_until_ms > ` + itoa(nowMS) + `),
			` + sign + `COUNT(*) FILTER (WHERE a.state = 'succeeded'),
			` + sign + `COUNT(*) FILTER (WHERE a.state = 'succeeded' AND a.revision > ` + itoa(rev) + `),
			` + sign + `COUNT(*) FILTER (WHERE a.state = 'failed')`
	}
	lo, hi := itoa(bounds[0]), itoa(bounds[len(bounds)-1])
	return counts("", "a.start_s") + `
		FROM tranche_attempts a
		WHERE a.dag_id = ` + itoa(dag) + ` AND a.start_s >= ` + lo + ` AND a.start_s < ` + hi + `
		GROUP BY 1
		UNION ALL ` + counts("-", "p.start_s") + `
		FROM tranche_partitions p
		JOIN tranche_attempts a ON a.dag_id = p.dag_id AND a.start_s = p.start_s AND a.attempt < p.latest
		WHERE p.dag_id = ` + itoa(dag) + ` AND p.start_s >= ` + lo + ` AND p.start_s < ` + hi + ` AND p.latest > 1
		GROUP BY 1`
}

// bucketsOf returns the bounds of ranges, in order and not overlapping,
// for BucketOf, and of each bucket (from 1) the range it is, or -1 for a
// gap between ranges.
func bucketsOf(ranges []ledger.Range) (bounds []int64, rangeOf []int) {
	rangeOf = []int{-1} // bucket 0: below the first range
	for i, r := range ranges {
		lo, hi := ceilUnix(r.From), ceilUnix(r.To)
		if hi <= lo {
			continue
		}
		if n := len(bounds); n == 0 || bounds[n-1] != lo {
			if n > 0 {
				rangeOf = append(rangeOf, -1) // the gap before lo
			}
			bounds = append(bounds, lo)
		}
		bounds = append(bounds, hi)
		rangeOf = append(rangeOf, i)
	}
	return bounds, rangeOf
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// readDAGID returns the id of DAG dag, or false when the ledger has none.
func (l *Ledger) readDAGID(ctx context.Context, dag string) (int64, bool, error) {
	var id int64
	err := l.readRow(ctx, qDAGID, dag).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	return id, err == nil, err
}

// CountLatest implements [ledger.LatestReader] with one aggregate
// statement per rangesPerQuery ranges.
func (l *Ledger) CountLatest(ctx context.Context, req ledger.CountRequest) ([]ledger.LatestCount, error) {
	sums := map[int]rangeCounts{}
	err := l.read(ctx, "counting the latest attempts of DAG "+req.DAG, func() error {
		dag, ok, err := l.readDAGID(ctx, req.DAG)
		if err != nil || !ok {
			return err
		}
		per := rangesPerQuery
		if l.dialect.BucketOf != nil {
			per = bucketsPerQuery
		} else if len(req.Ranges) > rangesPerQuery {
			return l.countEach(ctx, dag, req, sums)
		}
		for first := 0; first < len(req.Ranges); first += per {
			ranges := req.Ranges[first:min(first+per, len(req.Ranges))]
			var q strings.Builder
			var args []any
			var rangeOf []int // by bucket, with BucketOf
			if l.dialect.BucketOf != nil {
				var bounds []int64
				if bounds, rangeOf = bucketsOf(ranges); len(bounds) == 0 {
					continue
				}
				q.WriteString(l.dialect.countOfBuckets(dag, bounds, req.Now.UnixMilli(), req.Revision))
				args = append(args, bounds)
			} else {
				for i, r := range ranges {
					if i > 0 {
						q.WriteString(" UNION ALL ")
					}
					q.WriteString(countOfRange(i, dag, ceilUnix(r.From), ceilUnix(r.To), req.Now.UnixMilli(), req.Revision))
				}
			}
			rows, err := l.reader.QueryContext(ctx, q.String(), args...)
			if err != nil {
				return err
			}
			for rows.Next() {
				var i int
				var c rangeCounts
				if err := rows.Scan(&i, &c.all, &c.running, &c.live, &c.succeeded, &c.above, &c.failed); err != nil {
					rows.Close()
					return err
				}
				if rangeOf != nil {
					if i < 0 || i >= len(rangeOf) || rangeOf[i] < 0 {
						continue // a gap between ranges
					}
					i = rangeOf[i]
				}
				i += first
				s := sums[i]
				sums[i] = rangeCounts{s.all + c.all, s.running + c.running, s.live + c.live, s.succeeded + c.succeeded, s.above + c.above, s.failed + c.failed}
			}
			if err := errors.Join(rows.Err(), rows.Close()); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var out []ledger.LatestCount
	for i, c := range sums {
		for _, g := range c.groups(i) {
			if g.N > 0 {
				out = append(out, g)
			}
		}
	}
	return out, nil
}

// countEach adds to sums the counts of req's ranges through countOfEach,
// bucketsPerQuery ranges a statement.
func (l *Ledger) countEach(ctx context.Context, dag int64, req ledger.CountRequest, sums map[int]rangeCounts) error {
	for first := 0; first < len(req.Ranges); first += bucketsPerQuery {
		ranges := req.Ranges[first:min(first+bucketsPerQuery, len(req.Ranges))]
		bounds := make([][2]int64, len(ranges))
		for i, r := range ranges {
			bounds[i] = [2]int64{ceilUnix(r.From), ceilUnix(r.To)}
		}
		rows, err := l.reader.QueryContext(ctx, countOfEach(dag, bounds, req.Now.UnixMilli(), req.Revision))
		if err != nil {
			return err
		}
		for rows.Next() {
			var i int
			var all, older string
			if err := rows.Scan(&i, &all, &older); err != nil {
				rows.Close()
				return err
			}
			c, err := parseCounts(all)
			if err == nil {
				var o rangeCounts
				if o, err = parseCounts(older); err == nil {
					c = rangeCounts{c.all - o.all, c.running - o.running, c.live - o.live, c.succeeded - o.succeeded, c.above - o.above, c.failed - o.failed}
				}
			}
			if err != nil {
				rows.Close()
				return err
			}
			if c != (rangeCounts{}) {
				sums[first+i] = c
			}
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return err
		}
	}
	return nil
}

// findInRange reads the latest attempts of the partitions of DAG dag
// starting in [lo, hi) whose state is one of states (quoted literals),
// seeking each one's partition to keep the latest. Through the partial
// indexes tranche_attempts_running and tranche_attempts_failed when the
// states are theirs, as the status of a backfill asks for them: the
// condition on the state is then written as the index's. With byFinish,
// the bounds on the start are written so that no index serves them
// (+a.start_s), for a statement ordered by finish time to read
// tranche_attempts_failed in that order rather than sort the span.
func findInRange(dag, lo, hi int64, states []string, byFinish bool) string {
	cond := partialIndex(states)
	if cond == "" {
		cond = `a.state IN (` + strings.Join(states, ", ") + `)`
	}
	start := `a.start_s`
	if byFinish {
		start = `+a.start_s`
	}
	return `SELECT ` + attemptColumns + `
		FROM tranche_attempts a
		JOIN tranche_partitions p ON p.dag_id = a.dag_id AND p.start_s = a.start_s AND p.latest = a.attempt
		WHERE a.dag_id = ` + itoa(dag) + ` AND ` + cond + ` AND ` + start + ` >= ` + itoa(lo) + ` AND ` + start + ` < ` + itoa(hi)
}

// partialIndex returns the condition of the partial index of attempts
// whose states are states (quoted literals, in attemptStates' order):
// tranche_attempts_running's or tranche_attempts_failed's, or "" when
// no partial index holds exactly those states.
func partialIndex(states []string) string {
	switch {
	case slices.Equal(states, []string{"'running'"}):
		return `a.state = 'running'`
	case slices.Equal(states, []string{"'failed'", "'canceled'"}):
		return `a.state IN ('failed', 'canceled')`
	}
	return ""
}

// findApart bounds the ranges FindLatest reads apart, each its own span
// of the primary key, when the states asked for are those of a partial
// index (the running attempts, the failed and canceled ones). Beyond it,
// FindLatest reads once, through that index, the span from the first
// range to the last, and keeps the attempts that lie in a range: the
// running attempts and the newest failure of a backfill of chosen slots,
// a range per run of adjacent ones by the thousand, then cost a statement,
// or a few pages of one for the newest, where reading the ranges apart
// cost two statements a range for the newest failure (3 min 25 s for
// 100,000 ranges on PostgreSQL, 4 ms since). The span read costs the
// attempts of those states between the ranges too: few while the DAG's
// failures and running attempts are, but all of them for the newest
// failure of a backfill whose ranges hold none when another backfill of
// the DAG failed often between them. Any other states (a grid's every
// latest attempt) are read a range at a time, rangesPerQuery ranges a
// statement, since the span would hold every attempt between the
// ranges.
const findApart = 16

// FindLatest implements [ledger.LatestReader]. It reads the answer
// before it yields, so that the loop body may call the ledger: it is for
// few attempts (the running ones, the newest failure), not every one.
// With Newest, finished attempts are read latest first through
// tranche_attempts_failed (which PostgreSQL reads backwards for a
// descending order whose NULLs come first: hence the finished and the
// unfinished apart), so that the newest failure of a million costs a few
// rows.
func (l *Ledger) FindLatest(ctx context.Context, req ledger.FindRequest) iter.Seq2[ledger.Attempt, error] {
	return func(yield func(ledger.Attempt, error) bool) {
		var states []string
		for _, s := range attemptStates { // in a fixed order; a state never stored matches nothing
			if slices.Contains(req.States, s) {
				states = append(states, "'"+string(s)+"'")
			}
		}
		var found []ledger.Attempt
		// run appends to found the attempts q reads that keep admits
		// (all when keep is nil), until found holds limit (0: no limit),
		// and returns how many rows it read and the last of them.
		run := func(q string, keep func(ledger.Attempt) bool, limit int) (n int, last ledger.Attempt, err error) {
			rows, err := l.reader.QueryContext(ctx, q)
			if err != nil {
				return 0, last, err
			}
			for rows.Next() {
				if last, err = scanAttempt(rows, req.DAG); err != nil {
					rows.Close()
					return n, last, err
				}
				n++
				if keep == nil || keep(last) {
					if found = append(found, last); len(found) == limit {
						break
					}
				}
			}
			return n, last, errors.Join(rows.Err(), rows.Close())
		}
		// newest appends to found the req.Newest attempts of q that keep
		// admits, in ledger.FinishedLater's order: the finished ones
		// latest first, then the unfinished ones. It reads the order in
		// pages, each after the last row of the one before and four times
		// its length, so that a keep that admits few of q's rows costs
		// the rows up to the ones it admits, not all of q's: a statement
		// without a LIMIT is sorted whole, and PostgreSQL's driver reads
		// every row of it even when the caller stops early.
		newest := func(q string, keep func(ledger.Attempt) bool) error {
			want := len(found) + req.Newest
			for _, finished := range []bool{true, false} {
				after := ""
				for page := req.Newest; len(found) < want; page *= 4 {
					order := ` AND a.finished_ms IS NULL` + after + ` ORDER BY a.start_s DESC`
					if finished {
						order = ` AND a.finished_ms IS NOT NULL` + after + ` ORDER BY a.finished_ms DESC, a.start_s DESC`
					}
					n, last, err := run(q+order+` LIMIT `+strconv.Itoa(page), keep, want)
					if err != nil {
						return err
					}
					if n < page {
						break // the end of the order
					}
					s := itoa(last.Start.Unix())
					after = ` AND a.start_s < ` + s
					if finished {
						f := itoa(last.Finished.UnixMilli())
						after = ` AND a.finished_ms <= ` + f + ` AND (a.finished_ms < ` + f + ` OR a.start_s < ` + s + `)`
					}
				}
			}
			return nil
		}
		err := l.read(ctx, "reading the latest attempts of DAG "+req.DAG, func() error {
			dag, ok, err := l.readDAGID(ctx, req.DAG)
			if err != nil || !ok || len(states) == 0 || len(req.Ranges) == 0 {
				return err
			}
			if len(req.Ranges) > findApart && partialIndex(states) != "" {
				ranges := req.Ranges
				inRanges := func(a ledger.Attempt) bool {
					k, _ := slices.BinarySearchFunc(ranges, a.Start, func(r ledger.Range, t time.Time) int {
						if !r.To.After(t) {
							return -1
						}
						return 1
					})
					return k < len(ranges) && ranges[k].Contains(a.Start)
				}
				lo, hi := ceilUnix(ranges[0].From), ceilUnix(ranges[len(ranges)-1].To)
				if req.Newest > 0 {
					return newest(findInRange(dag, lo, hi, states, true), inRanges)
				}
				_, _, err := run(findInRange(dag, lo, hi, states, false)+` ORDER BY 1`, inRanges, 0)
				return err
			}
			if req.Newest > 0 {
				// Each range keeps its newest; sorted below, these give
				// the newest of all.
				// Failures are read through tranche_attempts_failed in
				// finish order, the range's bounds checked on each
				// (byFinish): the newest failures of a range of a
				// million partitions are then a few index entries, not
				// the range sorted (0.25 s of SQLite's CPU a read). The
				// cost moves to a narrow range whose DAG failed often
				// since elsewhere: the index entries of those failures.
				byFinish := slices.Equal(states, []string{"'failed'", "'canceled'"})
				for _, r := range req.Ranges {
					if err := newest(findInRange(dag, ceilUnix(r.From), ceilUnix(r.To), states, byFinish), nil); err != nil {
						return err
					}
				}
				return nil
			}
			for first := 0; first < len(req.Ranges); first += rangesPerQuery {
				var q strings.Builder
				for i, r := range req.Ranges[first:min(first+rangesPerQuery, len(req.Ranges))] {
					if i > 0 {
						q.WriteString(" UNION ALL ")
					}
					q.WriteString(findInRange(dag, ceilUnix(r.From), ceilUnix(r.To), states, false))
				}
				q.WriteString(" ORDER BY 1")
				if _, _, err := run(q.String(), nil, 0); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			yield(ledger.Attempt{}, err)
			return
		}
		if req.Newest > 0 {
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

// attemptStates are the states the attempts table holds.
var attemptStates = []ledger.State{ledger.StateRunning, ledger.StateSucceeded, ledger.StateFailed, ledger.StateCanceled}

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
