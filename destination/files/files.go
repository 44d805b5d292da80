package files

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/destination"
	"github.com/tranche-dev/tranche/internal/fsdest"
)

// Destination is a [tranche.Destination] that writes JSON lines: one file per
// asset and partition, at DIR/ASSET/COLUMN=KEY/data.jsonl (DIR/ASSET/data.jsonl
// for an unpartitioned asset), one row per line as a JSON object with
// sorted keys. An empty partition is an empty file.
//
// Names are escaped for any file system: bytes other than letters,
// digits, '-', '_', '.' and '+' become %XX, so the hourly key
// "2026-11-01T01:00-05:00" is the folder "hour=2026-11-01T01%3A00-05%3A00".
//
// A write encodes every batch into a temporary file beside its target
// (".data-*.jsonl.tmp", synced to disk) before it renames any into place,
// then syncs the folders, so rows that JSON cannot encode, or a context
// canceled before the renames, leave every partition as it was, and a
// process killed during a write, or a machine that loses power, leaves
// each partition's old file or its new one, never part of one (and, at
// worst, a temporary file that readers of data.jsonl never see). Files
// and folders are created as [os.Create] and [os.MkdirAll] create them:
// 0666 and 0777, less the process's umask.
//
// It is a fenced destination (see [Destination]): beside each data.jsonl
// of a fenced write, a file ".fence" holds the token of the partition's
// last fenced write ({"dag":…,"token":N}), and a write whose token is
// older is refused with a [*tranche.StaleWriteError], matching [tranche.ErrFenced],
// leaving every partition of the write as it was. The check and the
// renames happen under an exclusive lock of each partition's folder
// (flock(2), taken in the order of the folders' names), so that they hold
// between processes, and between machines sharing a file system whose
// locks do: the file always ends with the rows of the newest attempt that
// wrote it. On systems without flock (Windows), the lock, and so the
// fence, hold only between the writes of one Destination value.
// Delete a partition's .fence to let an older ledger's attempts write it
// again (a ledger started afresh numbers attempts from 1).
type Destination struct {
	// Dir is the root folder; it is created when missing. It must not be
	// empty.
	Dir string

	// The folders' locks: flock(2) where the system has it, or the
	// folders locked by this value's writes, with their waiters.
	locks fsdest.Locks
}

var _ tranche.Destination = (*Destination)(nil)

// fenceFile is the name of the file that holds a partition's fence.
const fenceFile = ".fence"

// String returns "files:" and the folder, the destination's name in
// events.
func (d *Destination) String() string { return "files:" + d.Dir }

// Path returns the file that holds the rows of the asset's partition with
// the given key, in column; an empty column and key name the file of an
// unpartitioned asset.
func (d *Destination) Path(asset, column, key string) string {
	if column == "" && key == "" {
		return filepath.Join(d.Dir, fsdest.EscapeName(asset), "data.jsonl")
	}
	return filepath.Join(d.Dir, fsdest.EscapeName(asset), fsdest.EscapeName(column)+"="+fsdest.EscapeName(key), "data.jsonl")
}

// staged is one batch's write, ready to be renamed into place.
type staged struct {
	b          *tranche.Batch
	dir, path  string            // the partition's folder and data file
	tmp, fence string            // the temporary data and fence files ("" for no fence)
	next       destination.Fence // the fence after the write
	keep       bool              // the fence does not change: fence is not renamed
}

