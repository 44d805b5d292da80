package tranchecli_test

import (
	"context"
	"strings"
	"testing"
	"time"
)

// FuzzMain gives Main any command line: it never panics, exits 0, 1 or
// 2, and a command line it calls bad usage (2) has written nothing.
func FuzzMain(f *testing.F) {
	for _, seed := range []string{
		"ls",
		"ls --format json",
		"status x --watch --interval 1ms",
		"history x 2026-01-01",
		"cancel x --stop-running",
		"resume x --max-concurrency 0",
		"plan events --from 2026-01-01T00:00:00Z --to 2026-01-08T00:00:00Z",
		"plan events --from 2026-01-01 --to 2026-01-08",
		"run events --yes --from 2026-01-01T00:00:00Z --to 2026-01-03T00:00:00Z --chunk 2",
		"run events --from 2026-01-01T00:00:00Z --to 2026-01-03T00:00:00Z",
		"run nightly --yes --slot 2026-01-05T02:00:00Z --slot 2026-01-05T03:00:00Z",
		"run nightly --yes --from 2026-01-01 --to 2026-01-02 --rerun all --on-failure continue",
		"plan nightly --format json --from 2026-01-01T02:00:00+01:00 --order oldest-first",
		"run events --dry-run --from 2026-01-01T00:00:00+05:45 --to 2026-01-02T00:00:00+05:45",
		"help run",
		"-- run",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, line string) {
		h := newHarness(t)
		// A window of many partitions runs until the deadline: bound
		// the work of one input.
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		code := h.p.Main(ctx, strings.Fields(line))
		switch code {
		case 0, 1:
		case 2:
			if n := h.backfills(); n != 0 {
				t.Errorf("%q: bad usage, and %d backfills recorded", line, n)
			}
		default:
			t.Errorf("%q: exit %d", line, code)
		}
	})
}
