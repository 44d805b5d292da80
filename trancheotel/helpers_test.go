package trancheotel_test

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/trancheotel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// telemetry is a real SDK tracer and meter provider that keep what they
// record in memory: every span through a SpanRecorder, the metrics
// through a ManualReader.
type telemetry struct {
	spans  *tracetest.SpanRecorder
	reader *sdkmetric.ManualReader
	tp     *sdktrace.TracerProvider
	mp     *sdkmetric.MeterProvider
}

func newTelemetry(opts ...sdktrace.TracerProviderOption) *telemetry {
	tel := &telemetry{spans: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader()}
	tel.tp = sdktrace.NewTracerProvider(append([]sdktrace.TracerProviderOption{sdktrace.WithSpanProcessor(tel.spans)}, opts...)...)
	tel.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(tel.reader))
	return tel
}

// hook returns a hook on tel's providers, and a function counting the
// runs it holds state for.
func (tel *telemetry) hook(opts ...trancheotel.Option) (func(context.Context, tranche.Event), func() int) {
	return trancheotel.NewHookWithRuns(append([]trancheotel.Option{
		trancheotel.WithTracerProvider(tel.tp), trancheotel.WithMeterProvider(tel.mp)}, opts...)...)
}

// ended returns the ended spans, and fails the test if some span started
// and did not end.
func (tel *telemetry) ended(t *testing.T) []sdktrace.ReadOnlySpan {
	t.Helper()
	started, ended := tel.spans.Started(), tel.spans.Ended()
	if len(started) != len(ended) {
		open := map[trace.SpanID]string{}
		for _, s := range started {
			open[s.SpanContext().SpanID()] = s.Name()
		}
		for _, s := range ended {
			delete(open, s.SpanContext().SpanID())
		}
		t.Errorf("%d spans started, %d ended; open: %v", len(started), len(ended), open)
	}
	return ended
}

// tree draws the spans as a tree, one span a line, children indented
// under their parent in the order they started: the name, tranche.status
// and the span status when it is Error.
func tree(t *testing.T, tel *telemetry) string {
	t.Helper()
	spans := tel.ended(t)
	order := map[trace.SpanID]int{}
	for i, s := range tel.spans.Started() {
		order[s.SpanContext().SpanID()] = i
	}
	children := map[trace.SpanID][]sdktrace.ReadOnlySpan{}
	known := map[trace.SpanID]bool{}
	for _, s := range spans {
		known[s.SpanContext().SpanID()] = true
	}
	var roots []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if p := s.Parent(); p.IsValid() && known[p.SpanID()] {
			if p.TraceID() != s.SpanContext().TraceID() {
				t.Errorf("span %s is in trace %s, its parent in %s", s.Name(), s.SpanContext().TraceID(), p.TraceID())
			}
			children[p.SpanID()] = append(children[p.SpanID()], s)
		} else {
			roots = append(roots, s)
		}
	}
	byStart := func(a, b sdktrace.ReadOnlySpan) int {
		return cmp.Compare(order[a.SpanContext().SpanID()], order[b.SpanContext().SpanID()])
	}
	var b strings.Builder
	var draw func(depth int, ss []sdktrace.ReadOnlySpan)
	draw = func(depth int, ss []sdktrace.ReadOnlySpan) {
		slices.SortFunc(ss, byStart)
		for _, s := range ss {
			fmt.Fprintf(&b, "%s%s %s", strings.Repeat("  ", depth), s.Name(), attr(s, "tranche.status"))
			if st := s.Status(); st.Code == codes.Error {
				fmt.Fprintf(&b, " ERROR")
			}
			b.WriteByte('\n')
			draw(depth+1, children[s.SpanContext().SpanID()])
		}
	}
	draw(0, roots)
	return b.String()
}

// attr returns the value of a span's attribute as text, or "" without it.
func attr(s sdktrace.ReadOnlySpan, key string) string {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value.String()
		}
	}
	return ""
}

// attrs returns a span's attributes as a map of text values.
func attrs(s sdktrace.ReadOnlySpan) map[string]string {
	m := map[string]string{}
	for _, kv := range s.Attributes() {
		m[string(kv.Key)] = kv.Value.String()
	}
	return m
}

// named returns the ended spans of that name, in the order they started.
func named(tel *telemetry, name string) []sdktrace.ReadOnlySpan {
	order := map[trace.SpanID]int{}
	for i, s := range tel.spans.Started() {
		order[s.SpanContext().SpanID()] = i
	}
	var out []sdktrace.ReadOnlySpan
	for _, s := range tel.spans.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b sdktrace.ReadOnlySpan) int {
		return cmp.Compare(order[a.SpanContext().SpanID()], order[b.SpanContext().SpanID()])
	})
	return out
}

// eventsOf returns a span's events as "name key=value ..." lines.
func eventsOf(s sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, e := range s.Events() {
		line := e.Name
		for _, kv := range e.Attributes {
			if kv.Key == "exception.stacktrace" {
				continue
			}
			line += " " + string(kv.Key) + "=" + kv.Value.String()
		}
		out = append(out, line)
	}
	return out
}

// point is a data point of a sum or a histogram, by its attributes.
type point struct {
	Value float64 // a sum's value, a histogram's sum
	Count uint64  // a histogram's count; 0 for a sum
}

// collect returns every metric of the hook's scope: name, then the
// attributes ("k=v,k=v") of each point.
func (tel *telemetry) collect(t *testing.T) map[string]map[string]point {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := tel.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]point{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != trancheotel.ScopeName {
			t.Errorf("metrics of scope %q", sm.Scope.Name)
			continue
		}
		for _, m := range sm.Metrics {
			pts := map[string]point{}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				if !d.IsMonotonic {
					t.Errorf("%s is not monotonic", m.Name)
				}
				for _, dp := range d.DataPoints {
					pts[enc(dp.Attributes)] = point{Value: float64(dp.Value)}
				}
			case metricdata.Gauge[int64]:
				for _, dp := range d.DataPoints {
					pts[enc(dp.Attributes)] = point{Value: float64(dp.Value)}
				}
			case metricdata.Histogram[float64]:
				for _, dp := range d.DataPoints {
					pts[enc(dp.Attributes)] = point{Value: dp.Sum, Count: dp.Count}
				}
			default:
				t.Errorf("%s is a %T", m.Name, m.Data)
			}
			out[m.Name] = pts
		}
	}
	return out
}

// exemplarSpans returns the span ids of the exemplars of a histogram's
// points, by the points' attributes.
func (tel *telemetry) exemplarSpans(t *testing.T, name string) map[string][]trace.SpanID {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := tel.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string][]trace.SpanID{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if h, ok := m.Data.(metricdata.Histogram[float64]); ok && m.Name == name {
				for _, dp := range h.DataPoints {
					for _, ex := range dp.Exemplars {
						out[enc(dp.Attributes)] = append(out[enc(dp.Attributes)], trace.SpanID(ex.SpanID))
					}
				}
			}
		}
	}
	return out
}

func enc(s attribute.Set) string { return s.Encoded(attribute.DefaultEncoder()) }

// day returns the UTC day partition of 2026-01-d.
func day(d int) tranche.TimePartition {
	return tranche.PartitionOf(tranche.Day, time.Date(2026, 1, d, 12, 0, 0, 0, time.UTC))
}

// days returns the UTC days 2026-01-from..to.
func days(t *testing.T, from, to int) tranche.TimePartitionWindow {
	t.Helper()
	w, err := tranche.NewTimePartitionWindow(tranche.Day, day(from).Start, day(to).Start)
	if err != nil {
		t.Fatal(err)
	}
	return w
}