// Write writes every batch, replacing the partitions' files, or none of
// them.
func (d *Destination) Write(ctx context.Context, batches []tranche.Batch) (err error) {
	if d.Dir == "" {
		return errors.New("tranche: files.Destination with an empty Dir")
	}
	var done []*staged
	defer func() {
		for _, s := range done {
			if s.tmp != "" {
				os.Remove(s.tmp)
			}
			if s.fence != "" {
				os.Remove(s.fence)
			}
		}
	}()
	for i := range batches {
		b := &batches[i]
		if err := ctx.Err(); err != nil {
			return err
		}
		if b.Asset == "" || b.Column == "" && b.Partition.Granularity.IsValid() {
			return fmt.Errorf("tranche: files destination: batch for asset %q, partition %q needs an asset name and, for a partition, a column", b.Asset, b.Partition.Key())
		}
		s := &staged{b: b, path: d.Path(b.Asset, b.Column, b.Partition.Key())}
		s.dir = filepath.Dir(s.path)
		done = append(done, s)
		if err := fsdest.MkdirSynced(d.Dir, s.dir); err != nil {
			if diskFull(err) {
				return fmt.Errorf("tranche: files destination: %s: %w", fullText, err)
			}
			return fmt.Errorf("tranche: files destination: %w", err)
		}
		if s.tmp, err = writeTemp(s.dir, ".data-", ".jsonl.tmp", func(w *bufio.Writer) error { return encodeRows(w, b) }); err != nil {
			return err
		}
		if b.Token != 0 {
			next := destination.Fence{DAG: b.DAG, Token: b.Token}
			if s.fence, err = writeTemp(s.dir, ".fence-", ".tmp", func(w *bufio.Writer) error { return json.NewEncoder(w).Encode(next) }); err != nil {
				return err
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	unlock, err := d.lock(ctx, done)
	if err != nil {
		return err
	}
	defer unlock()
	// Under the locks: every fence is checked before anything is renamed.
	for _, s := range done {
		if s.b.Token == 0 {
			continue
		}
		old, err := readFence(filepath.Join(s.dir, fenceFile))
		if err != nil {
			return err
		}
		if s.next, err = old.Admit(*s.b); err != nil {
			return err
		}
		s.keep = s.next == old
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	// The fence goes first: a write cut short between the two renames
	// leaves a fence at least as new as the data, which refuses the
	// stale writes it must, never the other way round.
	for i, s := range done {
		if s.fence != "" && !s.keep {
			if err := os.Rename(s.fence, filepath.Join(s.dir, fenceFile)); err != nil {
				done = done[i:]
				return fmt.Errorf("tranche: files destination: %w", err)
			}
			s.fence = ""
		}
		if err := os.Rename(s.tmp, s.path); err != nil {
			done = done[i:]
			return fmt.Errorf("tranche: files destination: %w", err)
		}
		s.tmp = ""
	}
	for _, s := range done {
		if err := fsdest.SyncDir(s.dir); err != nil {
			return fmt.Errorf("tranche: files destination: %w", err)
		}
	}
	return nil
}

// lock takes the lock of every staged partition's folder, in the order of
// their names so that writers of overlapping partitions cannot deadlock,
// waiting while ctx allows, and returns the function that releases them.
func (d *Destination) lock(ctx context.Context, done []*staged) (unlock func(), err error) {
	dirs := make([]string, 0, len(done))
	for _, s := range done {
		dirs = append(dirs, s.dir)
	}
	slices.Sort(dirs)
	dirs = slices.Compact(dirs)
	var held []func()
	unlock = func() {
		for i := len(held) - 1; i >= 0; i-- {
			held[i]()
		}
	}
	for _, dir := range dirs {
		release, err := d.locks.Lock(ctx, dir, false)
		if err != nil {
			unlock()
			return nil, fmt.Errorf("tranche: files destination: locking %s: %w", dir, err)
		}
		held = append(held, release)
	}
	return unlock, nil
}

// readFence reads a partition's fence; a missing file is no fence.
func readFence(path string) (destination.Fence, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return destination.Fence{}, nil
	}
	if err != nil {
		return destination.Fence{}, fmt.Errorf("tranche: files destination: %w", err)
	}
	var f destination.Fence
	if err := json.Unmarshal(data, &f); err != nil || f.Token < 0 {
		return destination.Fence{}, fmt.Errorf("tranche: files destination: fence %s holds %q, not {\"dag\":…,\"token\":N}; delete it to unfence the partition", path, data)
	}
	return f, nil
}

// encodeRows writes a batch's rows as JSON lines.
func encodeRows(w *bufio.Writer, b *tranche.Batch) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for i, r := range b.Rows {
		if err := enc.Encode(r); err != nil {
			where := "unpartitioned"
			if k := b.Partition.Key(); k != "" {
				where = "partition " + k
			}
			return fmt.Errorf("tranche: files destination: asset %q, %s, row %d: %w", b.Asset, where, i, err)
		}
	}
	return nil
}

// fullText explains a write that found the disk full (see diskFull): it
// wrote only temporary files, removed, so that it kept nothing.
const fullText = "the disk is full, or a file reached the process's size limit; nothing of this write was kept, every partition is as it was"

// writeTemp writes a new file in dir named prefix, random hexadecimal
// digits and suffix, with what encode writes, synced to disk, and returns
// its name (see [fsdest.WriteTemp]). encode's errors are returned as they
// are; the file system's are wrapped.
func writeTemp(dir, prefix, suffix string, encode func(*bufio.Writer) error) (string, error) {
	var encErr error
	name, err := fsdest.WriteTemp(dir, prefix, suffix, func(f *os.File) error {
		w := bufio.NewWriter(f)
		if encErr = encode(w); encErr != nil {
			return encErr
		}
		return w.Flush()
	})
	switch {
	case encErr != nil && diskFull(encErr):
		return "", fmt.Errorf("tranche: files destination: %s: %w", fullText, encErr)
	case encErr != nil:
		return "", encErr
	case err != nil && diskFull(err):
		return "", fmt.Errorf("tranche: files destination: %s: %w", fullText, err)
	case err != nil:
		return "", fmt.Errorf("tranche: files destination: %w", err)
	}
	return name, nil
}
