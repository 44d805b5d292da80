package duckdb

import (
	"context"
	"database/sql"
	"errors"
	"math"
	"math/big"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/destination/column"
	"github.com/tranche-dev/tranche/destination/sqldest"
	"github.com/tranche-dev/tranche/internal/integer"
)

// kindTypes are, for each kind, the column types the destination
// writes it into, and one it refuses.
var kindTypes = map[column.Type][]string{
	column.Int:    append(append([]string{}, castTypes...), "DOUBLE", "FLOAT", "DECIMAL(4,2)", "DECIMAL(38,0)", "VARCHAR"),
	column.Float:  {"DOUBLE", "FLOAT", "DECIMAL(4,2)", "DECIMAL(18,6)", "BIGINT"},
	column.String: {"VARCHAR", "BLOB"},
	column.Bool:   {"BOOLEAN", "VARCHAR"},
	column.Time:   {"TIMESTAMP WITH TIME ZONE", "TIMESTAMPTZ", "TIMESTAMP", "TIMESTAMP_NS", "TIMESTAMP_MS", "TIMESTAMP_S", "VARCHAR"},
	column.Bytes:  {"BLOB", "VARCHAR"},
}

// anyValue draws a value a row might hold for a column of any kind:
// each of the Go types the kinds take, near the types' bounds, and some
// no kind takes.
func anyValue() *rapid.Generator[any] {
	times := []time.Time{minTimestamp, maxTimestamp, minTimestampNS, maxTimestampNS,
		time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)}
	return rapid.OneOf(
		rapid.Map(intValue(), func(n int64) any { return n }),
		rapid.Map(intValue(), func(n int64) any { return int(n) }),
		rapid.Map(rapid.Int8(), func(n int8) any { return n }),
		rapid.Map(rapid.Uint64(), func(n uint64) any { return n }),
		rapid.Map(floatValue(), func(f float64) any { return f }),
		rapid.Map(rapid.Float32(), func(f float32) any { return f }),
		rapid.Map(rapid.SampledFrom([]string{"", "user-000001", "caf\xe9", "a\x00b", "ü"}), func(s string) any { return s }),
		rapid.Map(rapid.Bool(), func(b bool) any { return b }),
		rapid.Map(rapid.Custom(func(t *rapid.T) time.Time {
			return rapid.SampledFrom(times).Draw(t, "near").Add(time.Duration(rapid.Int64Range(-2e9, 2e9).Draw(t, "off")))
		}), func(t time.Time) any { return t }),
		rapid.Just[any]([]byte("bytes")),
		rapid.Just[any](nil),
		rapid.Just[any](struct{}{}),
	)
}

// captureRows returns the *sqldest.Rows that a write of rows gives a
// dialect's Insert, for a table of one column "v" of the given kind
// (allowing NULL when null), unpartitioned.
func captureRows(t *testing.T, db *sql.DB, kind column.Type, null bool, rows []tranche.Row) *sqldest.Rows {
	t.Helper()
	var got *sqldest.Rows
	dialect := Dialect
	dialect.Insert = func(_ context.Context, _ *sql.Conn, _ *sql.Tx, _ [2]string, _ []string, r *sqldest.Rows) error {
		got = r
		return nil
	}
	tbl := sqldest.Table{Name: "conv", Columns: []sqldest.Column{{Name: "v", Type: kind, Null: null}}}
	d, err := sqldest.New(t.Context(), db, sqldest.Options{Dialect: &dialect, Name: "capture"}, tbl)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.CreateTables(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := d.Write(t.Context(), []tranche.Batch{{Asset: "conv", Rows: rows}}); err != nil {
		t.Fatal(err)
	}
	return got
}

// TestConvertersAgreeWithFit checks, for random values and column types
// of every kind, that a column's converter, whose fast paths take the
// values of the kind's own Go type that the type holds through one type
// switch, gives what the spec's check followed by fit gives: the same
// value for the appender, or the same error, value named and what would
// be accepted. The fast paths are an optimization, never a weaker check.
func TestConvertersAgreeWithFit(t *testing.T) {
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows := map[[2]int]*sqldest.Rows{}
	for kind := range kindTypes {
		for _, null := range []bool{false, true} {
			n := 0
			if null {
				n = 1
			}
			// A table per kind and nullness, the rows read once.
			if _, err := db.ExecContext(t.Context(), "DROP TABLE IF EXISTS conv"); err != nil {
				t.Fatal(err)
			}
			rows[[2]int{int(kind), n}] = captureRows(t, db, kind, null, []tranche.Row{{"v": nil}})
		}
	}
	rapid.Check(t, func(rt *rapid.T) {
		kind := rapid.SampledFrom([]column.Type{column.Int, column.Float, column.String, column.Bool, column.Time, column.Bytes}).Draw(rt, "kind")
		typ := rapid.SampledFrom(kindTypes[kind]).Draw(rt, "type")
		null := rapid.Bool().Draw(rt, "null")
		n := 0
		if null {
			n = 1
		}
		r := rows[[2]int{int(kind), n}]
		c, err := parseType(typ)
		if err != nil {
			rt.Fatal(err)
		}
		v := anyValue().Draw(rt, "value")
		out, want, err := c.converter(r, 0, kind)(v)

		// The reference: the spec's check, then fit.
		refOut, refWant, refErr := r.Value(0, v)
		refValue := v
		if refErr == nil && refOut != nil {
			refValue = refOut
			var fitted any
			fitted, refWant, refErr = c.fit(refOut)
			switch {
			case refErr != nil:
				if n, ok := integer.Int64(refOut); ok {
					refValue = n
				}
			case fitted != nil:
				refOut = fitted
			}
		}
		if !errors.Is(err, refErr) || (err == nil) != (refErr == nil) {
			rt.Fatalf("%T %v, kind %v, into %s (null %v): the converter says %v (%q); the spec and fit say %v (%q)", v, v, kind, typ, null, err, want, refErr, refWant)
		}
		if err != nil {
			if want != refWant || !cmp.Equal(out, refValue, same) {
				rt.Fatalf("%T %v into %s: refused naming %T %v, wanting %q; the reference names %T %v, wanting %q", v, v, typ, out, out, want, refValue, refValue, refWant)
			}
			return
		}
		if !cmp.Equal(out, refOut, same) {
			rt.Fatalf("%T %v into %s: the converter gives %T %v; the reference %T %v", v, v, typ, out, out, refOut, refOut)
		}
	})
}

// same compares the values for the appender: floats with NaN equal to
// itself, and a Decimal's big.Int by value.
var same = cmp.Options{
	cmp.Comparer(func(a, b float64) bool { return a == b || math.IsNaN(a) && math.IsNaN(b) }),
	cmp.Comparer(func(a, b *big.Int) bool { return a.Cmp(b) == 0 }),
}
