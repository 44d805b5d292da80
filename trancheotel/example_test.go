package trancheotel_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/trancheotel"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// The hook on a runner, with the SDK's in-memory exporter and a manual
// metric reader standing in for a program's exporters: a run of two
// assets, the second failing, gives a span tree and metrics.
func Example() {
	exporter := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	hook := trancheotel.NewHook(trancheotel.WithTracerProvider(tp), trancheotel.WithMeterProvider(mp),
		trancheotel.WithDAG("daily-sales"))

	dest := new(tranche.MemoryDestination)
	dag, err := tranche.NewDAG(
		tranche.Asset{
			Name:         "orders",
			Partitioning: tranche.Partitioning{Granularity: tranche.Day, Column: "day"},
			Destinations: []tranche.Destination{dest},
			Materialize: func(_ context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
				p, err := m.Partition()
				return []tranche.Row{{"day": p.Key(), "total": 120}, {"day": p.Key(), "total": 80}}, err
			},
		},
		tranche.Asset{
			Name:         "revenue",
			Deps:         []string{"orders"},
			Partitioning: tranche.Partitioning{Granularity: tranche.Day},
			Materialize: func(context.Context, *tranche.Materialization) ([]tranche.Row, error) {
				return nil, errors.New("currency rates missing")
			},
		},
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	runner := tranche.Runner{OnEvent: hook}
	day := tranche.PartitionOf(tranche.Day, time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))
	_, err = runner.Run(context.Background(), dag, day)
	fmt.Println("run:", err)

	// Print the spans as a tree, siblings in the order they ended.
	spans := exporter.GetSpans()
	var show func(parent string, depth int)
	show = func(parent string, depth int) {
		for _, s := range spans {
			if s.Parent.SpanID().String() != parent {
				continue
			}
			line := strings.Repeat("  ", depth) + s.Name
			for _, kv := range s.Attributes {
				if kv.Key == "tranche.partition.key" || kv.Key == "tranche.rows" {
					line += fmt.Sprintf(" %s=%s", kv.Key, kv.Value.String())
				}
			}
			fmt.Println(line, s.Status.Code)
			show(s.SpanContext.SpanID().String(), depth+1)
		}
	}
	show("0000000000000000", 0)

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		fmt.Println(err)
		return
	}
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if sum, ok := m.Data.(metricdata.Sum[int64]); ok {
			fmt.Println(m.Name, sum.DataPoints[0].Value)
		}
	}
	// Output:
	// run: tranche: asset "revenue" failed for 2026-03-01: currency rates missing
	// run daily-sales tranche.partition.key=2026-03-01 tranche.rows=2 Error
	//   asset orders tranche.rows=2 Unset
	//     write memory tranche.rows=2 Unset
	//   asset revenue Error
	// tranche.write.rows 2
}

// Without providers set, NewHook returns nil: the runner then builds no
// events at all. A program sets its providers first (otel.SetTracerProvider
// and otel.SetMeterProvider, or WithTracerProvider and WithMeterProvider).
func ExampleNewHook() {
	hook := trancheotel.NewHook()
	fmt.Println(hook == nil)
	// Output:
	// true
}
