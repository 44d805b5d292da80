package tranche

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// Asset declares one data asset of a [DAG]: its name, what it depends on,
// how it is partitioned, where its rows go, and the function,
// [Asset.Materialize], that computes them.
//
// An Asset is a plain value; [NewDAG] copies it, so changing an Asset after
// the DAG is built changes nothing.
type Asset struct {
	// Name identifies the asset; it must be unique in a DAG and not empty.
	Name string

	// Deps names the assets this one reads. Each runs, and completes,
	// before this one starts, and its rows reach this one through
	// [Materialization.Input].
	Deps []string

	// Mappings says, by dependency name, which of a partitioned
	// dependency's partitions each partition of this asset reads (see
	// [Mapping]). A dependency without an entry reads the partitions
	// that cover this asset's: the same partition when both share a
	// granularity, as before mappings existed. Every key must name one
	// of Deps.
	Mappings map[string]Mapping

	// Partitioning says how the asset is divided in time. The zero value
	// means unpartitioned: the asset is materialized whole on every run.
	Partitioning Partitioning

	// Destinations receive the asset's rows after each successful call,
	// one [Batch] per partition (see [Destination]). Nil means the rows
	// only feed the assets that depend on this one.
	Destinations []Destination

	// Timeout bounds each attempt, the call and its writes; its context
	// is canceled when it expires. Zero means no limit beyond the run's
	// context.
	Timeout time.Duration

	// Retry says how often and how soon an attempt that failed with a
	// [Retryable] error, or timed out, is tried again. The zero value
	// tries once.
	Retry Retry

	// CodeVersion is the version of the asset's code, as Dagster's
	// code_version: change it when a change of Materialize changes what
	// it writes. A backfill records the versions of its DAG's assets
	// with each attempt; a partition whose latest success ran under
	// other versions is stale, and rerun policy "stale" runs it again.
	// It is no part of the DAG's identity: changing it keeps the
	// history. "" declares none.
	CodeVersion string

	// Materialize computes the asset's rows for the partition or window
	// in m. It must not be nil.
	//
	// It is called once per attempt, with a context canceled when the
	// run fails fast, is canceled, or the attempt times out; it should
	// return promptly then. Returning an error wrapped by [Retryable]
	// asks for another attempt (see [Asset.Retry]); returning [ErrSkip]
	// says there is nothing to materialize. A panic is recovered and
	// fails the asset with a [*PanicError]. A type that holds what the
	// work needs (a database handle) gives its method: Materialize:
	// loader.Materialize.
	Materialize func(ctx context.Context, m *Materialization) ([]Row, error)
}

// partitioned reports whether the asset is partitioned in time.
func (a Asset) partitioned() bool { return a.Partitioning.Granularity.IsValid() }

// Partitioning describes how a partitioned asset divides time.
type Partitioning struct {
	// Granularity is the length of the asset's partitions. The zero value
	// means the asset is not partitioned, and the other fields must be
	// zero too.
	Granularity TimeGranularity

	// Location is the time zone whose calendar the partitions follow. Nil
	// means any: the asset takes the location of the run's partition or
	// window. When set, a run in another location is refused.
	Location *time.Location

	// Column is the row field that holds each row's partition: a
	// time.Time inside the partition, or the partition's key as a string
	// ("2026-01-31"). Destinations split rows by it, so it is required
	// when the asset has destinations.
	Column string

	// AllowWindow allows a run for a whole [TimePartitionWindow], in which
	// the asset is called once with every partition of the window. When
	// false, such a run is refused before anything runs, and the asset
	// must be run one partition at a time.
	AllowWindow bool

	// First is an instant in the asset's first partition, the oldest one
	// with data. A run reaching before that partition is refused with a
	// [*PartitionError]. The zero time means no limit.
	First time.Time
}

// Row is one record an asset produces: column names to values. A
// partitioned asset's rows carry their partition in
// [Partitioning.Column].
type Row map[string]any

// Retry is an asset's retry policy, for errors wrapped with [Retryable]
// and for attempts that exceed [Asset.Timeout]. Other errors, and panics,
// fail the asset at once.
type Retry struct {
	// Attempts is the most attempts made, the first included. Zero and 1
	// both mean a single attempt.
	Attempts int

	// Backoff is the wait before the second attempt; each later wait
	// doubles. Zero means one second.
	Backoff time.Duration

	// MaxBackoff caps the wait. Zero means no cap.
	MaxBackoff time.Duration
}

