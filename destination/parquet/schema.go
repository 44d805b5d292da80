package parquet

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
	"unsafe"

	pq "github.com/parquet-go/parquet-go"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/destination/column"
	"github.com/tranche-dev/tranche/internal/integer"
)

// node is the Parquet node of a column of the kind.
func node(k column.Type) pq.Node {
	switch k {
	case column.Int:
		return pq.Int(64)
	case column.Float:
		return pq.Leaf(pq.DoubleType)
	case column.String:
		return pq.String()
	case column.Bool:
		return pq.Leaf(pq.BooleanType)
	case column.Time:
		return pq.Timestamp(pq.Microsecond)
	}
	return pq.Leaf(pq.ByteArrayType)
}

// Column is one column of a [Schema].
type Column struct {
	Name string // the rows' key, and the column's name in the files
	Type column.Type
	// Null allows null: a nil value, or a row without the column. A
	// column that does not allow it refuses both, and is written as a
	// required Parquet column.
	Null bool
}

// Schema is the columns of an asset's files, in their order in the
// files. The asset's partition column is not among them: it is in the
// folder names (see [Destination]).
type Schema struct {
	Columns []Column
}

// destName names the destination in its errors.
const destName = "parquet destination"

// layout is a schema compiled for one batch: the columns, where each
// row's values go, and the Parquet schema.
type layout struct {
	cols   []Column
	index  map[string]int // column name to its index in cols
	skip   string         // the partition column, which is in the folder name
	schema *pq.Schema
	// inferred[i] is the row the kind of cols[i] was inferred from; nil
	// for a declared schema.
	inferred []int
}

// compile checks a declared schema against a batch's partition column.
func compile(asset, partitionColumn string, s Schema) (*layout, error) {
	if len(s.Columns) == 0 {
		return nil, fmt.Errorf("tranche: parquet destination: the schema of asset %q has no columns", asset)
	}
	l := &layout{cols: s.Columns, index: make(map[string]int, len(s.Columns)), skip: partitionColumn}
	for i, c := range s.Columns {
		switch _, dup := l.index[c.Name]; {
		case c.Name == "":
			return nil, fmt.Errorf("tranche: parquet destination: the schema of asset %q: column %d has no name", asset, i)
		case dup:
			return nil, fmt.Errorf("tranche: parquet destination: the schema of asset %q names column %q twice", asset, c.Name)
		case !c.Type.IsValid():
			return nil, fmt.Errorf("tranche: parquet destination: the schema of asset %q: column %q has type %v; want Int, Float, String, Bool, Time or Bytes", asset, c.Name, c.Type)
		case partitionColumn != "" && c.Name == partitionColumn:
			return nil, fmt.Errorf("tranche: parquet destination: the schema of asset %q declares its partition column %q, which the folder names hold (%s=KEY): leave it out, and put any finer value in a column of its own", asset, c.Name, c.Name)
		}
		l.index[c.Name] = i
	}
	l.build()
	return l, nil
}

// infer makes the schema of a batch from its rows, checking and
// converting them as it goes, in one pass over the rows' maps: a column
// for every key but the partition column, of the kind of its first
// non-nil value (Float for a column holding both integers and floats, if
// each of its integers is one a float64 holds), nullable, in the order
// of their names.
func infer(b *tranche.Batch) (*layout, *columns, error) {
	n := len(b.Rows)
	l := &layout{index: map[string]int{}, skip: b.Column}
	cs := &columns{n: n}
	for i, r := range b.Rows {
		// The columns found so far, by lookup, as a declared schema's
		// are; the row's map is walked only when it holds a key more.
		found := 0
		for j := range l.cols {
			v, ok := r[l.cols[j].Name]
			if !ok {
				continue
			}
			found++
			if err := l.take(b, cs, i, j, v); err != nil {
				return nil, nil, err
			}
		}
		if l.skip != "" {
			if _, ok := r[l.skip]; ok {
				found++
			}
		}
		if found == len(r) {
			continue
		}
		for k, v := range r {
			if _, seen := l.index[k]; seen || k == l.skip || v == nil {
				continue // a missing value is null: every column starts null
			}
			kind, ok := column.TypeOf(v)
			if !ok {
				return nil, nil, noKind(b, i, k, v)
			}
			j := len(l.cols)
			l.index[k] = j
			l.cols = append(l.cols, Column{Name: k, Type: kind, Null: true})
			l.inferred = append(l.inferred, i)
			cs.add(kind, n)
			if err := l.take(b, cs, i, j, v); err != nil {
				return nil, nil, err
			}
		}
	}
	if len(l.cols) == 0 {
		return l, nil, nil
	}
	// Sorted by name, so that the partitions of one asset agree on the
	// order of the columns they share.
	sortColumns(l, cs)
	l.build()
	return l, cs, nil
}

