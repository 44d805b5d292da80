//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package parquet

import (
	"context"
	"os"
	"path/filepath"
)

// crossProcess says that the folders' locks hold only between the
// writes of one Destination value: without flock(2), another process
// may be writing in a locked folder.
const crossProcess = false

// lockDir locks the folder against the other writes of d. It still
// creates the lock file, so that a folder that cannot be written fails
// here as it does where flock(2) exists.
func (d *Destination) lockDir(ctx context.Context, dir string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(dir, lockFile), os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		return nil, err
	}
	f.Close()
	d.mu.Lock()
	if d.held == nil {
		d.held = map[string]chan struct{}{}
	}
	ch := d.held[dir]
	if ch == nil {
		ch = make(chan struct{}, 1)
		d.held[dir] = ch
	}
	d.mu.Unlock()
	select {
	case ch <- struct{}{}:
		return func() { <-ch }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
