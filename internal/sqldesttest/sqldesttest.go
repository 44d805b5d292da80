// Package sqldesttest is the test suite of the SQL destinations
// (github.com/tranche-dev/tranche/destination/sqldest), which the SQLite, PostgreSQL
// and DuckDB modules run against their real databases: validation,
// replacement, fencing tokens, and the commit shared with the ledger
// (for the databases that hold a ledger).
package sqldesttest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/destination/column"
	"github.com/tranche-dev/tranche/destination/destinationtest"
	"github.com/tranche-dev/tranche/destination/sqldest"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/memledger"
	"github.com/tranche-dev/tranche/ledger/sqlledger"
)

// Env is one test's database: a ledger in it, a way to read it, and
// destinations writing into it.
type Env struct {
	// Ledger is the ledger in the database; nil for a database that
	// holds none (DuckDB), whose Shared must be nil too: the tests of
	// the commit shared with a ledger are then skipped, and the
	// backfills run on an in-memory ledger.
	Ledger *sqlledger.Ledger
	// DB reads the database, its current schema the ledger's.
	DB *sql.DB
	// Shared returns a destination sharing the ledger's transactions,
	// its tables created; nil where the database holds no ledger.
	Shared func(t *testing.T, tables ...sqldest.Table) *sqldest.Destination
	// Separate returns a destination in the same database that does not
	// share them, its tables created.
	Separate func(t *testing.T, tables ...sqldest.Table) *sqldest.Destination
}

// Events is the table of the events asset: the partition column day (a
// Time), n, worker, and the token of the write.
var Events = sqldest.Table{Name: "events", Partition: "day", Columns: []sqldest.Column{
	{Name: "day", Type: column.Time},
	{Name: "n", Type: column.Int},
	{Name: "worker", Type: column.String, Null: true},
	{Name: "token", Type: column.Int, Meta: sqldest.FromToken},
}}

// Audit is a second table of the events asset that appends every write:
// counting its deliveries per partition counts the writes that landed.
var Audit = sqldest.Table{Name: "events_audit", Asset: "events", Partition: "day", Append: true, Columns: []sqldest.Column{
	{Name: "day", Type: column.Time},
	{Name: "n", Type: column.Int},
	{Name: "worker", Type: column.String, Null: true},
	{Name: "token", Type: column.Int, Meta: sqldest.FromToken},
	{Name: "delivery", Type: column.String, Meta: sqldest.FromDeliveryID},
}}

// Row is a row of Events or Audit as read back.
type Row struct {
	Key      string // the partition of day
	N        int64
	Worker   string
	Token    int64
	Delivery string // Audit only
}

// ReadRows reads the rows of Events (or Audit), by partition key, in the
// order of n.
func ReadRows(ctx context.Context, db *sql.DB, table string) (map[string][]Row, error) {
	cols := "day, n, worker, token, ''"
	if table == Audit.Name {
		cols = "day, n, worker, token, delivery"
	}
	rows, err := db.QueryContext(ctx, "SELECT "+cols+" FROM "+table+" ORDER BY day, n, token")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string][]Row{}
	for rows.Next() {
		var day any
		var r Row
		var worker sql.NullString
		if err := rows.Scan(&day, &r.N, &worker, &r.Token, &r.Delivery); err != nil {
			return nil, err
		}
		t, err := Instant(day)
		if err != nil {
			return nil, err
		}
		r.Key, r.Worker = tranche.PartitionOf(tranche.Day, t.UTC()).Key(), worker.String
		out[r.Key] = append(out[r.Key], r)
	}
	return out, rows.Err()
}

// Instant reads a Time column's value: a time.Time from PostgreSQL, text
// in sqldest.SQLiteTimeLayout from SQLite.
func Instant(v any) (time.Time, error) {
	switch v := v.(type) {
	case time.Time:
		return v, nil
	case string:
		return time.Parse(sqldest.SQLiteTimeLayout, v)
	case []byte:
		return time.Parse(sqldest.SQLiteTimeLayout, string(v))
	}
	return time.Time{}, fmt.Errorf("a time column holds %T %v", v, v)
}

