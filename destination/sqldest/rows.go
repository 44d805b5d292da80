package sqldest

import (
	"slices"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/destination"
	"github.com/tranche-dev/tranche/destination/column"
)

// Rows are the rows of one batch for one table, as a dialect's Insert
// reads them: one row at a time, each value checked against the table's
// spec as it is read ([Rows.Row]). A write committing on its own reads
// the batch once, checking and inserting in one pass, and a refused value
// rolls back its transaction, so that nothing of the write lands; a
// write handed to a ledger's transaction has been checked and converted
// whole when [Destination.Write] took it, since it runs after the batch
// is back with the runner.
type Rows struct {
	t       *table
	dialect *Dialect
	dest    string // the destination's name, for errors
	asset   string
	key     string // the partition's key; "" unpartitioned
	start   any    // the partition's start, as the Time partition column takes it

	rows  []tranche.Row // read as Insert goes; nil once converted
	conv  [][]any       // checked and converted at Write
	n     int
	steps []step  // the columns Row reads from each row: the table's, or with the dialect's converters (Convert)
	metas []value // the Meta columns' values, as Row gives them
	batch []value // the Meta columns' values, the batch's as they came
	// metaErr, when not nil, refuses every row: a Meta column's value
	// that the column's Converter refused, once for the batch.
	metaErr *column.ValueError
}

// step is how Row reads one of the columns that come from the rows.
type step struct {
	j    int    // the column's index in the table
	key  string // its key in the rows
	col  *Column
	part bool      // whether it is the partition column
	conv Converter // the dialect's; nil for the spec's check
}

// value is a Meta column's value, the batch's.
type value struct {
	j int
	v any
}

// A Converter checks and converts a row's value v for one column, as
// the row holds it, in place of the spec's check ([Rows.Value]): for a
// dialect that checks values against the column's type as the table
// declares it, so that each value goes through one switch chosen for its
// column once per write. It returns the value for the driver; or, for a
// value it refuses, the value the error names (v, or v as the spec
// converts it), what would be accepted and the error ([column.ErrNull],
// [column.ErrMistyped], [column.ErrOutOfRange]). It must refuse what the spec refuses.
type Converter func(v any) (out any, want string, err error)

// Columns returns the table's columns, in the order of Row's values. The
// slice is the destination's: do not change it.
func (r *Rows) Columns() []Column { return r.t.cols }

// PartitionColumn returns the index in [Rows.Columns] of the partition
// column, or -1 for an unpartitioned table.
func (r *Rows) PartitionColumn() int { return r.t.part }

// Value checks v, a row's value for column j, against the spec as Row
// does for a column without a [Converter], and returns it converted for
// the driver, or what would be accepted and the error: the spec's check,
// for a Converter to fall back on.
func (r *Rows) Value(j int, v any) (any, string, error) { return r.dialect.value(&r.t.cols[j], v) }

// Convert has Row use conv[j], where it is not nil, for the values of
// column j, in place of the spec's check. The partition column's
// converter gets the value as that column takes it, which the runner has
// checked lies in the batch's partition: the row's time, or the
// partition's start or key. A Meta column's converter is called once,
// here, with the batch's value (its token, run or delivery id), since
// that is every row's: Row gives what it returns, or, for a value it
// refuses, refuses each row with the error, after the row's own values
// are checked.
// It reports whether Row will: false for rows that were checked and
// converted whole when [Destination.Write] took them, whose values Row
// gives as converted then, for the caller to check as it likes.
func (r *Rows) Convert(conv []Converter) bool {
	if r.conv != nil {
		return false
	}
	steps := slices.Clone(r.t.steps)
	for k := range steps {
		steps[k].conv = conv[steps[k].j]
	}
	r.steps = steps
	metas := slices.Clone(r.batch)
	r.metaErr = nil
	for k := range metas {
		m := &metas[k]
		if conv[m.j] == nil {
			continue
		}
		cv, want, err := conv[m.j](m.v)
		if err != nil {
			r.metaErr = &column.ValueError{Column: r.t.cols[m.j].Name, Value: cv, Err: err, Want: want}
			break
		}
		m.v = cv
	}
	r.metas = metas
	return true
}

