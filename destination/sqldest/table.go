package sqldest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tranche-dev/tranche/internal/integer"
)

// Type is the type of Go values a column takes.
type Type int

// The types of columns. A value must be of one of the Go types its type
// lists; nil is NULL, for a column that allows it.
const (
	// Int takes int, int8, int16, int32, int64, uint8, uint16, uint32,
	// and uint and uint64 up to math.MaxInt64; it is written as an
	// int64.
	Int Type = iota + 1
	// Float takes float64 and float32, and integers of the Int types up
	// to 2^53 in magnitude, which a float64 holds exactly.
	Float
	// String takes string: on PostgreSQL, valid UTF-8 without NUL
	// bytes, as its text types require.
	String
	// Bool takes bool.
	Bool
	// Time takes time.Time. PostgreSQL stores it in a TIMESTAMPTZ column;
	// SQLite, which has no time type, as UTC text of a fixed width,
	// 2006-01-02T15:04:05.000000000Z, which sorts as the instants do and
	// which SQLite's date functions read.
	Time
	// Bytes takes []byte, copied when the write is handed to a ledger's
	// transaction, which runs after the batch is back with the runner.
	Bytes
)

var typeNames = [...]string{Int: "Int", Float: "Float", String: "String", Bool: "Bool", Time: "Time", Bytes: "Bytes"}

// String returns the type's name, such as "Int".
func (k Type) String() string {
	if k < Int || k > Bytes {
		return fmt.Sprintf("Type(%d)", int(k))
	}
	return typeNames[k]
}