var jan1 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func day(i int) tranche.TimePartition { return tranche.PartitionOf(tranche.Day, jan1.AddDate(0, 0, i)) }

// rowsOf returns n rows of the events asset in partition p, by worker.
func rowsOf(p tranche.TimePartition, n int, worker string) []tranche.Row {
	out := make([]tranche.Row, n)
	for i := range out {
		out[i] = tranche.Row{"day": p.Start.Add(time.Duration(i) * time.Minute), "n": i, "worker": worker}
	}
	return out
}

func batch(p tranche.TimePartition, rows []tranche.Row, run string, token int64) tranche.Batch {
	return tranche.Batch{Asset: "events", Column: "day", Partition: p, Rows: rows, RunID: run, Token: token}
}

// Run runs the suite, each test in a new Env; the destination contract's
// suite is [Contract], which each destination's contract test runs.
func Run(t *testing.T, newEnv func(t *testing.T) *Env) {
	tests := []struct {
		name string
		f    func(t *testing.T, e *Env)
	}{
		{"Validation", testValidation},
		{"Replace", testReplace},
		{"Partitions", testPartitionKinds},
		{"Tokens", testTokens},
		{"SharedCommitsWithFinish", testSharedCommitsWithFinish},
		{"SharedFenced", testSharedFenced},
		{"SharedNotLeased", testSharedNotLeased},
		{"SharedWorkFails", testSharedWorkFails},
		{"SharedUnfenced", testSharedUnfenced},
		{"Backfill", testBackfill},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			if strings.HasPrefix(tc.name, "Shared") && e.Shared == nil {
				t.Skip("the database holds no ledger, whose transactions a destination would share")
			}
			tc.f(t, e)
		})
	}
}

// ContractTable is the table of the asset of the destination contract's
// suite (destination/destinationtest), in which every test of the suite
// writes through a destination apart from the ledger.
var ContractTable = sqldest.Table{Name: "contract_events", Asset: destinationtest.Asset, Partition: destinationtest.Column,
	Columns: []sqldest.Column{
		{Name: destinationtest.Column, Type: column.Time},
		{Name: "n", Type: column.Int},
		{Name: "note", Type: column.String},
	}}

// Contract runs the destination contract's suite
// (destinationtest.Run) on a destination apart from the ledger, each
// check in a new Env, as every destination's own test does. (A
// destination sharing the ledger's transactions writes only at the
// ledger's Finish: Run's Shared tests check it.)
func Contract(t *testing.T, newEnv func(t *testing.T) *Env) {
	destinationtest.Run(t, func(t *testing.T) destinationtest.Subject {
		e := newEnv(t)
		d := e.Separate(t, ContractTable)
		return destinationtest.Subject{Destination: d, Read: func(ctx context.Context, p tranche.TimePartition) ([]tranche.Row, error) {
			rows, err := e.DB.QueryContext(ctx, "SELECT "+destinationtest.Column+", n, note FROM "+ContractTable.Name)
			if err != nil {
				return nil, err
			}
			defer rows.Close()
			var out []tranche.Row
			for rows.Next() {
				var at any
				var n int64
				var note string
				if err := rows.Scan(&at, &n, &note); err != nil {
					return nil, err
				}
				instant, err := Instant(at)
				if err != nil {
					return nil, err
				}
				if !instant.Before(p.Start) && instant.Before(p.End) {
					out = append(out, tranche.Row{destinationtest.Column: instant, "n": n, "note": note})
				}
			}
			return out, rows.Err()
		}}
	})
}

// ledger returns the ledger backfills run on: the database's, or an
// in-memory one where it holds none.
func (e *Env) ledger() ledger.Ledger {
	if e.Ledger == nil {
		return memledger.New(nil)
	}
	return e.Ledger
}

