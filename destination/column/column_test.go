package column_test

import (
	"errors"
	"testing"
	"time"

	"github.com/tranche-dev/tranche/destination/column"
)

// TestValueError checks the one message of a refused value, as a
// destination with tables (sqldest's) and one without (parquet) print it.
func TestValueError(t *testing.T) {
	for _, c := range []struct {
		err  column.ValueError
		want string
	}{
		{column.ValueError{Destination: "sqlite destination", Table: "main.events", Asset: "a", Partition: "2026-01-02", Row: 3, Column: "n", Value: "x", Err: column.ErrMistyped, Want: column.Int.Accepts()},
			`tranche: sqlite destination: table main.events, asset "a", partition 2026-01-02: row 3: column "n": string "x" is not an integer (int, int8 to int64, uint8 to uint64 up to 2^63-1)`},
		{column.ValueError{Destination: "parquet destination", Asset: "a", Row: 0, Column: "extra", Value: 1.5, Err: column.ErrUnknownColumn, Want: `the schema's columns are "id"`},
			`tranche: parquet destination: asset "a": row 0: key "extra" (float64 1.5) is no column of the schema; the schema's columns are "id"`},
		{column.ValueError{Destination: "duckdb destination", Table: "t", Asset: "a", Row: 1, Column: "ok", Err: column.ErrNull, Want: "a bool"},
			`tranche: duckdb destination: table t, asset "a": row 1: column "ok" is missing or nil, and does not allow null; want a bool`},
	} {
		if got := c.err.Error(); got != c.want {
			t.Errorf("Error() = %s\nwant      %s", got, c.want)
		}
		if !errors.Is(&c.err, c.err.Err) {
			t.Errorf("%v does not match %v", &c.err, c.err.Err)
		}
	}
}

// TestTypeOf checks the type each Go value infers, and the names.
func TestTypeOf(t *testing.T) {
	for v, want := range map[any]column.Type{int8(1): column.Int, uint64(1): column.Int, float32(1): column.Float, "s": column.String, true: column.Bool, time.Time{}: column.Time} {
		if got, ok := column.TypeOf(v); !ok || got != want {
			t.Errorf("TypeOf(%T) = %v, %v; want %v", v, got, ok, want)
		}
	}
	if got, ok := column.TypeOf([]byte{}); !ok || got != column.Bytes {
		t.Errorf("TypeOf([]byte) = %v, %v; want Bytes", got, ok)
	}
	if _, ok := column.TypeOf(struct{}{}); ok {
		t.Error("TypeOf(struct{}{}) has a type")
	}
	if column.Type(0).IsValid() || column.Type(7).String() != "Type(7)" || column.Time.String() != "Time" {
		t.Error("the zero Type is valid, or a type's name is wrong")
	}
}
