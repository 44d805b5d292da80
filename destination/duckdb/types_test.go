package duckdb_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/destination/column"
	"github.com/tranche-dev/tranche/destination/duckdb"
	"github.com/tranche-dev/tranche/destination/sqldest"
)

// TestTableAlteredBetweenWrites writes a partition, alters the table's
// column between writes, and writes again through the same destination:
// each write checks the values against the column's type as the table
// declares it then, not as it did at an earlier write. A BIGINT column
// narrowed to TINYINT refuses 300, which it took before (the appender
// would store it as 44), and takes 100; widened to DECIMAL(6,2), it
// refuses 10000 and takes 9999; turned to VARCHAR, it refuses an Int; a
// column dropped fails the write naming it.
func TestTableAlteredBetweenWrites(t *testing.T) {
	d, err := duckdb.Open(t.Context(), "", events)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.CreateTables(t.Context()); err != nil {
		t.Fatal(err)
	}
	p := dayOf(0)
	token := int64(0)
	write := func(n any) error {
		token++
		return d.Write(t.Context(), []tranche.Batch{{Asset: "events", Column: "day", Partition: p, Token: token, RunID: "run",
			Rows: []tranche.Row{{"day": p.Start, "n": 1}, {"day": p.Start.Add(1), "n": n}}}})
	}
	alter := func(q string) {
		t.Helper()
		if _, err := d.DB().ExecContext(t.Context(), q); err != nil {
			t.Fatal(err)
		}
	}
	stored := func() string {
		t.Helper()
		var s string
		if err := d.DB().QueryRowContext(t.Context(), "SELECT string_agg(CAST(n AS VARCHAR), ',' ORDER BY day) FROM events").Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	refused := func(n any, kind error, says ...string) {
		t.Helper()
		before := stored()
		err := write(n)
		ve, ok := errors.AsType[*column.ValueError](err)
		if !ok || !errors.Is(err, kind) || ve.Row != 1 || ve.Column != "n" {
			t.Fatalf("write of n = %v: %v; want a *column.ValueError of row 1, column n, matching %v", n, err, kind)
		}
		for _, s := range says {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("error %q does not say %q", err, s)
			}
		}
		if after := stored(); after != before {
			t.Errorf("a refused write changed the partition: %s, then %s", before, after)
		}
	}

	if err := write(300); err != nil {
		t.Fatal(err)
	}
	if got := stored(); got != "1,300" {
		t.Fatalf("the BIGINT column holds %s; want 1,300", got)
	}

	alter("ALTER TABLE events ALTER n TYPE TINYINT USING n % 100")
	refused(300, column.ErrOutOfRange, "int64 300", "TINYINT's range, -128 to 127")
	if err := write(100); err != nil {
		t.Fatal(err)
	}
	if got := stored(); got != "1,100" {
		t.Fatalf("the TINYINT column holds %s; want 1,100", got)
	}

	alter("ALTER TABLE events ALTER n TYPE DECIMAL(6,2)")
	refused(10000, column.ErrOutOfRange, "int64 10000", "DECIMAL(6,2)")
	if err := write(9999); err != nil {
		t.Fatal(err)
	}
	if got := stored(); got != "1.00,9999.00" {
		t.Fatalf("the DECIMAL(6,2) column holds %s; want 1.00,9999.00", got)
	}

	alter("ALTER TABLE events ALTER n TYPE VARCHAR")
	if err := write(7); !errors.Is(err, column.ErrMistyped) || !strings.Contains(err.Error(), "VARCHAR") {
		t.Errorf("an Int into the column turned VARCHAR: %v; want an error matching ErrMistyped naming VARCHAR", err)
	}

	alter("ALTER TABLE events DROP n")
	if err := write(7); err == nil || !strings.Contains(err.Error(), `table events has no column "n"`) {
		t.Errorf("a write after the column was dropped: %v; want an error naming the missing column", err)
	}
}

// TestMetaColumnsFitted writes into Meta columns, the token's of a
// narrow type: the batch's token, run and delivery id are checked
// against the column's type once for the batch, and a value that does not fit refuses the
// write with a *column.ValueError of row 0 naming the column and the
// value, after the row's own values (a bad one of row 0 is named
// first); nothing is written. Those that fit are in every row.
func TestMetaColumnsFitted(t *testing.T) {
	tbl := sqldest.Table{Name: "audit", Partition: "day", Columns: []sqldest.Column{
		{Name: "day", Type: column.Time},
		{Name: "n", Type: column.Int, SQLType: "TINYINT"},
		{Name: "tok", Type: column.Int, SQLType: "TINYINT", Meta: sqldest.FromToken},
		{Name: "run", Type: column.String, Meta: sqldest.FromRunID},
		{Name: "delivery", Type: column.String, Meta: sqldest.FromDeliveryID},
	}}
	d, err := duckdb.Open(t.Context(), "", tbl)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.CreateTables(t.Context()); err != nil {
		t.Fatal(err)
	}
	p := dayOf(0)
	write := func(token int64, run string, n0 int) error {
		return d.Write(t.Context(), []tranche.Batch{{Asset: "audit", Column: "day", Partition: p, Token: token, RunID: run, DAG: "dag",
			Rows: []tranche.Row{{"day": p.Start, "n": n0}, {"day": p.Start.Add(1), "n": 2}}}})
	}

	err = write(300, "run-1", 1)
	ve, ok := errors.AsType[*column.ValueError](err)
	if !ok || !errors.Is(err, column.ErrOutOfRange) || ve.Row != 0 || ve.Column != "tok" || ve.Value != int64(300) || ve.Partition != p.Key() {
		t.Fatalf("token 300 into a TINYINT column: %v; want a *column.ValueError of row 0, column tok, value int64 300, matching ErrOutOfRange", err)
	}
	err = write(300, "run-1", 1000)
	if ve, ok := errors.AsType[*column.ValueError](err); !ok || ve.Column != "n" || ve.Row != 0 || ve.Value != int64(1000) {
		t.Fatalf("token 300 and n 1000 in row 0: %v; want n refused first", err)
	}
	if n := count(t, d.DB(), "audit"); n != 0 {
		t.Fatalf("refused writes left %d rows", n)
	}
	var tokens int
	if err := d.DB().QueryRowContext(t.Context(), "SELECT count(*) FROM tranche_tokens").Scan(&tokens); err != nil {
		t.Fatal(err)
	}
	if tokens != 0 {
		t.Fatalf("refused writes left %d token rows", tokens)
	}

	if err := write(5, "run-1", 1); err != nil {
		t.Fatal(err)
	}
	rows, err := d.DB().QueryContext(t.Context(), "SELECT n, tok, run, delivery FROM audit ORDER BY day")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var deliveries []string
	for rows.Next() {
		var n, tok int
		var run, delivery string
		if err := rows.Scan(&n, &tok, &run, &delivery); err != nil {
			t.Fatal(err)
		}
		if tok != 5 || run != "run-1" || delivery == "" {
			t.Errorf("row n=%d holds token %d, run %q, delivery %q; want 5, run-1 and the batch's delivery id", n, tok, run, delivery)
		}
		deliveries = append(deliveries, delivery)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(deliveries) != 2 || deliveries[0] != deliveries[1] {
		t.Errorf("deliveries %q; want the batch's, the same in both rows", deliveries)
	}
}