func read(t *testing.T, e *Env, table string) map[string][]Row {
	t.Helper()
	rows, err := ReadRows(t.Context(), e.DB, table)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

func testValidation(t *testing.T, e *Env) {
	for _, shared := range []bool{false, true} {
		t.Run(fmt.Sprintf("shared=%v", shared), func(t *testing.T) {
			if shared && e.Shared == nil {
				t.Skip("the database holds no ledger, whose transactions a destination would share")
			}
			var d *sqldest.Destination
			if shared {
				d = e.Shared(t, Events)
			} else {
				d = e.Separate(t, Events)
			}
			p := day(0)
			before := rowsOf(p, 2, "before")
			if err := d.Write(t.Context(), []tranche.Batch{batch(p, before, "r", 0)}); err != nil {
				t.Fatal(err)
			}
			want := read(t, e, "events")
			good := func() []tranche.Row { return rowsOf(p, 3, "w") }
			cases := []struct {
				name   string
				mutate func([]tranche.Row) []tranche.Row
				err    error
				column string
				says   []string
			}{
				{"unknown column", func(r []tranche.Row) []tranche.Row { r[2]["colour"] = "red"; return r },
					column.ErrUnknownColumn, "colour", []string{`row 2`, `key "colour"`, `string "red"`, "day, n, worker"}},
				{"string for Int", func(r []tranche.Row) []tranche.Row { r[1]["n"] = "12"; return r },
					column.ErrMistyped, "n", []string{`row 1`, `column "n"`, `string "12"`, "an integer"}},
				{"float for Int", func(r []tranche.Row) []tranche.Row { r[0]["n"] = 1.5; return r },
					column.ErrMistyped, "n", []string{`float64 1.5`, "an integer"}},
				{"uint64 over int64", func(r []tranche.Row) []tranche.Row { r[0]["n"] = uint64(1 << 63); return r },
					column.ErrMistyped, "n", []string{"uint64 9223372036854775808"}},
				{"int for String", func(r []tranche.Row) []tranche.Row { r[2]["worker"] = 7; return r },
					column.ErrMistyped, "worker", []string{`column "worker"`, "int 7", "a string"}},
				{"missing NOT NULL", func(r []tranche.Row) []tranche.Row { delete(r[1], "n"); return r },
					column.ErrNull, "n", []string{`column "n" is missing or nil`}},
				{"nil NOT NULL", func(r []tranche.Row) []tranche.Row { r[1]["n"] = nil; return r },
					column.ErrNull, "n", []string{`column "n" is missing or nil`}},
			}
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					err := d.Write(t.Context(), []tranche.Batch{batch(day(1), rowsOf(day(1), 1, "ok"), "r", 0), batch(p, c.mutate(good()), "r", 0)})
					ve, ok := errors.AsType[*column.ValueError](err)
					if !ok || !errors.Is(err, c.err) {
						t.Fatalf("Write = %v; want a *ValueError matching %v", err, c.err)
					}
					if ve.Column != c.column || ve.Asset != "events" || ve.Partition != p.Key() || ve.Table != "events" {
						t.Errorf("ValueError %+v; want column %q, asset events, partition %s", ve, c.column, p.Key())
					}
					for _, s := range append(c.says, "asset \"events\"", "partition "+p.Key(), d.String()) {
						if !strings.Contains(err.Error(), s) {
							t.Errorf("error %q does not say %q", err, s)
						}
					}
					if diff := cmp.Diff(want, read(t, e, "events")); diff != "" {
						t.Errorf("a refused write changed the table (-before +after):\n%s", diff)
					}
				})
			}
			// A bad value in the last of many rows, after the earlier
			// ones have gone to the database (the driver's buffers, the
			// appender's chunks, the INSERTs already run), and after
			// another partition of the same write was replaced (the
			// writes go in the order of their partitions): refused alike,
			// and nothing of the write lands, tokens included.
			t.Run("late bad value", func(t *testing.T) {
				tokens := readTokens(t, e)
				late := day(1)
				many := rowsOf(late, 10_000, "many")
				for i := range many {
					many[i]["day"] = late.Start.Add(time.Duration(i) * time.Second)
				}
				many[len(many)-1]["n"] = "last"
				err := d.Write(t.Context(), []tranche.Batch{batch(late, many, "late", 0), batch(p, rowsOf(p, 3000, "replaced"), "late", 0)})
				ve, ok := errors.AsType[*column.ValueError](err)
				if !ok || !errors.Is(err, column.ErrMistyped) || ve.Row != len(many)-1 || ve.Column != "n" || ve.Partition != late.Key() {
					t.Fatalf("Write = %v; want a *ValueError for row %d, column n, partition %s", err, len(many)-1, late.Key())
				}
				for _, s := range []string{"row 9999", `column "n"`, `string "last"`, `asset "events"`, "partition " + late.Key()} {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not say %q", err, s)
					}
				}
				if diff := cmp.Diff(want, read(t, e, "events")); diff != "" {
					t.Errorf("a refused write changed the table (-before +after):\n%s", diff)
				}
				if diff := cmp.Diff(tokens, readTokens(t, e)); diff != "" {
					t.Errorf("a refused write changed the tokens (-before +after):\n%s", diff)
				}
			})
			// The null column takes nil and a missing key.
			r := good()
			delete(r[0], "worker")
			r[1]["worker"] = nil
			if err := d.Write(t.Context(), []tranche.Batch{batch(p, r, "r", 0)}); err != nil {
				t.Errorf("Write with a nil and a missing nullable value = %v", err)
			}
			// Integers of every type, and a key string for the partition.
			r = []tranche.Row{{"day": p.Key(), "n": int8(1)}, {"day": p.Start, "n": uint32(2)}, {"day": p.Start, "n": int64(3)}}
			if err := d.Write(t.Context(), []tranche.Batch{batch(p, r, "r", 0)}); err != nil {
				t.Errorf("Write with int8, uint32, int64 and a key string = %v", err)
			}
			if got := read(t, e, "events")[p.Key()]; len(got) != 3 || got[0].N != 1 {
				t.Errorf("partition %s holds %+v; want n 1, 2, 3", p.Key(), got)
			}
			err := d.Write(t.Context(), []tranche.Batch{{Asset: "other", Column: "day", Partition: p}})
			if !errors.Is(err, sqldest.ErrNoTable) || !strings.Contains(err.Error(), `"other"`) {
				t.Errorf("Write of an asset without a table = %v; want ErrNoTable naming it", err)
			}
		})
	}
}

