package tranche

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"strconv"
	"time"
)

// Kind names what an [Event] reports. Its string value is stable and
// safe to store; new kinds may be added, so hooks should ignore kinds
// they do not know.
type Kind string

// Run, asset, write and log events, emitted by [Runner.Run].
const (
	KindRunStarted   Kind = "run.started"   // before the first asset
	KindRunCompleted Kind = "run.completed" // every asset completed or was skipped
	KindRunFailed    Kind = "run.failed"    // an asset failed
	KindRunCanceled  Kind = "run.canceled"  // the run's context was canceled

	KindAssetStarted   Kind = "asset.started"   // once per attempt
	KindAssetRetrying  Kind = "asset.retrying"  // an attempt failed and another follows after Duration
	KindAssetCompleted Kind = "asset.completed" // the asset's rows are written
	KindAssetFailed    Kind = "asset.failed"    // its last attempt failed; Err says why
	KindAssetCanceled  Kind = "asset.canceled"  // it did not finish: the run was canceled, failed fast, or a dependency failed
	KindAssetSkipped   Kind = "asset.skipped"   // it returned ErrSkip, or a dependency was skipped

	KindWriteStarted   Kind = "write.started"   // before a destination's write
	KindWriteCompleted Kind = "write.completed" // the destination holds the asset's partitions
	KindWriteFailed    Kind = "write.failed"    // the destination refused the write

	KindLog Kind = "log" // a record of an asset's logger; see Materialization.Logger
)

// level is the slog level at which [SlogHook] logs events of kind k:
// failures at ERROR, retries at WARN, lifecycle at INFO and the
// fine-grained steps at DEBUG.
func (k Kind) level() slog.Level {
	switch k {
	// The backfill package's kinds are named by value: the root knows
	// nothing of backfills, but SlogHook logs their events too.
	case KindRunFailed, KindAssetFailed, KindWriteFailed, "backfill.failed", "partition.failed":
		return slog.LevelError
	case KindAssetRetrying, "lease.renew_failed", "lease.renew_slow", "partition.unclaimed", "backfill.unfinished":
		return slog.LevelWarn
	case KindWriteStarted, KindWriteCompleted, "partition.claimed", "partition.held", "partition.started":
		return slog.LevelDebug
	}
	return slog.LevelInfo
}

// Event reports one step of a run or a backfill. Fields that do not apply
// to the kind are zero. Events are values: a hook may keep them.
type Event struct {
	Kind        Kind
	Time        time.Time // when the step happened
	RunID       string    // the run; empty for backfill-wide events
	Backfill    string    // the backfill's id, when the run belongs to one
	Asset       string    // the asset, for asset, write and log events
	Destination string    // the destination, for write events

	// Partition is the run's partition, or for a write event the
	// partition written when there is one. Window is the run's window,
	// for a window run. Target is the partition's key or the window's
	// text form ([TimePartitionWindow.String]); empty for a run without
	// either.
	Partition TimePartition
	Window    TimePartitionWindow
	Target    string

	// Attempt is the asset's attempt for asset, write and log events (1
	// for the first), and the run's attempt for run events (1 unless a
	// backfill retries the run).
	Attempt int

	// Duration is how long the step took: the run, the asset (all its
	// attempts), or the write. For KindAssetRetrying it is the wait before
	// the next attempt.
	Duration time.Duration

	Rows int   // rows written: by the write, the asset, or the whole run
	Err  error // why the step failed, was canceled or skipped

	// Level, Message and Attrs are a log record's, for KindLog.
	Level   slog.Level
	Message string
	Attrs   []slog.Attr

	// Progress counts a backfill's partitions, on backfill and partition
	// events.
	Progress *Progress

	runAttempt int // the run's attempt, on every event of the run
	seq        int // tells apart the log events, and the writes to each destination, of an asset's attempt
}

// Progress counts the partitions of a backfill.
type Progress struct {
	Done    int           // partitions succeeded here so far
	Failed  int           // partitions failed here so far, or whose claims failed
	Skipped int           // partitions skipped: succeeded already (here or, by the end, elsewhere), or left by the rerun policy
	Held    int           // partitions held by other workers, not known to have succeeded
	Total   int           // partitions in the backfill
	ETA     time.Duration // estimated time left; zero when unknown
}

