package backfill

import (
	"context"
	"errors"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/internal/hookcall"
	"github.com/tranche-dev/tranche/ledger"
)

func (x *execution) emit(ctx context.Context, e tranche.Event) {
	if x.b.OnEvent == nil {
		return
	}
	e.Time = x.b.now()
	e.Backfill, e.DAG, e.Trigger = x.cfg.id, x.b.DAG.Name, string(ledger.TriggerBackfill)
	e.Window = x.cfg.window
	e.Target = x.cfg.window.String()
	e.Progress = x.progress()
	e.Level, _ = kindLevel(e.Kind)
	x.deliver(ctx, e)
}

func (x *execution) emitJob(ctx context.Context, kind tranche.Kind, u *job, err error, more ...func(*tranche.Event)) {
	if x.b.OnEvent == nil {
		return
	}
	e := tranche.Event{Kind: kind, Time: x.b.now(), Backfill: x.cfg.id, DAG: x.b.DAG.Name, Trigger: string(ledger.TriggerBackfill), Err: err, Progress: x.progress(),
		RunID: x.runID(u), Target: u.window.String()}
	if len(u.partitions) == 1 {
		e.Partition, e.Target = u.partitions[0], u.partitions[0].Key()
	} else {
		e.Window = u.window
	}
	e.Level, _ = kindLevel(kind)
	for _, f := range more {
		f(&e)
	}
	x.deliver(ctx, e)
}

// deliver calls the hook, one call at a time, recovering a panic so that
// a broken hook cannot take a backfill down half-recorded; the report's
// HookErr keeps it.
func (x *execution) deliver(ctx context.Context, e tranche.Event) {
	err := hookcall.Call[tranche.PanicError](&x.hookMu, context.WithoutCancel(ctx), x.b.OnEvent, e, func() string {
		return "backfill event hook on " + string(e.Kind)
	})
	if err != nil {
		x.count(func(r *Report) { r.HookErr = errors.Join(r.HookErr, err) })
	}
}
