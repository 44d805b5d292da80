package trancheotel

import (
	"context"

	"github.com/tranche-dev/tranche"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Instrument names.
const (
	MetricRunDuration   = "tranche.run.duration"
	MetricAssetDuration = "tranche.asset.duration"
	MetricWriteDuration = "tranche.write.duration"
	MetricRowsWritten   = "tranche.write.rows"
	MetricPartitions    = "tranche.backfill.partitions"
)

// durationBuckets are the histograms' bucket boundaries, in seconds: a
// write may take milliseconds, a run hours.
var durationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 1800, 3600}

// instruments are the hook's metrics. A nil *instruments records nothing.
type instruments struct {
	runDuration, assetDuration, writeDuration metric.Float64Histogram
	rows, partitionCount                      metric.Int64Counter
}

func newInstruments(m metric.Meter) *instruments {
	var in instruments
	// An error leaves a working no-op instrument; otel's handler reports
	// it, as the SDK does its own.
	report := func(err error) {
		if err != nil {
			otel.Handle(err)
		}
	}
	hist := func(name, desc string) metric.Float64Histogram {
		h, e := m.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc),
			metric.WithExplicitBucketBoundaries(durationBuckets...))
		report(e)
		return h
	}
	in.runDuration = hist(MetricRunDuration, "How long tranche runs took, by status.")
	in.assetDuration = hist(MetricAssetDuration, "How long tranche assets took, all attempts of a run, by asset and status.")
	in.writeDuration = hist(MetricWriteDuration, "How long writes to destinations took, by asset, destination and status.")
	var err error
	in.rows, err = m.Int64Counter(MetricRowsWritten, metric.WithUnit("{row}"),
		metric.WithDescription("Rows written to destinations, by asset and destination."))
	report(err)
	in.partitionCount, err = m.Int64Counter(MetricPartitions, metric.WithUnit("{partition}"),
		metric.WithDescription("Partitions of backfills that this worker saw succeed, fail, held by another worker, or skipped as done, by state."))
	report(err)
	return &in
}

// attrs returns the measurement option for the attributes given and the
// hook's DAG.
func (h *hook) attrs(kvs ...attribute.KeyValue) metric.MeasurementOption {
	if h.dag != "" {
		kvs = append(kvs, h.dagAttr)
	}
	return metric.WithAttributeSet(attribute.NewSet(kvs...))
}

func (m *instruments) run(ctx context.Context, h *hook, e *tranche.Event) {
	if m == nil || !m.runDuration.Enabled(ctx) {
		return
	}
	m.runDuration.Record(ctx, e.Duration.Seconds(), h.attrs(attribute.String(keyStatus, status(e.Kind))))
}

func (m *instruments) asset(ctx context.Context, h *hook, e *tranche.Event) {
	// A retry is one attempt of the asset's run, which the asset's end
	// measures whole; an asset settled without running took no time.
	if m == nil || e.Kind == tranche.KindAssetRetrying || e.Attempt == 0 || !m.assetDuration.Enabled(ctx) {
		return
	}
	m.assetDuration.Record(ctx, e.Duration.Seconds(),
		h.attrs(attribute.String(keyAsset, e.Asset), attribute.String(keyStatus, status(e.Kind))))
}

func (m *instruments) write(ctx context.Context, h *hook, e *tranche.Event) {
	if m == nil {
		return
	}
	if m.writeDuration.Enabled(ctx) {
		m.writeDuration.Record(ctx, e.Duration.Seconds(), h.attrs(attribute.String(keyAsset, e.Asset),
			attribute.String(keyDestination, e.Destination), attribute.String(keyStatus, status(e.Kind))))
	}
	if e.Kind == tranche.KindWriteCompleted && e.Rows > 0 && m.rows.Enabled(ctx) {
		m.rows.Add(ctx, int64(e.Rows), h.attrs(attribute.String(keyAsset, e.Asset), attribute.String(keyDestination, e.Destination)))
	}
}

func (m *instruments) partitions(ctx context.Context, h *hook, e *tranche.Event) {
	if m == nil || !m.partitionCount.Enabled(ctx) {
		return
	}
	var state string
	switch e.Kind {
	case tranche.KindPartitionSucceeded:
		state = "succeeded"
	case tranche.KindPartitionFailed:
		state = "failed"
	case tranche.KindPartitionHeld:
		state = "held"
	case tranche.KindPartitionSkipped:
		state = "skipped"
	}
	n := 1 // a partition's event
	if !e.Partition.Granularity.IsValid() && e.Window.Len() > 0 {
		n = e.Window.Len() // a chunk's
	}
	m.partitionCount.Add(ctx, int64(n), h.attrs(attribute.String(keyPartitionState, state)))
}
