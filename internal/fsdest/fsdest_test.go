package fsdest_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tranche-dev/tranche/internal/fsdest"
)

func TestEscapeName(t *testing.T) {
	for in, want := range map[string]string{
		"daily_totals":           "daily_totals",
		"a b/c":                  "a%20b%2Fc",
		".":                      "%2E",
		"..":                     "%2E.",
		".hidden":                ".hidden",
		"2026-11-01T01:00-05:00": "2026-11-01T01%3A00-05%3A00",
		"x+y%z":                  "x+y%25z",
	} {
		if got := fsdest.EscapeName(in); got != want {
			t.Errorf("EscapeName(%q) = %q, want %q", in, got, want)
		}
	}
}

// A lock excludes the other writes of the same Locks, and of other
// values where flock(2) holds (CrossProcess); a wait ends with its
// context.
func TestLocks(t *testing.T) {
	dir := t.TempDir()
	var l fsdest.Locks
	unlock, err := l.Lock(t.Context(), dir, false)
	if err != nil {
		t.Fatal(err)
	}
	others := []*fsdest.Locks{&l}
	if fsdest.CrossProcess {
		others = append(others, new(fsdest.Locks))
	}
	for _, o := range others {
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		if _, err := o.Lock(ctx, dir, false); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("a second lock of a held folder: %v; want it to wait until its context ends", err)
		}
		cancel()
	}
	got := make(chan error, 1)
	go func() {
		u, err := l.Lock(t.Context(), dir, false)
		if err == nil {
			u()
		}
		got <- err
	}()
	unlock()
	if err := <-got; err != nil {
		t.Errorf("the lock once released: %v", err)
	}

	// A lock file is created when asked for, and a missing one is an
	// error otherwise.
	file := filepath.Join(dir, ".lock")
	if _, err := l.Lock(t.Context(), filepath.Join(dir, "missing"), false); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("locking a missing file: %v; want ErrNotExist", err)
	}
	u, err := l.Lock(t.Context(), file, true)
	if err != nil {
		t.Fatal(err)
	}
	u()
	if _, err := os.Stat(file); err != nil {
		t.Errorf("the lock file: %v", err)
	}
}

// WriteTemp leaves no file when fill fails, and returns fill's error as
// it is.
func TestWriteTemp(t *testing.T) {
	dir := t.TempDir()
	boom := errors.New("boom")
	if _, err := fsdest.WriteTemp(dir, ".x-", ".tmp", func(*os.File) error { return boom }); err != boom {
		t.Errorf("WriteTemp = %v, want fill's error", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("a failed WriteTemp left %v", entries)
	}
	name, err := fsdest.WriteTemp(dir, ".x-", ".tmp", func(f *os.File) error { _, err := f.WriteString("rows"); return err })
	if err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(name); err != nil || string(data) != "rows" || filepath.Dir(name) != dir {
		t.Errorf("WriteTemp wrote %q in %s (%v); want rows in %s", data, filepath.Dir(name), err, dir)
	}
}
