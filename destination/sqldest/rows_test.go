package sqldest

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/destination/column"
)

// TestRowsConvert gives Row a dialect's converters: each row-fed column
// goes through its converter (the partition column with the value as it
// takes it), the Meta column's once for the batch, with the batch's
// value, its result in every row, a converter's refusal names the
// value it returns with the row and the column, and rows converted
// whole at Write keep their values and decline the converters.
func TestRowsConvert(t *testing.T) {
	c, err := compile(Table{Name: "t", Partition: "day", Columns: []Column{
		{Name: "day", Type: column.Time}, {Name: "n", Type: column.Int}, {Name: "tok", Type: column.Int, Meta: FromToken},
	}})
	if err != nil {
		t.Fatal(err)
	}
	d := &Destination{name: "dest", dialect: &Dialect{Name: "test"}}
	p := tranche.PartitionOf(tranche.Day, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	batch := tranche.Batch{Asset: "a", Column: "day", Partition: p, Token: 7,
		Rows: []tranche.Row{{"day": p.Start.Format(time.DateOnly), "n": 1}, {"day": p.Start, "n": 300}}}

	var seen []any
	conv := make([]Converter, 3)
	conv[0] = func(v any) (any, string, error) { seen = append(seen, v); return "day", "", nil }
	conv[1] = func(v any) (any, string, error) {
		seen = append(seen, v)
		if v.(int) > 255 {
			return int64(v.(int)), "at most 255", column.ErrOutOfRange
		}
		return v, "", nil
	}
	metaCalls := 0
	conv[2] = func(v any) (any, string, error) {
		metaCalls++
		if v != int64(7) {
			t.Errorf("the Meta column's converter was called with %T %v; want the batch's token, int64 7", v, v)
		}
		return "seven", "", nil
	}

	r := newRows(d, c, &batch)
	if !r.Convert(conv) {
		t.Fatal("Convert = false for rows read as they are inserted")
	}
	vals := make([]any, 3)
	if err := r.Row(0, vals); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]any{"day", 1, "seven"}, vals); diff != "" {
		t.Errorf("row 0 (-want +got):\n%s", diff)
	}
	err = r.Row(1, vals)
	ve, ok := errors.AsType[*column.ValueError](err)
	if !ok || !errors.Is(err, column.ErrOutOfRange) || ve.Row != 1 || ve.Column != "n" || ve.Value != int64(300) || ve.Want != "at most 255" || ve.Asset != "a" {
		t.Errorf("row 1: %v (%+v); want a *ValueError of row 1, column n, value int64 300, matching ErrOutOfRange", err, ve)
	}
	// The partition column's converter gets the partition's start for
	// a key, and the row's time for a time.
	if diff := cmp.Diff([]any{p.Start, 1, p.Start, 300}, seen); diff != "" {
		t.Errorf("the converters' values (-want +got):\n%s", diff)
	}
	if metaCalls != 1 {
		t.Errorf("the Meta column's converter was called %d times for two rows; want once, for the batch", metaCalls)
	}

	// A Meta value the converter refuses refuses every row, once the
	// row's own values are checked: row 1 is refused for its n first.
	conv[2] = func(v any) (any, string, error) { return v, "a token under 5", column.ErrOutOfRange }
	r = newRows(d, c, &batch)
	r.Convert(conv)
	err = r.Row(0, vals)
	ve, ok = errors.AsType[*column.ValueError](err)
	if !ok || !errors.Is(err, column.ErrOutOfRange) || ve.Row != 0 || ve.Column != "tok" || ve.Value != int64(7) || ve.Want != "a token under 5" || ve.Partition != p.Key() {
		t.Errorf("row 0 with a refused token: %v (%+v); want a *ValueError of row 0, column tok, value int64 7, matching ErrOutOfRange", err, ve)
	}
	err = r.Row(1, vals)
	if ve, ok := errors.AsType[*column.ValueError](err); !ok || ve.Column != "n" || ve.Row != 1 {
		t.Errorf("row 1 with a refused token and an n out of range: %v; want the n refused first", err)
	}

	batch.Rows = batch.Rows[:1]
	r = newRows(d, c, &batch)
	if err := r.convert(); err != nil {
		t.Fatal(err)
	}
	if r.Convert(conv) {
		t.Error("Convert = true for rows converted at Write")
	}
	if err := r.Row(0, vals); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]any{p.Start, int64(1), int64(7)}, vals); diff != "" {
		t.Errorf("row 0 converted at Write (-want +got):\n%s", diff)
	}
}