// delay returns the wait after the given failed attempt (1-based):
// Backoff doubled attempt-1 times, capped at MaxBackoff, and never past
// the largest Duration.
func (r Retry) delay(attempt int) time.Duration {
	d := r.Backoff
	if d <= 0 {
		d = time.Second
	}
	for i := 1; i < attempt && d <= math.MaxInt64/2 && (r.MaxBackoff <= 0 || d < r.MaxBackoff); i++ {
		d *= 2
	}
	if r.MaxBackoff > 0 && d > r.MaxBackoff {
		d = r.MaxBackoff
	}
	return d
}

// Retryable marks err as transient, so that the runner tries the asset
// again as its [Retry] policy allows. errors.Is and errors.As see through
// the mark. Retryable(nil) is nil.
func Retryable(err error) error {
	if err == nil {
		return nil
	}
	return &retryableError{err}
}

type retryableError struct{ err error }

func (e *retryableError) Error() string { return e.err.Error() }
func (e *retryableError) Unwrap() error { return e.err }

// isRetryable reports whether err, or an error it wraps, was marked with
// [Retryable].
func isRetryable(err error) bool {
	var r *retryableError
	return errors.As(err, &r)
}

// Materialization is what one call of [Asset.Materialize] is asked to do: the
// asset, the run, the partition or window, and the rows of the asset's
// dependencies. It is valid only during the call.
type Materialization struct {
	run     *runState
	index   int // the run's node: the asset's position in the DAG, unless the run has a plan
	attempt int
	logger  atomic.Pointer[slog.Logger]
	logSeq  atomic.Int64
}

// Asset returns the name of the asset being materialized.
func (m *Materialization) Asset() string { return m.run.assetOf(m.index).Name }

// RunID returns the id of the run.
func (m *Materialization) RunID() string { return m.run.id }

// Trigger returns why the run runs ([RunOptions.Trigger], which backfills
// and schedulers set to the trigger their ledger records for the claim:
// ledger.Trigger's values), or "" for a run without one, so that an asset
// may, say, read a cheaper source for a backfill than for the live slot.
func (m *Materialization) Trigger() string { return m.run.trigger }

// Partition returns the partition being materialized. It returns an
// error naming the asset when the run is for a window (use
// [Materialization.Window]) or the asset is unpartitioned; an asset that
// returns it fails, which is what an asset made for one partition at a
// time should do then.
func (m *Materialization) Partition() (TimePartition, error) {
	name := m.Asset()
	t := m.run.targetOf(m.index)
	switch {
	case !m.run.assetOf(m.index).partitioned():
		return TimePartition{}, fmt.Errorf("tranche: asset %q is unpartitioned: it has no partition", name)
	case t.isWindow:
		return TimePartition{}, fmt.Errorf("tranche: asset %q is materialized for window %s, not one partition; use Window", name, t.window)
	}
	return t.partition, nil
}

// Batches returns what the runner gives each destination of the asset
// besides the rows: one Batch per partition of the run, oldest first, as
// Destination.Write receives them (one without a partition for an
// unpartitioned asset), each with the asset, its partition column and
// partition, the run's id and, for a run a ledger fences (a backfill's),
// the partition's fencing token and the DAG identity that numbered it;
// Rows is nil. The token is the ledger's token of the claim
// (ledger.Lease.Tokens), which holds the ledger's attempt number at the
// partition (ledger.Attempt.Number; ledger.TokenAttempt reads it back),
// which Event.Attempt is not: that counts the runner's calls of the
// asset (Asset.Retry). An asset that writes by
// itself fences its writes with them as a destination does
// (destination.Fence.Admit), and names its deliveries
// (destination.DeliveryID).
func (m *Materialization) Batches() []Batch {
	a := m.run.assetOf(m.index)
	if !a.partitioned() {
		return []Batch{{Asset: a.Name, RunID: m.run.id}}
	}
	var batches []Batch
	t := m.run.targetOf(m.index)
	if !t.isWindow {
		batches = []Batch{{Asset: a.Name, Column: a.Partitioning.Column, Partition: t.partition}}
	} else {
		batches = make([]Batch, 0, t.window.Len())
		for p := range t.window.OldestFirst() {
			batches = append(batches, Batch{Asset: a.Name, Column: a.Partitioning.Column, Partition: p})
		}
	}
	if p := m.run.plan; p == nil || p.nodes[m.index].own {
		m.run.stamp(batches)
	} else {
		for k := range batches {
			batches[k].RunID = m.run.id
		}
	}
	return batches
}

