package tranche

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// NewProgressReporter returns an event hook that reports a backfill's
// progress on w: on a terminal, one line rewritten in place with counts,
// rate and ETA; otherwise a plain line per finished partition. Give it as
// [Backfill.OnEvent], or combine it with other hooks through [Hooks].
func NewProgressReporter(w io.Writer) func(context.Context, Event) {
	r := &progressReporter{w: w, terminal: isTerminal(w)}
	return r.onEvent
}

type progressReporter struct {
	w        io.Writer
	terminal bool

	mu    sync.Mutex
	start time.Time
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}

func (r *progressReporter) onEvent(_ context.Context, e Event) {
	if e.Progress == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if e.Kind == KindBackfillStarted || r.start.IsZero() {
		r.start = e.Time
	}
	p := e.Progress
	counts := fmt.Sprintf("%d/%d done, %d failed, %d skipped", p.Done, p.Total, p.Failed, p.Skipped)
	if elapsed := e.Time.Sub(r.start); elapsed > 0 && p.Done+p.Failed > 0 {
		counts += fmt.Sprintf(", %.1f/s", float64(p.Done+p.Failed)/elapsed.Seconds())
	}
	if p.ETA > 0 {
		counts += fmt.Sprintf(", ETA %v", approx(p.ETA))
	}
	final := e.Kind == KindBackfillCompleted || e.Kind == KindBackfillFailed || e.Kind == KindBackfillCanceled
	switch {
	case r.terminal && final:
		fmt.Fprintf(r.w, "\r\033[Kbackfill %s %s: %s\n", e.Backfill, kindVerb(e.Kind), counts)
	case r.terminal:
		fmt.Fprintf(r.w, "\r\033[Kbackfill %s: %s", e.Backfill, counts)
	case final:
		fmt.Fprintf(r.w, "backfill %s %s: %s\n", e.Backfill, kindVerb(e.Kind), counts)
	case e.Kind == KindPartitionSucceeded || e.Kind == KindPartitionFailed:
		fmt.Fprintf(r.w, "backfill %s: %s %s (%s)\n", e.Backfill, e.Target, kindVerb(e.Kind), counts)
	}
}

func kindVerb(k Kind) string {
	switch k {
	case KindBackfillCompleted:
		return "completed"
	case KindBackfillFailed, KindPartitionFailed:
		return "failed"
	case KindBackfillCanceled:
		return "canceled"
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
