package sqldest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tranche-dev/tranche/destination/column"
	"github.com/tranche-dev/tranche/internal/integer"
)

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
	Type column.Type
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

// ErrNoTable refuses a batch of an asset the destination has no table
// for.
var ErrNoTable = errors.New("sqldest: no table for the asset")

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
		case !col.Type.IsValid():
			bad("column %q: type %v; want Int, Float, String, Bool, Time or Bytes", col.Name, col.Type)
		}
		names[col.Name] = true
		c.columnNames = append(c.columnNames, col.Name)
		c.bytes = c.bytes || col.Type == column.Bytes
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
			if col.Type != column.Int {
				bad("column %q takes the token, an Int; type %v", col.Name, col.Type)
			}
		case FromRunID, FromDeliveryID:
			c.delivery = c.delivery || col.Meta == FromDeliveryID
			if col.Type != column.String {
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
			case col.Type != column.Time && col.Type != column.String:
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
	case c.cols[c.part].Type == column.Time:
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
		return nil, col.Type.Accepts(), column.ErrNull
	}
	// A value already of the written type is returned as it came, not
	// boxed anew: a batch of a million values allocates none for them.
	switch col.Type {
	case column.Int:
		if _, ok := v.(int64); ok {
			return v, "", nil
		}
		if n, ok := integer.Int64(v); ok {
			if d.Integers {
				return v, "", nil
			}
			return n, "", nil
		}
	case column.Float:
		switch f := v.(type) {
		case float64:
			return v, "", nil
		case float32:
			return float64(f), "", nil
		}
		if n, ok := integer.Int64(v); ok && n <= 1<<53 && n >= -(1<<53) {
			return float64(n), "", nil
		}
	case column.String:
		if s, ok := v.(string); ok {
			if d.UTF8 && (!utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0) {
				return nil, "valid UTF-8 without NUL bytes, as " + d.Name + "'s text takes", column.ErrMistyped
			}
			return v, "", nil
		}
	case column.Bool:
		if _, ok := v.(bool); ok {
			return v, "", nil
		}
	case column.Time:
		if t, ok := v.(time.Time); ok {
			if d.Time == nil {
				return v, "", nil
			}
			return d.Time(t), "", nil
		}
	case column.Bytes:
		if _, ok := v.([]byte); ok {
			return v, "", nil
		}
	}
	return nil, col.Type.Accepts(), column.ErrMistyped
}

func (d *Dialect) timeValue(t time.Time) any {
	if d.Time == nil {
		return t
	}
	return d.Time(t)
}