// Window returns the partitions being materialized as a window: the run's
// window, or a window of the one partition of a single-partition run. It
// returns the empty window for an unpartitioned asset.
func (m *Materialization) Window() TimePartitionWindow {
	if !m.run.assetOf(m.index).partitioned() {
		return TimePartitionWindow{}
	}
	return m.run.targetOf(m.index).asWindow()
}

// Logger returns a logger whose records become [KindLog] events of the
// run, attributed to the asset and attempt; see [Runner.OnEvent]. It
// discards its records when the runner has no hook and no logger. It may
// be called, and used, from several goroutines.
func (m *Materialization) Logger() *slog.Logger {
	if l := m.logger.Load(); l != nil {
		return l
	}
	m.logger.CompareAndSwap(nil, slog.New(&logHandler{m: m}))
	return m.logger.Load()
}

// Input returns the rows of the dependency named dep that the asset
// reads: those of every partition its mapping ([Asset.Mappings]) maps the
// partition or window to, oldest partition first (by default the same
// partition or window, or every finer partition inside it), or the whole
// rows of an unpartitioned dependency. [Materialization.Inputs] gives
// them by partition. It fails, naming both assets, when dep is not one of
// the asset's dependencies.
func (m *Materialization) Input(dep string) ([]Row, error) {
	d := m.run.dag
	for k, j := range d.deps[m.run.assetIndex(m.index)] {
		if d.assets[j].Name != dep {
			continue
		}
		if m.run.plan == nil {
			return m.run.assets[j].rows, nil
		}
		batches, err := m.run.inputs(m.index, k, j)
		if err != nil {
			return nil, err
		}
		if len(batches) == 1 {
			return batches[0].Rows, nil
		}
		var rows []Row
		for _, b := range batches {
			rows = append(rows, b.Rows...)
		}
		return rows, nil
	}
	return nil, m.noDependency(dep)
}

// Inputs returns what [Materialization.Input] does, by partition: one
// [Batch] per partition of dep that the asset reads, oldest first, each
// with the dependency's name, partition column, partition and rows (one
// batch without a partition for an unpartitioned dependency). It fails
// when dep is not a dependency, and when dep ran for a whole window
// without a Partitioning.Column, whose rows cannot be told apart by
// partition.
func (m *Materialization) Inputs(dep string) ([]Batch, error) {
	d := m.run.dag
	for k, j := range d.deps[m.run.assetIndex(m.index)] {
		if d.assets[j].Name != dep {
			continue
		}
		if m.run.plan != nil {
			return m.run.inputs(m.index, k, j)
		}
		a, t, rows := &d.assets[j], &m.run.target, m.run.assets[j].rows
		switch {
		case !a.partitioned():
			return []Batch{{Asset: a.Name, RunID: m.run.id, Rows: rows}}, nil
		case !t.isWindow:
			return []Batch{{Asset: a.Name, Column: a.Partitioning.Column, Partition: t.partition, RunID: m.run.id, Rows: rows}}, nil
		case a.Partitioning.Column == "":
			return nil, fmt.Errorf("tranche: dependency %q ran for window %s without a Partitioning.Column, so its rows cannot be told apart by partition; give it a column, or use Input", a.Name, t.text)
		}
		batches, err := split(a, t, rows)
		for k := range batches {
			batches[k].RunID = m.run.id
		}
		return batches, err
	}
	return nil, m.noDependency(dep)
}

// noDependency is the error of Input and Inputs for a name that is not a
// dependency.
func (m *Materialization) noDependency(dep string) error {
	a := *m.run.assetOf(m.index)
	deps := "none"
	if len(a.Deps) > 0 {
		deps = strings.Join(a.Deps, ", ")
	}
	return fmt.Errorf("tranche: asset %q has no dependency %q; its dependencies: %s", a.Name, dep, deps)
}

// clone returns a copy of a that shares nothing mutable with it.
func (a Asset) clone() Asset {
	a.Deps = slices.Clone(a.Deps)
	a.Mappings = maps.Clone(a.Mappings)
	a.Destinations = slices.Clone(a.Destinations)
	return a
}
