package trancheotel_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/trancheotel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// The hook's cost on runs of 10 no-op daily assets, against the same runs
// without a hook. See BENCHMARKS.md, "OpenTelemetry hook".

func noop(context.Context, *tranche.Materialization) ([]tranche.Row, error) { return nil, nil }

func benchDAG(b *testing.B, n int) *tranche.DAG {
	assets := make([]tranche.Asset, n)
	for i := range assets {
		assets[i] = tranche.Asset{
			Name:         fmt.Sprintf("asset%03d", i),
			Partitioning: tranche.Partitioning{Granularity: tranche.Day},
			Materialize:  noop,
		}
	}
	dag, err := tranche.NewDAG(assets...)
	if err != nil {
		b.Fatal(err)
	}
	return dag
}

// discard is a span exporter that drops what it is given: the SDK does
// all its work (sampling, recording, the span processor's export call)
// and nothing is kept.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

// sdkProviders returns real SDK providers: every span sampled and
// exported synchronously to an exporter that drops it, and every
// measurement aggregated by a meter provider with a manual reader.
func sdkProviders(sampler sdktrace.Sampler) []trancheotel.Option {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sampler), sdktrace.WithSyncer(discard{}))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	return []trancheotel.Option{trancheotel.WithTracerProvider(tp), trancheotel.WithMeterProvider(mp), trancheotel.WithDAG("bench")}
}

// BenchmarkHookSideBySide alternates runs of 10 no-op assets without a
// hook and with the OpenTelemetry hook, 100 partitions at a time (in
// turns: without first, then with first), so that both see the same load
// on a shared machine, and reports each side per run and their ratio:
//
//   - sdk: real SDK providers, every run sampled (see sdkProviders);
//   - sdk-ratio-0.1: the same with one trace in ten sampled, a usual
//     production setting;
//   - noop: otel's no-op providers, with which NewHook returns nil.
//
// With an SDK a third side, sdk-direct, runs without a hook and then makes
// the spans and measurements the hook would, directly with the SDK: what
// any hook making them costs at the least.
func BenchmarkHookSideBySide(b *testing.B) {
	w, err := tranche.NewTimePartitionWindow(tranche.Day, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 4, 10, 0, 0, 0, 0, time.UTC))
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		sampler sdktrace.Sampler // nil: the no-op providers
	}{
		{"sdk", sdktrace.AlwaysSample()},
		{"sdk-ratio-0.1", sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0.1))},
		{"noop", nil},
	} {
		b.Run(c.name, func(b *testing.B) {
			dag := benchDAG(b, 10)
			opts := []trancheotel.Option{trancheotel.WithTracerProvider(tracenoop.NewTracerProvider()),
				trancheotel.WithMeterProvider(metricnoop.NewMeterProvider())}
			var direct func(context.Context)
			if c.sampler != nil {
				opts = sdkProviders(c.sampler)
				direct = directTelemetry(b, c.sampler, dag)
			}
			quiet, hooked := tranche.Runner{}, tranche.Runner{OnEvent: trancheotel.NewHook(opts...)}
			ctx := context.Background()
			side := func(r *tranche.Runner, after func(context.Context)) time.Duration {
				t0 := time.Now()
				for p := range w.All() {
					if _, err := r.Run(ctx, dag, p); err != nil {
						b.Fatal(err)
					}
					if after != nil {
						after(ctx)
					}
				}
				return time.Since(t0)
			}
			var without, with, floor time.Duration
			runs := 0
			b.ReportAllocs()
			for b.Loop() {
				if runs/w.Len()%2 == 0 {
					without += side(&quiet, nil)
					with += side(&hooked, nil)
				} else {
					with += side(&hooked, nil)
					without += side(&quiet, nil)
				}
				if direct != nil {
					floor += side(&quiet, direct)
				}
				runs += w.Len()
			}
			b.ReportMetric(float64(without.Nanoseconds())/float64(runs), "nohook-ns/run")
			b.ReportMetric(float64(with.Nanoseconds())/float64(runs), "hook-ns/run")
			b.ReportMetric(float64(with)/float64(without), "hook/nohook")
			if direct != nil {
				b.ReportMetric(float64(floor.Nanoseconds())/float64(runs), "direct-ns/run")
				b.ReportMetric(float64(floor)/float64(without), "direct/nohook")
			}
		})
	}
}