// accepts says, for errors, which Go values a type takes.
func (k Type) accepts() string {
	switch k {
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
	return k.String()
}

// Meta names a value of the batch rather than of the row, which a column
// takes for every row of the batch.
type Meta int

const (
	// FromRow: the column takes the row's value under its key. The
	// default.
	FromRow Meta = iota
	// FromToken: the batch's fencing token ([tranche.Batch.Token]), in
	// an Int column.
	FromToken
	// FromRunID: the batch's run id, in a String column.
	FromRunID
	// FromDeliveryID: the batch's delivery id
	// ([destination.DeliveryID]), in a String column: what an
	// appending table deduplicates by.
	FromDeliveryID
)

// Column maps a key of the rows to a column of a table.
type Column struct {
	Name string // the column's name in the table
	Key  string // the rows' key; "" means Name
	Type Type
	// SQLType is the column's SQL type, for [Destination.CreateTables] and
	// [Table.DDL]; "" means the dialect's type for Type (on SQLite
	// INTEGER, REAL, TEXT, INTEGER, TEXT, BLOB; on PostgreSQL BIGINT,
	// DOUBLE PRECISION, TEXT, BOOLEAN, TIMESTAMPTZ, BYTEA; on DuckDB
	// BIGINT, DOUBLE, VARCHAR, BOOLEAN, TIMESTAMPTZ, BLOB).
	SQLType string
	// Null allows NULL: a nil value, or a row without the key. A column
	// that does not allow it refuses both.
	Null bool
	// Meta, when not FromRow, fills the column from the batch instead
	// of the rows.
	Meta Meta
}

// Table is a table that receives an asset's rows, which the user owns:
// the destination writes only the columns it names, and creates the
// table only when asked ([Destination.CreateTables]).
type Table struct {
	// Schema qualifies Name: a PostgreSQL schema, or an attached SQLite
	// database; "" is the connection's current schema (PostgreSQL's
	// search_path, SQLite's main).
	Schema string
	Name   string
	// Asset is the asset whose batches the table receives; "" means
	// Name. An asset may fill several tables.
	Asset string
	// Partition names the partition column among Columns, whose key is
	// the asset's partition column (Partitioning.Column). A Time column
	// is replaced by the partition's bounds: every row whose value lies
	// in [Start, End) is deleted before the batch's rows are inserted. A
	// String column holds the partition's key, and its rows with the
	// key are replaced; a row's partition value may be a time.Time or a
	// key string either way, as the runner accepts them, and is written
	// as the column's type. "" for the table of an unpartitioned asset,
	// which each write replaces whole.
	Partition string
	// Append keeps every write's rows instead of replacing the
	// partition's: an audit log of writes. Its partitions are still
	// fenced by token.
	Append  bool
	Columns []Column
}

// Errors of a refused batch, matched with errors.Is; a [*ValueError]
// carries the details.
var (
	ErrUnknownColumn = errors.New("sqldest: no such column")
	ErrMistyped      = errors.New("sqldest: value of the wrong type")
	ErrNull          = errors.New("sqldest: NULL in a column that does not allow it")
	ErrNoTable       = errors.New("sqldest: no table for the asset")
	// ErrOutOfRange refuses a value of the right kind that the table's
	// column, as the database declares it, cannot hold: 300 for a
	// TINYINT, a time beyond a TIMESTAMP's years. Only the dialects that
	// check the table's own types return it (DuckDB's).
	ErrOutOfRange = errors.New("sqldest: value out of the column's range")
)

// ValueError refuses a write, which writes nothing, for one value of one
// row: a key that is no column of the table, a value the column's type
// does not take, or a missing or nil value where NULL is not allowed; or,
// from a dialect that checks the table's own column types as it inserts,
// a value the column cannot hold ([ErrOutOfRange]). A write committing
// on its own meets it as it inserts the row, and rolls its transaction
// back; a write for a ledger's transaction, before it is handed over.
type ValueError struct {
	Destination string
	Table       string // the table, qualified as written
	Asset       string
	Partition   string // the partition's key; "" for an unpartitioned asset
	Row         int    // the row's index in the batch
	Column      string // the column; for ErrUnknownColumn, the row's key
	Value       any    // the value refused; nil for a missing one
	Err         error  // ErrUnknownColumn, ErrMistyped, ErrNull or ErrOutOfRange
	Want        string // what would be accepted
}

func (e *ValueError) Error() string {
	where := fmt.Sprintf("tranche: %s: table %s, asset %q", e.Destination, e.Table, e.Asset)
	if e.Partition != "" {
		where += ", partition " + e.Partition
	}
	where += fmt.Sprintf(": row %d: ", e.Row)
	switch {
	case errors.Is(e.Err, ErrUnknownColumn):
		return where + fmt.Sprintf("key %q (%s) is no column of the table; %s", e.Column, describe(e.Value), e.Want)
	case errors.Is(e.Err, ErrNull) && e.Value == nil:
		return where + fmt.Sprintf("column %q is missing or nil, and does not allow NULL; want %s", e.Column, e.Want)
	}
	return where + fmt.Sprintf("column %q: %s is not %s", e.Column, describe(e.Value), e.Want)
}

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

// table is a Table compiled for writing.
type table struct {
	Table
	ident    string // quoted and qualified, for SQL
	name     string // qualified, unquoted: its key in the token table, and its name in errors
	cols     []Column
	byKey    map[string]int // a row column's key -> its index in cols
	fromRows int            // how many columns come from rows
	part     int            // the partition column's index, or -1
	keys     string         // the row keys, for errors
	rowKeys  []string       // each column's key in the rows; "" for a Meta column
	steps    []step         // the columns from the rows, in order, as Row reads them
	metas    []int          // the indexes of the Meta columns
	delivery bool           // whether a column takes the delivery id
	bytes    bool           // whether a column takes Bytes

	qDelete, qInsert string
	qInsertHead      string   // INSERT INTO ... VALUES, before the rows
	columnNames      []string // unquoted, in order
}

// quote quotes an SQL identifier, as SQLite and PostgreSQL both read it.
func quote(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// compile checks a table spec and prepares its statements.
func compile(t Table) (*table, error) {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("table %s: "+format, append([]any{qualified(t)}, args...)...))
	}
	switch {
	case t.Name == "":
		return nil, errors.New("a table without a name")
	case strings.ContainsRune(t.Name, 0) || strings.ContainsRune(t.Schema, 0):
		return nil, fmt.Errorf("table %q: a NUL byte in its name", qualified(t))
	case len(t.Columns) == 0:
		bad("no columns")
	}
	c := &table{Table: t, name: qualified(t), cols: slices.Clone(t.Columns), byKey: map[string]int{}, part: -1}
	if c.Asset == "" {
		c.Asset = t.Name
	}
	c.ident = quote(t.Name)
	if t.Schema != "" {
		c.ident = quote(t.Schema) + "." + c.ident
	}
	names := map[string]bool{}
	var keys []string
	for i, col := range t.Columns {
		switch {
		case col.Name == "" || strings.ContainsRune(col.Name, 0):
			bad("column %d: name %q; want a name without NUL bytes", i, col.Name)
			continue
		case names[col.Name]:
			bad("column %q named twice", col.Name)
		case col.Type < Int || col.Type > Bytes:
			bad("column %q: type %v; want Int, Float, String, Bool, Time or Bytes", col.Name, col.Type)
		}
		names[col.Name] = true
		c.columnNames = append(c.columnNames, col.Name)
		c.bytes = c.bytes || col.Type == Bytes
		key := ""
		switch col.Meta {
		case FromRow:
			key = col.Key
			if key == "" {
				key = col.Name
			}
			if _, dup := c.byKey[key]; dup {
				bad("key %q mapped to two columns", key)
			}
			c.byKey[key] = i
			c.fromRows++
			keys = append(keys, key)
		case FromToken:
			if col.Type != Int {
				bad("column %q takes the token, an Int; type %v", col.Name, col.Type)
			}
		case FromRunID, FromDeliveryID:
			c.delivery = c.delivery || col.Meta == FromDeliveryID
			if col.Type != String {
				bad("column %q takes the run or delivery id, a String; type %v", col.Name, col.Type)
			}
		default:
			bad("column %q: meta %d; want FromRow, FromToken, FromRunID or FromDeliveryID", col.Name, col.Meta)
		}
		c.rowKeys = append(c.rowKeys, key)
		if col.Meta == FromRow {
			c.steps = append(c.steps, step{j: i, key: key, col: &c.cols[i], part: col.Name == t.Partition})
		} else {
			c.metas = append(c.metas, i)
		}
		if col.Name == t.Partition {
			c.part = i
			switch {
			case col.Meta != FromRow:
				bad("partition column %q must come from the rows", col.Name)
			case col.Type != Time && col.Type != String:
				bad("partition column %q: type %v; want Time (bounds) or String (keys)", col.Name, col.Type)
			case col.Null:
				bad("partition column %q must not allow NULL", col.Name)
			}
		}
	}
	if t.Partition != "" && c.part < 0 {
		bad("partition column %q is none of its columns", t.Partition)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	c.keys = strings.Join(keys, ", ")
	var cols, ph []string
	for i, n := range c.columnNames {
		cols = append(cols, quote(n))
		ph = append(ph, fmt.Sprintf("$%d", i+1))
	}
	c.qInsertHead = "INSERT INTO " + c.ident + " (" + strings.Join(cols, ", ") + ") VALUES "
	c.qInsert = c.qInsertHead + "(" + strings.Join(ph, ", ") + ")"
	switch {
	case t.Partition == "":
		c.qDelete = "DELETE FROM " + c.ident
	case c.cols[c.part].Type == Time:
		p := quote(t.Partition)
		c.qDelete = "DELETE FROM " + c.ident + " WHERE " + p + " >= $1 AND " + p + " < $2"
	default:
		c.qDelete = "DELETE FROM " + c.ident + " WHERE " + quote(t.Partition) + " = $1"
	}
	return c, nil
}

func qualified(t Table) string {
	if t.Schema != "" {
		return t.Schema + "." + t.Name
	}
	return t.Name
}

// insertQuery returns the INSERT of n rows, rebound for the dialect.
func (c *table) insertQuery(d *Dialect, n int) string {
	if n == 1 {
		return c.qInsert
	}
	var b strings.Builder
	b.WriteString(c.qInsertHead)
	k := 1
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('(')
		for j := range c.cols {
			if j > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "$%d", k)
			k++
		}
		b.WriteByte(')')
	}
	return d.rebind(b.String())
}

