package duckdb_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"path/filepath"
	"testing"

	duckdbgo "github.com/duckdb/duckdb-go/v2"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/destination/duckdb"
	"github.com/tranche-dev/tranche/internal/sqldesttest"
)

// Benchmarks of the DuckDB destination; run them with
//
//	go test -run '^$' -bench DuckDBWrite -benchtime 12x -count 5 ./destination/duckdb
//
// BENCHMARKS.md holds the medians and the ratios.

// BenchmarkDuckDBWrite writes partitions of 100,000 rows into a DuckDB
// file through the destination (a fenced write: the token check, the
// delete of the partition, the table's column types read and every
// value checked, the appender, the commit), beside a plain loop of the
// same duckdb-go calls without tranche: a transaction, an appender on
// its connection, AppendRow for each row's values, Close, the commit,
// into a table like the destination's in a file of its own
// (sqldesttest.BenchWriteLoop). checkpoints=auto is DuckDB as it comes,
// which checkpoints a file at the commit that takes its log past 16 MiB
// (every third partition or so, about half of either side's time);
// checkpoints=deferred moves the threshold out of reach.
func BenchmarkDuckDBWrite(b *testing.B) {
	const rows = 100_000
	for _, checkpoints := range []string{"auto", "deferred"} {
		b.Run(fmt.Sprintf("rows=%d/checkpoints=%s", rows, checkpoints), func(b *testing.B) {
			// A file each, so that each side pays the checkpoints of its
			// own writes: in one file, DuckDB's automatic checkpoint, when
			// the log passes 16 MiB, falls to whichever commit crosses it.
			dir := b.TempDir()
			d, err := duckdb.Open(b.Context(), filepath.Join(dir, "dest.duckdb"), sqldesttest.BenchTable("bench"))
			if err != nil {
				b.Fatal(err)
			}
			defer d.Close()
			if err := d.CreateTables(b.Context()); err != nil {
				b.Fatal(err)
			}
			db, err := sql.Open("duckdb", filepath.Join(dir, "loop.duckdb"))
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			ddl, err := sqldesttest.BenchTable("loop").DDL(&duckdb.Dialect)
			if err != nil {
				b.Fatal(err)
			}
			for _, q := range ddl {
				if _, err := db.ExecContext(b.Context(), q); err != nil {
					b.Fatal(err)
				}
			}
			loop := func(ctx context.Context, data []tranche.Row) error {
				conn, err := db.Conn(ctx)
				if err != nil {
					return err
				}
				defer conn.Close()
				tx, err := conn.BeginTx(ctx, nil)
				if err != nil {
					return err
				}
				defer tx.Rollback()
				err = conn.Raw(func(dc any) error {
					a, err := duckdbgo.NewAppender(dc.(driver.Conn), "", "", "loop")
					if err != nil {
						return err
					}
					for _, r := range data {
						if err := a.AppendRow(r["day"], r["n"], r["name"], r["value"]); err != nil {
							a.Close()
							return err
						}
					}
					return a.Close()
				})
				if err != nil {
					return err
				}
				return tx.Commit()
			}
			if checkpoints == "deferred" {
				// No automatic checkpoint in either file: what is left is
				// each side's own work, the destination's fixed part
				// (its queries, the check of every value) alone.
				for _, db := range []*sql.DB{d.DB(), db} {
					if _, err := db.ExecContext(b.Context(), "SET GLOBAL checkpoint_threshold = '10GB'"); err != nil {
						b.Fatal(err)
					}
				}
			}
			sqldesttest.BenchWriteLoop(b, d.Destination, loop, rows)
		})
	}
}