// ID returns a deterministic id of the event, 32 hexadecimal digits: a
// hash of its run id and the run's attempt, backfill, asset, destination,
// target, kind and attempt (and, for log and write events, their order
// within the asset's attempt). The same step of the same run has the same id however
// often its events are delivered, so consumers can drop duplicates.
func (e Event) ID() string {
	var buf [256]byte
	b := buf[:0]
	for _, s := range [...]string{e.RunID, e.Backfill, e.Asset, e.Destination, e.Target, string(e.Kind)} {
		b = strconv.AppendInt(b, int64(len(s)), 10)
		b = append(b, ':')
		b = append(b, s...)
	}
	for _, n := range [...]int{e.runAttempt, e.Attempt, e.seq} {
		b = append(b, ':')
		b = strconv.AppendInt(b, int64(n), 10)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// LogValue implements [slog.LogValuer]: the event's non-zero fields as a
// group, its kind first and its id last.
func (e Event) LogValue() slog.Value {
	return slog.GroupValue(e.attrs(true)...)
}

// attrs returns the event's non-zero fields as attributes.
func (e Event) attrs(kind bool) []slog.Attr {
	attrs := make([]slog.Attr, 0, 12)
	if kind {
		attrs = append(attrs, slog.String("kind", string(e.Kind)))
	}
	add := func(key, v string) {
		if v != "" {
			attrs = append(attrs, slog.String(key, v))
		}
	}
	add("run", e.RunID)
	add("backfill", e.Backfill)
	add("asset", e.Asset)
	add("destination", e.Destination)
	if e.Partition.Granularity.IsValid() && e.Partition.Key() != e.Target {
		add("partition", e.Partition.Key())
	}
	add("target", e.Target)
	if e.Attempt != 0 {
		attrs = append(attrs, slog.Int("attempt", e.Attempt))
	}
	if e.Duration != 0 {
		attrs = append(attrs, slog.Duration("duration", e.Duration))
	}
	if e.Rows != 0 {
		attrs = append(attrs, slog.Int("rows", e.Rows))
	}
	if e.Err != nil {
		attrs = append(attrs, slog.String("err", e.Err.Error()))
	}
	if p := e.Progress; p != nil {
		attrs = append(attrs, slog.Group("progress", slog.Int("done", p.Done), slog.Int("failed", p.Failed),
			slog.Int("skipped", p.Skipped), slog.Int("held", p.Held), slog.Int("total", p.Total), slog.Duration("eta", p.ETA)))
	}
	return append(attrs, slog.String("id", e.ID()))
}

// MarshalJSON encodes the event as one JSON object with stable keys: id,
// kind, time (RFC 3339 in UTC, so that the lines of workers in different
// zones read and sort alike), and, when set, run, backfill, asset, destination,
// partition and target (keys and text forms), attempt, duration_ns, rows,
// error, level, msg, attrs and progress (done, failed, skipped, held,
// total, eta_ns).
func (e Event) MarshalJSON() ([]byte, error) {
	type progress struct {
		Done    int   `json:"done"`
		Failed  int   `json:"failed"`
		Skipped int   `json:"skipped"`
		Held    int   `json:"held"`
		Total   int   `json:"total"`
		ETA     int64 `json:"eta_ns"`
	}
	v := struct {
		ID          string         `json:"id"`
		Kind        Kind           `json:"kind"`
		Time        string         `json:"time"`
		RunID       string         `json:"run,omitempty"`
		Backfill    string         `json:"backfill,omitempty"`
		Asset       string         `json:"asset,omitempty"`
		Destination string         `json:"destination,omitempty"`
		Partition   string         `json:"partition,omitempty"`
		Target      string         `json:"target,omitempty"`
		Attempt     int            `json:"attempt,omitempty"`
		Duration    int64          `json:"duration_ns,omitempty"`
		Rows        int            `json:"rows,omitempty"`
		Err         string         `json:"error,omitempty"`
		Level       string         `json:"level,omitempty"`
		Message     string         `json:"msg,omitempty"`
		Attrs       map[string]any `json:"attrs,omitempty"`
		Progress    *progress      `json:"progress,omitempty"`
	}{
		ID: e.ID(), Kind: e.Kind, Time: e.Time.UTC().Format(time.RFC3339Nano),
		RunID: e.RunID, Backfill: e.Backfill, Asset: e.Asset, Destination: e.Destination,
		Target: e.Target, Attempt: e.Attempt, Duration: int64(e.Duration), Rows: e.Rows,
		Message: e.Message,
	}
	if e.Partition.Granularity.IsValid() && e.Partition.Key() != e.Target {
		v.Partition = e.Partition.Key()
	}
	if e.Err != nil {
		v.Err = e.Err.Error()
	}
	if e.Kind == KindLog {
		v.Level = e.Level.String()
	}
	if len(e.Attrs) > 0 {
		v.Attrs = attrMap(e.Attrs)
	}
	if p := e.Progress; p != nil {
		v.Progress = &progress{p.Done, p.Failed, p.Skipped, p.Held, p.Total, int64(p.ETA)}
	}
	return json.Marshal(v)
}

// attrMap turns attributes into JSON-friendly maps, groups nested.
func attrMap(attrs []slog.Attr) map[string]any {
	m := make(map[string]any, len(attrs))
	for _, a := range attrs {
		v := a.Value.Resolve()
		switch v.Kind() {
		case slog.KindGroup:
			m[a.Key] = attrMap(v.Group())
		case slog.KindDuration:
			m[a.Key] = int64(v.Duration())
		case slog.KindTime:
			m[a.Key] = v.Time().Format(time.RFC3339Nano)
		default:
			x := v.Any()
			if err, ok := x.(error); ok {
				x = err.Error()
			} else if _, err := json.Marshal(x); err != nil {
				x = fmt.Sprint(x)
			}
			m[a.Key] = x
		}
	}
	return m
}

// SlogHook returns a hook that logs each event to l: failures at ERROR,
// retries at WARN, the lifecycle of runs, assets, backfills and
// partitions at INFO, writes, claims and leases at DEBUG, and log events
// at their own level. The record's time is the event's; its message is
// the kind, or a log event's own message; its attributes are the event's
// non-zero fields (run, asset, target, attempt, duration, rows, err, ...,
// and id last, as [Event.LogValue] lists them), with kind=log and the
// record's own attributes for log events. A nil l gives a hook that does
// nothing.
func SlogHook(l *slog.Logger) func(context.Context, Event) {
	return func(ctx context.Context, e Event) {
		if l == nil {
			return
		}
		level, msg := e.Kind.level(), string(e.Kind)
		if e.Kind == KindLog {
			level, msg = e.Level, e.Message
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

// Hooks returns a hook that calls each non-nil hook in turn with every
// event, as slog.NewMultiHandler fans out records. It copies hooks, so
// that a later change to the caller's slice changes nothing. If a hook
// panics, the others are still called, and then the first panic is
// raised again as a [*PanicError] holding the value and the stack of the
// hook that panicked, for the runner to report in [Result.HookErr].
func Hooks(hooks ...func(context.Context, Event)) func(context.Context, Event) {
	hooks = slices.Clone(hooks)
	return func(ctx context.Context, e Event) {
		var first *PanicError
		for i, h := range hooks {
			if h == nil {
				continue
			}
			func() {
				defer func() {
					if v := recover(); v != nil && first == nil {
						// The stack is taken here, before the panic
						// unwinds, so that it holds the hook's frames.
						first = &PanicError{Value: v, Stack: debug.Stack(), Where: fmt.Sprintf("hook %d of Hooks", i)}
					}
				}()
				h(ctx, e)
			}()
		}
		if first != nil {
			panic(first)
		}
	}
}

// hookPanic returns the error of a hook's panic with value v, recovered
// where the runner called it: the value and stack of a [*PanicError]
// that [Hooks] raised again, or v and the stack here.
func hookPanic(v any, where string) *PanicError {
	if pe, ok := v.(*PanicError); ok {
		return &PanicError{Value: pe.Value, Stack: pe.Stack, Where: where + ", " + pe.Where}
	}
	return &PanicError{Value: v, Stack: debug.Stack(), Where: where}
}

// logHandler is the slog.Handler behind Materialization.Logger: each
// record becomes a KindLog event of the run.
type logHandler struct {
	m    *Materialization
	goas []groupOrAttrs
}

type groupOrAttrs struct {
	group string
	attrs []slog.Attr
}

func (h *logHandler) Enabled(context.Context, slog.Level) bool { return h.m.run.hasHooks() }

func (h *logHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	if len(attrs) == 0 {
		return h
	}
	return h.with(groupOrAttrs{attrs: attrs})
}

func (h *logHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	return h.with(groupOrAttrs{group: name})
}

func (h *logHandler) with(g groupOrAttrs) *logHandler {
	h2 := *h
	h2.goas = append(h.goas[:len(h.goas):len(h.goas)], g)
	return &h2
}

func (h *logHandler) Handle(_ context.Context, r slog.Record) error {
	attrs := make([]slog.Attr, 0, r.NumAttrs())
	r.Attrs(func(a slog.Attr) bool {
		attrs = appendAttr(attrs, a)
		return true
	})
	for i := len(h.goas) - 1; i >= 0; i-- {
		g := h.goas[i]
		if g.group == "" {
			pre := make([]slog.Attr, 0, len(g.attrs)+len(attrs))
			for _, a := range g.attrs {
				pre = appendAttr(pre, a)
			}
			attrs = append(pre, attrs...)
		} else if len(attrs) > 0 {
			attrs = []slog.Attr{{Key: g.group, Value: slog.GroupValue(attrs...)}}
		}
	}
	m := h.m
	m.run.emit(&Event{
		Kind: KindLog, Time: r.Time, Asset: m.Asset(), Attempt: m.attempt,
		Level: r.Level, Message: r.Message, Attrs: attrs, seq: int(m.logSeq.Add(1)),
	})
	return nil
}

// appendAttr appends a resolved, as slog.Handler asks: LogValuers
// resolved, empty attributes dropped, groups without a key inlined and
// empty groups dropped.
func appendAttr(attrs []slog.Attr, a slog.Attr) []slog.Attr {
	a.Value = a.Value.Resolve()
	if a.Equal(slog.Attr{}) {
		return attrs
	}
	if a.Value.Kind() != slog.KindGroup {
		return append(attrs, a)
	}
	var sub []slog.Attr
	for _, g := range a.Value.Group() {
		sub = appendAttr(sub, g)
	}
	switch {
	case len(sub) == 0:
		return attrs
	case a.Key == "":
		return append(attrs, sub...)
	}
	return append(attrs, slog.Attr{Key: a.Key, Value: slog.GroupValue(sub...)})
}
