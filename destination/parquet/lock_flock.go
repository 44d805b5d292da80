//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package parquet

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// crossProcess says that the folders' locks hold between processes.
const crossProcess = true

// lockDir takes an exclusive flock(2) of the folder's lock file, which
// holds between processes (and between the goroutines of one, each
// opening the file anew). It polls rather than blocks, so that a wait
// ends with ctx. The lock file is never removed or replaced, so that
// every writer locks the same file.
func (d *Destination) lockDir(ctx context.Context, dir string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(dir, lockFile), os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		return nil, err
	}
	fd := int(f.Fd())
	wait := 100 * time.Microsecond
	for {
		err := syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, err
		}
		if err := sleepCtx(ctx, wait); err != nil {
			f.Close()
			return nil, err
		}
		wait = min(2*wait, 20*time.Millisecond)
	}
	return func() {
		// Closing the last descriptor of the file releases the lock too.
		syscall.Flock(fd, syscall.LOCK_UN)
		f.Close()
	}, nil
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
