package backfill

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/tranche-dev/tranche"
)

// NewProgressReporter returns an event hook that reports a backfill's
// progress on w: on a terminal, one line rewritten in place (at most ten
// times a second) with counts, rate and ETA; otherwise a plain line when
// a partition finishes, at most one a second (the first ten failures
// each get theirs), so that a backfill of a million partitions writes a
// line a second rather than a million. The last line says how the
// backfill ended: succeeded, failed, canceled, or unfinished when other
// workers still hold some of its partitions, which the counts show apart
// from the skipped ones ("held elsewhere"). Give it as
// [Backfill.OnEvent], or combine it with other hooks through [tranche.Hooks].
func NewProgressReporter(w io.Writer) func(context.Context, tranche.Event) {
	r := &progressReporter{w: w, terminal: isTerminal(w)}
	return r.onEvent
}

// How often the reporter writes at most: a terminal's line, and plain
// lines.
const (
	terminalEvery = 100 * time.Millisecond
	plainEvery    = time.Second
	plainFailures = 10 // failures listed each on its line, however fast they come
)

type progressReporter struct {
	w        io.Writer
	terminal bool

	mu       sync.Mutex
	start    time.Time
	last     time.Time // when the last line was written, by the events' clock
	failures int       // failures listed
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}

func (r *progressReporter) onEvent(_ context.Context, e tranche.Event) {
	if e.Progress == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if e.Kind == KindStarted || r.start.IsZero() {
		r.start, r.last, r.failures = e.Time, time.Time{}, 0
	}
	final := e.Kind == KindSucceeded || e.Kind == KindFailed || e.Kind == KindCanceled ||
		e.Kind == KindUnfinished
	finished := e.Kind == KindPartitionSucceeded || e.Kind == KindPartitionFailed
	due := r.last.IsZero() || e.Time.Sub(r.last) >= plainEvery
	listed := ""
	switch {
	case final:
	case r.terminal:
		if !r.last.IsZero() && e.Time.Sub(r.last) < terminalEvery {
			return
		}
	case e.Kind == KindPartitionFailed && r.failures < plainFailures:
		if r.failures++; r.failures == plainFailures {
			listed = "; further failures are counted, not listed"
		}
	case !finished || !due:
		return
	}
	r.last = e.Time
	counts := r.counts(e)
	switch {
	case r.terminal && final:
		fmt.Fprintf(r.w, "\r\033[Kbackfill %s %s: %s\n", e.Backfill, kindVerb(e.Kind), counts)
	case r.terminal:
		fmt.Fprintf(r.w, "\r\033[Kbackfill %s: %s", e.Backfill, counts)
	case final:
		fmt.Fprintf(r.w, "backfill %s %s: %s\n", e.Backfill, kindVerb(e.Kind), counts)
	default:
		fmt.Fprintf(r.w, "backfill %s: %s %s (%s)%s\n", e.Backfill, e.Target, kindVerb(e.Kind), counts, listed)
	}
}

// counts formats an event's progress.
func (r *progressReporter) counts(e tranche.Event) string {
	p := e.Progress
	counts := fmt.Sprintf("%d/%d done, %d failed, %d skipped", p.Done, p.Total, p.Failed, p.Skipped)
	if p.Held > 0 {
		counts += fmt.Sprintf(", %d held elsewhere", p.Held)
	}
	if elapsed := e.Time.Sub(r.start); elapsed > 0 && p.Done+p.Failed > 0 {
		counts += fmt.Sprintf(", %.1f partitions/s", float64(p.Done+p.Failed)/elapsed.Seconds())
	}
	if p.ETA > 0 {
		counts += fmt.Sprintf(", ETA %v", approx(p.ETA))
	}
	if e.Kind == KindUnfinished {
		counts += ": not done"
	}
	return counts
}

func kindVerb(k tranche.Kind) string {
	switch k {
	case KindSucceeded:
		return "succeeded"
	case KindFailed, KindPartitionFailed:
		return "failed"
	case KindCanceled:
		return "canceled"
	case KindUnfinished:
		return "unfinished"
	case KindPartitionSucceeded:
		return "succeeded"
	}
	return string(k)
}

// approx rounds d for people: to the second from a second up, to the
// millisecond below, so that a short wait never reads as none ("0s").
func approx(d time.Duration) time.Duration {
	if r := d.Round(time.Second); r > 0 {
		return r
	}
	return max(d.Round(time.Millisecond), time.Millisecond)
}
