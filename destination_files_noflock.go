//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package tranche

import "context"

// heldDir is a folder locked by a write of one FilesDestination, and the
// number of writes holding or waiting for it.
type heldDir struct {
	token chan struct{} // holds a value while the folder is locked
	users int
}

// lockDir locks the folder dir against the other writes of d: without
// flock(2), no lock holds between processes.
func (d *FilesDestination) lockDir(ctx context.Context, dir string) (func(), error) {
	d.mu.Lock()
	if d.held == nil {
		d.held = map[string]*heldDir{}
	}
	h := d.held[dir]
	if h == nil {
		h = &heldDir{token: make(chan struct{}, 1)}
		d.held[dir] = h
	}
	h.users++
	d.mu.Unlock()
	done := func() {
		d.mu.Lock()
		if h.users--; h.users == 0 {
			delete(d.held, dir)
		}
		d.mu.Unlock()
	}
	select {
	case h.token <- struct{}{}:
	case <-ctx.Done():
		done()
		return nil, ctx.Err()
	}
	return func() { <-h.token; done() }, nil
}

// syncDir does nothing: folders cannot be synced here (Windows refuses to
// flush a folder's handle).
func syncDir(string) error { return nil }
