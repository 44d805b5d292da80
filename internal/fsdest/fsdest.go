// Package fsdest holds what the destinations that write files share:
// folders created and synced so that they survive a power loss, temporary files written and synced
// before their rename, names escaped for any file system, and the lock
// of a partition's folder (flock(2) where the system has it).
//
// It is used by destination/files (in the root module) and by
// destination/parquet (a module of its own, which may import it: an
// internal package is visible to every package under the repository's
// module path).
package fsdest

import (
	"encoding/hex"
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
)

// MkdirSynced creates dir and its missing parents below root as
// [os.MkdirAll] does, and syncs the folder holding each folder it
// creates, so that a new partition's folder survives a power loss with
// the file renamed into it.
func MkdirSynced(root, dir string) error {
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
		if err := SyncDir(filepath.Dir(p)); err != nil {
			return err
		}
	}
	return nil
}

// WriteTemp creates a new file in dir named prefix, random hexadecimal
// digits and suffix, 0666 less the umask as [os.Create] makes files
// ([os.CreateTemp] would make it 0600), fills it with fill, syncs it to
// disk, and returns its name. On an error the file is removed, and the
// error is fill's as it returned it, or the file system's.
func WriteTemp(dir, prefix, suffix string, fill func(*os.File) error) (_ string, err error) {
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
		return "", err
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = cerr
		}
		if err != nil {
			os.Remove(name)
		}
	}()
	if err := fill(f); err != nil {
		return "", err
	}
	if err := f.Sync(); err != nil {
		return "", err
	}
	return name, nil
}

// EscapeName makes s safe as one path element on any file system: bytes
// other than letters, digits, '-', '_', '.' and '+' become %XX (which
// Hive readers decode), and "." and ".." escape their first dot.
func EscapeName(s string) string {
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
