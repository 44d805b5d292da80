package duckdb

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"math"
	"math/big"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	duckdb "github.com/duckdb/duckdb-go/v2"

	"github.com/tranche-dev/tranche/destination/column"
	"github.com/tranche-dev/tranche/destination/sqldest"
	"github.com/tranche-dev/tranche/internal/integer"
)

// qColumns reads the names and declared types of a table's columns, in
// the table's order, from the result of a query that returns no row
// (the driver names each column's type as DuckDB declares it: DECIMAL(p,s),
// JSON, ENUM): a third cheaper than typeof over the columns of an empty
// table joined to one row, and a sixth of a query of duckdb_columns(),
// which reads the whole catalog.
const qColumns = `SELECT * FROM %s LIMIT 0`

// qZone reads the connection's zone, for a write into a TIMESTAMP
// column (without time zone).
const qZone = `SELECT current_setting('TimeZone')`

// appendRows is the dialect's Insert: it reads the table's column types
// in the transaction, then appends the rows with an appender on the
// transaction's connection, checking each value against its column's
// type as it appends it. DuckDB's appender writes a value as its column's
// type without a check of its own (300 into a TINYINT is stored as 44,
// and a string that is not UTF-8 as it is), so that the check is the only
// thing between a bad value and the table. A refused value stops the
// appender, its rows discarded, and the destination rolls the
// transaction back, which discards those the appender flushed before.
func appendRows(ctx context.Context, conn *sql.Conn, tx *sql.Tx, table [2]string, columns []string, rows *sqldest.Rows) error {
	names, types, err := tableColumns(ctx, tx, table)
	if err != nil {
		return err
	}
	cols := make([]tableType, len(columns))
	zone := ""
	for j, c := range columns {
		k := indexOf(names, c)
		if k < 0 {
			return fmt.Errorf("table %s has no column %q; its columns are %s", qualified(table), c, strings.Join(names, ", "))
		}
		if cols[j], err = parseType(types[k]); err != nil {
			return fmt.Errorf("table %s, column %q: %w", qualified(table), c, err)
		}
		if !cols[j].naive {
			continue
		}
		if zone == "" {
			if err := tx.QueryRowContext(ctx, qZone).Scan(&zone); err != nil {
				return err
			}
		}
		if !utcZone(zone) {
			return fmt.Errorf("table %s, column %q: a %s column (without time zone) needs the connections' zone to be UTC (SET TimeZone = 'UTC'; duckdb.Open sets it), since DuckDB compares it with the partitions' bounds in the connection's zone, %q", qualified(table), c, cols[j].name, zone)
		}
	}
	// Each column's values are checked against the spec and the
	// column's declared type by one converter, chosen here, once per
	// write; a Meta column's value, the batch's, is checked once for
	// every row (Convert calls its converter). Rows that were converted
	// when the destination took them have each value fitted as it
	// comes.
	conv := make([]sqldest.Converter, len(columns))
	for j := range cols {
		conv[j] = cols[j].converter(rows, j, rows.Columns()[j].Type)
	}
	fit := !rows.Convert(conv)
	whole := len(columns) == len(names)
	for j := range columns {
		whole = whole && strings.EqualFold(columns[j], names[j])
	}
	return conn.Raw(func(dc any) error {
		c, ok := dc.(driver.Conn)
		if !ok {
			return fmt.Errorf("the appender needs a duckdb connection (github.com/duckdb/duckdb-go/v2); the database's driver gave %T", dc)
		}
		var a *duckdb.Appender
		if whole {
			a, err = duckdb.NewAppender(c, "", table[0], table[1])
		} else {
			a, err = duckdb.NewAppenderWithColumns(c, "", table[0], table[1], columns)
		}
		if err != nil {
			return err
		}
		// stop discards what the appender holds, unflushed, and closes
		// it, returning err.
		stop := func(err error) error {
			a.Clear()
			a.Close()
			return err
		}
		// One slice of values for every row: the appender copies them
		// into its chunk at once.
		vals := make([]any, len(columns))
		args := make([]driver.Value, len(columns))
		for i := range rows.Len() {
			if err := rows.Row(i, vals); err != nil {
				return stop(err)
			}
			for j, v := range vals {
				args[j] = v
			}
			if fit {
				if err := fitRow(cols, columns, i, args); err != nil {
					return stop(err)
				}
			}
			if err := a.AppendRow(args...); err != nil {
				return stop(fmt.Errorf("row %d: %w", i, err))
			}
		}
		return a.CloseWithCancel(ctx)
	})
}

