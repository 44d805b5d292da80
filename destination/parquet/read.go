package parquet

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	pq "github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/destination/column"
)

// Rows reads back the rows of the asset's partition with the given key,
// in column (an empty column and key for an unpartitioned asset), from
// its part file: what tests of a pipeline check. Each row holds its
// non-null values as the types of their columns read them: int64,
// float64, string, bool, time.Time in UTC, and []byte. The partition
// column, which is in the folder's name, is not among them. A folder
// without a part file, as an empty partition with an inferred schema
// leaves, holds no rows; a partition never written fails with an error
// matching fs.ErrNotExist.
func (d *Destination) Rows(asset, column, key string) ([]tranche.Row, error) {
	path := d.Path(asset, column, key)
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		if info, serr := os.Stat(filepath.Dir(path)); serr == nil && info.IsDir() {
			return nil, nil
		}
	}
	if err != nil {
		return nil, fmt.Errorf("tranche: parquet destination: %w", err)
	}
	defer f.Close()
	rows, err := readRows(f)
	if err != nil {
		return nil, fmt.Errorf("tranche: parquet destination: %s: %w", path, err)
	}
	return rows, nil
}

// readRows decodes a Parquet file of flat columns of the types Write
// writes.
func readRows(f *os.File) ([]tranche.Row, error) {
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	file, err := pq.OpenFile(f, info.Size())
	if err != nil {
		return nil, err
	}
	fields := file.Schema().Fields()
	kinds := make([]column.Type, len(fields))
	for i, field := range fields {
		if !field.Leaf() || field.Repeated() {
			return nil, fmt.Errorf("column %q is not a flat column", field.Name())
		}
		if kinds[i], err = kindOfNode(field); err != nil {
			return nil, err
		}
	}
	r := pq.NewReader(file)
	defer r.Close()
	out := make([]tranche.Row, 0, file.NumRows())
	buf := make([]pq.Row, 256)
	for {
		n, err := r.ReadRows(buf)
		for _, row := range buf[:n] {
			tr := make(tranche.Row, len(fields))
			for _, v := range row {
				if v.IsNull() {
					continue
				}
				j := v.Column()
				tr[fields[j].Name()] = goValue(kinds[j], v)
			}
			out = append(out, tr)
		}
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// kindOfNode returns the kind of a leaf column of a file Write wrote.
func kindOfNode(n pq.Field) (column.Type, error) {
	t := n.Type()
	var logical format.LogicalTypeValue
	if lt := t.LogicalType(); lt != nil {
		logical = lt.Value
	}
	switch t.Kind() {
	case pq.Int64:
		if _, ok := logical.(*format.TimestampType); ok {
			return column.Time, nil
		}
		return column.Int, nil
	case pq.Double:
		return column.Float, nil
	case pq.Boolean:
		return column.Bool, nil
	case pq.ByteArray:
		if _, ok := logical.(*format.StringType); ok {
			return column.String, nil
		}
		return column.Bytes, nil
	}
	return 0, fmt.Errorf("column %q is of type %v, which this package does not write", n.Name(), t)
}

// goValue returns the Go value of a non-null Parquet value of the kind.
func goValue(k column.Type, v pq.Value) any {
	switch k {
	case column.Int:
		return v.Int64()
	case column.Float:
		return v.Double()
	case column.String:
		return string(v.ByteArray())
	case column.Bool:
		return v.Boolean()
	case column.Time:
		return time.UnixMicro(v.Int64()).UTC()
	}
	return append([]byte{}, v.ByteArray()...)
}
