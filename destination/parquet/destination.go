package parquet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	pq "github.com/parquet-go/parquet-go"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/destination"
	"github.com/tranche-dev/tranche/internal/fsdest"
)

// PartFile is the name of the file that holds a partition's rows.
const PartFile = "part-00000.parquet"

// The files beside a partition's part file, hidden from readers that
// skip names starting with a dot, as Spark, Trino and Hive do (and that
// DuckDB's *.parquet globs never match).
const (
	lockFile   = ".lock"  // locked by every write of the partition, never replaced
	fenceFile  = ".fence" // the fence of a partition left without a part file
	tempPrefix = ".part-" // a write's data before its rename
	fenceTemp  = ".fence-"
	tempSuffix = ".tmp"
)

// The key-value metadata of a part file that names the write that made
// it, and the partition's fence: the token of its last fenced write.
const (
	metaAsset     = "tranche.asset"
	metaPartition = "tranche.partition"
	metaRunID     = "tranche.run_id"
	metaToken     = "tranche.token"
	metaDelivery  = "tranche.delivery_id"
	metaFence     = "tranche.fence"
	metaFenceDAG  = "tranche.fence.dag"
)

// rowsPerChunk is how many rows a write hands to parquet-go at a time,
// checking its context between them.
const rowsPerChunk = 4096

// Destination is a [tranche.Destination] that writes Parquet files in
// Hive-style folders: one file per asset and partition, at
// DIR/ASSET/COLUMN=KEY/part-00000.parquet (DIR/ASSET/part-00000.parquet
// for an unpartitioned asset). See the package documentation for the
// schema, the layout and the guarantees.
type Destination struct {
	// Dir is the root folder; it is created when missing. It must not be
	// empty.
	Dir string

	// Schemas holds the declared schema of each asset, by name. The
	// schema of an asset without one is inferred from each batch's rows.
	// Writes only read it: change it only while none is under way.
	Schemas map[string]Schema

	// The folders' locks: flock(2) of each folder's lock file where the
	// system has it, or the folders locked by this value's writes.
	locks fsdest.Locks
}

var _ tranche.Destination = (*Destination)(nil)

// String returns "parquet:" and the folder, the destination's name in
// events.
func (d *Destination) String() string { return "parquet:" + d.Dir }

// Path returns the file that holds the rows of the asset's partition with
// the given key, in column; an empty column and key name the file of an
// unpartitioned asset. Names are escaped as the package documentation
// says.
func (d *Destination) Path(asset, column, key string) string {
	if column == "" && key == "" {
		return filepath.Join(d.Dir, fsdest.EscapeName(asset), PartFile)
	}
	return filepath.Join(d.Dir, fsdest.EscapeName(asset), fsdest.EscapeName(column)+"="+fsdest.EscapeName(key), PartFile)
}

// where names a partition in errors.
func where(key string) string {
	if key == "" {
		return "unpartitioned"
	}
	return "partition " + key
}

// fence is a partition's fence: the token of its last fenced write and
// the DAG identity that token counts in, as its .fence file, or its part
// file's metadata, holds it.
type fence = destination.Fence

// staged is one batch's write.
type staged struct {
	b      *tranche.Batch
	l      *layout
	cols   *columns // the batch's values, converted
	dir    string   // the partition's folder
	path   string   // its part file
	tmp    string   // the new part file before its rename; "" for none
	fence  string   // the new .fence before its rename, for a partition left without a part file
	old    fence    // the partition's fence before the write
	next   fence    // and after it
	remove bool     // an inferred partition with no columns: no part file
}

// fail wraps a write's error with the batch's asset and partition.
func (s *staged) fail(err error) error {
	return fmt.Errorf("tranche: parquet destination: asset %q, %s: %w", s.b.Asset, where(s.b.Partition.Key()), err)
}