// readTokens reads the token table, a line a partition.
func readTokens(t *testing.T, e *Env) []string {
	t.Helper()
	rows, err := e.DB.QueryContext(t.Context(), "SELECT table_name, start_s, token, run_id FROM "+sqldest.TokenTable+" ORDER BY table_name, start_s")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var table, run string
		var start, token int64
		if err := rows.Scan(&table, &start, &token, &run); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s %d: token %d of %s", table, start, token, run))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func testReplace(t *testing.T, e *Env) {
	d := e.Separate(t, Events)
	ctx := t.Context()
	// A window of three partitions at once, then one replaced, one
	// emptied.
	if err := d.Write(ctx, []tranche.Batch{
		batch(day(0), rowsOf(day(0), 3, "a"), "r", 0),
		batch(day(1), rowsOf(day(1), 2, "a"), "r", 0),
		batch(day(2), rowsOf(day(2), 1, "a"), "r", 0),
	}); err != nil {
		t.Fatal(err)
	}
	if err := d.Write(ctx, []tranche.Batch{batch(day(1), rowsOf(day(1), 4, "b"), "r", 0), batch(day(2), nil, "r", 0)}); err != nil {
		t.Fatal(err)
	}
	got := read(t, e, "events")
	counts := map[string]string{}
	for k, rows := range got {
		counts[k] = fmt.Sprintf("%d by %s", len(rows), rows[0].Worker)
	}
	want := map[string]string{day(0).Key(): "3 by a", day(1).Key(): "4 by b"}
	if diff := cmp.Diff(want, counts); diff != "" {
		t.Errorf("partitions after the rewrite (-want +got):\n%s", diff)
	}
	// The partition's bounds are half-open: a row at the next day's
	// midnight belongs to the next day, and survives.
	for _, r := range got[day(0).Key()] {
		if r.N < 0 || r.N > 2 {
			t.Errorf("row %+v", r)
		}
	}
}

