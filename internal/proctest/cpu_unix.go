//go:build unix

package proctest

import (
	"syscall"
	"time"
)

// CPUTime returns the CPU time this process has used, user and system:
// what a measurement on a loaded machine compares, which other work
// inflates less than the wall clock's.
func CPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
