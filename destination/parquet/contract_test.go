package parquet_test

import (
	"context"
	"errors"
	"io/fs"
	"testing"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/destination/column"
	"github.com/tranche-dev/tranche/destination/destinationtest"
	"github.com/tranche-dev/tranche/destination/parquet"
)

// The Parquet destination keeps the destination contract, with a
// declared schema and with one inferred from each batch.
func TestParquetDestinationContract(t *testing.T) {
	for _, declared := range []bool{true, false} {
		name := "inferred"
		if declared {
			name = "declared"
		}
		t.Run(name, func(t *testing.T) {
			destinationtest.Run(t, func(t *testing.T) destinationtest.Subject {
				d := &parquet.Destination{Dir: t.TempDir()}
				if declared {
					d.Schemas = map[string]parquet.Schema{destinationtest.Asset: {Columns: []parquet.Column{
						{Name: "n", Type: column.Int}, {Name: "note", Type: column.String}}}}
				}
				return destinationtest.Subject{Destination: d, Read: func(_ context.Context, p tranche.TimePartition) ([]tranche.Row, error) {
					rows, err := d.Rows(destinationtest.Asset, destinationtest.Column, p.Key())
					if errors.Is(err, fs.ErrNotExist) {
						return nil, nil
					}
					return rows, err
				}}
			})
		})
	}
}