func testPartitionKinds(t *testing.T, e *Env) {
	ctx := t.Context()
	byKey := sqldest.Table{Name: "by_key", Asset: "events", Partition: "part", Columns: []sqldest.Column{
		{Name: "part", Key: "day", Type: column.String},
		{Name: "n", Type: column.Int},
		{Name: "w", Key: "worker", Type: column.String},
		{Name: "run", Type: column.String, Meta: sqldest.FromRunID},
	}}
	whole := sqldest.Table{Name: "totals", Columns: []sqldest.Column{{Name: "total", Type: column.Float}, {Name: "ok", Type: column.Bool}, {Name: "blob", Type: column.Bytes, Null: true}}}
	d := e.Separate(t, byKey, whole)
	for i, w := range []string{"a", "b"} {
		if err := d.Write(ctx, []tranche.Batch{batch(day(0), rowsOf(day(0), 2+i, w), "run-"+w, 0), batch(day(1), rowsOf(day(1), 1, w), "run-"+w, 0)}); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := e.DB.QueryContext(ctx, "SELECT part, count(*), min(w), min(run) FROM by_key GROUP BY part ORDER BY part")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		var part, w, run string
		var n int
		if err := rows.Scan(&part, &n, &w, &run); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%s: %d by %s in %s", part, n, w, run))
	}
	rows.Close()
	want := []string{day(0).Key() + ": 3 by b in run-b", day(1).Key() + ": 1 by b in run-b"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("a table partitioned by key (-want +got):\n%s", diff)
	}
	for _, n := range []int{3, 1} {
		r := make([]tranche.Row, n)
		for i := range r {
			r[i] = tranche.Row{"total": float32(i), "ok": true, "blob": []byte{1, 2}}
		}
		if err := d.Write(ctx, []tranche.Batch{{Asset: "totals", Rows: r}}); err != nil {
			t.Fatal(err)
		}
	}
	var n int
	if err := e.DB.QueryRowContext(ctx, "SELECT count(*) FROM totals").Scan(&n); err != nil || n != 1 {
		t.Errorf("an unpartitioned table holds %d rows (%v); want the last write's 1", n, err)
	}
	err = d.Write(ctx, []tranche.Batch{{Asset: "totals", Column: "day", Partition: day(0)}})
	if err == nil || !strings.Contains(err.Error(), "unpartitioned") {
		t.Errorf("a partitioned batch for an unpartitioned table = %v", err)
	}
}

func testTokens(t *testing.T, e *Env) {
	d := e.Separate(t, Events)
	ctx := t.Context()
	p := day(3)
	write := func(dag, worker string, token int64) error {
		b := batch(p, rowsOf(p, 2, worker), "run", token)
		b.DAG = dag
		return d.Write(ctx, []tranche.Batch{b})
	}
	holder := func() string {
		rows := read(t, e, "events")[p.Key()]
		if len(rows) == 0 {
			return "nobody"
		}
		return fmt.Sprintf("%s at %d", rows[0].Worker, rows[0].Token)
	}
	steps := []struct {
		dag    string
		worker string
		token  int64
		fenced bool
		holder string
	}{
		{"dag", "a", 2, false, "a at 2"},
		{"dag", "stale", 1, true, "a at 2"},      // an attempt taken over: refused
		{"dag", "again", 2, false, "again at 2"}, // the same attempt's retry: accepted
		{"dag", "plain", 0, false, "plain at 0"}, // unfenced: never refused
		{"dag", "stale", 1, true, "plain at 0"},  // and the stored token is still 2
		{"dag", "newer", 3, false, "newer at 3"},
		// Tokens order the claims of a partition whatever the DAG
		// identity (a deploy): another identity's older token is stale,
		// its newer one replaces the partition and fences the first.
		{"dag-v2", "changed", 1, true, "newer at 3"},
		{"dag-v2", "changed", 5, false, "changed at 5"},
		{"dag", "old", 4, true, "changed at 5"},
		{"dag", "old", 6, false, "old at 6"},
	}
	for _, s := range steps {
		err := write(s.dag, s.worker, s.token)
		if s.fenced {
			te, ok := errors.AsType[*sqldest.TokenError](err)
			if !errors.Is(err, tranche.ErrFenced) || !ok || te.Token != s.token || te.Stored < 2 || te.Partition != p.Key() {
				t.Errorf("write by %s at token %d = %v; want a *TokenError matching ErrFenced", s.worker, s.token, err)
			}
		} else if err != nil {
			t.Errorf("write by %s at token %d = %v", s.worker, s.token, err)
		}
		if got := holder(); got != s.holder {
			t.Errorf("after the write by %s at token %d, the partition holds %s; want %s", s.worker, s.token, got, s.holder)
		}
	}
	// A write of several partitions is refused whole when one is stale.
	fresh, stale := batch(day(4), rowsOf(day(4), 1, "x"), "run", 1), batch(p, rowsOf(p, 1, "x"), "run", 1)
	fresh.DAG, stale.DAG = "dag", "dag"
	err := d.Write(ctx, []tranche.Batch{fresh, stale})
	if !errors.Is(err, tranche.ErrFenced) {
		t.Errorf("a write with one stale partition = %v", err)
	}
	if rows := read(t, e, "events")[day(4).Key()]; len(rows) != 0 {
		t.Errorf("a refused write left %d rows in another partition", len(rows))
	}
}

