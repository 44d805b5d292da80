package trancheotel

import (
	"context"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/schedule"
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
	MetricScheduleLag   = "tranche.schedule.lag"
	MetricScheduleSlots = "tranche.schedule.slots"
	MetricQueued        = "tranche.schedule.queued"
	// MetricScheduleUpstream counts the slots of the assets of a DAG of
	// several granularities that the partitions they map to held back
	// or made stale, by tranche.slot.upstream.
	MetricScheduleUpstream = "tranche.schedule.upstream"
)

// durationBuckets are the histograms' bucket boundaries, in seconds: a
// write may take milliseconds, a run hours.
var durationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 1800, 3600}

// instruments are the hook's metrics. A nil *instruments records nothing.
type instruments struct {
	runDuration, assetDuration, writeDuration metric.Float64Histogram
	rows, partitionCount                      metric.Int64Counter
	lag                                       metric.Float64Histogram
	slots, upstream                           metric.Int64Counter
	queued                                    metric.Int64Gauge
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
	in.lag = hist(MetricScheduleLag, "How long after its close a scheduler's slot was claimed to run, by trigger.")
	in.slots, err = m.Int64Counter(MetricScheduleSlots, metric.WithUnit("{slot}"),
		metric.WithDescription("Slots a scheduler ran (succeeded, failed), stopped (canceled) or did not run (missed, skipped), by state."))
	report(err)
	in.upstream, err = m.Int64Counter(MetricScheduleUpstream, metric.WithUnit("{slot}"),
		metric.WithDescription("Slots of assets of a DAG of several granularities that waited for the partitions they map to (waiting), ran at their deadline without them (late), or ran again once one was materialized again after them (stale), by tranche.slot.upstream."))
	report(err)
	in.queued, err = m.Int64Gauge(MetricQueued, metric.WithUnit("{slot}"),
		metric.WithDescription("Due slots a scheduler waits to run: queued behind a running one, or held by another worker."))
	report(err)
	return &in
}

// setKey names the attributes of a measurement: its instrument and the
// values that vary.
type setKey struct {
	instrument         uint8
	dag                string // the event's DAG name, without WithDAG
	asset, destination string
	status             string // tranche.status, tranche.partition.state, tranche.slot.state or tranche.slot.upstream
	trigger            string // tranche.trigger, of a run
}

const (
	runSet uint8 = iota
	assetSet
	writeSet
	rowsSet
	partitionSet
	lagSet
	slotSet
	queueSet
	upstreamSet
)

// maxSets bounds the attribute sets kept: their number is that of the
// DAG's assets and destinations times the statuses, not of runs, and
// past the bound (a DAG of a thousand assets) sets are built per
// measurement.
const maxSets = 4096

// measurement returns the option giving a measurement its attributes,
// built once per set: an attribute set costs a sort and an allocation.
func (h *hook) measurement(k setKey) metric.MeasurementOption {
	h.setsMu.RLock()
	o, ok := h.sets[k]
	h.setsMu.RUnlock()
	if ok {
		return o
	}
	var buf [5]attribute.KeyValue
	kvs := buf[:0]
	switch {
	case h.dag != "":
		kvs = append(kvs, h.dagAttr)
	case k.dag != "":
		kvs = append(kvs, attribute.String(keyDAG, k.dag))
	}
	if k.asset != "" {
		kvs = append(kvs, attribute.String(keyAsset, k.asset))
	}
	if k.destination != "" {
		kvs = append(kvs, attribute.String(keyDestination, k.destination))
	}
	if k.trigger != "" {
		kvs = append(kvs, attribute.String(keyTrigger, k.trigger))
	}
	switch k.instrument {
	case partitionSet:
		kvs = append(kvs, attribute.String(keyPartitionState, k.status))
	case slotSet:
		kvs = append(kvs, attribute.String(keySlotState, k.status))
	case upstreamSet:
		kvs = append(kvs, attribute.String(keySlotUpstream, k.status))
	case rowsSet, lagSet, queueSet:
	default:
		kvs = append(kvs, attribute.String(keyStatus, k.status))
	}
	o = metric.WithAttributeSet(attribute.NewSet(kvs...))
	h.setsMu.Lock()
	if len(h.sets) < maxSets {
		h.sets[k] = o
	}
	h.setsMu.Unlock()
	return o
}

