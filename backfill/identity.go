package backfill

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"time"

	"github.com/tranche-dev/tranche"
)

// BackfillID returns the id of the backfill of the DAG identity dag over
// window w, run in chunks of chunk partitions (1 for one run per
// partition): the same three always name the same backfill, so running it
// again resumes it.
func BackfillID(dag string, w tranche.TimePartitionWindow, chunk int) string {
	return shortHash(fmt.Sprintf("tranche/backfill/v1\ndag=%s\nfrom=%s\nto=%s\nchunk=%d\n",
		dag, utc(w.Start()), utc(w.End()), max(chunk, 1)), 12)
}

// BackfillIDOf returns the id of the backfill of the DAG identity dag over
// the chosen partitions ps (see [Backfill.Partitions]), run in chunks of
// chunk partitions: the same set always names the same backfill, whatever
// the order or repetitions of ps, and never the backfill of a whole
// window, even one holding the same partitions.
func BackfillIDOf(dag string, ps []tranche.TimePartition, chunk int) string {
	starts := make([]time.Time, len(ps))
	for i, p := range ps {
		starts[i] = p.Start
	}
	return backfillIDOf(dag, starts, chunk)
}

// backfillIDOf is BackfillIDOf of the partitions starting at starts.
func backfillIDOf(dag string, starts []time.Time, chunk int) string {
	starts = slices.Clone(starts)
	slices.SortFunc(starts, time.Time.Compare)
	starts = slices.CompactFunc(starts, time.Time.Equal)
	h := sha256.New()
	fmt.Fprintf(h, "tranche/backfill-partitions/v1\ndag=%s\nchunk=%d\n", dag, max(chunk, 1))
	var buf []byte
	for _, t := range starts {
		buf = append(append(buf[:0], "partition="...), utc(t)...)
		h.Write(append(buf, '\n'))
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}

// RunID returns the run id of the DAG identity dag for the span
// [start, end): a partition's bounds, or a chunk's. Every attempt at the
// same span keeps it, so its data and checkpoints keep one namespace.
func RunID(dag string, start, end time.Time) string {
	// The form of the other ids, appended without fmt: a backfill makes
	// one per partition.
	var buf [128]byte
	b := append(buf[:0], "tranche/run/v1\ndag="...)
	b = append(b, dag...)
	b = append(b, "\nfrom="...)
	b = start.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, "\nto="...)
	b = end.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, '\n')
	sum := sha256.Sum256(b)
	var hexSum [2 * sha256.Size]byte
	hex.Encode(hexSum[:], sum[:])
	return string(hexSum[:16])
}

func utc(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func shortHash(s string, n int) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:n]
}
