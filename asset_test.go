package tranche

import (
	"testing"
	"time"
)

func TestRetryDelay(t *testing.T) {
	for _, tc := range []struct {
		retry   Retry
		attempt int
		want    time.Duration
	}{
		{Retry{}, 1, time.Second},
		{Retry{}, 3, 4 * time.Second},
		{Retry{Backoff: 100 * time.Millisecond}, 1, 100 * time.Millisecond},
		{Retry{Backoff: 100 * time.Millisecond}, 4, 800 * time.Millisecond},
		{Retry{Backoff: time.Second, MaxBackoff: 5 * time.Second}, 3, 4 * time.Second},
		{Retry{Backoff: time.Second, MaxBackoff: 5 * time.Second}, 4, 5 * time.Second},
		{Retry{Backoff: time.Second, MaxBackoff: 5 * time.Second}, 400, 5 * time.Second},
		{Retry{Backoff: 10 * time.Second, MaxBackoff: time.Second}, 1, time.Second},
		{Retry{Backoff: time.Hour}, 1000, time.Hour << 21}, // stops doubling before it overflows
	} {
		if got := tc.retry.delay(tc.attempt); got != tc.want {
			t.Errorf("%+v.delay(%d) = %v, want %v", tc.retry, tc.attempt, got, tc.want)
		}
	}
}
