package duckdb

import (
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/destination/column"
	"github.com/tranche-dev/tranche/destination/sqldest"
)

// The column types whose range the destination checks as DuckDB's own
// casts do, and values near their bounds.
var (
	castTypes = []string{"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT",
		"HUGEINT", "UHUGEINT"}
	intBounds = []int64{0, 1, -1, math.MinInt8, math.MaxInt8, math.MaxUint8, math.MinInt16, math.MaxInt16, math.MaxUint16,
		math.MinInt32, math.MaxInt32, math.MaxUint32, math.MinInt64, math.MaxInt64, 99, 100, 999, 1000, 99999, 100000}
)

func intValue() *rapid.Generator[int64] {
	return rapid.OneOf(rapid.Int64(), rapid.Int64Range(-100000, 100000),
		rapid.Custom(func(t *rapid.T) int64 {
			return rapid.SampledFrom(intBounds).Draw(t, "bound") + rapid.Int64Range(-2, 2).Draw(t, "off")
		}))
}

func floatValue() *rapid.Generator[float64] {
	return rapid.OneOf(rapid.Float64(), rapid.Float64Range(-1000, 1000),
		rapid.Custom(func(t *rapid.T) float64 { // halves and the like at a decimal's last digit
			return float64(rapid.Int64Range(-2000000, 2000000).Draw(t, "n")) / 2000
		}),
		rapid.SampledFrom([]float64{math.Inf(1), math.Inf(-1), math.NaN(), math.MaxFloat32, -math.MaxFloat32,
			math.MaxFloat32 * (1 + 1e-8), math.MaxFloat32 * (1 + 1e-7), math.MaxFloat64, 1e38, 0.005, 0.015, 99.995, -99.995}))
}

// decimalOf draws a DECIMAL(p,s) of a width up to max.
func decimalOf(max int) func(t *rapid.T) string {
	return func(t *rapid.T) string {
		p := rapid.IntRange(1, max).Draw(t, "width")
		return fmt.Sprintf("DECIMAL(%d,%d)", p, rapid.IntRange(0, p).Draw(t, "scale"))
	}
}

// TestFitAgreesWithDuckDB checks, for random values and column types,
// that the destination refuses exactly the values that DuckDB's own cast
// refuses (TRY_CAST is NULL), and that what the appender then stores is
// what the cast gives: the check stands where the appender has none.
// A Float goes into decimals of up to 18 digits here: wider ones (held
// in a HUGEINT) DuckDB's cast fills from a double by another way, which
// differs in the digits past a double's 16, where neither is exact.
func TestFitAgreesWithDuckDB(t *testing.T) {
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	ctx := t.Context()
	tables := map[string]string{}
	table := func(typ string) string {
		name, ok := tables[typ]
		if !ok {
			name = fmt.Sprintf("t%d", len(tables))
			if _, err := db.ExecContext(ctx, fmt.Sprintf("CREATE TABLE %s (v %s)", name, typ)); err != nil {
				t.Fatal(err)
			}
			tables[typ] = name
		}
		return name
	}
	rapid.Check(t, func(rt *rapid.T) {
		var typ, sqlType string
		var v any
		if rapid.Bool().Draw(rt, "int") {
			typ = rapid.OneOf(rapid.SampledFrom(castTypes), rapid.Custom(decimalOf(38))).Draw(rt, "type")
			v, sqlType = intValue().Draw(rt, "value"), "BIGINT"
		} else {
			typ = rapid.OneOf(rapid.Just("FLOAT"), rapid.Just("DOUBLE"), rapid.Custom(decimalOf(18))).Draw(rt, "type")
			v, sqlType = floatValue().Draw(rt, "value"), "DOUBLE"
		}
		c, err := parseType(typ)
		if err != nil {
			rt.Fatal(err)
		}
		_, want, ferr := c.fit(v)
		var cast sql.NullString
		if err := db.QueryRowContext(ctx, fmt.Sprintf("SELECT CAST(TRY_CAST($1::%s AS %s) AS VARCHAR)", sqlType, typ), v).Scan(&cast); err != nil {
			rt.Fatal(err)
		}
		if (ferr == nil) != cast.Valid {
			rt.Fatalf("%T %v into %s: the destination says %v (%s); DuckDB's cast gives %q (valid %v)", v, v, typ, ferr, want, cast.String, cast.Valid)
		}
		if ferr != nil {
			if !errors.Is(ferr, column.ErrOutOfRange) {
				rt.Fatalf("%v into %s refused with %v; want ErrOutOfRange", v, typ, ferr)
			}
			return
		}
		// Written through a destination, appended, the value reads back
		// as the cast gives it.
		name := table(typ)
		kind := column.Int
		if sqlType == "DOUBLE" {
			kind = column.Float
		}
		d, err := New(ctx, db, "duckdb test", sqldest.Table{Name: name, Columns: []sqldest.Column{{Name: "v", Type: kind, SQLType: typ}}})
		if err != nil {
			rt.Fatal(err)
		}
		if err := d.Write(ctx, []tranche.Batch{{Asset: name, Rows: []tranche.Row{{"v": v}}}}); err != nil {
			rt.Fatalf("append %v into %s: %v", v, typ, err)
		}
		var stored string
		if err := db.QueryRowContext(ctx, "SELECT CAST(v AS VARCHAR) FROM "+name).Scan(&stored); err != nil {
			rt.Fatal(err)
		}
		if stored != cast.String {
			rt.Fatalf("%T %v into %s: appended, it reads %q; DuckDB's cast gives %q", v, v, typ, stored, cast.String)
		}
	})
}

