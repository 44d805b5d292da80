package proctest

import (
	"os"
	"runtime"
	"syscall"
)

// stopSelf stops the process with SIGSTOP sent to the calling thread, so
// that this thread stops before it runs on: a signal sent to the process
// may be taken by another thread, which the scheduler may leave waiting
// while this one goes on with the write it was to stop.
func stopSelf() error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return syscall.Tgkill(os.Getpid(), syscall.Gettid(), syscall.SIGSTOP)
}
