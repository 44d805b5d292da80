package tranche

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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
// so rows that JSON cannot encode, or a context canceled before the
// renames, leave every partition as it was, and a process killed during a
// write leaves each partition's old file or its new one, never part of
// one (and, at worst, a temporary file that readers of data.jsonl never
// see).
type FilesDestination struct {
	// Dir is the root folder; it is created when missing. It must not be
	// empty.
	Dir string
}

var _ Destination = (*FilesDestination)(nil)

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

// Write writes every batch, replacing the partitions' files.
func (d *FilesDestination) Write(ctx context.Context, batches []Batch) (err error) {
	if d.Dir == "" {
		return errors.New("tranche: FilesDestination with an empty Dir")
	}
	type staged struct{ tmp, path string }
	var done []staged
	defer func() {
		if err != nil {
			for _, s := range done {
				os.Remove(s.tmp)
			}
		}
	}()
	for _, b := range batches {
		if err := ctx.Err(); err != nil {
			return err
		}
		if b.Asset == "" || b.Column == "" && b.Partition.Granularity.IsValid() {
			return fmt.Errorf("tranche: files destination: batch for asset %q, partition %q needs an asset name and, for a partition, a column", b.Asset, b.Key())
		}
		path := d.Path(b.Asset, b.Column, b.Key())
		tmp, err := writeTemp(path, b)
		if err != nil {
			return err
		}
		done = append(done, staged{tmp, path})
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	for i, s := range done {
		if err := os.Rename(s.tmp, s.path); err != nil {
			done = done[i:]
			return fmt.Errorf("tranche: files destination: %w", err)
		}
	}
	done = nil
	return nil
}

// writeTemp encodes a batch into a new temporary file beside path, synced
// to disk, and returns its name.
func writeTemp(path string, b Batch) (name string, err error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("tranche: files destination: %w", err)
	}
	f, err := os.CreateTemp(dir, ".data-*.jsonl.tmp")
	if err != nil {
		return "", fmt.Errorf("tranche: files destination: %w", err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("tranche: files destination: %w", cerr)
		}
		if err != nil {
			os.Remove(f.Name())
		}
	}()
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for i, r := range b.Rows {
		if err := enc.Encode(r); err != nil {
			where := "unpartitioned"
			if k := b.Key(); k != "" {
				where = "partition " + k
			}
			return "", fmt.Errorf("tranche: files destination: asset %q, %s, row %d: %w", b.Asset, where, i, err)
		}
	}
	if err := w.Flush(); err != nil {
		return "", fmt.Errorf("tranche: files destination: %w", err)
	}
	if err := f.Sync(); err != nil {
		return "", fmt.Errorf("tranche: files destination: %w", err)
	}
	return f.Name(), nil
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
