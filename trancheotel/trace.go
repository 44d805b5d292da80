package trancheotel

import (
	"context"
	"sync"

	"github.com/tranche-dev/tranche"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Attribute keys, of spans and measurements.
const (
	keyDAG            = "tranche.dag"
	keyRunID          = "tranche.run.id"
	keyRunAttempt     = "tranche.run.attempt"
	keyBackfill       = "tranche.backfill.id"
	keyTrigger        = "tranche.trigger"
	keyPartition      = "tranche.partition.key"
	keyWindow         = "tranche.window"
	keyAsset          = "tranche.asset"
	keyAttempt        = "tranche.asset.attempt"
	keyDestination    = "tranche.destination"
	keyRows           = "tranche.rows"
	keyStatus         = "tranche.status"
	keyRetryWait      = "tranche.retry.wait"
	keyError          = "tranche.error"
	keyPartitionState = "tranche.partition.state"
	keySlotState      = "tranche.slot.state"
	keySlotUpstream   = "tranche.slot.upstream"
)

// runSpans is a traced run in progress: its span, and the spans of its
// asset attempts and their writes that have not ended.
type runSpans struct {
	attempt int // the run's attempt
	// prev is an older attempt of the same run id that has not ended
	// either, or nil; guarded by hook.mu. Attempts overlap only when a
	// worker lost its lease to another in the same process and has not
	// noticed yet: events of assets do not say which attempt of the run
	// they belong to, so they go to the newest.
	prev *runSpans

	mu     sync.Mutex // guards what follows: the runner serializes a run's events, but other kinds may come from elsewhere
	done   bool       // the run ended: its spans are ended
	ctx    context.Context
	span   trace.Span
	assets []assetSpan // the attempts in progress, a few at most
}

// assetSpan is an asset attempt in progress.
type assetSpan struct {
	asset   string
	attempt int
	ctx     context.Context
	span    trace.Span
	write   trace.Span // the write in progress, or nil: an attempt writes to its destinations one at a time
}

// runStarted starts the run's span, as a child of the span in ctx if
// there is one (the caller's span around Runner.Run or Backfill.Run),
// and keeps it if it records.
func (h *hook) runStarted(ctx context.Context, e *tranche.Event) {
	if h.tracer == nil {
		return
	}
	var buf [6]attribute.KeyValue
	attrs := append(buf[:0], attribute.String(keyRunID, e.RunID), attribute.Int(keyRunAttempt, e.Attempt))
	if h.dag != "" {
		attrs = append(attrs, h.dagAttr)
	} else if v, ok := h.dags.Load(e.Backfill); ok && e.Backfill != "" {
		attrs = append(attrs, attribute.String(keyDAG, v.(string)))
	}
	if e.Backfill != "" {
		attrs = append(attrs, attribute.String(keyBackfill, e.Backfill))
	}
	if e.Trigger != "" {
		attrs = append(attrs, attribute.String(keyTrigger, e.Trigger))
	}
	switch {
	case e.Partition.Granularity.IsValid():
		attrs = append(attrs, attribute.String(keyPartition, e.Target))
	case e.Target != "":
		attrs = append(attrs, attribute.String(keyWindow, e.Target))
	}
	name := "run"
	if h.dag != "" {
		name = "run " + h.dag
	}
	ctx, span := h.tracer.Start(ctx, name, trace.WithTimestamp(e.Time), trace.WithAttributes(attrs...))
	if !span.IsRecording() {
		// Not sampled: its children would not be either, so the run
		// costs nothing more and takes no entry.
		span.End()
		return
	}
	r := &runSpans{attempt: e.Attempt, ctx: ctx, span: span}
	h.mu.Lock()
	r.prev = h.runs[e.RunID]
	h.runs[e.RunID] = r
	h.mu.Unlock()
}

// runEnded ends the run's span, and any of its spans still open, and
// forgets the run. It returns the context of the run's span, or ctx if the
// run is not traced.
func (h *hook) runEnded(ctx context.Context, e *tranche.Event) context.Context {
	if h.tracer == nil {
		return ctx
	}
	h.mu.Lock()
	var r, next *runSpans // next is the newer attempt whose prev is r
	for p := h.runs[e.RunID]; p != nil; next, p = p, p.prev {
		if p.attempt == e.Attempt {
			r = p
			break
		}
	}
	switch {
	case r == nil:
	case next != nil:
		next.prev = r.prev
	case r.prev != nil:
		h.runs[e.RunID] = r.prev
	default:
		delete(h.runs, e.RunID)
	}
	h.mu.Unlock()
	if r == nil {
		return ctx
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.done = true
	end := trace.WithTimestamp(e.Time)
	for _, a := range r.assets {
		// The runner settles every asset before the run ends, so this
		// is only for events lost on the way; the spans end all the same.
		if a.write != nil {
			a.write.SetStatus(codes.Error, "the run ended during the write")
			a.write.End(end)
		}
		a.span.SetStatus(codes.Error, "the run ended before the asset did")
		a.span.End(end)
	}
	r.span.SetAttributes(attribute.String(keyStatus, status(e.Kind)), attribute.Int(keyRows, e.Rows))
	setError(r.span, e)
	r.span.End(end)
	ctx = r.ctx
	r.assets, r.ctx = nil, nil
	return ctx
}

// lockRun returns the event's run, locked, if it is traced and in
// progress. The method of runSpans the caller then calls unlocks it, in a
// deferred call, so that a span processor that panics (the runner
// recovers a hook's panic) leaves the run usable. (A lookup rather than a
// callback, so that the event stays on the caller's stack.)
func (h *hook) lockRun(e *tranche.Event) *runSpans {
	if h.tracer == nil || e.RunID == "" {
		return nil
	}
	h.mu.Lock()
	r := h.runs[e.RunID]
	h.mu.Unlock()
	if r == nil {
		return nil
	}
	r.mu.Lock()
	if r.done {
		r.mu.Unlock()
		return nil
	}
	return r
}

func (r *runSpans) find(asset string, attempt int) int {
	for i := range r.assets {
		if a := &r.assets[i]; a.attempt == attempt && a.asset == asset {
			return i
		}
	}
	return -1
}

func (r *runSpans) assetStarted(h *hook, e *tranche.Event) {
	defer r.mu.Unlock()
	ctx, span := h.tracer.Start(r.ctx, "asset "+e.Asset, trace.WithTimestamp(e.Time),
		trace.WithAttributes(attribute.String(keyAsset, e.Asset), attribute.Int(keyAttempt, e.Attempt)))
	r.assets = append(r.assets, assetSpan{asset: e.Asset, attempt: e.Attempt, ctx: ctx, span: span})
}

// assetEnded ends the attempt's span, and returns its context (or the
// run's, when the attempt has no span).
func (r *runSpans) assetEnded(_ context.Context, e *tranche.Event) context.Context {
	defer r.mu.Unlock()
	i := r.find(e.Asset, e.Attempt)
	if i < 0 {
		// Settled with no attempt running: canceled or skipped for its
		// dependencies, or canceled while waiting to retry.
		r.event(e)
		return r.ctx
	}
	a := r.assets[i]
	r.assets = append(r.assets[:i], r.assets[i+1:]...)
	end := trace.WithTimestamp(e.Time)
	if a.write != nil {
		a.write.SetStatus(codes.Error, "the attempt ended during the write")
		a.write.End(end)
	}
	var buf [2]attribute.KeyValue
	attrs := append(buf[:0], attribute.String(keyStatus, status(e.Kind)))
	switch e.Kind {
	case tranche.KindAssetSucceeded:
		attrs = append(attrs, attribute.Int(keyRows, e.Rows))
	case tranche.KindAssetRetrying:
		attrs = append(attrs, attribute.String(keyRetryWait, e.Duration.String()))
	}
	a.span.SetAttributes(attrs...)
	setError(a.span, e)
	a.span.End(end)
	return a.ctx
}

func (r *runSpans) writeStarted(h *hook, e *tranche.Event) {
	defer r.mu.Unlock()
	i := r.find(e.Asset, e.Attempt)
	if i < 0 {
		return
	}
	a := &r.assets[i]
	if a.write != nil { // its end was lost
		a.write.SetStatus(codes.Error, "another write started")
		a.write.End(trace.WithTimestamp(e.Time))
	}
	_, a.write = h.tracer.Start(a.ctx, "write "+e.Destination, trace.WithTimestamp(e.Time),
		trace.WithAttributes(attribute.String(keyDestination, e.Destination), attribute.Int(keyRows, e.Rows)))
}

// writeEnded ends the write's span, and returns the context of its
// attempt's span.
func (r *runSpans) writeEnded(ctx context.Context, e *tranche.Event) context.Context {
	defer r.mu.Unlock()
	i := r.find(e.Asset, e.Attempt)
	if i < 0 || r.assets[i].write == nil {
		return ctx
	}
	w := r.assets[i].write
	r.assets[i].write = nil
	w.SetAttributes(attribute.String(keyStatus, status(e.Kind)))
	setError(w, e)
	w.End(trace.WithTimestamp(e.Time))
	return r.assets[i].ctx
}

// other records an event of a kind the hook does not know as an event of
// the run's span.
func (r *runSpans) other(e *tranche.Event) {
	defer r.mu.Unlock()
	r.event(e)
}

// event records an event as an event of the run's span: an asset settled
// without running, or a kind the hook does not know.
func (r *runSpans) event(e *tranche.Event) {
	var buf [3]attribute.KeyValue
	attrs := buf[:0]
	if e.Asset != "" {
		attrs = append(attrs, attribute.String(keyAsset, e.Asset))
	}
	if e.Destination != "" {
		attrs = append(attrs, attribute.String(keyDestination, e.Destination))
	}
	if e.Err != nil {
		attrs = append(attrs, attribute.String(keyError, e.Err.Error()))
	}
	r.span.AddEvent(string(e.Kind), trace.WithTimestamp(e.Time), trace.WithAttributes(attrs...))
}

// setError records a failed or canceled step's error on its span. A skip
// is not an error, nor is a completed step.
func setError(span trace.Span, e *tranche.Event) {
	if e.Err == nil || e.Kind == tranche.KindAssetSkipped {
		return
	}
	span.RecordError(e.Err, trace.WithTimestamp(e.Time))
	span.SetStatus(codes.Error, e.Err.Error())
}

// status names how a step ended, as the attribute tranche.status.
func status(k tranche.Kind) string {
	switch k {
	case tranche.KindRunSucceeded, tranche.KindAssetSucceeded, tranche.KindWriteSucceeded:
		return "succeeded"
	case tranche.KindRunFailed, tranche.KindAssetFailed, tranche.KindWriteFailed:
		return "failed"
	case tranche.KindRunCanceled, tranche.KindAssetCanceled:
		return "canceled"
	case tranche.KindAssetSkipped:
		return "skipped"
	case tranche.KindAssetRetrying:
		return "retrying"
	}
	return string(k)
}
