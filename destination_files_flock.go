//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package tranche

import (
	"context"
	"errors"
	"os"
	"syscall"
	"time"
)

// heldDir is unused where flock(2) locks folders between processes.
type heldDir struct{}

// lockDir takes an exclusive flock(2) of the folder dir, which holds
// between processes (and between the goroutines of one, each opening the
// folder anew). It polls rather than blocks, so that a wait ends with ctx.
func (d *FilesDestination) lockDir(ctx context.Context, dir string) (func(), error) {
	f, err := os.Open(dir)
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
		// Closing the last descriptor of the folder releases the lock.
		syscall.Flock(fd, syscall.LOCK_UN)
		f.Close()
	}, nil
}

// syncDir syncs the folder dir, so that the renames and creations in it
// survive a power loss.
func syncDir(dir string) error {
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
