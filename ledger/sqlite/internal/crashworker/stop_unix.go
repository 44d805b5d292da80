//go:build unix && !linux

package main

import (
	"os"
	"syscall"
)

// stopSelf stops the process with SIGSTOP.
func stopSelf() error { return syscall.Kill(os.Getpid(), syscall.SIGSTOP) }