// DDL returns the statements that create the table and an index on its
// partition column, if they do not exist, in the dialect's SQL:
//
//	CREATE TABLE IF NOT EXISTS "events" (
//		"day" TIMESTAMPTZ NOT NULL,
//		"n" BIGINT NOT NULL,
//		"note" TEXT
//	)
//	CREATE INDEX IF NOT EXISTS "events_day" ON "events" ("day")
//
// (without the index where the dialect says NoPartitionIndex). A table
// created otherwise needs the columns the spec names, of types
// that take its column types' values, and should have that index: every write
// deletes by the partition column.
func (t Table) DDL(d *Dialect) ([]string, error) {
	c, err := compile(t)
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	b.WriteString("CREATE TABLE IF NOT EXISTS " + c.ident + " (")
	for i, col := range c.cols {
		if i > 0 {
			b.WriteString(",")
		}
		typ := col.SQLType
		if typ == "" {
			typ = d.Types[col.Type]
		}
		b.WriteString("\n\t" + quote(col.Name) + " " + typ)
		if !col.Null {
			b.WriteString(" NOT NULL")
		}
	}
	b.WriteString("\n)")
	out := []string{b.String()}
	if t.Partition != "" && !d.NoPartitionIndex {
		out = append(out, "CREATE INDEX IF NOT EXISTS "+quote(t.Name+"_"+t.Partition)+" ON "+c.ident+" ("+quote(t.Partition)+")")
	}
	return out, nil
}

// value checks and converts the value v of column col for the driver.
// It returns the error's Err and Want when v is refused.
func (d *Dialect) value(col *Column, v any) (any, string, error) {
	if v == nil {
		if col.Null {
			return nil, "", nil
		}
		return nil, col.Type.accepts(), ErrNull
	}
	// A value already of the written type is returned as it came, not
	// boxed anew: a batch of a million values allocates none for them.
	switch col.Type {
	case Int:
		if _, ok := v.(int64); ok {
			return v, "", nil
		}
		if n, ok := integer.Int64(v); ok {
			if d.Integers {
				return v, "", nil
			}
			return n, "", nil
		}
	case Float:
		switch f := v.(type) {
		case float64:
			return v, "", nil
		case float32:
			return float64(f), "", nil
		}
		if n, ok := integer.Int64(v); ok && n <= 1<<53 && n >= -(1<<53) {
			return float64(n), "", nil
		}
	case String:
		if s, ok := v.(string); ok {
			if d.UTF8 && (!utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0) {
				return nil, "valid UTF-8 without NUL bytes, as " + d.Name + "'s text takes", ErrMistyped
			}
			return v, "", nil
		}
	case Bool:
		if _, ok := v.(bool); ok {
			return v, "", nil
		}
	case Time:
		if t, ok := v.(time.Time); ok {
			if d.Time == nil {
				return v, "", nil
			}
			return d.Time(t), "", nil
		}
	case Bytes:
		if _, ok := v.([]byte); ok {
			return v, "", nil
		}
	}
	return nil, col.Type.accepts(), ErrMistyped
}

func (d *Dialect) timeValue(t time.Time) any {
	if d.Time == nil {
		return t
	}
	return d.Time(t)
}
