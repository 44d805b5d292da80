package tranchecli

import "time"

// SetClock gives the schedulers of p's schedule subcommand a clock, as
// schedule.Scheduler's Now and After do, so that tests run days of slots
// in seconds.
func SetClock(p *Program, now func() time.Time, after func(time.Duration) <-chan time.Time) {
	p.now, p.after = now, after
}
