// Package wait holds the one sleep that a context ends, which the
// runner's retries, the backfill's waits and watches, the file
// destinations' lock polls and the network fault proxy share.
package wait

import (
	"context"
	"time"
)

// Sleep sleeps for d, or until ctx ends, and then returns ctx.Err();
// it returns nil after a whole sleep. A d of zero or less returns at
// once, with ctx.Err().
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