// claim claims partitions of the events DAG in the ledger.
func claim(t *testing.T, e *Env, worker string, lease time.Duration, ps ...tranche.TimePartition) *ledger.Lease {
	t.Helper()
	l, err := e.Ledger.Claim(t.Context(), ledger.ClaimRequest{DAG: "dag", Backfill: "bf", Worker: worker, RunID: "run-" + ps[0].Key(),
		Partitions: ps, Lease: lease, Policy: ledger.RerunFailed})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func succeeded(n int) []ledger.Outcome {
	out := make([]ledger.Outcome, n)
	for i := range out {
		out[i] = ledger.Outcome{State: ledger.StateSucceeded}
	}
	return out
}

func history(t *testing.T, e *Env, p tranche.TimePartition) string {
	t.Helper()
	h, err := e.Ledger.History(t.Context(), "dag", p.Start)
	if err != nil {
		t.Fatal(err)
	}
	var s []string
	for _, a := range h {
		s = append(s, fmt.Sprintf("%d %s %s", a.Number, a.Worker, a.State))
	}
	return strings.Join(s, "; ")
}

// writeLease writes the lease's partitions as a run under it would.
func writeLease(t *testing.T, d *sqldest.Destination, lease *ledger.Lease, worker string) error {
	t.Helper()
	var bs []tranche.Batch
	tokens := lease.Tokens()
	for i, p := range lease.Partitions {
		bs = append(bs, batch(p, rowsOf(p, 2, worker), lease.RunID, tokens[i]))
	}
	return d.Write(t.Context(), bs)
}

func testSharedCommitsWithFinish(t *testing.T, e *Env) {
	d := e.Shared(t, Events, Audit)
	lease := claim(t, e, "a", time.Minute, day(0), day(1))
	if err := writeLease(t, d, lease, "first"); err != nil {
		t.Fatal(err)
	}
	// An asset's retry writes again: the second write replaces the first.
	if err := writeLease(t, d, lease, "a"); err != nil {
		t.Fatal(err)
	}
	if rows := read(t, e, "events"); len(rows) != 0 {
		t.Fatalf("rows visible before the finish: %v", rows)
	}
	if err := e.Ledger.Finish(t.Context(), lease, succeeded(2)); err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"events", "events_audit"} {
		rows := read(t, e, table)
		for _, p := range lease.Partitions {
			if got := rows[p.Key()]; len(got) != 2 || got[0].Worker != "a" || ledger.TokenAttempt(got[0].Token) != 1 {
				t.Errorf("%s partition %s: %+v; want the 2 rows of a at attempt 1's token, once", table, p.Key(), got)
			}
		}
	}
	for _, p := range lease.Partitions {
		if h := history(t, e, p); h != "1 a succeeded" {
			t.Errorf("partition %s: history %q", p.Key(), h)
		}
	}
	// Finished: the lease can defer nothing more.
	if err := writeLease(t, d, lease, "late"); !errors.Is(err, sqlledger.ErrNotLeased) {
		t.Errorf("a write after the finish = %v; want ErrNotLeased", err)
	}
	// A failed outcome discards the work.
	lease = claim(t, e, "a", time.Minute, day(5))
	if err := writeLease(t, d, lease, "a"); err != nil {
		t.Fatal(err)
	}
	if err := e.Ledger.Finish(t.Context(), lease, []ledger.Outcome{{State: ledger.StateFailed, Err: "boom"}}); err != nil {
		t.Fatal(err)
	}
	if rows := read(t, e, "events")[day(5).Key()]; len(rows) != 0 {
		t.Errorf("a failed partition's rows landed: %+v", rows)
	}
}