// fitRow checks row i's values, as sqldest converted them when the
// destination took the rows, against the columns' types, replacing in
// args those the appender takes otherwise.
func fitRow(cols []tableType, columns []string, i int, args []driver.Value) error {
	for j, v := range args {
		if v == nil {
			continue
		}
		cv, want, err := cols[j].fit(v)
		if err != nil {
			if n, ok := integer.Int64(v); ok {
				v = n // as sqldest converts it, named so in errors
			}
			return &column.ValueError{Row: i, Column: columns[j], Value: v, Err: err, Want: want}
		}
		if cv != nil {
			args[j] = cv
		}
	}
	return nil
}

// tableColumns reads the names and declared types of a table's columns.
func tableColumns(ctx context.Context, tx *sql.Tx, table [2]string) (names, types []string, err error) {
	ident := quote(table[1])
	if table[0] != "" {
		ident = quote(table[0]) + "." + ident
	}
	rs, err := tx.QueryContext(ctx, fmt.Sprintf(qColumns, ident))
	if err != nil {
		return nil, nil, err
	}
	defer rs.Close()
	cts, err := rs.ColumnTypes()
	if err != nil {
		return nil, nil, err
	}
	names = make([]string, len(cts))
	types = make([]string, len(cts))
	for i, ct := range cts {
		names[i], types[i] = ct.Name(), ct.DatabaseTypeName()
	}
	return names, types, rs.Close()
}

