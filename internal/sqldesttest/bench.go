package sqldesttest

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/destination/column"
	"github.com/tranche-dev/tranche/destination/sqldest"
	"github.com/tranche-dev/tranche/ledger"
)

// BenchTable is the table of the write benchmark: a time, an integer, a
// string and a float a row.
func BenchTable(name string) sqldest.Table {
	return sqldest.Table{Name: name, Asset: "bench", Partition: "day", Columns: []sqldest.Column{
		{Name: "day", Type: column.Time},
		{Name: "n", Type: column.Int},
		{Name: "name", Type: column.String},
		{Name: "value", Type: column.Float},
	}}
}

// BenchRows returns n rows of the partition p, of BenchTable's columns:
// day (a time.Time in p), n (an int), name (a string), value (a float64).
func BenchRows(p tranche.TimePartition, n int) []tranche.Row {
	out := make([]tranche.Row, n)
	for i := range out {
		out[i] = tranche.Row{"day": p.Start.Add(time.Duration(i) * time.Second), "n": i,
			"name": fmt.Sprintf("user-%06d", i), "value": float64(i) / 3}
	}
	return out
}

// BenchWrite writes a partition of rows rows a loop, alternating the
// destination d (a fenced write committing on its own: the token check,
// the delete, the insert, and the commit) and what a user would write
// without it, a loop of prepared INSERTs in one transaction into db's
// table loop (created like d's, of BenchTable), so that both see the same
// load. placeholder(i) is the driver's i-th placeholder. It reports each
// side's time per partition and per row, and their ratio.
func BenchWrite(b *testing.B, db *sql.DB, d *sqldest.Destination, loop string, placeholder func(int) string, rows int) {
	insert := fmt.Sprintf("INSERT INTO %s (day, n, name, value) VALUES (%s, %s, %s, %s)", loop,
		placeholder(1), placeholder(2), placeholder(3), placeholder(4))
	BenchWriteLoop(b, d, func(ctx context.Context, data []tranche.Row) error { return plainLoop(ctx, db, insert, data) }, rows)
}

// BenchWriteLoop is BenchWrite with the user's loop given: loop writes
// a partition's rows (of BenchTable, as BenchRows makes them) the way a
// user of the database's driver would without tranche. The two sides
// take turns at going first, so that neither pays alone for what comes
// before it: the collection of the garbage that making the rows leaves,
// which falls on whichever side runs next.
func BenchWriteLoop(b *testing.B, d *sqldest.Destination, loop func(ctx context.Context, rows []tranche.Row) error, rows int) {
	ctx := context.Background()
	var took [2]time.Duration
	i := 0
	for b.Loop() {
		p := tranche.PartitionOf(tranche.Day, jan1.AddDate(0, 0, i))
		data := BenchRows(p, rows)
		sides := [2]func() error{
			func() error {
				return d.Write(ctx, []tranche.Batch{{Asset: "bench", Column: "day", Partition: p, Rows: data, RunID: "bench", Token: 1}})
			},
			func() error { return loop(ctx, data) },
		}
		for k := range 2 {
			side := (i + k) % 2
			t0 := time.Now()
			if err := sides[side](); err != nil {
				b.Fatal(err)
			}
			took[side] += time.Since(t0)
		}
		i++
	}
	b.ReportMetric(float64(took[0].Microseconds())/float64(i), "dest-µs/partition")
	b.ReportMetric(float64(took[1].Microseconds())/float64(i), "loop-µs/partition")
	b.ReportMetric(float64(took[0].Nanoseconds())/float64(i*rows), "dest-ns/row")
	b.ReportMetric(float64(took[0])/float64(took[1]), "dest/loop")
}

// plainLoop is the user's loop: a transaction, a prepared INSERT, one
// execution a row with the row's values, the commit.
func plainLoop(ctx context.Context, db *sql.DB, insert string, rows []tranche.Row) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	stmt, err := tx.PrepareContext(ctx, insert)
	if err != nil {
		return err
	}
	for _, r := range rows {
		if _, err := stmt.ExecContext(ctx, r["day"], r["n"], r["name"], r["value"]); err != nil {
			return err
		}
	}
	if err := stmt.Close(); err != nil {
		return err
	}
	return tx.Commit()
}

// BenchBackfill runs, each loop, a backfill of partitions partitions of
// rows rows each through the destination shared with the ledger, and the
// same through separate, which commits on its own, in alternation, and
// reports each one's time per partition and their ratio: what sharing
// the ledger's transaction saves, or costs, per partition. Both
// destinations write BenchTable tables of their own. A third backfill,
// whose destination writes nothing, measures the backfill's own cost,
// so that the ratio of the two destinations' overheads is reported too.
func BenchBackfill(b *testing.B, l ledger.Ledger, shared, separate *sqldest.Destination, partitions, rows, concurrency int) {
	ctx := context.Background()
	var took [3]time.Duration
	i := 0
	for b.Loop() {
		for k, d := range []tranche.Destination{shared, separate, discard{}} {
			first := jan1.AddDate(0, 0, i*partitions)
			i++
			w, err := tranche.NewTimePartitionWindow(tranche.Day, first, first.AddDate(0, 0, partitions-1))
			if err != nil {
				b.Fatal(err)
			}
			dag, err := tranche.NewDAG(tranche.Asset{
				Name:         "bench",
				Partitioning: tranche.Partitioning{Granularity: tranche.Day, Location: time.UTC, Column: "day"},
				Destinations: []tranche.Destination{d},
				Materialize: func(ctx context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
					p, err := m.Partition()
					return BenchRows(p, rows), err
				},
			})
			if err != nil {
				b.Fatal(err)
			}
			t0 := time.Now()
			r, err := (&backfill.Backfill{DAG: dag, Window: w, Ledger: l, Concurrency: concurrency}).Run(ctx)
			if err != nil || r.Succeeded != partitions {
				b.Fatalf("backfill: %v, %+v", err, r)
			}
			took[k] += time.Since(t0)
		}
	}
	n := float64(i / 3 * partitions)
	b.ReportMetric(float64(took[0].Microseconds())/n, "shared-µs/partition")
	b.ReportMetric(float64(took[1].Microseconds())/n, "separate-µs/partition")
	b.ReportMetric(float64(took[2].Microseconds())/n, "nowrite-µs/partition")
	b.ReportMetric(float64(took[0])/float64(took[1]), "shared/separate")
	// What writing costs a partition beyond the backfill itself.
	b.ReportMetric(float64(took[0]-took[2])/float64(took[1]-took[2]), "shared/separate-overhead")
}

// discard is a destination that writes nothing: the backfill's own cost.
type discard struct{}

func (discard) Write(context.Context, []tranche.Batch) error { return nil }
