package proctest

import (
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/sqldest"
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
		{Name: "day", Kind: sqldest.Time},
		{Name: "n", Kind: sqldest.Int},
		{Name: "worker", Kind: sqldest.String},
		{Name: "attempt", Kind: sqldest.Int},
		{Name: "token", Kind: sqldest.Int, Meta: sqldest.FromToken},
	}
	if audit {
		cols = append(cols, sqldest.Column{Name: "delivery", Kind: sqldest.String, Meta: sqldest.FromDeliveryID})
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
			if r.N != i || r.Worker != last.Worker || r.Token != int64(last.Number) {
				t.Errorf("partition %s: row %+v; want n %d, written by %s at token %d (the success)", key, r, i, last.Worker, last.Number)
			}
		}
		deliveries := map[string]int{}
		var newest int64
		for _, r := range audit[key] {
			deliveries[r.Delivery]++
			newest = max(newest, r.Token)
			if shared && (r.Token != int64(last.Number) || r.Worker != last.Worker) {
				t.Errorf("partition %s: audited a write by %s at token %d; the success was %s's at %d", key, r.Worker, r.Token, last.Worker, last.Number)
			}
		}
		if newest != int64(last.Number) {
			t.Errorf("partition %s: the newest audited write has token %d; the success's is %d", key, newest, last.Number)
		}
		for d, n := range deliveries {
			if n != rows {
				t.Errorf("partition %s: delivery %s audited %d rows; want %d", key, d, n, rows)
			}
		}
		if len(deliveries) > 1 {
			twice++
			if shared {
				t.Errorf("partition %s written %d times (audit: %v); want once; history:\n%s", key, len(deliveries), deliveries, formatAttempts(h))
			}
		}
	}
	return twice
}

func formatAttempts(h []ledger.Attempt) string {
	var b strings.Builder
	for _, a := range h {
		fmt.Fprintf(&b, "\tattempt %d by %s: %s %q (started %s, finished %s)\n", a.Number, a.Worker, a.State, a.Err,
			a.Started.Format("15:04:05.000"), a.Finished.Format("15:04:05.000"))
	}
	return b.String()
}