// directTelemetry returns a function that makes, with SDK providers of
// its own, the spans and measurements the hook makes for a run of dag's
// assets: a run span with its four attributes, a child span per asset
// with two, each given two more at its end, and a histogram measurement
// for each in its span's context (so with an exemplar when sampled), with
// attribute sets built beforehand.
func directTelemetry(b *testing.B, sampler sdktrace.Sampler, dag *tranche.DAG) func(context.Context) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sampler), sdktrace.WithSyncer(discard{}))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	tracer, meter := tp.Tracer("direct"), mp.Meter("direct")
	runs, err := meter.Float64Histogram("run")
	if err != nil {
		b.Fatal(err)
	}
	assets, err := meter.Float64Histogram("asset")
	if err != nil {
		b.Fatal(err)
	}
	var names []string
	var sets []metric.MeasurementOption
	for a := range dag.Assets() {
		names = append(names, a.Name)
		sets = append(sets, metric.WithAttributeSet(attribute.NewSet(attribute.String("asset", a.Name), attribute.String("status", "succeeded"))))
	}
	runSet := metric.WithAttributeSet(attribute.NewSet(attribute.String("status", "succeeded")))
	return func(ctx context.Context) {
		now := time.Now()
		rctx, run := tracer.Start(ctx, "run bench", trace.WithTimestamp(now), trace.WithAttributes(
			attribute.String("run.id", "0123456789abcdef0123456789abcdef"), attribute.Int("run.attempt", 1),
			attribute.String("dag", "bench"), attribute.String("partition", "2026-01-01")))
		for i, name := range names {
			actx, span := tracer.Start(rctx, "asset "+name, trace.WithTimestamp(now),
				trace.WithAttributes(attribute.String("asset", name), attribute.Int("attempt", 1)))
			span.SetAttributes(attribute.String("status", "succeeded"), attribute.Int("rows", 0))
			span.End(trace.WithTimestamp(now))
			assets.Record(actx, 0, sets[i])
		}
		run.SetAttributes(attribute.String("status", "succeeded"), attribute.Int("rows", 0))
		run.End(trace.WithTimestamp(now))
		runs.Record(rctx, 0, runSet)
	}
}

// BenchmarkHook measures runs of 10 no-op assets with the hook alone, for
// its allocations.
func BenchmarkHook(b *testing.B) {
	dag := benchDAG(b, 10)
	p := tranche.PartitionOf(tranche.Day, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	for _, c := range []struct {
		name string
		hook func(context.Context, tranche.Event)
	}{
		{"nohook", nil},
		{"sdk", trancheotel.NewHook(sdkProviders(sdktrace.AlwaysSample())...)},
		{"sdk-unsampled", trancheotel.NewHook(sdkProviders(sdktrace.NeverSample())...)},
	} {
		b.Run(c.name, func(b *testing.B) {
			r := tranche.Runner{OnEvent: c.hook}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := r.Run(ctx, dag, p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSDK measures what the SDK charges for the pieces the hook is
// made of, on the providers of sdkProviders: a bare sampled span, a span
// as the hook makes one (two attributes at its start, two at its end, both
// timestamps given), and a histogram measurement in a sampled span's
// context (so with an exemplar), its attribute set built beforehand.
func BenchmarkSDK(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithSyncer(discard{}))
	tracer := tp.Tracer("bench")
	ctx := context.Background()
	b.Run("span-bare", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, span := tracer.Start(ctx, "asset a")
			span.End()
		}
	})
	b.Run("span", func(b *testing.B) {
		now := time.Now()
		b.ReportAllocs()
		for b.Loop() {
			_, span := tracer.Start(ctx, "asset a", trace.WithTimestamp(now),
				trace.WithAttributes(attribute.String("tranche.asset", "a"), attribute.Int("tranche.asset.attempt", 1)))
			span.SetAttributes(attribute.String("tranche.status", "succeeded"), attribute.Int("tranche.rows", 0))
			span.End(trace.WithTimestamp(now))
		}
	})
	b.Run("histogram", func(b *testing.B) {
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
		h, err := mp.Meter("bench").Float64Histogram("d", metric.WithExplicitBucketBoundaries(trancheotel.DurationBuckets...))
		if err != nil {
			b.Fatal(err)
		}
		set := metric.WithAttributeSet(attribute.NewSet(attribute.String("tranche.asset", "a"),
			attribute.String("tranche.status", "succeeded"), attribute.String("tranche.dag", "bench")))
		sctx, span := tracer.Start(ctx, "run")
		defer span.End()
		b.ReportAllocs()
		for b.Loop() {
			h.Record(sctx, 0.5, set)
		}
	})
}