// quote quotes an identifier.
func quote(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

func qualified(table [2]string) string {
	if table[0] == "" {
		return table[1]
	}
	return table[0] + "." + table[1]
}

// indexOf finds a column by name as DuckDB does, whose identifiers are
// case-insensitive.
func indexOf(names []string, c string) int {
	for k, n := range names {
		if n == c {
			return k
		}
	}
	for k, n := range names {
		if strings.EqualFold(n, c) {
			return k
		}
	}
	return -1
}

func utcZone(z string) bool {
	switch z {
	case "UTC", "Etc/UTC", "GMT", "Etc/GMT", "Etc/Universal", "Universal", "Etc/Zulu", "Zulu", "Z":
		return true
	}
	return false
}

// typ is a DuckDB column type the destination writes.
type typ int

const (
	tInteger typ = iota + 1 // the signed and unsigned integers up to 64 bits
	tHuge                   // HUGEINT
	tUHuge                  // UHUGEINT
	tDouble
	tFloat
	tDecimal
	tVarchar
	tBool
	tTimestamp   // TIMESTAMPTZ, TIMESTAMP: microseconds
	tTimestampMS // TIMESTAMP_MS
	tTimestampS  // TIMESTAMP_S
	tTimestampNS // TIMESTAMP_NS
	tBlob
)

// tableType is a column's declared type in the table, ready to check
// values.
type tableType struct {
	name   string // the type as DuckDB names it, for errors
	t      typ
	lo, hi int64 // tInteger's range
	width  int   // tDecimal's precision and scale
	scale  int
	pow    *big.Int // 10^scale
	limit  *big.Int // 10^width: the scaled values lie strictly within it
	naive  bool     // TIMESTAMP without time zone (of any unit)
}

var integers = map[string][2]int64{
	"TINYINT": {math.MinInt8, math.MaxInt8}, "SMALLINT": {math.MinInt16, math.MaxInt16},
	"INTEGER": {math.MinInt32, math.MaxInt32}, "BIGINT": {math.MinInt64, math.MaxInt64},
	"UTINYINT": {0, math.MaxUint8}, "USMALLINT": {0, math.MaxUint16},
	"UINTEGER": {0, math.MaxUint32}, "UBIGINT": {0, math.MaxInt64}, // an Int's values stop at MaxInt64
}

var decimalType = regexp.MustCompile(`^DECIMAL\((\d+),\s*(\d+)\)$`)

// supported lists, for errors, the column types the destination writes.
const supported = "TINYINT, SMALLINT, INTEGER, BIGINT, HUGEINT, their unsigned types, DOUBLE, FLOAT, DECIMAL(p,s), VARCHAR, BOOLEAN, TIMESTAMPTZ, TIMESTAMP, TIMESTAMP_NS, TIMESTAMP_MS, TIMESTAMP_S or BLOB"

// parseType reads a type as the driver names it (DatabaseTypeName), or
// as duckdb_columns() does.
func parseType(s string) (tableType, error) {
	c := tableType{name: s}
	if r, ok := integers[s]; ok {
		c.t, c.lo, c.hi = tInteger, r[0], r[1]
		return c, nil
	}
	switch s {
	case "HUGEINT":
		c.t = tHuge
	case "UHUGEINT":
		c.t = tUHuge
	case "DOUBLE":
		c.t = tDouble
	case "FLOAT":
		c.t = tFloat
	case "VARCHAR":
		c.t = tVarchar
	case "BOOLEAN":
		c.t = tBool
	case "TIMESTAMPTZ", "TIMESTAMP WITH TIME ZONE":
		// The driver's name, and typeof's; errors give the latter.
		c.t, c.name = tTimestamp, "TIMESTAMP WITH TIME ZONE"
	case "TIMESTAMP":
		c.t, c.naive = tTimestamp, true
	case "TIMESTAMP_MS":
		c.t, c.naive = tTimestampMS, true
	case "TIMESTAMP_S":
		c.t, c.naive = tTimestampS, true
	case "TIMESTAMP_NS":
		c.t, c.naive = tTimestampNS, true
	case "BLOB":
		c.t = tBlob
	default:
		m := decimalType.FindStringSubmatch(s)
		if m == nil {
			return c, fmt.Errorf("the column's type %s is none that the destination writes (%s)", s, supported)
		}
		c.t = tDecimal
		var errW, errS error
		c.width, errW = strconv.Atoi(m[1])
		c.scale, errS = strconv.Atoi(m[2])
		if errW != nil || errS != nil || c.width < 1 || c.width > 38 || c.scale > c.width {
			return c, fmt.Errorf("the column's type %s is no DECIMAL DuckDB makes: its width must be 1 to 38, and its scale at most the width", s)
		}
		c.pow = new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(c.scale)), nil)
		c.limit = new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(c.width)), nil)
	}
	return c, nil
}

// The times each timestamp type holds, as duckdb-go converts them.
var (
	// TIMESTAMP and TIMESTAMPTZ (and _MS and _S, which DuckDB converts
	// to them): the years duckdb-go's appender takes.
	minTimestamp = time.Date(-290307, 1, 1, 0, 0, 0, 0, time.UTC)
	maxTimestamp = time.Date(294247, 1, 1, 0, 0, 0, 0, time.UTC) // exclusive
	// TIMESTAMP_NS: nanoseconds in an int64 from 1678 on (duckdb-go's
	// first year), the last one, math.MaxInt64, being DuckDB's infinity.
	minTimestampNS = time.Date(1678, 1, 1, 0, 0, 0, 0, time.UTC)
	maxTimestampNS = time.Unix(0, math.MaxInt64).UTC() // exclusive
)

