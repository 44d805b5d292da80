package tranche

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/tranche-dev/tranche/internal/idhash"
)

// Kind names what an [Event] reports. Its string value is stable and
// safe to store; new kinds may be added, so hooks should ignore kinds
// they do not know.
type Kind string

// Run, asset, write and log events, emitted by [Runner.Run].
const (
	KindRunStarted   Kind = "run.started"   // before the first asset
	KindRunSucceeded Kind = "run.succeeded" // every asset succeeded or was skipped
	KindRunFailed    Kind = "run.failed"    // an asset failed
	KindRunCanceled  Kind = "run.canceled"  // the run's context was canceled

	KindAssetStarted   Kind = "asset.started"   // once per attempt
	KindAssetRetrying  Kind = "asset.retrying"  // an attempt failed and another follows after Duration
	KindAssetSucceeded Kind = "asset.succeeded" // the asset's rows are written
	KindAssetFailed    Kind = "asset.failed"    // its last attempt failed; Err says why
	KindAssetCanceled  Kind = "asset.canceled"  // it did not finish: the run was canceled, failed fast, or a dependency failed
	KindAssetSkipped   Kind = "asset.skipped"   // it returned ErrSkip, or a dependency was skipped

	KindWriteStarted   Kind = "write.started"   // before a destination's write
	KindWriteSucceeded Kind = "write.succeeded" // the destination holds the asset's partitions
	KindWriteFailed    Kind = "write.failed"    // the destination refused the write

	KindLog Kind = "log" // a record of an asset's logger; see Materialization.Logger
)

// level is the level of events of kind k ([Event.Level]), for each kind
// above but KindLog, whose records carry their own; ok is false for any
// other kind.
func (k Kind) level() (level slog.Level, ok bool) {
	switch k {
	case KindRunFailed, KindAssetFailed, KindWriteFailed:
		return slog.LevelError, true
	case KindAssetRetrying:
		return slog.LevelWarn, true
	case KindRunStarted, KindRunSucceeded, KindRunCanceled,
		KindAssetStarted, KindAssetSucceeded, KindAssetCanceled, KindAssetSkipped:
		return slog.LevelInfo, true
	case KindWriteStarted, KindWriteSucceeded:
		return slog.LevelDebug, true
	}
	return 0, false
}

// Event reports one step of a run or a backfill. Fields that do not apply
// to the kind are zero. Events are values: a hook may keep them.
type Event struct {
	Kind     Kind
	Time     time.Time // when the step happened
	RunID    string    // the run; empty for backfill-wide events
	Backfill string    // the backfill's id, when the run belongs to one
	DAG      string    // the DAG's name ([DAG.Name]), on a backfill's own events
	// Trigger says why the run ran, as its ledger records it
	// (ledger.Trigger): "live" or "catch-up" for a scheduler's slot,
	// "backfill", "manual" for an ordinary recorded run; "" for a run no
	// ledger records. A hook that pages on-call for the live schedule
	// alone acts on failures whose Trigger is "live" or "catch-up".
	Trigger     string
	Asset       string // the asset, for asset, write and log events
	Destination string // the destination, for write events

	// Partition is the run's partition, or for a write event the
	// partition written when there is one. Window is the run's window,
	// for a window run. Target is the partition's key or the window's
	// text form ([TimePartitionWindow.String]); empty for a run without
	// either.
	Partition TimePartition
	Window    TimePartitionWindow
	Target    string

	// Attempt is the runner's count of calls of the asset for asset,
	// write and log events (1 for the first; Asset.Retry calls it
	// again), and the run's attempt for run events (1 unless a backfill
	// retries the run, RunOptions.Attempt). The asset's is not the
	// ledger's attempt number at a partition, nor its fencing token,
	// which Materialization.Batches gives.
	Attempt int

	// Duration is how long the step took: the run, the asset (all its
	// attempts), or the write. For KindAssetRetrying it is the wait before
	// the next attempt.
	Duration time.Duration

	Rows int   // rows written: by the write, the asset, or the whole run
	Err  error // why the step failed, was canceled or skipped

	// Level is the level of the event's kind, decided by the package
	// that defines the kind beside its definition and set when the event
	// is emitted: ERROR for failures, WARN for retries and trouble worked
	// around, INFO for the lifecycle, DEBUG for the fine steps.
	// [SlogHook] logs the event at it. For KindLog it is the record's.
	Level slog.Level

	// Message and Attrs are a log record's, for KindLog.
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
	return idhash.Sum(b, 32)
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
	add("dag", e.DAG)
	add("trigger", e.Trigger)
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
// zones read and sort alike), and, when set, run, backfill, dag, trigger, asset, destination,
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
		DAG         string         `json:"dag,omitempty"`
		Trigger     string         `json:"trigger,omitempty"`
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
		RunID: e.RunID, Backfill: e.Backfill, DAG: e.DAG, Trigger: e.Trigger, Asset: e.Asset, Destination: e.Destination,
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
