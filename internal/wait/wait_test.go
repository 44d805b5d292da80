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

// TestBackoff checks that each wait lies in the upper half of try²
// milliseconds and that the waits of one try differ, so that two
// workers that collided do not retry in step.
func TestBackoff(t *testing.T) {
	for try := 1; try <= 8; try++ {
		top := time.Duration(try*try) * time.Millisecond
		seen := map[time.Duration]bool{}
		for range 200 {
			d := Backoff(try)
			if d < top/2 || d > top {
				t.Fatalf("Backoff(%d) = %v; want within [%v, %v]", try, d, top/2, top)
			}
			seen[d] = true
		}
		if len(seen) < 10 {
			t.Errorf("Backoff(%d) took %d values in 200 draws; want them spread", try, len(seen))
		}
	}
}

// TestRetry checks that Retry stops at a success, at a failure that is
// not transient, after its tries, and when the context ends during a
// wait, and returns the last failure each time.
func TestRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		busy, bad := errors.New("busy"), errors.New("bad")
		transient := func(err error) bool { return err == busy }
		calls := 0
		failing := func(n int, last error) func() error {
			calls = 0
			return func() error {
				if calls++; calls < n {
					return busy
				}
				return last
			}
		}
		if err := Retry(t.Context(), 8, transient, failing(3, nil)); err != nil || calls != 3 {
			t.Errorf("a success at the third call: %v after %d calls", err, calls)
		}
		if err := Retry(t.Context(), 8, transient, failing(2, bad)); err != bad || calls != 2 {
			t.Errorf("a lasting failure at the second call: %v after %d calls", err, calls)
		}
		start := time.Now()
		if err := Retry(t.Context(), 4, transient, failing(100, nil)); err != busy || calls != 4 {
			t.Errorf("4 tries of a busy database: %v after %d calls", err, calls)
		}
		if took := time.Since(start); took < (1+4+9)*time.Millisecond/2 || took > (1+4+9)*time.Millisecond {
			t.Errorf("4 tries waited %v in all; want the upper halves of 1, 4 and 9 ms", took)
		}
		ctx, cancel := context.WithCancel(t.Context())
		go func() {
			time.Sleep(5 * time.Millisecond)
			cancel()
		}()
		if err := Retry(ctx, 100, transient, failing(1000, nil)); err != busy || calls >= 100 {
			t.Errorf("a canceled retry: %v after %d calls", err, calls)
		}
	})
}