// fit checks v, a value as sqldest converted it (an integer of a Go
// integer type, the dialect keeping those as the rows hold them, a
// float64, string, bool, time.Time or []byte), against the column's
// type, and returns what the appender takes in its place, nil to take v
// as it is (boxing none anew); or the error and what would be accepted.
func (c *tableType) fit(v any) (any, string, error) {
	switch v := v.(type) {
	case int64:
		return c.fitInt(v)
	case int:
		return c.fitInt(int64(v))
	case float64:
		switch c.t {
		case tDouble:
			return nil, "", nil
		case tFloat:
			// As DuckDB's cast: refused when the nearest float32 is
			// infinite and v is not.
			if f := float32(v); math.IsInf(float64(f), 0) && !math.IsInf(v, 0) {
				return nil, fmt.Sprintf("at most %g in magnitude, as the column's type in the table, FLOAT, holds", math.MaxFloat32), column.ErrOutOfRange
			}
			return nil, "", nil
		case tDecimal:
			// As DuckDB's cast of a DOUBLE: v times 10^scale in floating
			// point, rounded half away from zero, within 10^width.
			r := math.Round(v * math.Pow10(c.scale))
			if math.IsNaN(r) || math.Abs(r) >= math.Pow10(c.width) {
				return nil, c.decimalWant(), column.ErrOutOfRange
			}
			n, _ := big.NewFloat(r).Int(nil)
			return c.decimal(n)
		}
		return nil, c.wants("a Float", "DOUBLE, FLOAT or DECIMAL"), column.ErrMistyped
	case string:
		if c.t != tVarchar {
			return nil, c.wants("a String", "VARCHAR"), column.ErrMistyped
		}
		if !utf8.ValidString(v) {
			return nil, "valid UTF-8, as the column's type in the table, VARCHAR, holds", column.ErrOutOfRange
		}
		return nil, "", nil
	case bool:
		if c.t != tBool {
			return nil, c.wants("a Bool", "BOOLEAN"), column.ErrMistyped
		}
		return nil, "", nil
	case time.Time:
		lo, hi := minTimestamp, maxTimestamp
		switch c.t {
		case tTimestamp, tTimestampMS, tTimestampS:
		case tTimestampNS:
			lo, hi = minTimestampNS, maxTimestampNS
		default:
			return nil, c.wants("a Time", "TIMESTAMPTZ, TIMESTAMP, TIMESTAMP_NS, TIMESTAMP_MS or TIMESTAMP_S"), column.ErrMistyped
		}
		if v.Before(lo) || !v.Before(hi) {
			return nil, fmt.Sprintf("a time from %s to before %s, as the column's type in the table, %s, holds",
				lo.Format(time.RFC3339), hi.Format(time.RFC3339Nano), c.name), column.ErrOutOfRange

		}
		return nil, "", nil
	case []byte:
		if c.t != tBlob {
			return nil, c.wants("a Bytes", "BLOB"), column.ErrMistyped
		}
		return nil, "", nil
	}
	if n, ok := integer.Int64(v); ok {
		return c.fitInt(n)
	}
	return nil, fmt.Sprintf("a value the column's type in the table, %s, takes", c.name), column.ErrMistyped
}

