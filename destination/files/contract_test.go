package files_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"testing"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/destination/destinationtest"
	"github.com/tranche-dev/tranche/destination/files"
)

// The files destination keeps the destination contract.
func TestFilesDestinationContract(t *testing.T) {
	destinationtest.Run(t, func(t *testing.T) destinationtest.Subject {
		d := &files.Destination{Dir: t.TempDir()}
		return destinationtest.Subject{Destination: d, Read: func(_ context.Context, p tranche.TimePartition) ([]tranche.Row, error) {
			f, err := os.Open(d.Path(destinationtest.Asset, destinationtest.Column, p.Key()))
			if errors.Is(err, fs.ErrNotExist) {
				return nil, nil
			}
			if err != nil {
				return nil, err
			}
			defer f.Close()
			var rows []tranche.Row
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				var r tranche.Row
				if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
					return nil, err
				}
				rows = append(rows, r)
			}
			return rows, sc.Err()
		}}
	})
}
