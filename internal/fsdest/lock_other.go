//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package fsdest

import (
	"context"
	"os"
	"sync"
)

// CrossProcess says that the locks of [Locks] hold only between the
// writes of one destination value: without flock(2), another process
// may be writing in a locked folder.
const CrossProcess = false

// Locks locks partitions' folders for the writes of one destination. Its
// zero value is ready to use; it must not be copied after first use.
type Locks struct {
	mu   sync.Mutex
	held map[string]*held
}

// held is a path locked by a write, and the number of writes holding or
// waiting for it.
type held struct {
	token chan struct{} // holds a value while the path is locked
	users int
}

// Lock locks path against the other writes of the same Locks: without
// flock(2), no lock holds between processes. It still opens the file,
// creating it when create is set, so that a folder that cannot be
// written fails here as it does where flock(2) exists.
func (l *Locks) Lock(ctx context.Context, path string, create bool) (func(), error) {
	flag := os.O_RDONLY
	if create {
		flag = os.O_RDWR | os.O_CREATE
	}
	f, err := os.OpenFile(path, flag, 0o666)
	if err != nil {
		return nil, err
	}
	f.Close()
	l.mu.Lock()
	if l.held == nil {
		l.held = map[string]*held{}
	}
	h := l.held[path]
	if h == nil {
		h = &held{token: make(chan struct{}, 1)}
		l.held[path] = h
	}
	h.users++
	l.mu.Unlock()
	done := func() {
		l.mu.Lock()
		if h.users--; h.users == 0 {
			delete(l.held, path)
		}
		l.mu.Unlock()
	}
	select {
	case h.token <- struct{}{}:
	case <-ctx.Done():
		done()
		return nil, ctx.Err()
	}
	return func() { <-h.token; done() }, nil
}

// SyncDir does nothing: folders cannot be synced here (Windows refuses to
// flush a folder's handle).
func SyncDir(string) error { return nil }
