// Package column is the type system of the destinations that write rows
// into typed columns: the SQL destinations of package sqldest (SQLite,
// PostgreSQL, DuckDB) and the Parquet destination. A column's [Type]
// says which Go values it takes, and a [*ValueError] refuses a batch for
// one value that does not fit, so that a schema written for one of them
// reads the same in the others and a refusal is matched the same way
// ([ErrUnknownColumn], [ErrMistyped], [ErrNull], [ErrOutOfRange]).
package column

import (
	"errors"
	"fmt"
	"time"
)

// Type is the type of Go values a column takes. Each destination says
// how it stores each type (sqldest's Dialect.Types, the Parquet types of
// package parquet).
type Type int

// The types of columns. A value must be of one of the Go types its type
// lists; nil, or a row without the column, is null, for a column that
// allows it.
const (
	// Int takes int, int8, int16, int32, int64, uint8, uint16, uint32,
	// and uint and uint64 up to math.MaxInt64, stored as an int64.
	Int Type = iota + 1
	// Float takes float64 and float32, and integers of the Int types up
	// to 2^53 in magnitude, which a float64 holds exactly.
	Float
	// String takes string; a destination may ask more of it (valid
	// UTF-8 for Parquet and PostgreSQL, no NUL bytes for PostgreSQL).
	String
	// Bool takes bool.
	Bool
	// Time takes time.Time.
	Time
	// Bytes takes []byte.
	Bytes
)

var typeNames = [...]string{Int: "Int", Float: "Float", String: "String", Bool: "Bool", Time: "Time", Bytes: "Bytes"}

// String returns the type's name, such as "Int".
func (t Type) String() string {
	if !t.IsValid() {
		return fmt.Sprintf("Type(%d)", int(t))
	}
	return typeNames[t]
}

// IsValid reports whether t is one of the types (not the zero value).
func (t Type) IsValid() bool { return t >= Int && t <= Bytes }

// Accepts says, for errors, which Go values t takes: "a bool".
func (t Type) Accepts() string {
	switch t {
	case Int:
		return "an integer (int, int8 to int64, uint8 to uint64 up to 2^63-1)"
	case Float:
		return "a number (float64, float32, or an integer up to 2^53)"
	case String:
		return "a string"
	case Bool:
		return "a bool"
	case Time:
		return "a time.Time"
	case Bytes:
		return "a []byte"
	}
	return t.String()
}

// TypeOf returns the type a column holding v would have, and whether v
// is of one: Int for every integer type, Float for float64 and float32.
func TypeOf(v any) (Type, bool) {
	switch v.(type) {
	case int, int8, int16, int32, int64, uint8, uint16, uint32, uint, uint64:
		return Int, true
	case float64, float32:
		return Float, true
	case string:
		return String, true
	case bool:
		return Bool, true
	case time.Time:
		return Time, true
	case []byte:
		return Bytes, true
	}
	return 0, false
}

// Errors of a refused batch, matched with errors.Is; a [*ValueError]
// carries the details.
var (
	ErrUnknownColumn = errors.New("column: no such column")
	ErrMistyped      = errors.New("column: value of the wrong type")
	ErrNull          = errors.New("column: null in a column that does not allow it")
	// ErrOutOfRange refuses a value of the right type that the column,
	// as the database declares it, cannot hold: 300 for a TINYINT, a
	// time beyond a TIMESTAMP's years. Only the destinations that check
	// the table's own types return it (DuckDB's).
	ErrOutOfRange = errors.New("column: value out of the column's range")
)

// ValueError refuses a write, which writes nothing, for one value of one
// row: a key that is no column, a value the column's type does not take,
// or a missing or nil value where null is not allowed; or a value the
// column cannot hold ([ErrOutOfRange]).
type ValueError struct {
	Destination string // the destination, as its errors name it: "parquet destination"
	Table       string // the table, qualified as written; "" for a destination without tables
	Asset       string
	Partition   string // the partition's key; "" for an unpartitioned asset
	Row         int    // the row's index in the batch
	Column      string // the column; for ErrUnknownColumn, the row's key
	Value       any    // the value refused; nil for a missing one
	Err         error  // ErrUnknownColumn, ErrMistyped, ErrNull or ErrOutOfRange
	Want        string // what would be accepted
}

func (e *ValueError) Error() string {
	where, of := "tranche: "+e.Destination+": ", "schema"
	if e.Table != "" {
		where, of = where+"table "+e.Table+", ", "table"
	}
	where += fmt.Sprintf("asset %q", e.Asset)
	if e.Partition != "" {
		where += ", partition " + e.Partition
	}
	where += fmt.Sprintf(": row %d: ", e.Row)
	switch {
	case errors.Is(e.Err, ErrUnknownColumn):
		return where + fmt.Sprintf("key %q (%s) is no column of the %s; %s", e.Column, describe(e.Value), of, e.Want)
	case errors.Is(e.Err, ErrNull) && e.Value == nil:
		return where + fmt.Sprintf("column %q is missing or nil, and does not allow null; want %s", e.Column, e.Want)
	}
	return where + fmt.Sprintf("column %q: %s is not %s", e.Column, describe(e.Value), e.Want)
}

// Unwrap returns Err.
func (e *ValueError) Unwrap() error { return e.Err }

// describe shows a value in an error: its type and value.
func describe(v any) string {
	switch v := v.(type) {
	case nil:
		return "nil"
	case string:
		if len(v) > 64 {
			v = v[:64] + "..."
		}
		return fmt.Sprintf("string %q", v)
	case []byte:
		return fmt.Sprintf("[]byte of %d bytes", len(v))
	case time.Time:
		return "time.Time " + v.Format(time.RFC3339Nano)
	}
	s := fmt.Sprint(v)
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return fmt.Sprintf("%T %s", v, s)
}