func testSharedFenced(t *testing.T, e *Env) {
	d := e.Shared(t, Events, Audit)
	p := day(2)
	stale := claim(t, e, "stale", 50*time.Millisecond, p)
	if err := writeLease(t, d, stale, "stale"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(150 * time.Millisecond) // past the lease
	newer := claim(t, e, "newer", time.Minute, p)
	if err := writeLease(t, d, newer, "newer"); err != nil {
		t.Fatal(err)
	}
	if err := e.Ledger.Finish(t.Context(), stale, succeeded(1)); !errors.Is(err, tranche.ErrFenced) {
		t.Errorf("the stale finish = %v; want ErrFenced", err)
	}
	if rows := read(t, e, "events_audit"); len(rows) != 0 {
		t.Errorf("the fenced finish wrote rows: %v", rows)
	}
	if err := e.Ledger.Finish(t.Context(), newer, succeeded(1)); err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"events", "events_audit"} {
		if got := read(t, e, table)[p.Key()]; len(got) != 2 || got[0].Worker != "newer" || got[0].Token != newer.Tokens()[0] {
			t.Errorf("%s: %+v; want the newer attempt's 2 rows only", table, got)
		}
	}
	if h := history(t, e, p); !strings.HasPrefix(h, "1 stale failed; 2 newer succeeded") {
		t.Errorf("history %q", h)
	}
	// A stale token meets the token table too: a separate write of
	// attempt 1 is refused.
	sep := e.Separate(t, Events)
	if err := sep.Write(t.Context(), []tranche.Batch{batch(p, rowsOf(p, 1, "zombie"), newer.RunID, stale.Tokens()[0])}); !errors.Is(err, tranche.ErrFenced) {
		t.Errorf("a separate write at token 1 after the shared one at 2 = %v; want ErrFenced", err)
	}
}

func testSharedNotLeased(t *testing.T, e *Env) {
	d := e.Shared(t, Events)
	err := d.Write(t.Context(), []tranche.Batch{batch(day(0), rowsOf(day(0), 1, "x"), "some-run", 4)})
	if !errors.Is(err, sqlledger.ErrNotLeased) || !strings.Contains(err.Error(), "some-run") {
		t.Errorf("a write under no lease of the ledger = %v; want ErrNotLeased naming the run", err)
	}
	if rows := read(t, e, "events"); len(rows) != 0 {
		t.Errorf("rows written: %v", rows)
	}
}

