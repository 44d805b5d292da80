package parquet

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"pgregory.net/rapid"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/destination/column"
)

// genSchema draws a schema of one to six columns of any kinds, named
// apart from the partition column.
func genSchema(t *rapid.T) Schema {
	names := rapid.SliceOfNDistinct(rapid.StringMatching(`[a-z][a-z0-9_]{0,7}`), 1, 6, rapid.ID[string]).
		Filter(func(ns []string) bool {
			for _, n := range ns {
				if n == "day" {
					return false
				}
			}
			return true
		}).Draw(t, "names")
	s := Schema{}
	for _, n := range names {
		s.Columns = append(s.Columns, Column{
			Name: n,
			Type: column.Type(rapid.IntRange(int(column.Int), int(column.Bytes)).Draw(t, n+".kind")),
			Null: rapid.Bool().Draw(t, n+".null"),
		})
	}
	return s
}

// genValue draws a value of the column's kind, of any Go type the kind
// takes, and returns it with the value reading the file gives back.
func genValue(t *rapid.T, c Column, label string) (in, out any) {
	switch c.Type {
	case column.Int:
		switch rapid.IntRange(0, 4).Draw(t, label+".type") {
		case 0:
			n := rapid.Int64().Draw(t, label)
			return n, n
		case 1:
			n := rapid.Int().Draw(t, label)
			return n, int64(n)
		case 2:
			n := rapid.Int8().Draw(t, label)
			return n, int64(n)
		case 3:
			n := rapid.Uint32().Draw(t, label)
			return n, int64(n)
		default:
			n := rapid.Uint64Range(0, math.MaxInt64).Draw(t, label)
			return n, int64(n)
		}
	case column.Float:
		switch rapid.IntRange(0, 3).Draw(t, label+".type") {
		case 0:
			f := rapid.Float64().Draw(t, label)
			return f, f
		case 1:
			f := rapid.SampledFrom([]float64{math.NaN(), math.Inf(1), math.Inf(-1), math.Copysign(0, -1), math.MaxFloat64, math.SmallestNonzeroFloat64}).Draw(t, label)
			return f, f
		case 2:
			f := rapid.Float32().Draw(t, label)
			return f, float64(f)
		default:
			n := rapid.Int64Range(-1<<53, 1<<53).Draw(t, label)
			return n, float64(n)
		}
	case column.String:
		s := rapid.String().Draw(t, label)
		return s, s
	case column.Bool:
		b := rapid.Bool().Draw(t, label)
		return b, b
	case column.Time:
		sec := rapid.Int64Range(time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC).Unix(), time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC).Unix()).Draw(t, label+".sec")
		nsec := rapid.Int64Range(0, 999_999_999).Draw(t, label+".nsec")
		zone := time.FixedZone("", 60*rapid.IntRange(-14*60, 14*60).Draw(t, label+".offset"))
		v := time.Unix(sec, nsec).In(zone)
		return v, time.UnixMicro(v.UnixMicro()).UTC()
	}
	b := rapid.SliceOfN(rapid.Byte(), 0, 40).Draw(t, label)
	return b, append([]byte{}, b...)
}

// TestPropertyRoundTrip writes random rows of a random declared schema
// and reads the partition back twice: with this package's reader, and
// with DuckDB, which must agree on every value, null and row.
func TestPropertyRoundTrip(t *testing.T) {
	db := openDuckDB(t)
	dir := t.TempDir()
	rapid.Check(t, func(t *rapid.T) {
		schema := genSchema(t)
		n := rapid.IntRange(0, 40).Draw(t, "rows")
		rows := make([]tranche.Row, n)
		want := make([]tranche.Row, n)
		for i := range rows {
			rows[i], want[i] = tranche.Row{}, tranche.Row{}
			for _, c := range schema.Columns {
				label := c.Name + "[" + string(rune('0'+i%10)) + "]"
				if c.Null {
					switch rapid.IntRange(0, 2).Draw(t, label+".null") {
					case 0:
						continue // missing
					case 1:
						rows[i][c.Name] = nil
						continue
					}
				}
				rows[i][c.Name], want[i][c.Name] = genValue(t, c, label)
			}
		}
		// One partition, replaced by each check.
		d := &Destination{Dir: dir, Schemas: map[string]Schema{"a": schema}}
		if err := d.Write(t.Context(), []tranche.Batch{batch("a", day(0), 1, rows...)}); err != nil {
			t.Fatal(err)
		}
		got, err := d.Rows("a", "day", day(0).Key())
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got, cmpopts.EquateNaNs(), cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("Rows (-want +got):\n%s", diff)
		}

		// DuckDB: every column in the declared order, a row per row in
		// the file's order, NULL for a missing or nil value.
		path := d.Path("a", "day", day(0).Key())
		q := "SELECT * EXCLUDE (file_row_number) FROM read_parquet('" + strings.ReplaceAll(path, "'", "''") + "', file_row_number = true) ORDER BY file_row_number"
		duck := query(t, db, q)
		if len(duck) != n {
			t.Fatalf("DuckDB reads %d rows; want %d", len(duck), n)
		}
		for i, vals := range duck {
			for j, c := range schema.Columns {
				w, ok := want[i][c.Name]
				if !ok {
					w = nil
				}
				if !cmp.Equal(w, vals[j], cmpopts.EquateNaNs(), cmpopts.EquateEmpty(), cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })) {
					t.Fatalf("row %d, column %q (%v): DuckDB reads %#v; want %#v", i, c.Name, c.Type, vals[j], w)
				}
			}
		}
	})
}
