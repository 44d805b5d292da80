package sqldest

import (
	"fmt"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/destination/column"
)

// BenchmarkRows checks and converts a batch of 100,000 rows of four
// columns: read=insert as a write committing on its own does, row by row
// into one slice of values as it inserts them; read=convert as a write
// handed to a ledger's transaction does, keeping every converted value.
func BenchmarkRows(b *testing.B) {
	c, err := compile(Table{Name: "bench", Partition: "day", Columns: []Column{
		{Name: "day", Type: column.Time}, {Name: "n", Type: column.Int}, {Name: "name", Type: column.String}, {Name: "value", Type: column.Float},
	}})
	if err != nil {
		b.Fatal(err)
	}
	d := &Destination{name: "bench", dialect: &Dialect{Name: "bench"}}
	p := tranche.PartitionOf(tranche.Day, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	rows := make([]tranche.Row, 100_000)
	for i := range rows {
		rows[i] = tranche.Row{"day": p.Start.Add(time.Duration(i) * time.Second), "n": i, "name": fmt.Sprintf("user-%06d", i), "value": float64(i) / 3}
	}
	batch := tranche.Batch{Asset: "bench", Column: "day", Partition: p, Rows: rows}
	b.Run("read=insert", func(b *testing.B) {
		vals := make([]any, len(c.cols))
		for b.Loop() {
			r := newRows(d, c, &batch)
			for i := range r.Len() {
				if err := r.Row(i, vals); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("read=convert", func(b *testing.B) {
		for b.Loop() {
			if err := newRows(d, c, &batch).convert(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
