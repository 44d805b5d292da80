//go:build !unix

package proctest

import "time"

// CPUTime returns 0: the CPU time of the process is read on Unix
// systems only.
func CPUTime() time.Duration { return 0 }