func testSharedWorkFails(t *testing.T, e *Env) {
	d := e.Shared(t, Events)
	lease := claim(t, e, "a", time.Minute, day(0))
	if err := writeLease(t, d, lease, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.DB.ExecContext(t.Context(), "DROP TABLE events"); err != nil {
		t.Fatal(err)
	}
	err := e.Ledger.Finish(t.Context(), lease, succeeded(1))
	de, ok := errors.AsType[*sqlledger.DeferredError](err)
	if !ok || !de.Recorded || !strings.Contains(err.Error(), "events") {
		t.Fatalf("Finish with the table gone = %v; want a *DeferredError, recorded failed, naming the table", err)
	}
	if h := history(t, e, day(0)); h != "1 a failed" {
		t.Errorf("history %q; want the attempt failed", h)
	}
}

func testSharedUnfenced(t *testing.T, e *Env) {
	// A run outside a ledger (token 0) commits on its own.
	d := e.Shared(t, Events)
	dag, err := tranche.NewDAG(eventsAsset(d, 2, nil))
	if err != nil {
		t.Fatal(err)
	}
	res, err := new(tranche.Runner).Run(t.Context(), dag, day(7))
	if err != nil || res.State != tranche.StateSucceeded {
		t.Fatalf("Run = %v, %v", res, err)
	}
	if got := read(t, e, "events")[day(7).Key()]; len(got) != 2 || got[0].Token != 0 {
		t.Errorf("rows %+v; want 2 at token 0", got)
	}
}

// eventsAsset is the daily events asset writing n rows a partition into
// d, calling work first when not nil.
func eventsAsset(d tranche.Destination, n int, work func(ctx context.Context, key string) error) tranche.Asset {
	return tranche.Asset{
		Name:         "events",
		Partitioning: tranche.Partitioning{Granularity: tranche.Day, Location: time.UTC, Column: "day", AllowWindow: true},
		Destinations: []tranche.Destination{d},
		Materialize: func(ctx context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
			var out []tranche.Row
			for p := range m.Window().OldestFirst() {
				if work != nil {
					if err := work(ctx, p.Key()); err != nil {
						return nil, err
					}
				}
				out = append(out, rowsOf(p, n, m.RunID())...)
			}
			return out, nil
		},
	}
}

func testBackfill(t *testing.T, e *Env) {
	for k, c := range []struct {
		name   string
		shared bool
		chunk  int
	}{{"shared", true, 1}, {"shared-chunks", true, 3}, {"separate", false, 1}} {
		t.Run(c.name, func(t *testing.T) {
			if c.shared && e.Shared == nil {
				t.Skip("the database holds no ledger, whose transactions a destination would share")
			}
			for _, q := range []string{"DELETE FROM events", "DELETE FROM events_audit"} {
				e.DB.ExecContext(t.Context(), q) // the tables of the case before
			}
			var d *sqldest.Destination
			if c.shared {
				d = e.Shared(t, Events, Audit)
			} else {
				d = e.Separate(t, Events, Audit)
			}
			first := jan1.AddDate(0, 1+k, 0) // a window of its own in the one ledger
			w, err := tranche.NewTimePartitionWindow(tranche.Day, first, first.AddDate(0, 0, 19))
			if err != nil {
				t.Fatal(err)
			}
			// Partition 7 fails once: its rows must not land with it.
			failed := false
			dag, err := tranche.NewDAG(eventsAsset(d, 3, func(_ context.Context, key string) error {
				if key == w.Start().AddDate(0, 0, 7).Format(time.DateOnly) && !failed {
					failed = true
					return errors.New("injected")
				}
				return nil
			}))
			if err != nil {
				t.Fatal(err)
			}
			l := e.ledger()
			b := &backfill.Backfill{DAG: dag, Window: w, Ledger: l, Concurrency: 3, ChunkSize: c.chunk, OnFailure: tranche.FailContinue}
			if _, err := b.Run(t.Context()); err == nil {
				t.Fatal("the first run did not fail")
			}
			if _, err := b.Run(t.Context()); err != nil {
				t.Fatal(err)
			}
			dagID := backfill.DAGIdentity(dag, tranche.Day, time.UTC)
			events, audit := read(t, e, "events"), read(t, e, "events_audit")
			for p := range w.OldestFirst() {
				h, err := l.History(t.Context(), dagID, p.Start)
				if err != nil {
					t.Fatal(err)
				}
				last := h[len(h)-1]
				if last.State != ledger.StateSucceeded {
					t.Errorf("partition %s: latest attempt %s", p.Key(), last.State)
				}
				got, logged := events[p.Key()], audit[p.Key()]
				if len(got) != 3 || ledger.TokenAttempt(got[0].Token) != last.Number {
					t.Errorf("partition %s: %+v; want 3 rows of attempt %d", p.Key(), got, last.Number)
				}
				deliveries := map[string]bool{}
				for _, r := range logged {
					deliveries[r.Delivery] = true
				}
				if len(deliveries) != 1 || len(logged) != 3 {
					t.Errorf("partition %s: %d rows of %d deliveries in the audit; want one delivery of 3 rows", p.Key(), len(logged), len(deliveries))
				}
			}
			if keys := slices.Sorted(func(yield func(string) bool) {
				for k := range events {
					if !yield(k) {
						return
					}
				}
			}); len(keys) != w.Len() {
				t.Errorf("%d partitions hold rows; want %d", len(keys), w.Len())
			}
		})
	}
}