func (m *instruments) run(ctx context.Context, h *hook, e *tranche.Event) {
	if m == nil || !m.runDuration.Enabled(ctx) {
		return
	}
	m.runDuration.Record(ctx, e.Duration.Seconds(), h.measurement(setKey{instrument: runSet, status: status(e.Kind), trigger: e.Trigger}))
}

func (m *instruments) asset(ctx context.Context, h *hook, e *tranche.Event) {
	// A retry is one attempt of the asset's run, which the asset's end
	// measures whole; an asset settled without running took no time.
	if m == nil || e.Kind == tranche.KindAssetRetrying || e.Attempt == 0 || !m.assetDuration.Enabled(ctx) {
		return
	}
	m.assetDuration.Record(ctx, e.Duration.Seconds(), h.measurement(setKey{instrument: assetSet, asset: e.Asset, status: status(e.Kind)}))
}

func (m *instruments) write(ctx context.Context, h *hook, e *tranche.Event) {
	if m == nil {
		return
	}
	if m.writeDuration.Enabled(ctx) {
		m.writeDuration.Record(ctx, e.Duration.Seconds(),
			h.measurement(setKey{instrument: writeSet, asset: e.Asset, destination: e.Destination, status: status(e.Kind)}))
	}
	if e.Kind == tranche.KindWriteSucceeded && e.Rows > 0 && m.rows.Enabled(ctx) {
		m.rows.Add(ctx, int64(e.Rows), h.measurement(setKey{instrument: rowsSet, asset: e.Asset, destination: e.Destination}))
	}
}

func (m *instruments) partitions(ctx context.Context, h *hook, e *tranche.Event) {
	if m == nil || !m.partitionCount.Enabled(ctx) {
		return
	}
	var state string
	switch e.Kind {
	case backfill.KindPartitionSucceeded:
		state = "succeeded"
	case backfill.KindPartitionFailed:
		state = "failed"
	case backfill.KindPartitionHeld:
		state = "held"
	case backfill.KindPartitionSkipped:
		state = "skipped"
	}
	n := 1 // a partition's event
	if !e.Partition.Granularity.IsValid() && e.Window.Len() > 0 {
		n = e.Window.Len() // a chunk's
	}
	// A backfill's events name its DAG (tranche.DAG.Name): without
	// WithDAG, the count takes it.
	k := setKey{instrument: partitionSet, status: state}
	if h.dag == "" {
		k.dag = e.DAG
	}
	m.partitionCount.Add(ctx, int64(n), h.measurement(k))
}

// schedule measures a scheduler's events: the lag of each slot claimed,
// each slot's fate, and the queue. A scheduler's events name its DAG
// (tranche.DAG.Name), which the measurements take without WithDAG.
func (m *instruments) schedule(ctx context.Context, h *hook, e *tranche.Event) {
	if m == nil {
		return
	}
	k := setKey{}
	if h.dag == "" {
		k.dag = e.DAG
	}
	switch e.Kind {
	case schedule.KindClaimed:
		if m.lag.Enabled(ctx) {
			k.instrument, k.trigger = lagSet, e.Trigger
			m.lag.Record(ctx, max(e.Duration, 0).Seconds(), h.measurement(k))
		}
	case schedule.KindQueue:
		for _, a := range e.Attrs {
			if a.Key == "queued" && m.queued.Enabled(ctx) {
				k.instrument = queueSet
				m.queued.Record(ctx, a.Value.Int64(), h.measurement(k))
			}
		}
	case schedule.KindWaiting, schedule.KindLate, schedule.KindStale:
		if m.upstream.Enabled(ctx) {
			k.instrument, k.status = upstreamSet, upstreamStates[e.Kind]
			m.upstream.Add(ctx, 1, h.measurement(k))
		}
	default:
		state, ok := slotStates[e.Kind]
		if ok && m.slots.Enabled(ctx) {
			k.instrument, k.status = slotSet, state
			m.slots.Add(ctx, 1, h.measurement(k))
		}
	}
}

// upstreamStates are the tranche.slot.upstream of the scheduler's
// events of slots that map to partitions of other assets.
var upstreamStates = map[tranche.Kind]string{
	schedule.KindWaiting: "waiting",
	schedule.KindLate:    "late",
	schedule.KindStale:   "stale",
}

// slotStates are the tranche.slot.state of the scheduler's slot events.
var slotStates = map[tranche.Kind]string{
	schedule.KindSucceeded: "succeeded",
	schedule.KindFailed:    "failed",
	schedule.KindMissed:    "missed",
	schedule.KindSkipped:   "skipped",
	schedule.KindCanceled:  "canceled",
}
