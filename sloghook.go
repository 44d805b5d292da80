package tranche

import (
	"context"
	"log/slog"
)

// SlogHook returns a hook that logs each event to l at its kind's level
// ([Event.Level]): failures at ERROR, but those of a backfill
// (Event.Trigger "backfill") at WARN, retries and trouble worked around at
// WARN, the lifecycle of runs, assets, backfills and partitions at INFO,
// writes, claims and leases at DEBUG, and log events at their own level. The record's time is the event's; its message is
// the kind, or a log event's own message; its attributes are the event's
// non-zero fields (run, asset, target, attempt, duration, rows, err, ...,
// and id last, as [Event.LogValue] lists them), with kind=log and the
// record's own attributes for log events. A nil l gives a hook that does
// nothing.
//
// ERROR is then what should page someone: a failure of the live schedule
// (triggers "live" and "catch-up"), of a run by hand, or of a run no
// ledger records. A backfill's failures stay in its status, are run
// again by resuming it, and leave the DAG's live data as it was.
func SlogHook(l *slog.Logger) func(context.Context, Event) {
	return func(ctx context.Context, e Event) {
		if l == nil {
			return
		}
		// A kind of this package has its level here; another package's
		// (backfill's, schedule's) came with the event, set where that
		// package defines the kind.
		level, msg := e.Level, string(e.Kind)
		if l, ok := e.Kind.level(); ok {
			level = l
		}
		if level == slog.LevelError && e.Trigger == "backfill" {
			level = slog.LevelWarn
		}
		if e.Kind == KindLog {
			msg = e.Message
		}
		h := l.Handler()
		if !h.Enabled(ctx, level) {
			return
		}
		r := slog.NewRecord(e.Time, level, msg, 0)
		r.AddAttrs(e.attrs(e.Kind == KindLog)...)
		r.AddAttrs(e.Attrs...)
		_ = h.Handle(ctx, r) // a handler's error has nowhere to go; slog.Logger drops it too
	}
}