// newRows returns the rows of b for t, to be read as they are inserted.
func newRows(d *Destination, t *table, b *tranche.Batch) *Rows {
	r := &Rows{t: t, dialect: d.dialect, dest: d.name, asset: b.Asset, key: b.Partition.Key(),
		rows: b.Rows, n: len(b.Rows), steps: t.steps}
	if t.part >= 0 && t.cols[t.part].Type == column.Time {
		r.start = d.dialect.timeValue(b.Partition.Start)
	}
	if len(t.metas) > 0 {
		// Boxed once for every row.
		token, run := any(b.Token), any(b.RunID)
		var delivery any
		if t.delivery {
			delivery = destination.DeliveryID(*b)
		}
		r.metas = make([]value, len(t.metas))
		for k, j := range t.metas {
			v := token
			switch t.cols[j].Meta {
			case FromRunID:
				v = run
			case FromDeliveryID:
				v = delivery
			}
			r.metas[k] = value{j: j, v: v}
		}
		r.batch = r.metas
	}
	return r
}

// Len returns how many rows there are.
func (r *Rows) Len() int { return r.n }

// Row puts the values of row i, 0 <= i < Len(), into vals, one for each
// of the table's columns in its order (the columns given to Insert),
// len(vals) of them: a row's value converted for the driver as its
// column's [column.Type] says (an int64, a float64, a string, a bool, a
// time.Time or what the dialect's Time makes of it, a []byte), the
// batch's for a [Meta] column, and nil for NULL. It refuses the row with
// a [*column.ValueError] naming the destination, the table, the asset, the
// partition, the row, the column and the value, for the first value the
// spec does not take: the caller stops there and returns the error, and
// the destination rolls the transaction back. vals is the caller's,
// reused from row to row as it likes.
func (r *Rows) Row(i int, vals []any) error {
	if r.conv != nil {
		copy(vals, r.conv[i])
		return nil
	}
	row := r.rows[i]
	steps := r.steps // a local, which the stores into vals do not make Go load again
	seen := 0
	for k := range steps {
		s := &steps[k]
		v, ok := row[s.key]
		if ok {
			seen++
		}
		if s.part {
			pv, ok := r.partitionValue(v)
			if !ok {
				return r.refuse(i, s.col.Name, v, column.ErrMistyped, "a time.Time or a partition key string")
			}
			v = pv
		}
		if s.conv != nil {
			cv, want, err := s.conv(v)
			if err != nil {
				return r.refuse(i, s.col.Name, cv, err, want)
			}
			vals[s.j] = cv
			continue
		}
		if s.part {
			vals[s.j] = v
			continue
		}
		cv, want, err := r.dialect.value(s.col, v)
		if err != nil {
			return r.refuse(i, s.col.Name, v, err, want)
		}
		vals[s.j] = cv
	}
	for _, m := range r.metas {
		vals[m.j] = m.v
	}
	// Every key of the row was a column's unless fewer were found than
	// the row holds.
	if seen < len(row) {
		for k, v := range row {
			if _, ok := r.t.byKey[k]; !ok {
				return r.refuse(i, k, v, column.ErrUnknownColumn, "the table's columns take the keys "+r.t.keys)
			}
		}
	}
	if e := r.metaErr; e != nil {
		return r.refuse(i, e.Column, e.Value, e.Err, e.Want)
	}
	return nil
}

func (r *Rows) refuse(i int, col string, v any, err error, want string) error {
	return &column.ValueError{Destination: r.dest, Table: r.t.name, Asset: r.asset, Partition: r.key, Row: i,
		Column: col, Value: v, Err: err, Want: want}
}

// partitionValue converts a row's partition value, which the runner has
// checked lies in the batch's partition, to the partition column's type.
func (r *Rows) partitionValue(v any) (any, bool) {
	kind := r.t.cols[r.t.part].Type
	switch tv := v.(type) {
	case time.Time:
		if kind == column.Time {
			if r.dialect.Time == nil {
				return v, true // as it came: no new box
			}
			return r.dialect.Time(tv), true
		}
		return r.key, true
	case string:
		if kind == column.Time {
			return r.start, true
		}
		return r.key, true
	}
	return nil, false
}

// convert checks and converts every row now, for a write that runs after
// the batch is back with the runner, copying the bytes of Bytes values.
func (r *Rows) convert() error {
	n := len(r.t.cols)
	conv := make([][]any, r.n)
	// One array for every row's values: one allocation per batch.
	all := make([]any, r.n*n)
	for i := range conv {
		vals := all[i*n : (i+1)*n : (i+1)*n]
		if err := r.Row(i, vals); err != nil {
			return err
		}
		if r.t.bytes {
			for j, v := range vals {
				if b, ok := v.([]byte); ok {
					vals[j] = append([]byte{}, b...)
				}
			}
		}
		conv[i] = vals
	}
	r.conv, r.rows = conv, nil
	return nil
}
