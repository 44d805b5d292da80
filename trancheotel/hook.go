package trancheotel

import (
	"context"
	"reflect"
	"runtime/debug"
	"sync"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/schedule"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// ScopeName is the instrumentation scope of the tracer and the meter the
// hook takes from its providers: this package's import path.
const ScopeName = "github.com/tranche-dev/tranche/trancheotel"

// An Option configures [NewHook]. Options are made by the With functions
// of this package.
type Option interface {
	apply(*config)
}

type config struct {
	tp  trace.TracerProvider
	mp  metric.MeterProvider
	dag string
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithTracerProvider sets the provider of the hook's tracer. Without it,
// or with nil, the hook takes otel's global provider
// ([otel.GetTracerProvider]) when [NewHook] is called.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return optionFunc(func(c *config) { c.tp = tp })
}

// WithMeterProvider sets the provider of the hook's meter. Without it, or
// with nil, the hook takes otel's global provider ([otel.GetMeterProvider])
// when [NewHook] is called.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(c *config) { c.mp = mp })
}

// WithDAG names the DAG whose runs the hook sees: in the name of each
// run's span ("run daily-sales"), and as the attribute tranche.dag of the
// run's span and of every measurement. Events do not name their DAG, so a
// program that runs several DAGs gives each its own hook. The name should
// be short and fixed: it is a metric dimension. Without it the attribute
// is left out and runs' spans are named "run".
func WithDAG(name string) Option {
	return optionFunc(func(c *config) { c.dag = name })
}

// NewHook returns a hook, for [tranche.Runner.OnEvent] and
// [backfill.Backfill.OnEvent], that turns events into spans and metrics
// (see the package documentation). Give the same hook to both: the
// runner's events make the spans and the run, asset and write metrics,
// the backfill's the partition counts. It is safe for concurrent use.
//
// A provider that can record nothing is not used: the no-op providers of
// go.opentelemetry.io/otel/trace/noop and go.opentelemetry.io/otel/metric/noop,
// and the global providers while no program has set them (the global
// providers are resolved once, here: install them before calling NewHook,
// as a program's telemetry setup does before it builds its runners). When
// neither provider is used NewHook returns nil, which Runner.OnEvent,
// Backfill.OnEvent and [tranche.Hooks] take for no hook, so that the
// runner does not even build its events.
func NewHook(opts ...Option) func(context.Context, tranche.Event) {
	h := newHook(opts)
	if h == nil {
		return nil
	}
	return h.onEvent
}

// newHook is NewHook's hook, or nil.
func newHook(opts []Option) *hook {
	var c config
	for _, o := range opts {
		o.apply(&c)
	}
	if c.tp == nil {
		c.tp = unlessUnset(otel.GetTracerProvider())
	}
	if c.mp == nil {
		c.mp = unlessUnset(otel.GetMeterProvider())
	}
	h := &hook{dag: c.dag}
	if c.tp != nil && !isNoop(c.tp) {
		h.tracer = c.tp.Tracer(ScopeName, trace.WithInstrumentationVersion(version()))
		h.runs = make(map[string]*runSpans)
	}
	if c.mp != nil && !isNoop(c.mp) {
		h.metrics = newInstruments(c.mp.Meter(ScopeName, metric.WithInstrumentationVersion(version())))
		h.sets = make(map[setKey]metric.MeasurementOption)
	}
	if h.tracer == nil && h.metrics == nil {
		return nil
	}
	if h.dag != "" {
		h.dagAttr = attribute.String(keyDAG, h.dag)
	}
	return h
}

// globalPackage is where otel's global providers live until a program
// sets its own: they delegate to the one set later, and until then record
// nothing.
const globalPackage = "go.opentelemetry.io/otel/internal/global"

// unlessUnset returns p, or nil when p is otel's global delegate that no
// program has set. (otel offers no other way to ask; TestGlobalProviders
// pins it against the otel version this module requires.)
func unlessUnset[P any](p P) P {
	t := reflect.TypeOf(p)
	if t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t != nil && t.PkgPath() == globalPackage {
		var zero P
		return zero
	}
	return p
}

// isNoop reports whether p is one of otel's no-op providers.
func isNoop(p any) bool {
	switch p.(type) {
	case tracenoop.TracerProvider, *tracenoop.TracerProvider, metricnoop.MeterProvider, *metricnoop.MeterProvider:
		return true
	}
	return false
}