// Write writes every batch, replacing the partitions' files, or none of
// them: a row that does not fit its schema, a stale token, a folder that
// cannot be written or a context that ends refuses the whole write,
// leaving every partition's files as they were (a partition's folder that
// was missing may be left created, with no part file). Only a failure of
// the renames themselves, the write's last step, leaves the partitions
// renamed before it replaced; each partition is whole either way.
func (d *Destination) Write(ctx context.Context, batches []tranche.Batch) (err error) {
	if d.Dir == "" {
		return errors.New("tranche: parquet destination with an empty Dir")
	}
	// Every row is checked before anything touches the disk.
	ss := make([]*staged, len(batches))
	dirs := make(map[string]bool, len(batches))
	for i := range batches {
		b := &batches[i]
		if b.Asset == "" || b.Column == "" && b.Partition.Granularity.IsValid() {
			return fmt.Errorf("tranche: parquet destination: batch for asset %q, %s needs an asset name and, for a partition, a column", b.Asset, where(b.Partition.Key()))
		}
		s := &staged{b: b, path: d.Path(b.Asset, b.Column, b.Partition.Key())}
		s.dir = filepath.Dir(s.path)
		if dirs[s.dir] {
			return fmt.Errorf("tranche: parquet destination: the write holds asset %q, %s twice", b.Asset, where(b.Partition.Key()))
		}
		dirs[s.dir] = true
		if schema, ok := d.Schemas[b.Asset]; ok {
			if s.l, err = compile(b.Asset, b.Column, schema); err == nil {
				s.cols, err = s.l.convert(b)
			}
		} else {
			s.l, s.cols, err = infer(b)
		}
		if err != nil {
			return err
		}
		switch {
		case len(s.l.cols) == 0 && len(b.Rows) > 0:
			return fmt.Errorf("tranche: parquet destination: asset %q, %s: its %d rows hold no column but the partition column %q, and a Parquet file cannot hold rows without columns: declare the asset's schema or give the rows a column", b.Asset, where(b.Partition.Key()), len(b.Rows), b.Column)
		case len(s.l.cols) == 0:
			s.remove = true // an inferred schema of no rows: no file
		}
		ss[i] = s
	}
	if err := ctx.Err(); err != nil {
		return err
	}

	for _, s := range ss {
		if err := fsdest.MkdirSynced(d.Dir, s.dir); err != nil {
			return s.fail(err)
		}
	}
	unlock, err := d.lock(ctx, ss)
	if err != nil {
		return err
	}
	defer unlock()
	defer func() {
		for _, s := range ss {
			if s.tmp != "" {
				os.Remove(s.tmp)
			}
			if s.fence != "" {
				os.Remove(s.fence)
			}
		}
	}()

	// Under the locks: every fence is checked before anything is
	// written, and no other writer has a temporary file in these
	// folders, so any there is a crashed writer's.
	for _, s := range ss {
		if s.old, err = readFence(s.dir); err != nil {
			return s.fail(err)
		}
		if s.next, err = s.old.Admit(*s.b); err != nil {
			return err
		}
		if fsdest.CrossProcess {
			removeLeftovers(s.dir)
		}
	}
	for _, s := range ss {
		if err := ctx.Err(); err != nil {
			return err
		}
		switch {
		case !s.remove:
			// The part file carries the fence in its metadata, so
			// that one rename replaces both.
			if s.tmp, err = d.encode(ctx, s); err != nil {
				return s.fail(explainFull(err))
			}
		case s.next.Token > 0:
			// A partition left without a part file keeps its fence
			// beside it.
			data, _ := json.Marshal(s.next)
			if s.fence, err = fsdest.WriteTemp(s.dir, fenceTemp, tempSuffix, func(f *os.File) error {
				_, err := f.Write(append(data, '\n'))
				return err
			}); err != nil {
				return s.fail(explainFull(err))
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	for _, s := range ss {
		if s.remove {
			// The fence goes first: a write cut short between the
			// rename and the removal leaves the old part file beside a
			// fence at least as new, never the other way round.
			if s.fence != "" {
				if err := os.Rename(s.fence, filepath.Join(s.dir, fenceFile)); err != nil {
					return s.fail(err)
				}
				s.fence = ""
			}
			if err := os.Remove(s.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return s.fail(err)
			}
			continue
		}
		if err := os.Rename(s.tmp, s.path); err != nil {
			return s.fail(err)
		}
		s.tmp = ""
		// A .fence left by an emptied partition is now the part file's
		// to carry; if its removal is lost, its fence is no newer.
		if err := os.Remove(filepath.Join(s.dir, fenceFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return s.fail(err)
		}
	}
	for _, s := range ss {
		if err := fsdest.SyncDir(s.dir); err != nil {
			return s.fail(err)
		}
	}
	return nil
}

// encode writes a batch's rows into a new temporary Parquet file in its
// partition's folder, synced to disk, and returns its name.
func (d *Destination) encode(ctx context.Context, s *staged) (string, error) {
	b, l := s.b, s.l
	return fsdest.WriteTemp(s.dir, tempPrefix, tempSuffix, func(f *os.File) error {
		w := pq.NewWriter(f, l.schema, pq.Compression(&pq.Snappy),
			pq.KeyValueMetadata(metaAsset, b.Asset),
			pq.KeyValueMetadata(metaPartition, b.Partition.Key()),
			pq.KeyValueMetadata(metaRunID, b.RunID),
			pq.KeyValueMetadata(metaToken, strconv.FormatInt(b.Token, 10)),
			pq.KeyValueMetadata(metaDelivery, destination.DeliveryID(*b)),
			pq.KeyValueMetadata(metaFence, strconv.FormatInt(s.next.Token, 10)),
			pq.KeyValueMetadata(metaFenceDAG, s.next.DAG))
		n := min(s.cols.n, rowsPerChunk)
		buf := make([]pq.Value, n*len(l.cols))
		rows := make([]pq.Row, n)
		for start := 0; start < s.cols.n; start += rowsPerChunk {
			if err := ctx.Err(); err != nil {
				return err
			}
			chunk := rows[:min(rowsPerChunk, s.cols.n-start)]
			s.cols.rows(l, start, buf, chunk)
			if _, err := w.WriteRows(chunk); err != nil {
				return err
			}
		}
		return w.Close()
	})
}

// lock takes the lock of every staged partition's folder, in the order of
// their names so that writers of overlapping partitions cannot deadlock,
// waiting while ctx allows, and returns the function that releases them.
func (d *Destination) lock(ctx context.Context, ss []*staged) (unlock func(), err error) {
	sorted := slices.Clone(ss)
	slices.SortFunc(sorted, func(a, b *staged) int { return strings.Compare(a.dir, b.dir) })
	var held []func()
	unlock = func() {
		for i := len(held) - 1; i >= 0; i-- {
			held[i]()
		}
	}
	for _, s := range sorted {
		release, err := d.locks.Lock(ctx, filepath.Join(s.dir, lockFile), true)
		if err != nil {
			unlock()
			if ctx.Err() != nil {
				return nil, err
			}
			return nil, s.fail(fmt.Errorf("locking the folder: %w", err))
		}
		held = append(held, release)
	}
	return unlock, nil
}

// readFence returns a partition's fence: the tranche.fence of its part
// file's metadata, or the token its .fence holds when it has no part
// file (the newer of the two if both are there, as a write cut short
// after emptying a partition leaves them); 0 when it has neither.
func readFence(dir string) (fence, error) {
	var side fence
	data, err := os.ReadFile(filepath.Join(dir, fenceFile))
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fence{}, err
	default:
		if err := json.Unmarshal(data, &side); err != nil || side.Token < 0 {
			return fence{}, fmt.Errorf("fence %s holds %q, not {\"token\":N}; delete it to unfence the partition", filepath.Join(dir, fenceFile), data)
		}
	}
	inFile, err := fileFence(filepath.Join(dir, PartFile))
	if err != nil {
		return fence{}, err
	}
	if side.Token > inFile.Token {
		return side, nil
	}
	return inFile, nil
}

// fileFence returns the fence a part file's metadata records; 0 for a
// missing file, or one without the key.
func fileFence(path string) (fence, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fence{}, nil
	}
	if err != nil {
		return fence{}, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return fence{}, err
	}
	file, err := pq.OpenFile(f, info.Size(), pq.SkipPageIndex(true), pq.SkipBloomFilters(true))
	if err != nil {
		return fence{}, fmt.Errorf("the part file %s cannot be read for its fence (%w); delete it to unfence the partition", path, err)
	}
	v, ok := file.Lookup(metaFence)
	if !ok {
		return fence{}, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return fence{}, fmt.Errorf("the part file %s records the fence %q, not a token; delete it to unfence the partition", path, v)
	}
	dag, _ := file.Lookup(metaFenceDAG)
	return fence{Token: n, DAG: dag}, nil
}

// removeLeftovers removes the temporary files of writers that died in
// the folder. Only a writer holding the folder's lock makes them, so
// while the caller holds it, every one is a leftover.
func removeLeftovers(dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return // the write's own steps report a folder it cannot read
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasSuffix(name, tempSuffix) && (strings.HasPrefix(name, tempPrefix) || strings.HasPrefix(name, fenceTemp)) {
			os.Remove(filepath.Join(dir, name))
		}
	}
}
