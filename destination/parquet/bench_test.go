package parquet

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
	"unsafe"

	pq "github.com/parquet-go/parquet-go"

	"github.com/tranche-dev/tranche"
)

// benchRows is the size of the benchmarks' partition.
const benchRows = 100_000

// benchBatch returns a partition of n rows of the orders shape: an
// int64, a float64, a string (null in every third row), a bool and a
// time.Time, besides the partition column.
func benchBatch(n int) []tranche.Row {
	p := day(0)
	rows := make([]tranche.Row, n)
	for i := range rows {
		r := tranche.Row{
			"day":       p.Key(),
			"id":        int64(i),
			"amount":    float64(i%1000) + 0.5,
			"paid":      i%2 == 0,
			"placed_at": p.Start.Add(time.Duration(i) * 800 * time.Millisecond),
		}
		if i%3 != 0 {
			r["customer"] = fmt.Sprintf("customer-%d", i%5000)
		}
		rows[i] = r
	}
	return rows
}

// plainWrite is what a user writes without tranche: the same parquet-go
// writer and calls, the values taken from the same rows by type
// assertion, the file synced and renamed into place.
func plainWrite(dir string, schema *pq.Schema, rows []tranche.Row) error {
	f, err := os.Create(filepath.Join(dir, "plain.tmp"))
	if err != nil {
		return err
	}
	defer f.Close()
	w := pq.NewWriter(f, schema, pq.Compression(&pq.Snappy))
	const cols = 5
	buf := make([]pq.Value, rowsPerChunk*cols)
	out := make([]pq.Row, 0, rowsPerChunk)
	for start := 0; start < len(rows); start += rowsPerChunk {
		out = out[:0]
		vals := buf
		for _, r := range rows[start:min(start+rowsPerChunk, len(rows))] {
			row := vals[:cols:cols]
			vals = vals[cols:]
			row[0] = pq.Int64Value(r["id"].(int64)).Level(0, 0, 0)
			row[1] = pq.DoubleValue(r["amount"].(float64)).Level(0, 0, 1)
			if s, ok := r["customer"].(string); ok {
				// The same view of the string's bytes as the destination's.
				row[2] = pq.ByteArrayValue(unsafe.Slice(unsafe.StringData(s), len(s))).Level(0, 1, 2)
			} else {
				row[2] = pq.NullValue().Level(0, 0, 2)
			}
			row[3] = pq.BooleanValue(r["paid"].(bool)).Level(0, 0, 3)
			row[4] = pq.Int64Value(r["placed_at"].(time.Time).UnixMicro()).Level(0, 0, 4)
			out = append(out, row)
		}
		if _, err := w.WriteRows(out); err != nil {
			return err
		}
	}
	if err := w.Close(); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), filepath.Join(dir, "plain.parquet"))
}

// cpuTime returns the CPU time the process has used, in user and system
// mode, all threads included: what a side costs the machine, less
// sensitive than the wall clock to the other processes of a shared one.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkWriteSideBySide writes a partition of 100,000 rows through the
// destination and through plainWrite, alternating the two in one loop so
// that both see the same load, and reports each side's time per
// partition and their ratio, by the wall clock and in CPU time. The destination's write is a fenced one at
// a new token each time: every row checked against the schema (declared,
// or inferred from the rows), the lock, the fence read and rewritten,
// the file synced and renamed, the folder synced.
func BenchmarkWriteSideBySide(b *testing.B) {
	rows := benchBatch(benchRows)
	l, err := compile("orders", "day", ordersSchema)
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		schemas map[string]Schema
	}{
		{"declared", map[string]Schema{"orders": ordersSchema}},
		{"inferred", nil},
	} {
		b.Run(tc.name, func(b *testing.B) {
			d := &Destination{Dir: b.TempDir(), Schemas: tc.schemas}
			plainDir := b.TempDir()
			var dest, plain, destCPU, plainCPU time.Duration
			token := int64(0)
			for b.Loop() {
				token++
				t0, c0 := time.Now(), cpuTime(b)
				if err := d.Write(b.Context(), []tranche.Batch{{Asset: "orders", Column: "day", Partition: day(0), Token: token, Rows: rows}}); err != nil {
					b.Fatal(err)
				}
				t1, c1 := time.Now(), cpuTime(b)
				if err := plainWrite(plainDir, l.schema, rows); err != nil {
					b.Fatal(err)
				}
				t2, c2 := time.Now(), cpuTime(b)
				dest, plain = dest+t1.Sub(t0), plain+t2.Sub(t1)
				destCPU, plainCPU = destCPU+c1-c0, plainCPU+c2-c1
			}
			n := float64(b.N)
			b.ReportMetric(float64(dest)/1e6/n, "dest-ms/partition")
			b.ReportMetric(float64(plain)/1e6/n, "loop-ms/partition")
			b.ReportMetric(float64(dest)/float64(plain), "dest/loop")
			b.ReportMetric(float64(destCPU)/1e6/n, "dest-cpu-ms/partition")
			b.ReportMetric(float64(plainCPU)/1e6/n, "loop-cpu-ms/partition")
			b.ReportMetric(float64(destCPU)/float64(plainCPU), "cpu-dest/loop")
		})
	}
}