// take stores value v of row i in inferred column j, turning an Int
// column into a Float one when v is the column's first float.
func (l *layout) take(b *tranche.Batch, cs *columns, i, j int, v any) error {
	if v == nil {
		return nil
	}
	c := &l.cols[j]
	if !set(cs, c.Type, j, i, v) {
		kind, ok := column.TypeOf(v)
		switch {
		case !ok:
			return noKind(b, i, c.Name, v)
		case kind != column.Float || c.Type != column.Int:
			return l.refuse(b, i, j, v, column.ErrMistyped)
		}
		if err := l.promote(b, cs, j); err != nil {
			return err
		}
		set(cs, column.Float, j, i, v)
	}
	cs.nulls[j][i] = false
	return nil
}

// noKind is the error for a value of no kind in an inferred schema.
func noKind(b *tranche.Batch, i int, k string, v any) error {
	return &column.ValueError{Destination: destName, Asset: b.Asset, Partition: b.Partition.Key(), Row: i, Column: k, Value: v, Err: column.ErrMistyped,
		Want: "a value of one of the types Parquet columns hold: an integer, a float, a string, a bool, a time.Time or a []byte (or declare the asset's schema)"}
}

// add appends a column of the kind for n rows, every value null.
func (cs *columns) add(k column.Type, n int) {
	var nums []uint64
	var bufs [][]byte
	switch k {
	case column.String, column.Bytes:
		bufs = make([][]byte, n)
	default:
		nums = make([]uint64, n)
	}
	nulls := make([]bool, n)
	for i := range nulls {
		nulls[i] = true
	}
	cs.nums, cs.bufs, cs.nulls = append(cs.nums, nums), append(cs.bufs, bufs), append(cs.nulls, nulls)
}

// promote turns inferred Int column j into a Float column when a float
// comes after its integers, converting those, each of which must be one
// a float64 holds.
func (l *layout) promote(b *tranche.Batch, cs *columns, j int) error {
	c := &l.cols[j]
	for i, v := range cs.nums[j] {
		if cs.nulls[j][i] {
			continue
		}
		if n := int64(v); n < -1<<53 || n > 1<<53 {
			c.Type = column.Float
			return l.refuse(b, i, j, b.Rows[i][c.Name], column.ErrMistyped)
		}
		cs.nums[j][i] = math.Float64bits(float64(int64(v)))
	}
	c.Type = column.Float
	return nil
}

// sortColumns sorts an inferred layout's columns by name, with their
// rows of inference and their values.
func sortColumns(l *layout, cs *columns) {
	order := make([]int, len(l.cols))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(l.cols[a].Name, l.cols[b].Name) })
	cols, inferred := make([]Column, len(order)), make([]int, len(order))
	nums, bufs, nulls := make([][]uint64, len(order)), make([][][]byte, len(order)), make([][]bool, len(order))
	for i, j := range order {
		cols[i], inferred[i] = l.cols[j], l.inferred[j]
		nums[i], bufs[i], nulls[i] = cs.nums[j], cs.bufs[j], cs.nulls[j]
		l.index[cols[i].Name] = i
	}
	l.cols, l.inferred = cols, inferred
	cs.nums, cs.bufs, cs.nulls = nums, bufs, nulls
}

// build makes the Parquet schema of the layout's columns, in their
// order.
func (l *layout) build() {
	g := pq.Group{}
	order := make([]string, len(l.cols))
	for i, c := range l.cols {
		n := node(c.Type)
		if c.Null {
			n = pq.Optional(n)
		}
		g[c.Name] = n
		order[i] = c.Name
	}
	l.schema = pq.NewSchema("tranche", newOrderedGroup(g, order))
}

// columns is a batch's values, checked and converted, by column: the
// numbers without pointers, so that holding a large batch until its file
// is written costs the garbage collector little, and reading them back
// in row order costs no map lookup.
type columns struct {
	n     int
	nums  [][]uint64 // by column: Int and Time as int64, Float as its bits, Bool as 0 or 1; nil for the others
	bufs  [][][]byte // by column: String and Bytes; nil for the others
	nulls [][]bool   // by column: whether each value is null; nil for a column without null
}

// convert checks every row of a batch against the layout and converts
// its values, returning the first refusal.
func (l *layout) convert(b *tranche.Batch) (*columns, error) {
	n := len(b.Rows)
	cs := &columns{n: n, nums: make([][]uint64, len(l.cols)), bufs: make([][][]byte, len(l.cols)), nulls: make([][]bool, len(l.cols))}
	for j, c := range l.cols {
		switch c.Type {
		case column.String, column.Bytes:
			cs.bufs[j] = make([][]byte, n)
		default:
			cs.nums[j] = make([]uint64, n)
		}
		if c.Null {
			cs.nulls[j] = make([]bool, n)
		}
	}
	for i, r := range b.Rows {
		found := 0
		for j := range l.cols {
			c := &l.cols[j]
			v, ok := r[c.Name]
			if ok {
				found++
			}
			if v == nil {
				if !c.Null {
					return nil, l.refuse(b, i, j, v, column.ErrNull)
				}
				cs.nulls[j][i] = true
				continue
			}
			if !set(cs, c.Type, j, i, v) {
				return nil, l.refuse(b, i, j, v, column.ErrMistyped)
			}
		}
		if found != len(r) {
			// One key more is fine if it is the partition column.
			if _, ok := r[l.skip]; l.skip == "" || !ok || found+1 != len(r) {
				return nil, l.unknown(b, i)
			}
		}
	}
	return cs, nil
}

