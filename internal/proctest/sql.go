package proctest

import (
	"cmp"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/destination"
	"github.com/tranche-dev/tranche/destination/column"
	"github.com/tranche-dev/tranche/destination/sqldest"
	"github.com/tranche-dev/tranche/ledger"
)

// EventsTable is the table of the events asset for an SQL destination:
// its rows, and the fencing token of the write that put them there.
var EventsTable = sqldest.Table{Name: "events", Partition: "day", Columns: eventsColumns(false)}

// AuditTable is a second table of the events asset, written in the same
// transaction, that appends every write instead of replacing it, with
// the write's delivery id: a partition written twice shows two deliveries
// there.
var AuditTable = sqldest.Table{Name: "events_audit", Asset: "events", Partition: "day", Append: true, Columns: eventsColumns(true)}

func eventsColumns(audit bool) []sqldest.Column {
	cols := []sqldest.Column{
		{Name: "day", Type: column.Time},
		{Name: "n", Type: column.Int},
		{Name: "worker", Type: column.String},
		{Name: "attempt", Type: column.Int},
		{Name: "token", Type: column.Int, Meta: sqldest.FromToken},
	}
	if audit {
		cols = append(cols, sqldest.Column{Name: "delivery", Type: column.String, Meta: sqldest.FromDeliveryID})
	}
	return cols
}

// SQLRow is a row of EventsTable or AuditTable as read back.
type SQLRow struct {
	Row
	Token    int64
	Delivery string // AuditTable's only
}