// TestParseType reads the types as the driver names them (TIMESTAMPTZ),
// and as duckdb_columns() and typeof do (TIMESTAMP WITH TIME ZONE).
func TestParseType(t *testing.T) {
	for _, c := range []struct {
		in   string
		want typ
		ok   bool
	}{
		{"TINYINT", tInteger, true}, {"UBIGINT", tInteger, true}, {"HUGEINT", tHuge, true},
		{"DECIMAL(18,3)", tDecimal, true}, {"DECIMAL(38, 10)", tDecimal, true},
		{"TIMESTAMP WITH TIME ZONE", tTimestamp, true}, {"TIMESTAMPTZ", tTimestamp, true}, {"TIMESTAMP_NS", tTimestampNS, true},
		{"VARCHAR", tVarchar, true}, {"BLOB", tBlob, true},
		{"UUID", 0, false}, {"INTEGER[]", 0, false}, {"ENUM('a', 'b')", 0, false}, {"DATE", 0, false}, {"DECIMAL(x,1)", 0, false},
		{"DECIMAL(39,1)", 0, false}, {"DECIMAL(4,5)", 0, false}, {"DECIMAL(99999999999999999999,1)", 0, false}, {"DECIMAL(0,0)", 0, false},
	} {
		got, err := parseType(c.in)
		if (err == nil) != c.ok || c.ok && got.t != c.want {
			t.Errorf("parseType(%q) = %v, %v; want type %v, ok %v", c.in, got.t, err, c.want, c.ok)
		}
	}
}

// FuzzParseType reads any text as a column type: an error or a type,
// never a panic, and a DECIMAL's bounds as DuckDB allows them.
func FuzzParseType(f *testing.F) {
	for _, s := range []string{"TINYINT", "DECIMAL(18,3)", "DECIMAL(38, 38)", "TIMESTAMP WITH TIME ZONE", "ENUM('a')", "DECIMAL(1,2)"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := parseType(s)
		if err != nil {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("parseType(%q) = %v; the error does not name the type", s, err)
			}
			return
		}
		if c.name != s && !(s == "TIMESTAMPTZ" && c.name == "TIMESTAMP WITH TIME ZONE") || c.t == 0 {
			t.Errorf("parseType(%q) = %+v", s, c)
		}
		if c.t == tDecimal && (c.width < 1 || c.width > 38 || c.scale < 0 || c.scale > c.width) {
			t.Errorf("parseType(%q): DECIMAL(%d,%d)", s, c.width, c.scale)
		}
	})
}
