package sqldest

import (
	"fmt"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
)

// BenchmarkRows checks and converts a batch of 100,000 rows of four
// columns, as every write does before anything is written.
func BenchmarkRows(b *testing.B) {
	c, err := compile(Table{Name: "bench", Partition: "day", Columns: []Column{
		{Name: "day", Kind: Time}, {Name: "n", Kind: Int}, {Name: "name", Kind: String}, {Name: "value", Kind: Float},
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
	for b.Loop() {
		if _, err := c.rows(d, &batch); err != nil {
			b.Fatal(err)
		}
	}
}
