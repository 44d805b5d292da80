package tranche

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// FilesDestination is a [Destination] that writes JSON lines: one file per
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
// older is refused with a [*StaleWriteError], matching [ErrFenced],
// leaving every partition of the write as it was. The check and the
// renames happen under an exclusive lock of each partition's folder
// (flock(2), taken in the order of the folders' names), so that they hold
// between processes, and between machines sharing a file system whose
// locks do: the file always ends with the rows of the newest attempt that
// wrote it. On systems without flock (Windows), the lock, and so the
// fence, hold only between the writes of one FilesDestination value.
// Delete a partition's .fence to let an older ledger's attempts write it
// again (a ledger started afresh numbers attempts from 1).
type FilesDestination struct {
	// Dir is the root folder; it is created when missing. It must not be
	// empty.
	Dir string

	// Where flock(2) is missing, the folders locked by this value's
	// writes, with their waiters.
	mu   sync.Mutex
	held map[string]*heldDir
}

var _ Destination = (*FilesDestination)(nil)

// fenceFile is the name of the file that holds a partition's fence.
const fenceFile = ".fence"

// String returns "files:" and the folder, the destination's name in
// events.
func (d *FilesDestination) String() string { return "files:" + d.Dir }

// Path returns the file that holds the rows of the asset's partition with
// the given key, in column; an empty column and key name the file of an
// unpartitioned asset.
func (d *FilesDestination) Path(asset, column, key string) string {
	if column == "" && key == "" {
		return filepath.Join(d.Dir, escapeName(asset), "data.jsonl")
	}
	return filepath.Join(d.Dir, escapeName(asset), escapeName(column)+"="+escapeName(key), "data.jsonl")
}

// staged is one batch's write, ready to be renamed into place.
type staged struct {
	b          *Batch
	dir, path  string // the partition's folder and data file
	tmp, fence string // the temporary data and fence files ("" for no fence)
	next       fence  // the fence after the write
	keep       bool   // the fence does not change: fence is not renamed
}

// Write writes every batch, replacing the partitions' files, or none of
// them.
func (d *FilesDestination) Write(ctx context.Context, batches []Batch) (err error) {
	if d.Dir == "" {
		return errors.New("tranche: FilesDestination with an empty Dir")
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
			return fmt.Errorf("tranche: files destination: batch for asset %q, partition %q needs an asset name and, for a partition, a column", b.Asset, b.Key())
		}
		s := &staged{b: b, path: d.Path(b.Asset, b.Column, b.Key())}
		s.dir = filepath.Dir(s.path)
		done = append(done, s)
		if err := mkdirSynced(d.Dir, s.dir); err != nil {
			return fmt.Errorf("tranche: files destination: %w", err)
		}
		if s.tmp, err = writeTemp(s.dir, ".data-", ".jsonl.tmp", func(w *bufio.Writer) error { return encodeRows(w, b) }); err != nil {
			return err
		}
		if b.Token != 0 {
			next := fence{DAG: b.DAG, Token: b.Token}
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
		if s.next, err = old.admit(s.b); err != nil {
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
		if err := syncDir(s.dir); err != nil {
			return fmt.Errorf("tranche: files destination: %w", err)
		}
	}
	return nil
}

// lock takes the lock of every staged partition's folder, in the order of
// their names so that writers of overlapping partitions cannot deadlock,
// waiting while ctx allows, and returns the function that releases them.
func (d *FilesDestination) lock(ctx context.Context, done []*staged) (unlock func(), err error) {
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
		release, err := d.lockDir(ctx, dir)
		if err != nil {
			unlock()
			return nil, fmt.Errorf("tranche: files destination: locking %s: %w", dir, err)
		}
		held = append(held, release)
	}
	return unlock, nil
}

// sleepCtx sleeps for d, or until ctx ends with its error.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// readFence reads a partition's fence; a missing file is no fence.
func readFence(path string) (fence, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fence{}, nil
	}
	if err != nil {
		return fence{}, fmt.Errorf("tranche: files destination: %w", err)
	}
	var f fence
	if err := json.Unmarshal(data, &f); err != nil || f.Token < 0 {
		return fence{}, fmt.Errorf("tranche: files destination: fence %s holds %q, not {\"dag\":…,\"token\":N}; delete it to unfence the partition", path, data)
	}
	return f, nil
}

// mkdirSynced creates dir and its missing parents below root as
// [os.MkdirAll] does, and syncs the folder holding each folder it
// creates, so that a new partition's folder survives a power loss with
// the file renamed into it.
func mkdirSynced(root, dir string) error {
	if info, err := os.Stat(dir); err == nil && info.IsDir() {
		return nil
	}
	var missing []string
	for p := dir; ; p = filepath.Dir(p) {
		if _, err := os.Stat(p); err == nil {
			break
		}
		missing = append(missing, p)
		if p == root || filepath.Dir(p) == p {
			break
		}
	}
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return err
	}
	for _, p := range missing {
		if err := syncDir(filepath.Dir(p)); err != nil {
			return err
		}
	}
	return nil
}

// writeTemp writes a new file in dir named prefix, random hexadecimal
// digits and suffix, with what encode writes, synced to disk, and returns
// its name. The file is created 0666 less the umask, as [os.Create]
// creates files ([os.CreateTemp] would make it 0600).
func writeTemp(dir, prefix, suffix string, encode func(*bufio.Writer) error) (_ string, err error) {
	var f *os.File
	var name string
	for range 100 {
		var r [8]byte
		for i := range r {
			r[i] = byte(rand.Uint32())
		}
		name = filepath.Join(dir, prefix+hex.EncodeToString(r[:])+suffix)
		f, err = os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666)
		if !errors.Is(err, fs.ErrExist) {
			break
		}
	}
	if err != nil {
		return "", fmt.Errorf("tranche: files destination: %w", err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("tranche: files destination: %w", cerr)
		}
		if err != nil {
			os.Remove(name)
		}
	}()
	w := bufio.NewWriter(f)
	if err := encode(w); err != nil {
		return "", err
	}
	if err := w.Flush(); err != nil {
		return "", fmt.Errorf("tranche: files destination: %w", err)
	}
	if err := f.Sync(); err != nil {
		return "", fmt.Errorf("tranche: files destination: %w", err)
	}
	return name, nil
}

// encodeRows writes a batch's rows as JSON lines.
func encodeRows(w *bufio.Writer, b *Batch) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for i, r := range b.Rows {
		if err := enc.Encode(r); err != nil {
			where := "unpartitioned"
			if k := b.Key(); k != "" {
				where = "partition " + k
			}
			return fmt.Errorf("tranche: files destination: asset %q, %s, row %d: %w", b.Asset, where, i, err)
		}
	}
	return nil
}

// escapeName makes s safe as one path element on any file system.
func escapeName(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_', c == '+',
			c == '.' && !(i == 0 && (s == "." || s == "..")):
			b.WriteByte(c)
		default:
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		}
	}
	return b.String()
}
