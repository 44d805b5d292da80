package parquet

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	_ "github.com/duckdb/duckdb-go/v2" // DuckDB, the independent reader of the files
	"github.com/google/go-cmp/cmp"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/destination/column"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/ledgertest"
	"github.com/tranche-dev/tranche/tranchetest"
)

// openDuckDB opens an in-memory DuckDB database, closed with the test.
func openDuckDB(t testing.TB) *sql.DB {
	t.Helper()
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// readParquet is the read_parquet call over every partition of an asset.
func readParquet(dir, asset string) string {
	glob := strings.ReplaceAll(dir+"/"+asset+"/*/*.parquet", "'", "''")
	return fmt.Sprintf("read_parquet('%s', hive_partitioning = true)", glob)
}

// fataler is what query needs of a *testing.T or a *rapid.T.
type fataler interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// query runs q and returns its rows, each a slice of its columns'
// values.
func query(t fataler, db *sql.DB, q string, args ...any) [][]any {
	t.Helper()
	rows, err := db.Query(q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	var out [][]any
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		out = append(out, vals)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return out
}

// order is the row the orders asset makes for partition p: day i of
// January has i+1 orders, every third without a customer.
func orders(p tranche.TimePartition) []tranche.Row {
	n := p.Start.Day()
	rows := make([]tranche.Row, n)
	for i := range rows {
		r := tranche.Row{
			"day":       p.Key(),
			"id":        int64(n*1000 + i),
			"amount":    float64(i) + 0.25,
			"paid":      i%2 == 0,
			"placed_at": p.Start.Add(time.Duration(i)*time.Minute + 123456789), // nanoseconds DuckDB does not keep
		}
		if i%3 != 0 {
			r["customer"] = fmt.Sprintf("c%d", i)
		}
		rows[i] = r
	}
	return rows
}

var ordersSchema = Schema{Columns: []Column{
	{Name: "id", Type: column.Int},
	{Name: "amount", Type: column.Float},
	{Name: "customer", Type: column.String, Null: true},
	{Name: "paid", Type: column.Bool},
	{Name: "placed_at", Type: column.Time},
}}

// TestBackfillDuckDB backfills January through the destination on the
// in-memory ledger, then reads every partition back with DuckDB's
// read_parquet and hive_partitioning: the partition column comes from
// the folder names, and each day's row count and values are the
// materializer's. Running the backfill again (RerunAll) replaces each
// partition at a newer token; a write of the first run's attempts that
// arrives after it, as a worker paused past its lease would make, is
// refused and changes nothing DuckDB reads.
func TestBackfillDuckDB(t *testing.T) {
	ctx := t.Context()
	dest := &Destination{Dir: t.TempDir(), Schemas: map[string]Schema{"orders": ordersSchema}}
	dag, err := tranche.NewDAG(tranche.Asset{
		Name:         "orders",
		Partitioning: tranche.Partitioning{Granularity: tranche.Day, Location: time.UTC, Column: "day"},
		Destinations: []tranche.Destination{dest},
		Materialize: func(_ context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
			p, err := m.Partition()
			if err != nil {
				return nil, err
			}
			return orders(p), nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	january, err := tranche.WindowBetween(tranche.Day, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	b := &backfill.Backfill{DAG: dag, Window: january, Concurrency: 4}
	clock := ledgertest.NewClock(january.End())
	if report, err := tranchetest.RunBackfill(ctx, clock, b); err != nil || report.Succeeded != 31 {
		t.Fatalf("backfill: %v, %v; want 31 partitions succeeded", report, err)
	}
	tranchetest.RequireSucceededOnce(t, b)

	db := openDuckDB(t)
	src := readParquet(dest.Dir, "orders")
	check := func(token int64) {
		t.Helper()
		// Per partition: the count and the sums DuckDB computes, against
		// the materializer's rows.
		got := query(t, db, "SELECT strftime(day, '%Y-%m-%d'), count(*), sum(id)::BIGINT, sum(amount), count(customer), count(*) FILTER (WHERE paid), min(placed_at), max(placed_at) FROM "+src+" GROUP BY day ORDER BY day")
		var want [][]any
		for p := range january.OldestFirst() {
			rows := orders(p)
			var ids int64
			var amounts float64
			var customers, paid int64
			for _, r := range rows {
				ids += r["id"].(int64)
				amounts += r["amount"].(float64)
				if _, ok := r["customer"]; ok {
					customers++
				}
				if r["paid"].(bool) {
					paid++
				}
			}
			first, last := rows[0]["placed_at"].(time.Time), rows[len(rows)-1]["placed_at"].(time.Time)
			want = append(want, []any{p.Key(), int64(len(rows)), ids, amounts, customers, paid,
				first.Truncate(time.Microsecond), last.Truncate(time.Microsecond)})
		}
		if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })); diff != "" {
			t.Errorf("per partition, DuckDB reads (-want +got):\n%s", diff)
		}
		// Every value of one partition, row by row.
		rows := query(t, db, "SELECT id, amount, customer, paid, placed_at FROM "+src+" WHERE day = DATE '2026-01-07' ORDER BY id")
		var wantRows [][]any
		for _, r := range orders(day(6)) {
			var customer any
			if c, ok := r["customer"]; ok {
				customer = c
			}
			wantRows = append(wantRows, []any{r["id"], r["amount"], customer, r["paid"], r["placed_at"].(time.Time).Truncate(time.Microsecond)})
		}
		if diff := cmp.Diff(wantRows, rows, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })); diff != "" {
			t.Errorf("partition 2026-01-07, DuckDB reads (-want +got):\n%s", diff)
		}
		// Each file records the token that wrote it.
		tokens := query(t, db, "SELECT DISTINCT decode(value) FROM parquet_kv_metadata('"+dest.Dir+"/orders/*/*.parquet') WHERE decode(key) = 'tranche.token'")
		var stored int64
		if len(tokens) == 1 && len(tokens[0]) == 1 {
			stored, _ = strconv.ParseInt(fmt.Sprint(tokens[0][0]), 10, 64)
		}
		if len(tokens) != 1 || int64(ledger.TokenAttempt(stored)) != token {
			t.Errorf("the files' tranche.token: %v; want one token, of attempt %d", tokens, token)
		}
	}
	check(1)

	// The schema DuckDB sees: the declared columns in their order, then
	// the partition column from the folder names.
	describe := query(t, db, "SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM "+src+")")
	wantDescribe := [][]any{{"id", "BIGINT"}, {"amount", "DOUBLE"}, {"customer", "VARCHAR"}, {"paid", "BOOLEAN"}, {"placed_at", "TIMESTAMP WITH TIME ZONE"}, {"day", "DATE"}}
	if diff := cmp.Diff(wantDescribe, describe); diff != "" {
		t.Errorf("DESCRIBE (-want +got):\n%s", diff)
	}

	b.Rerun = ledger.RerunAll
	if report, err := tranchetest.RunBackfill(ctx, clock, b); err != nil || report.Succeeded != 31 {
		t.Fatalf("backfill again: %v, %v; want 31 partitions succeeded", report, err)
	}
	check(2)

	stale := tranche.Batch{Asset: "orders", Column: "day", Partition: day(6), Token: 1,
		DAG: backfill.DAGIdentity(b.DAG, tranche.Day, b.Window.Location()), Rows: []tranche.Row{{"day": "2026-01-07", "id": -1, "amount": 0.0, "paid": true, "placed_at": t0}}}
	if err := dest.Write(ctx, []tranche.Batch{stale}); !errors.Is(err, tranche.ErrFenced) {
		t.Fatalf("the first run's write after the second = %v; want ErrFenced", err)
	}
	check(2)
}
