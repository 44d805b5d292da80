//go:build !plan9

package parquet

import (
	"errors"
	"fmt"
	"syscall"
)

// explainFull explains the error of a temporary file's write that found
// the disk full (ENOSPC), or the file at the process's size limit (EFBIG,
// RLIMIT_FSIZE): the write removed its temporary files and renamed
// nothing, so that it kept nothing. The error still matches
// syscall.ENOSPC or syscall.EFBIG.
func explainFull(err error) error {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EFBIG) {
		return fmt.Errorf("the disk is full, or a file reached the process's size limit; nothing of this write was kept, every partition is as it was: %w", err)
	}
	return err
}