// rows fills out with the Parquet rows start to start+len(out) of the
// columns, their values in buf, a column at a time.
func (cs *columns) rows(l *layout, start int, buf []pq.Value, out []pq.Row) {
	k, n := len(l.cols), len(out)
	for j := range l.cols {
		c := &l.cols[j]
		switch c.Type {
		case column.Int, column.Time:
			for i, x := range cs.nums[j][start : start+n] {
				buf[i*k+j] = pq.Int64Value(int64(x))
			}
		case column.Float:
			for i, x := range cs.nums[j][start : start+n] {
				buf[i*k+j] = pq.DoubleValue(math.Float64frombits(x))
			}
		case column.Bool:
			for i, x := range cs.nums[j][start : start+n] {
				buf[i*k+j] = pq.BooleanValue(x != 0)
			}
		default:
			for i, x := range cs.bufs[j][start : start+n] {
				buf[i*k+j] = pq.ByteArrayValue(x)
			}
		}
		if c.Null {
			for i, null := range cs.nulls[j][start : start+n] {
				if null {
					buf[i*k+j] = pq.Value{} // a zero Value is null
				} else {
					buf[i*k+j].SetDefinitionLevel(1)
				}
			}
		}
		for i := range n {
			buf[i*k+j].SetColumnIndex(j)
		}
	}
	for i := range out {
		out[i] = buf[i*k : (i+1)*k : (i+1)*k]
	}
}

// unknown returns the error for the first key of row i that is no column.
func (l *layout) unknown(b *tranche.Batch, i int) error {
	for k, v := range b.Rows[i] {
		if _, ok := l.index[k]; !ok && k != l.skip {
			return &column.ValueError{Destination: destName, Asset: b.Asset, Partition: b.Partition.Key(), Row: i, Column: k, Value: v, Err: column.ErrUnknownColumn,
				Want: "the schema's columns are " + l.names()}
		}
	}
	return nil
}

// refuse returns the error for value v of column j in row i.
func (l *layout) refuse(b *tranche.Batch, i, j int, v any, err error) error {
	c := l.cols[j]
	want := c.Type.Accepts()
	if c.Type == column.String {
		want = "a string of valid UTF-8 (a Bytes column takes other bytes)"
	}
	if errors.Is(err, column.ErrNull) {
		want = "a value: " + want
	}
	if l.inferred != nil {
		want += fmt.Sprintf(", the type %v inferred from row %d (declare the asset's schema to choose another)", c.Type, l.inferred[j])
	}
	return &column.ValueError{Destination: destName, Asset: b.Asset, Partition: b.Partition.Key(), Row: i, Column: c.Name, Value: v, Err: err, Want: want}
}

// names lists the layout's columns for errors.
func (l *layout) names() string {
	s := ""
	for i, c := range l.cols {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%q", c.Name)
	}
	return s
}

// set stores value v of row i in column j of the kind, and reports
// whether the kind takes it.
func set(cs *columns, k column.Type, j, i int, v any) bool {
	switch k {
	case column.Int:
		if n, ok := integer.Int64(v); ok {
			cs.nums[j][i] = uint64(n)
			return true
		}
	case column.Float:
		switch f := v.(type) {
		case float64:
			cs.nums[j][i] = math.Float64bits(f)
			return true
		case float32:
			cs.nums[j][i] = math.Float64bits(float64(f))
			return true
		}
		if n, ok := integer.Int64(v); ok && -1<<53 <= n && n <= 1<<53 {
			cs.nums[j][i] = math.Float64bits(float64(n))
			return true
		}
	case column.String:
		if s, ok := v.(string); ok && utf8.ValidString(s) {
			// parquet-go copies the bytes into its pages and never
			// writes them: a view of the string saves a copy per value.
			cs.bufs[j][i] = unsafe.Slice(unsafe.StringData(s), len(s))
			return true
		}
	case column.Bool:
		if b, ok := v.(bool); ok {
			if b {
				cs.nums[j][i] = 1
			}
			return true
		}
	case column.Time:
		if t, ok := v.(time.Time); ok {
			cs.nums[j][i] = uint64(t.UnixMicro())
			return true
		}
	case column.Bytes:
		if b, ok := v.([]byte); ok {
			cs.bufs[j][i] = b
			return true
		}
	}
	return false
}

// orderedGroup is a Parquet group whose columns are in the schema's
// order: parquet-go's Group orders them by name.
type orderedGroup struct {
	pq.Group
	fields []pq.Field
}

// newOrderedGroup returns the group of g's fields in the order of names.
func newOrderedGroup(g pq.Group, names []string) orderedGroup {
	byName := make(map[string]pq.Field, len(g))
	for _, f := range g.Fields() {
		byName[f.Name()] = f
	}
	fields := make([]pq.Field, len(names))
	for i, name := range names {
		fields[i] = byName[name]
	}
	return orderedGroup{Group: g, fields: fields}
}

// Fields returns the group's fields in the schema's order.
func (g orderedGroup) Fields() []pq.Field { return g.fields }
