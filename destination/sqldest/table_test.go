package sqldest

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/tranche-dev/tranche/destination/column"
)

func TestTableSpecErrors(t *testing.T) {
	col := func(name string, k column.Type) Column { return Column{Name: name, Type: k} }
	cases := []struct {
		name string
		t    Table
		says []string
	}{
		{"no name", Table{Columns: []Column{col("a", column.Int)}}, []string{"without a name"}},
		{"no columns", Table{Name: "t"}, []string{"no columns"}},
		{"column twice", Table{Name: "t", Columns: []Column{col("a", column.Int), col("a", column.String)}}, []string{`column "a" named twice`}},
		{"key twice", Table{Name: "t", Columns: []Column{col("a", column.Int), {Name: "b", Key: "a", Type: column.Int}}}, []string{`key "a" mapped to two columns`}},
		{"bad kind", Table{Name: "t", Columns: []Column{col("a", 0)}}, []string{`type Type(0)`}},
		{"missing partition", Table{Name: "t", Partition: "day", Columns: []Column{col("a", column.Int)}}, []string{`partition column "day" is none of its columns`}},
		{"partition kind", Table{Name: "t", Partition: "a", Columns: []Column{col("a", column.Int)}}, []string{`partition column "a": type Int; want Time`}},
		{"partition null", Table{Name: "t", Partition: "a", Columns: []Column{{Name: "a", Type: column.Time, Null: true}}}, []string{"must not allow NULL"}},
		{"token kind", Table{Name: "t", Columns: []Column{{Name: "tok", Type: column.String, Meta: FromToken}}}, []string{`column "tok" takes the token, an Int`}},
		{"several at once", Table{Name: "t", Partition: "p", Columns: []Column{col("a", 0), col("a", column.Int)}},
			[]string{"type Type(0)", "named twice", `partition column "p"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := c.t.DDL(&SQLite)
			if err == nil {
				t.Fatal("DDL of a bad spec succeeded")
			}
			for _, s := range c.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
		})
	}
}

func TestDDL(t *testing.T) {
	tbl := Table{Schema: "wh", Name: "page views", Partition: "day", Columns: []Column{
		{Name: "day", Type: column.Time},
		{Name: "views", Type: column.Int},
		{Name: "note", Type: column.String, Null: true, SQLType: "VARCHAR(80)"},
		{Name: "token", Type: column.Int, Meta: FromToken},
	}}
	got, err := tbl.DDL(&SQLite)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"CREATE TABLE IF NOT EXISTS \"wh\".\"page views\" (\n\t\"day\" TEXT NOT NULL,\n\t\"views\" INTEGER NOT NULL,\n\t\"note\" VARCHAR(80),\n\t\"token\" INTEGER NOT NULL\n)",
		`CREATE INDEX IF NOT EXISTS "page views_day" ON "wh"."page views" ("day")`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("DDL mismatch (-want +got):\n%s", diff)
	}
}

// TestValueKinds checks, for values of every Go type a row may hold,
// that each kind takes exactly the types it lists.
func TestValueKinds(t *testing.T) {
	d := SQLite
	d.UTF8 = true
	values := map[string]any{
		"int": 1, "int8": int8(-2), "int16": int16(3), "int32": int32(4), "int64": int64(5),
		"uint8": uint8(6), "uint16": uint16(7), "uint32": uint32(8), "uint": uint(9), "uint64": uint64(10),
		"float32": float32(1.5), "float64": 2.5, "string": "s", "bool": true,
		"time": time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), "bytes": []byte("b"),
		"big-uint64": uint64(math.MaxUint64), "big-int": int64(1<<53 + 1), "bad-utf8": "\xff", "nul": "a\x00b",
		"struct": struct{}{}, "pointer": new(int),
	}
	takes := map[column.Type][]string{
		column.Int:    {"int", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint", "uint64", "big-int"},
		column.Float:  {"int", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint", "uint64", "float32", "float64"},
		column.String: {"string"},
		column.Bool:   {"bool"},
		column.Time:   {"time"},
		column.Bytes:  {"bytes"},
	}
	for k := column.Int; k <= column.Bytes; k++ {
		col := Column{Name: "c", Type: k}
		for name, v := range values {
			_, want, err := d.value(&col, v)
			ok := false
			for _, n := range takes[k] {
				ok = ok || n == name
			}
			if ok != (err == nil) {
				t.Errorf("kind %v, %s %v: err %v (want %q); want taken: %v", k, name, v, err, want, ok)
			}
			if err != nil && (!errors.Is(err, column.ErrMistyped) || want == "") {
				t.Errorf("kind %v, %s: err %v, want %q; want ErrMistyped saying what is accepted", k, name, err, want)
			}
		}
		// A dialect that takes Go integers as they are gets them so,
		// checked alike.
		keep := d
		keep.Integers = true
		for _, name := range []string{"int", "int8", "uint16", "uint", "uint64", "big-uint64"} {
			got, _, err := keep.value(&col, values[name])
			if k == column.Int && name != "big-uint64" && (err != nil || got != values[name]) {
				t.Errorf("Int with Integers, %s: %#v, %v; want it as it came", name, got, err)
			}
			if k == column.Int && name == "big-uint64" && !errors.Is(err, column.ErrMistyped) {
				t.Errorf("Int with Integers, %s: %v; want ErrMistyped", name, err)
			}
		}
		if _, _, err := d.value(&col, nil); !errors.Is(err, column.ErrNull) {
			t.Errorf("kind %v: nil in a NOT NULL column: %v", k, err)
		}
		col.Null = true
		if v, _, err := d.value(&col, nil); err != nil || v != nil {
			t.Errorf("kind %v: nil in a NULL column: %v, %v", k, v, err)
		}
	}
}

// TestSQLiteTimeOrder checks that SQLite's text form of instants sorts
// as the instants do, and reads back as the same instant.
func TestSQLiteTimeOrder(t *testing.T) {
	zones := []*time.Location{time.UTC, time.FixedZone("", -(3*3600 + 30*60)), time.FixedZone("", 14*3600)}
	instant := rapid.Custom(func(t *rapid.T) time.Time {
		sec := rapid.Int64Range(time.Date(1, 1, 2, 0, 0, 0, 0, time.UTC).Unix(), time.Date(9999, 12, 30, 0, 0, 0, 0, time.UTC).Unix()).Draw(t, "sec")
		return time.Unix(sec, rapid.Int64Range(0, 999_999_999).Draw(t, "nsec")).In(rapid.SampledFrom(zones).Draw(t, "zone"))
	})
	rapid.Check(t, func(t *rapid.T) {
		a, b := instant.Draw(t, "a"), instant.Draw(t, "b")
		sa, sb := SQLiteTime(a).(string), SQLiteTime(b).(string)
		if a.Before(b) != (sa < sb) || a.Equal(b) != (sa == sb) {
			t.Fatalf("%v, %v: %q, %q do not sort as the instants", a, b, sa, sb)
		}
		back, err := time.Parse(SQLiteTimeLayout, sa)
		if err != nil || !back.Equal(a) {
			t.Fatalf("%q reads back as %v (%v); want %v", sa, back, err, a)
		}
	})
}