// converter returns the check and conversion of the rows' values for
// column j of rows, of the given kind, into a column of c's type: the
// values of the Go type that the kind writes as it is (an int or int64,
// a float64, a string, a bool, a time.Time, a []byte), when the type
// takes them as they are, go through one type switch; any other value,
// and a NULL, goes through the spec's check (rows.Value), then fit.
func (c *tableType) converter(rows *sqldest.Rows, j int, kind column.Type) sqldest.Converter {
	slow := func(v any) (any, string, error) {
		cv, want, err := rows.Value(j, v)
		if err != nil {
			return v, want, err
		}
		if cv == nil {
			return nil, "", nil
		}
		out, want, err := c.fit(cv)
		if err != nil {
			if n, ok := integer.Int64(cv); ok {
				cv = n // as sqldest converts it, named so in errors
			}
			return cv, want, err
		}
		if out != nil {
			return out, "", nil
		}
		return cv, "", nil
	}
	// same reports whether the spec takes v as it is, which the fast
	// paths below assume of the dialect (UTF8 unset, Time nil).
	same := func(v any) bool {
		out, _, err := rows.Value(j, v)
		return err == nil && out == v
	}
	switch {
	case kind == column.Int && c.t == tInteger && same(0):
		lo, hi := c.lo, c.hi
		return func(v any) (any, string, error) {
			switch n := v.(type) {
			case int:
				if int64(n) >= lo && int64(n) <= hi {
					return v, "", nil
				}
			case int64:
				if n >= lo && n <= hi {
					return v, "", nil
				}
			}
			return slow(v)
		}
	case kind == column.Float && c.t == tDouble:
		return func(v any) (any, string, error) {
			if _, ok := v.(float64); ok {
				return v, "", nil
			}
			return slow(v)
		}
	case kind == column.String && c.t == tVarchar && same("\x00"):
		return func(v any) (any, string, error) {
			if s, ok := v.(string); ok && utf8.ValidString(s) {
				return v, "", nil
			}
			return slow(v)
		}
	case kind == column.Bool && c.t == tBool:
		return func(v any) (any, string, error) {
			if _, ok := v.(bool); ok {
				return v, "", nil
			}
			return slow(v)
		}
	case kind == column.Time && same(minTimestampNS) && (c.t == tTimestamp || c.t == tTimestampMS || c.t == tTimestampS || c.t == tTimestampNS):
		lo, hi := minTimestamp, maxTimestamp
		if c.t == tTimestampNS {
			lo, hi = minTimestampNS, maxTimestampNS
		}
		// In whole seconds, which t.Unix reads without a call: lo is a
		// whole second, and a time before hi's second is before hi; the
		// times of hi's second go the slow way, which compares them
		// exactly.
		loS, hiS := lo.Unix(), hi.Unix()
		return func(v any) (any, string, error) {
			if t, ok := v.(time.Time); ok {
				if s := t.Unix(); s >= loS && s < hiS {
					return v, "", nil
				}
			}
			return slow(v)
		}
	case kind == column.Bytes && c.t == tBlob:
		return func(v any) (any, string, error) {
			if _, ok := v.([]byte); ok {
				return v, "", nil
			}
			return slow(v)
		}
	}
	return slow
}

// fitInt checks an integer against the column's type.
func (c *tableType) fitInt(v int64) (any, string, error) {
	switch c.t {
	case tInteger:
		if v < c.lo || v > c.hi {
			return nil, fmt.Sprintf("within %s's range, %d to %d (the column's type in the table)", c.name, c.lo, c.hi), column.ErrOutOfRange
		}
		return nil, "", nil
	case tHuge:
		return nil, "", nil
	case tUHuge:
		if v < 0 {
			return nil, "at least 0, as the column's type in the table, UHUGEINT, holds", column.ErrOutOfRange
		}
		return nil, "", nil
	case tDouble, tFloat:
		limit := int64(1) << 53
		if c.t == tFloat {
			limit = 1 << 24
		}
		if v > limit || v < -limit {
			return nil, fmt.Sprintf("at most 2^%d in magnitude, which the column's type in the table, %s, holds exactly", map[typ]int{tDouble: 53, tFloat: 24}[c.t], c.name), column.ErrOutOfRange
		}
		return nil, "", nil
	case tDecimal:
		return c.decimal(new(big.Int).Mul(big.NewInt(v), c.pow))
	}
	return nil, c.wants("an Int", "an integer type, DOUBLE, FLOAT or DECIMAL"), column.ErrMistyped
}

// wants says what the column's kind needs of the table's type.
func (c *tableType) wants(kind, types string) string {
	return fmt.Sprintf("a value of the column's type in the table, %s: %s column needs %s there", c.name, kind, types)
}

// decimal checks a scaled value against the precision.
func (c *tableType) decimal(n *big.Int) (any, string, error) {
	if new(big.Int).Abs(n).Cmp(c.limit) >= 0 {
		return nil, c.decimalWant(), column.ErrOutOfRange
	}
	return duckdb.Decimal{Width: uint8(c.width), Scale: uint8(c.scale), Value: n}, "", nil
}

func (c *tableType) decimalWant() string {
	return fmt.Sprintf("a number of at most %d digits before the point, as the column's type in the table, %s, holds", c.width-c.scale, c.name)
}
