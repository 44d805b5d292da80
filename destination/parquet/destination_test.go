package parquet

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/destination/column"
)

// day returns the UTC day partition i days after 2026-01-01.
func day(i int) tranche.TimePartition {
	return tranche.PartitionOf(tranche.Day, time.Date(2026, 1, 1+i, 0, 0, 0, 0, time.UTC))
}

// batch returns a batch of asset for partition p, with rows that each get
// the partition column "day" set to the partition's key.
func batch(asset string, p tranche.TimePartition, token int64, rows ...tranche.Row) tranche.Batch {
	for _, r := range rows {
		r["day"] = p.Key()
	}
	return tranche.Batch{Asset: asset, Column: "day", Partition: p, Token: token, RunID: "run-" + p.Key(), Rows: rows}
}

// files lists the files under dir, relative and slash-separated, sorted.
func files(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !e.IsDir() {
			rel, _ := filepath.Rel(dir, path)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// snapshot reads every file under dir.
func snapshot(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, name := range files(t, dir) {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		out[name] = data
	}
	return out
}

var (
	t0 = time.Date(2026, 1, 1, 3, 4, 5, 123456789, time.UTC)
	ny = time.FixedZone("-05:00", -5*3600)
)

// events is a declared schema of every kind, the two strings nullable.
var events = Schema{Columns: []Column{
	{Name: "id", Type: column.Int},
	{Name: "amount", Type: column.Float},
	{Name: "name", Type: column.String, Null: true},
	{Name: "ok", Type: column.Bool},
	{Name: "at", Type: column.Time},
	{Name: "raw", Type: column.Bytes, Null: true},
}}

func TestWrite(t *testing.T) {
	hour := tranche.PartitionOf(tranche.Hour, time.Date(2026, 11, 1, 1, 0, 0, 0, ny))
	tests := []struct {
		name    string
		schemas map[string]Schema
		batches []tranche.Batch
		files   []string                            // the files after the write, but .lock
		want    map[string]map[string][]tranche.Row // asset, key: rows read back
	}{
		{
			name:    "declared schema, every kind, Go types widened",
			schemas: map[string]Schema{"events": events},
			batches: []tranche.Batch{batch("events", day(0), 1,
				tranche.Row{"id": 1, "amount": 2.5, "name": "a", "ok": true, "at": t0, "raw": []byte{0, 1}},
				tranche.Row{"id": int8(-2), "amount": float32(0.5), "ok": false, "at": t0.In(ny), "raw": nil},
				tranche.Row{"id": uint64(math.MaxInt64), "amount": 1 << 53, "name": "é", "ok": true, "at": time.Time{}},
			)},
			files: []string{"events/day=2026-01-01/part-00000.parquet"},
			want: map[string]map[string][]tranche.Row{"events": {"2026-01-01": {
				{"id": int64(1), "amount": 2.5, "name": "a", "ok": true, "at": t0.Truncate(time.Microsecond), "raw": []byte{0, 1}},
				{"id": int64(-2), "amount": 0.5, "ok": false, "at": t0.Truncate(time.Microsecond)},
				{"id": int64(math.MaxInt64), "amount": float64(1 << 53), "name": "é", "ok": true, "at": time.Time{}.UTC()},
			}}},
		},
		{
			name: "inferred schema: integers and floats make a Float column, missing values are null",
			batches: []tranche.Batch{batch("inferred", day(0), 0,
				tranche.Row{"n": 1, "s": "x", "at": t0},
				tranche.Row{"n": 2.5, "b": []byte("y")},
				tranche.Row{"n": nil, "flag": true},
			)},
			files: []string{"inferred/day=2026-01-01/part-00000.parquet"},
			want: map[string]map[string][]tranche.Row{"inferred": {"2026-01-01": {
				{"n": 1.0, "s": "x", "at": t0.Truncate(time.Microsecond)},
				{"n": 2.5, "b": []byte("y")},
				{"flag": true},
			}}},
		},
		{
			name:    "several partitions and assets in one write",
			schemas: map[string]Schema{"a": {Columns: []Column{{Name: "v", Type: column.Int}}}},
			batches: []tranche.Batch{
				batch("a", day(0), 4, tranche.Row{"v": 1}),
				batch("a", day(1), 4, tranche.Row{"v": 2}, tranche.Row{"v": 3}),
				batch("b", day(1), 4, tranche.Row{"w": "z"}),
			},
			files: []string{
				"a/day=2026-01-01/part-00000.parquet",
				"a/day=2026-01-02/part-00000.parquet",
				"b/day=2026-01-02/part-00000.parquet",
			},
			want: map[string]map[string][]tranche.Row{
				"a": {"2026-01-01": {{"v": int64(1)}}, "2026-01-02": {{"v": int64(2)}, {"v": int64(3)}}},
				"b": {"2026-01-02": {{"w": "z"}}},
			},
		},
		{
			name:    "an empty partition: a file of no rows with a declared schema, no file with an inferred one",
			schemas: map[string]Schema{"declared": events},
			batches: []tranche.Batch{batch("declared", day(0), 0), batch("inferred", day(0), 0)},
			files:   []string{"declared/day=2026-01-01/part-00000.parquet"},
			want:    map[string]map[string][]tranche.Row{"declared": {"2026-01-01": {}}, "inferred": {"2026-01-01": nil}},
		},
		{
			name: "an hourly key is escaped in the folder name",
			batches: []tranche.Batch{{Asset: "clicks", Column: "hour", Partition: hour, Token: 2,
				Rows: []tranche.Row{{"hour": hour.Start, "n": 1}}}},
			files: []string{"clicks/hour=2026-11-01T01%3A00-05%3A00/part-00000.parquet"},
		},
		{
			name:    "an unpartitioned asset",
			batches: []tranche.Batch{{Asset: "dim", Token: 1, Rows: []tranche.Row{{"k": "a"}, {"k": "b"}}}},
			files:   []string{"dim/part-00000.parquet"},
			want:    map[string]map[string][]tranche.Row{"dim": {"": {{"k": "a"}, {"k": "b"}}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := &Destination{Dir: t.TempDir(), Schemas: tt.schemas}
			if err := d.Write(t.Context(), tt.batches); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range files(t, d.Dir) {
				if filepath.Base(f) != lockFile {
					got = append(got, f)
				}
			}
			if diff := cmp.Diff(tt.files, got); diff != "" {
				t.Errorf("files (-want +got):\n%s", diff)
			}
			for asset, parts := range tt.want {
				for key, want := range parts {
					column := "day"
					if key == "" {
						column = ""
					}
					rows, err := d.Rows(asset, column, key)
					if err != nil {
						t.Fatal(err)
					}
					if diff := cmp.Diff(want, rows); diff != "" {
						t.Errorf("Rows(%q, %q) (-want +got):\n%s", asset, key, diff)
					}
				}
			}
		})
	}
}

func TestWriteReplaces(t *testing.T) {
	d := &Destination{Dir: t.TempDir()}
	ctx := t.Context()
	if err := d.Write(ctx, []tranche.Batch{batch("a", day(0), 1, tranche.Row{"v": 1}, tranche.Row{"v": 2})}); err != nil {
		t.Fatal(err)
	}
	if err := d.Write(ctx, []tranche.Batch{batch("a", day(0), 2, tranche.Row{"v": 3})}); err != nil {
		t.Fatal(err)
	}
	rows, err := d.Rows("a", "day", day(0).Key())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]tranche.Row{{"v": int64(3)}}, rows); diff != "" {
		t.Errorf("rows after the second write (-want +got):\n%s", diff)
	}
	// An inferred partition written empty has no part file left.
	if err := d.Write(ctx, []tranche.Batch{batch("a", day(0), 3)}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(d.Path("a", "day", day(0).Key())); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the part file after an empty write: %v; want none", err)
	}
	if rows, err := d.Rows("a", "day", day(0).Key()); err != nil || rows != nil {
		t.Errorf("Rows of the emptied partition = %v, %v; want none", rows, err)
	}
	if _, err := d.Rows("a", "day", day(9).Key()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Rows of a partition never written: %v; want fs.ErrNotExist", err)
	}
}

// TestWriteLeftovers checks that a write removes the temporary files of
// a writer that died in the partition's folder, and only those.
func TestWriteLeftovers(t *testing.T) {
	d := &Destination{Dir: t.TempDir()}
	b := batch("a", day(0), 1, tranche.Row{"v": 1})
	if err := d.Write(t.Context(), []tranche.Batch{b}); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(d.Path("a", "day", day(0).Key()))
	for _, name := range []string{".part-0123456789abcdef.tmp", ".fence-0123456789abcdef.tmp", "notes.txt"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o666); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Write(t.Context(), []tranche.Batch{b}); err != nil {
		t.Fatal(err)
	}
	want := []string{"a/day=2026-01-01/.lock", "a/day=2026-01-01/notes.txt", "a/day=2026-01-01/part-00000.parquet"}
	if diff := cmp.Diff(want, files(t, d.Dir)); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
}

// TestBadRows checks every refusal of a batch's rows or schema: the error
// names the asset, the partition, the row, the column and the value, and
// nothing is written, neither the bad partition nor the others of the
// write, and a partition written before is left as it was.
func TestBadRows(t *testing.T) {
	type want struct {
		err    error // matched with errors.Is; nil for an error that is no *ValueError
		row    int
		column string
		value  any
		text   []string // in the message
	}
	nonUTF8 := string([]byte{0xff, 'a'})
	tests := []struct {
		name    string
		schemas map[string]Schema
		rows    []tranche.Row
		want    want
	}{
		{"a value of another kind", map[string]Schema{"a": events},
			[]tranche.Row{okRow(), withValue(okRow(), "id", "7")},
			want{column.ErrMistyped, 1, "id", "7", []string{`asset "a"`, "partition 2026-01-02", "row 1", `column "id"`, `string "7"`, "is not an integer"}}},
		{"a nil value in a column without null", map[string]Schema{"a": events},
			[]tranche.Row{withValue(okRow(), "ok", nil)},
			want{column.ErrNull, 0, "ok", nil, []string{`column "ok" is missing or nil, and does not allow null`, "want a value: a bool"}}},
		{"a missing value in a column without null", map[string]Schema{"a": events},
			[]tranche.Row{without(okRow(), "at")},
			want{column.ErrNull, 0, "at", nil, []string{`column "at" is missing or nil`}}},
		{"a key that is no column", map[string]Schema{"a": events},
			[]tranche.Row{okRow(), okRow(), withValue(okRow(), "extra", 1.5)},
			want{column.ErrUnknownColumn, 2, "extra", 1.5, []string{`key "extra" (float64 1.5) is no column of the schema`, `"id", "amount", "name", "ok", "at", "raw"`}}},
		{"a string that is not UTF-8", map[string]Schema{"a": events},
			[]tranche.Row{withValue(okRow(), "name", nonUTF8)},
			want{column.ErrMistyped, 0, "name", nonUTF8, []string{"a string of valid UTF-8"}}},
		{"a uint64 above 2^63-1", map[string]Schema{"a": events},
			[]tranche.Row{withValue(okRow(), "id", uint64(math.MaxUint64))},
			want{column.ErrMistyped, 0, "id", uint64(math.MaxUint64), []string{"uint64 18446744073709551615", "up to 2^63-1"}}},
		{"an integer a float64 cannot hold", map[string]Schema{"a": events},
			[]tranche.Row{withValue(okRow(), "amount", 1<<53+1)},
			want{column.ErrMistyped, 0, "amount", 1<<53 + 1, []string{"int 9007199254740993", "an integer up to 2^53"}}},
		{"inferred: a string after integers", nil,
			[]tranche.Row{{"n": 1}, {"n": 2}, {"n": "three"}},
			want{column.ErrMistyped, 2, "n", "three", []string{`string "three" is not an integer`, "the type Int inferred from row 0"}}},
		{"inferred: a float after an integer a float64 cannot hold", nil,
			[]tranche.Row{{"n": 1}, {"n": 1<<53 + 1}, {"n": 0.5}},
			want{column.ErrMistyped, 1, "n", 1<<53 + 1, []string{"int 9007199254740993 is not a number", "the type Float inferred from row 0"}}},
		{"inferred: a uint64 above 2^63-1", nil,
			[]tranche.Row{{"n": uint64(math.MaxUint64)}},
			want{column.ErrMistyped, 0, "n", uint64(math.MaxUint64), []string{"up to 2^63-1), the type Int inferred from row 0"}}},
		{"inferred: a value of no kind", nil,
			[]tranche.Row{{"n": 1}, {"n": struct{ X int }{3}}},
			want{column.ErrMistyped, 1, "n", struct{ X int }{3}, []string{"struct { X int } {3}", "declare the asset's schema"}}},
		{"inferred: rows with the partition column alone", nil,
			[]tranche.Row{{}, {}},
			want{nil, 0, "", nil, []string{`asset "a", partition 2026-01-02: its 2 rows hold no column but the partition column "day"`}}},
		{"declared: the partition column", map[string]Schema{"a": {Columns: []Column{{Name: "day", Type: column.String}}}},
			[]tranche.Row{{}},
			want{nil, 0, "", nil, []string{`the schema of asset "a" declares its partition column "day", which the folder names hold`}}},
		{"declared: a column twice", map[string]Schema{"a": {Columns: []Column{{Name: "v", Type: column.Int}, {Name: "v", Type: column.Int}}}},
			[]tranche.Row{{"v": 1}},
			want{nil, 0, "", nil, []string{`the schema of asset "a" names column "v" twice`}}},
		{"declared: no kind", map[string]Schema{"a": {Columns: []Column{{Name: "v"}}}},
			[]tranche.Row{{"v": 1}},
			want{nil, 0, "", nil, []string{`column "v" has type Type(0); want Int, Float, String, Bool, Time or Bytes`}}},
		{"declared: no columns", map[string]Schema{"a": {}},
			[]tranche.Row{{"v": 1}},
			want{nil, 0, "", nil, []string{`the schema of asset "a" has no columns`}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := &Destination{Dir: t.TempDir(), Schemas: tt.schemas}
			// Partition 0 was written before; this write replaces it
			// and writes partition 1, whose rows are bad.
			good := func() tranche.Batch {
				if _, ok := tt.schemas["a"]; ok && len(tt.schemas["a"].Columns) > 0 && tt.schemas["a"].Columns[0].Name == "id" {
					return batch("a", day(0), 1, okRow())
				}
				return batch("a", day(0), 1, tranche.Row{"v": 1})
			}
			if tt.want.err != nil {
				if err := d.Write(t.Context(), []tranche.Batch{good()}); err != nil {
					t.Fatal(err)
				}
			}
			before := snapshot(t, d.Dir)
			err := d.Write(t.Context(), []tranche.Batch{good(), batch("a", day(1), 2, tt.rows...)})
			if err == nil {
				t.Fatal("Write succeeded; want an error")
			}
			for _, s := range tt.want.text {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
			if tt.want.err != nil {
				var ve *column.ValueError
				if !errors.As(err, &ve) || !errors.Is(err, tt.want.err) {
					t.Fatalf("error %v is not a *ValueError matching %v", err, tt.want.err)
				}
				if ve.Asset != "a" || ve.Partition != "2026-01-02" || ve.Row != tt.want.row || ve.Column != tt.want.column || !cmp.Equal(ve.Value, tt.want.value) {
					t.Errorf("ValueError = %+v; want asset a, partition 2026-01-02, row %d, column %q, value %#v",
						ve, tt.want.row, tt.want.column, tt.want.value)
				}
			}
			if diff := cmp.Diff(before, snapshot(t, d.Dir)); diff != "" {
				t.Errorf("the refused write changed the folder (-before +after):\n%s", diff)
			}
		})
	}
}

// okRow is a row that fits the events schema.
func okRow() tranche.Row {
	return tranche.Row{"id": 1, "amount": 2.5, "name": "a", "ok": true, "at": t0, "raw": []byte("r")}
}

func withValue(r tranche.Row, k string, v any) tranche.Row { r[k] = v; return r }

func without(r tranche.Row, k string) tranche.Row { delete(r, k); return r }

func TestWriteRefusesMalformedBatches(t *testing.T) {
	tests := []struct {
		name    string
		dir     string
		batches []tranche.Batch
		want    string
	}{
		{"no Dir", "", []tranche.Batch{batch("a", day(0), 0)}, "empty Dir"},
		{"no asset", "x", []tranche.Batch{batch("", day(0), 0)}, `batch for asset "", partition 2026-01-01 needs an asset name`},
		{"no column", "x", []tranche.Batch{{Asset: "a", Partition: day(0)}}, "for a partition, a column"},
		{"a partition twice", "x", []tranche.Batch{batch("a", day(0), 0), batch("a", day(0), 0)}, `the write holds asset "a", partition 2026-01-01 twice`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := tt.dir
			if dir != "" {
				dir = filepath.Join(t.TempDir(), dir)
			}
			d := &Destination{Dir: dir}
			err := d.Write(t.Context(), tt.batches)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Write = %v; want an error saying %q", err, tt.want)
			}
			if dir != "" {
				if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("the refused write created %s (%v)", dir, err)
				}
			}
		})
	}
}

