// Package wait holds the one sleep that a context ends, which the
// runner's retries, the backfill's waits and watches, the file
// destinations' lock polls and the network fault proxy share, and the
// one retry of a transaction after a transient conflict, which the SQL
// ledger and the SQL destinations share.
package wait

import (
	"context"
	"math/rand/v2"
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

// Backoff is the wait before try+1 of a transaction that met a
// transient conflict (a locked SQLite file, a PostgreSQL serialization
// failure or deadlock, an optimistic DuckDB write): try² milliseconds,
// drawn at random from its upper half, so that the workers that
// collided once do not retry in step and collide again.
func Backoff(try int) time.Duration {
	d := time.Duration(try*try) * time.Millisecond
	return d - rand.N(d/2+1)
}

// Retry calls f until it succeeds, until transient says its failure is
// not worth another try, after tries calls, or once ctx ends, waiting
// Backoff between calls; it returns f's last error (nil on success).
func Retry(ctx context.Context, tries int, transient func(error) bool, f func() error) error {
	for try := 1; ; try++ {
		err := f()
		if err == nil || !transient(err) || try >= tries || ctx.Err() != nil {
			return err
		}
		if Sleep(ctx, Backoff(try)) != nil {
			return err
		}
	}
}