var version = sync.OnceValue(func() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	v := ""
	for _, m := range info.Deps {
		if m.Path == ScopeName {
			v = m.Version
		}
	}
	if info.Main.Path == ScopeName {
		v = info.Main.Version
	}
	if v == "(devel)" { // built in the repository: no version
		return ""
	}
	return v
})

// hook holds what a hook made by NewHook needs: its tracer and the spans
// of the runs in progress, and its instruments; a nil tracer or nil
// instruments turn that half off.
type hook struct {
	dag     string
	dagAttr attribute.KeyValue // tranche.dag, when dag is set

	tracer trace.Tracer
	mu     sync.Mutex // guards runs
	// runs holds the spans of every run in progress that is traced, by
	// run id: an entry is added by the run's start and removed by its
	// end, so the map holds no more entries than runs at once.
	runs map[string]*runSpans

	// dags holds, without WithDAG, the DAG name of each backfill in
	// progress, from its events (tranche.Event.DAG), by backfill id,
	// for its runs' spans, whose events do not name the DAG.
	dags sync.Map

	metrics *instruments
	setsMu  sync.RWMutex
	sets    map[setKey]metric.MeasurementOption // the measurements' attribute sets, at most maxSets
}

// onEvent is the hook: each kind to its spans and measurements. Kinds it
// does not know (tranche may add some) become events of their run's span
// if the run is traced, and are otherwise ignored. A step's measurement
// is made in the context of its span when it has one, so that an
// exemplar of the measurement points to the span.
func (h *hook) onEvent(ctx context.Context, e tranche.Event) {
	if h.dag == "" && e.DAG != "" && e.Backfill != "" {
		switch e.Kind {
		case backfill.KindSucceeded, backfill.KindFailed, backfill.KindCanceled:
			h.dags.Delete(e.Backfill)
		default:
			if v, ok := h.dags.Load(e.Backfill); !ok || v.(string) != e.DAG {
				h.dags.Store(e.Backfill, e.DAG)
			}
		}
	}
	switch e.Kind {
	case schedule.KindClaimed, schedule.KindQueue, schedule.KindSucceeded, schedule.KindFailed,
		schedule.KindMissed, schedule.KindSkipped, schedule.KindCanceled,
		schedule.KindWaiting, schedule.KindLate, schedule.KindStale:
		// A scheduler's: measured, and, as kinds the run's span does
		// not know, its events when the run is traced.
		h.metrics.schedule(ctx, h, &e)
	}
	switch e.Kind {
	case tranche.KindRunStarted:
		h.runStarted(ctx, &e)
	case tranche.KindRunSucceeded, tranche.KindRunFailed, tranche.KindRunCanceled:
		h.metrics.run(h.runEnded(ctx, &e), h, &e)
	case tranche.KindAssetStarted:
		if r := h.lockRun(&e); r != nil {
			r.assetStarted(h, &e)
		}
	case tranche.KindAssetRetrying, tranche.KindAssetSucceeded, tranche.KindAssetFailed,
		tranche.KindAssetCanceled, tranche.KindAssetSkipped:
		if r := h.lockRun(&e); r != nil {
			ctx = r.assetEnded(ctx, &e)
		}
		h.metrics.asset(ctx, h, &e)
	case tranche.KindWriteStarted:
		if r := h.lockRun(&e); r != nil {
			r.writeStarted(h, &e)
		}
	case tranche.KindWriteSucceeded, tranche.KindWriteFailed:
		if r := h.lockRun(&e); r != nil {
			ctx = r.writeEnded(ctx, &e)
		}
		h.metrics.write(ctx, h, &e)
	case backfill.KindPartitionSucceeded, backfill.KindPartitionFailed, backfill.KindPartitionHeld, backfill.KindPartitionSkipped:
		h.metrics.partitions(ctx, h, &e)
	case tranche.KindLog, backfill.KindPartitionClaimed, backfill.KindPartitionStarted,
		backfill.KindStarted, backfill.KindSucceeded, backfill.KindFailed, backfill.KindCanceled:
		// Logs belong to a log pipeline (an otelslog handler on
		// Runner.Logger); the backfill's lifecycle is in its partitions'
		// counts and, for a trace, in the caller's span around
		// Backfill.Run.
	default:
		if r := h.lockRun(&e); r != nil {
			r.other(&e)
		}
	}
}
