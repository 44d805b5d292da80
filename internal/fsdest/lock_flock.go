//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package fsdest

import (
	"context"
	"errors"
	"os"
	"syscall"
	"time"

	"github.com/tranche-dev/tranche/internal/wait"
)

// CrossProcess says that the locks of [Locks] hold between processes.
const CrossProcess = true

// Locks locks partitions' folders for the writes of one destination. Its
// zero value is ready to use; it must not be copied after first use.
// Where flock(2) exists, Locks holds nothing: the kernel keeps the locks.
type Locks struct{}

// Lock takes an exclusive flock(2) of the file or folder at path, which
// holds between processes (and between the goroutines of one, each
// opening the file anew), creating the file first when create is set. It
// polls rather than blocks, so that a wait ends with ctx, and returns the
// function that releases the lock. A lock file must never be removed or
// replaced, so that every writer locks the same file.
func (*Locks) Lock(ctx context.Context, path string, create bool) (func(), error) {
	flag := os.O_RDONLY
	if create {
		flag = os.O_RDWR | os.O_CREATE
	}
	f, err := os.OpenFile(path, flag, 0o666)
	if err != nil {
		return nil, err
	}
	fd := int(f.Fd())
	backoff := 100 * time.Microsecond
	for {
		err := syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, err
		}
		if err := wait.Sleep(ctx, backoff); err != nil {
			f.Close()
			return nil, err
		}
		backoff = min(2*backoff, 20*time.Millisecond)
	}
	return func() {
		// Closing the last descriptor of the file releases the lock too.
		syscall.Flock(fd, syscall.LOCK_UN)
		f.Close()
	}, nil
}

// SyncDir syncs the folder dir, so that the renames and creations in it
// survive a power loss.
func SyncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
