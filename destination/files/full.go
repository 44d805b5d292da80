//go:build !plan9

package files

import (
	"errors"
	"syscall"
)

// diskFull reports whether err is a write's that found the disk full
// (ENOSPC), or the file at the process's size limit (EFBIG,
// RLIMIT_FSIZE). The destination's error then says so (fullText), and
// still matches syscall.ENOSPC or syscall.EFBIG.
func diskFull(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EFBIG)
}
