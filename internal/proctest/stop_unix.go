//go:build unix && !linux

package proctest

import (
	"os"
	"syscall"
)

// stopSelf stops the process with SIGSTOP.
func stopSelf() error { return syscall.Kill(os.Getpid(), syscall.SIGSTOP) }