func TestWriteCanceled(t *testing.T) {
	d := &Destination{Dir: t.TempDir()}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := d.Write(ctx, []tranche.Batch{batch("a", day(0), 1, tranche.Row{"v": 1})}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Write with a canceled context = %v; want context.Canceled", err)
	}
	if got := files(t, d.Dir); len(got) != 0 {
		t.Errorf("the canceled write left %q", got)
	}
}

// TestWriteNotWritable checks the errors of a root folder that cannot be
// written: a folder whose mode refuses writes (checked in a process that
// is not root, since root writes anyway), and a regular file.
func TestWriteNotWritable(t *testing.T) {
	t.Run("read-only folder", func(t *testing.T) {
		root := t.TempDir()
		lake := filepath.Join(root, "lake")
		if err := os.Mkdir(lake, 0o555); err != nil {
			t.Fatal(err)
		}
		out := runUnprivileged(t, "not-writable", lake)
		for _, s := range []string{`asset "a", partition 2026-01-01:`, "lake/a", "permission denied", "ErrPermission=true"} {
			if !strings.Contains(out, s) {
				t.Errorf("the write into a read-only folder printed %q; want it to say %q", out, s)
			}
		}
		if got := files(t, lake); len(got) != 0 {
			t.Errorf("the refused write left %q", got)
		}
	})
	t.Run("read-only partition folder", func(t *testing.T) {
		root := t.TempDir()
		lake := filepath.Join(root, "lake")
		d := &Destination{Dir: lake}
		if err := d.Write(t.Context(), []tranche.Batch{batch("a", day(0), 1, tranche.Row{"v": 1})}); err != nil {
			t.Fatal(err)
		}
		part := filepath.Dir(d.Path("a", "day", day(0).Key()))
		if err := os.Chmod(part, 0o555); err != nil {
			t.Fatal(err)
		}
		before := snapshot(t, lake)
		out := runUnprivileged(t, "not-writable", lake)
		for _, s := range []string{`asset "a", partition 2026-01-01:`, "day=2026-01-01/.lock", "permission denied", "ErrPermission=true"} {
			if !strings.Contains(out, s) {
				t.Errorf("the write into a read-only partition folder printed %q; want it to say %q", out, s)
			}
		}
		if diff := cmp.Diff(before, snapshot(t, lake)); diff != "" {
			t.Errorf("the refused write changed the lake (-before +after):\n%s", diff)
		}
	})
	t.Run("a file for a folder", func(t *testing.T) {
		lake := filepath.Join(t.TempDir(), "lake")
		if err := os.WriteFile(lake, []byte("x"), 0o666); err != nil {
			t.Fatal(err)
		}
		d := &Destination{Dir: lake}
		err := d.Write(t.Context(), []tranche.Batch{batch("a", day(0), 1, tranche.Row{"v": 1})})
		if err == nil || !strings.Contains(err.Error(), `asset "a", partition 2026-01-01:`) || !strings.Contains(err.Error(), "not a directory") {
			t.Fatalf("Write under a file = %v; want an error naming the partition and saying not a directory", err)
		}
		if data, err := os.ReadFile(lake); err != nil || !bytes.Equal(data, []byte("x")) {
			t.Errorf("the file under the lake's name holds %q, %v; want it untouched", data, err)
		}
	})
}