// SQLRows reads EventsTable (audit false) or AuditTable, by partition
// key.
func SQLRows(t testing.TB, db *sql.DB, audit bool) map[string][]SQLRow {
	t.Helper()
	q := "SELECT day, n, worker, attempt, token, '' FROM events"
	if audit {
		q = "SELECT day, n, worker, attempt, token, delivery FROM events_audit"
	}
	rows, err := db.QueryContext(t.Context(), q+" ORDER BY day, n")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string][]SQLRow{}
	for rows.Next() {
		var day any
		var r SQLRow
		if err := rows.Scan(&day, &r.N, &r.Worker, &r.Attempt, &r.Token, &r.Delivery); err != nil {
			t.Fatal(err)
		}
		var at time.Time
		switch v := day.(type) {
		case time.Time:
			at = v
		case string:
			if at, err = time.Parse(sqldest.SQLiteTimeLayout, v); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatalf("events.day holds %T %v", day, day)
		}
		r.Day = tranche.PartitionOf(tranche.Day, at.UTC()).Key()
		out[r.Day] = append(out[r.Day], r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// CheckSQL checks that every partition of w holds, in EventsTable, the
// rows rows of the attempt that the ledger's histories say succeeded, and
// that AuditTable holds that attempt's write and none newer: the data
// agrees with the ledger. With shared (a destination sharing the
// ledger's transactions) it also checks that each partition was written
// exactly once; otherwise an attempt killed between its write and its
// finish may have written too, and twice counts the partitions written
// more than once.
func CheckSQL(t testing.TB, db *sql.DB, hs map[string][]ledger.Attempt, w tranche.TimePartitionWindow, rows int, shared bool) (twice int) {
	t.Helper()
	events, audit := SQLRows(t, db, false), SQLRows(t, db, true)
	seenTwice := 0
	for p := range w.OldestFirst() {
		key := p.Key()
		h := hs[key]
		if len(h) == 0 || h[len(h)-1].State != ledger.StateSucceeded {
			t.Errorf("partition %s: its latest attempt did not succeed:\n%v", key, h)
			continue
		}
		last := h[len(h)-1]
		for _, a := range h[:len(h)-1] {
			if a.State != ledger.StateFailed {
				t.Errorf("partition %s: attempt %d by %s %s %q before the success; want every earlier attempt failed:\n%s", key, a.Number, a.Worker, a.State, a.Err, formatAttempts(h))
			}
		}
		got := events[key]
		if len(got) != rows {
			t.Errorf("partition %s: %d rows in the table; want %d, once each", key, len(got), rows)
		}
		for i, r := range got {
			if r.N != i || r.Worker != last.Worker || ledger.TokenAttempt(r.Token) != last.Number {
				t.Errorf("partition %s: row %+v; want n %d, written by %s at token %d (the success)", key, r, i, last.Worker, last.Number)
			}
		}
		deliveries := map[string]int{}
		var newest int64
		for _, r := range audit[key] {
			deliveries[r.Delivery]++
			newest = max(newest, r.Token)
			if shared && (ledger.TokenAttempt(r.Token) != last.Number || r.Worker != last.Worker) {
				t.Errorf("partition %s: audited a write by %s at token %d; the success was %s's at %d", key, r.Worker, r.Token, last.Worker, last.Number)
			}
		}
		if ledger.TokenAttempt(newest) != last.Number {
			t.Errorf("partition %s: the newest audited write has token %d; the success's is %d", key, newest, last.Number)
		}
		for d, n := range deliveries {
			if n != rows {
				t.Errorf("partition %s: delivery %s audited %d rows; want %d", key, d, n, rows)
			}
		}
		// The appending recipe (destination.Newest): a reader of the
		// audit, which appends every write, that keeps each partition's
		// newest delivery sees the success's rows, once.
		seen := NewestAudited(audit[key])
		if len(seen) > rows {
			seenTwice++
		}
		if len(seen) != rows {
			t.Errorf("partition %s: a reader keeping the newest delivery sees %d rows; want %d, once each (audit: %v)", key, len(seen), rows, deliveries)
		}
		for i, r := range seen {
			if r.N != i || r.Worker != last.Worker || ledger.TokenAttempt(r.Token) != last.Number {
				t.Errorf("partition %s: a reader keeping the newest delivery sees %+v; want n %d by %s at token %d (the success)", key, r, i, last.Worker, last.Number)
			}
		}
		if len(deliveries) > 1 {
			twice++
			if shared {
				t.Errorf("partition %s written %d times (audit: %v); want once; history:\n%s", key, len(deliveries), deliveries, formatAttempts(h))
			}
		}
	}
	t.Logf("the audit, which appends every write: %d partitions delivered more than once; a reader keeping each partition's newest delivery (destination.Newest) saw %d of %d partitions twice",
		twice, seenTwice, w.Len())
	return twice
}

// NewestAudited is what a reader of AuditTable that follows the
// appending recipe sees of one partition: the rows of its newest
// delivery, by destination.Newest, in the order of n. (The events of the
// process tests are of one DAG, so the order of the rows read does not
// matter.)
func NewestAudited(audited []SQLRow) []SQLRow {
	var ds []destination.Delivery[SQLRow]
	at := map[string]int{}
	for _, r := range audited {
		i, ok := at[r.Delivery]
		if !ok {
			i = len(ds)
			at[r.Delivery] = i
			ds = append(ds, destination.Delivery[SQLRow]{Asset: "events", Partition: r.Day, Token: r.Token, ID: r.Delivery})
		}
		ds[i].Rows = append(ds[i].Rows, r)
	}
	kept := destination.Newest(ds)
	if len(kept) == 0 {
		return nil
	}
	out := kept[0].Rows
	slices.SortFunc(out, func(a, b SQLRow) int { return cmp.Compare(a.N, b.N) })
	return out
}

func formatAttempts(h []ledger.Attempt) string {
	var b strings.Builder
	for _, a := range h {
		fmt.Fprintf(&b, "\tattempt %d by %s: %s %q (started %s, finished %s)\n", a.Number, a.Worker, a.State, a.Err,
			a.Started.Format("15:04:05.000"), a.Finished.Format("15:04:05.000"))
	}
	return b.String()
}

// CheckRefusedNotSucceeded checks, in the ledger's tables on db, the
// attempts at partition key of a deploy's test: the old code's worker
// (any but "deployed") stopped in its write there, past its lease, while
// the deployed worker landed the partition, and the fence refused its
// write when it resumed. Each of the old code's attempts is recorded
// failed, none succeeded, and the deployed worker's attempt succeeded
// once: an attempt whose write a fence refused is never recorded
// succeeded (issue 30: deploy trials recorded the old worker's attempt
// succeeded after the new code had landed the partition, through a
// destination that compared tokens within one DAG identity only).
func CheckRefusedNotSucceeded(t testing.TB, db *sql.DB, key string) {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), `SELECT d.dag, a.attempt, a.worker, a.state, a.error
		FROM tranche_attempts a JOIN tranche_dags d ON d.id = a.dag_id
		WHERE a.partition_key = $1 ORDER BY a.started_ms, a.attempt`, key)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var old, deployed []string
	for rows.Next() {
		var dag, worker, state, msg string
		var attempt int
		if err := rows.Scan(&dag, &attempt, &worker, &state, &msg); err != nil {
			t.Fatal(err)
		}
		line := fmt.Sprintf("%s attempt %d by %s: %s %s", dag, attempt, worker, state, msg)
		switch {
		case worker != "deployed":
			old = append(old, line)
			if state != string(ledger.StateFailed) {
				t.Errorf("partition %s: %s; want the old code's attempt, whose write the fence refused, failed", key, line)
			}
		case state == string(ledger.StateSucceeded):
			deployed = append(deployed, line)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(old) == 0 || len(deployed) != 1 {
		t.Errorf("partition %s: the old code's attempts %q, the deployed worker's successes %q; want one or more of the first, one of the second", key, old, deployed)
	}
}
