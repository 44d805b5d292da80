package wait

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// TestSleep checks that a sleep lasts its duration, that a canceled
// context ends it at once with its error, and that a sleep of zero
// does not wait.
func TestSleep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		if err := Sleep(t.Context(), time.Minute); err != nil || time.Since(start) != time.Minute {
			t.Errorf("Sleep(1m) = %v after %v; want nil after 1m", err, time.Since(start))
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		start = time.Now()
		if err := Sleep(ctx, time.Hour); !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != time.Second {
			t.Errorf("Sleep(1h) under a 1s deadline = %v after %v; want DeadlineExceeded after 1s", err, time.Since(start))
		}
		start = time.Now()
		if err := Sleep(t.Context(), 0); err != nil || time.Since(start) != 0 {
			t.Errorf("Sleep(0) = %v after %v", err, time.Since(start))
		}
	})
}
