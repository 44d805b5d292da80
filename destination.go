package tranche

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/tranche-dev/tranche/internal/fencing"
)

// Destination stores the rows of assets, one partition at a time: after
// each successful call of an asset, the runner calls Write once per
// destination of the asset with one [Batch] per partition of the run,
// oldest first, and each batch replaces what the destination held for
// that asset and partition, all the batches or none.
//
// Package github.com/tranche-dev/tranche/destination is its contract, as
// database/sql/driver is for drivers: what a write must do, how fencing
// tokens keep a stale worker's rows out and what lands how often (exactly
// once, newest attempt wins, at least once), and destination.Fence.Admit,
// the one fencing rule every shipped destination calls. Package
// destination/destinationtest checks an implementation.
type Destination interface {
	Write(ctx context.Context, batches []Batch) error
}

// Batch is the rows of one asset for one partition.
type Batch struct {
	Asset     string
	Column    string        // the partition column; empty for an unpartitioned asset
	Partition TimePartition // the zero TimePartition, whose Key is "", for an unpartitioned asset
	Rows      []Row

	// RunID is the id of the run that wrote the batch. A backfill's
	// partition keeps its run id across attempts (see backfill.RunID).
	RunID string

	// Token is the batch's fencing token: the ledger's token of the
	// claim that wrote it (ledger.Lease.Tokens), which grows with every
	// claim of the partition, whatever DAG identity made it, so that a
	// write by an attempt that was taken over, or by a DAG since
	// deployed anew, has a lower token than the newer claim's. A fenced
	// destination keeps the token of each partition's last write and
	// refuses an older one (package destination's rules). Zero when the
	// run is not recorded in a ledger ([Runner.Run]), and for an
	// unpartitioned asset: such a write is not fenced.
	Token int64

	// DAG is the identity of the DAG whose claim made Token (see
	// backfill.DAGIdentity); empty when Token is 0. A fence records it
	// beside the token, to say who wrote the partition last.
	DAG string
}

// MemoryDestination is a [Destination] that keeps rows in memory, by
// asset and partition key. The zero value is ready to use, and it is safe
// for concurrent use. Tests read it back with [MemoryDestination.Rows].
//
// It is a fenced destination by package destination's rules: it keeps the
// fence of each partition's last fenced write, and refuses a stale write
// with an error matching [ErrFenced].
type MemoryDestination struct {
	mu     sync.Mutex
	assets map[string]map[string]*memoryPartition // asset, partition key ("" unpartitioned)
}

type memoryPartition struct {
	rows  []Row
	fence fence
}

var _ Destination = (*MemoryDestination)(nil)

// fence is the token of a partition's last fenced write, and the DAG
// identity that numbered it, as destination.Fence.
type fence struct {
	DAG   string
	Token int64
}

// admit is destination.Fence.Admit, which the root cannot import: the
// same rule, internal/fencing's.
func (f fence) admit(b *Batch) (fence, error) {
	dag, token, ok := fencing.Next(f.DAG, f.Token, b.DAG, b.Token)
	if !ok {
		return f, &StaleWriteError{Asset: b.Asset, Key: b.Partition.Key(), Token: b.Token, Latest: f.Token}
	}
	return fence{DAG: dag, Token: token}, nil
}

// Write replaces each batch's partition with copies of its rows, all the
// batches at once, or none when a batch is older than its partition's last
// write.
func (d *MemoryDestination) Write(ctx context.Context, batches []Batch) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	copies := make([][]Row, len(batches))
	for i, b := range batches {
		copies[i] = make([]Row, len(b.Rows))
		for j, r := range b.Rows {
			copies[i][j] = maps.Clone(r)
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.assets == nil {
		d.assets = make(map[string]map[string]*memoryPartition)
	}
	fences := make([]fence, len(batches))
	for i := range batches {
		b := &batches[i]
		var f fence
		if p := d.assets[b.Asset][b.Partition.Key()]; p != nil {
			f = p.fence
		}
		var err error
		if fences[i], err = f.admit(b); err != nil {
			return err
		}
	}
	for i, b := range batches {
		parts := d.assets[b.Asset]
		if parts == nil {
			parts = make(map[string]*memoryPartition)
			d.assets[b.Asset] = parts
		}
		parts[b.Partition.Key()] = &memoryPartition{rows: copies[i], fence: fences[i]}
	}
	return nil
}

// Rows returns a copy of the rows held for the asset's partition with the
// given key ("" for an unpartitioned asset), and whether the partition was
// ever written. An empty partition that was written returns no rows and
// true.
func (d *MemoryDestination) Rows(asset, key string) ([]Row, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	p, ok := d.assets[asset][key]
	if !ok {
		return nil, false
	}
	out := make([]Row, len(p.rows))
	for i, r := range p.rows {
		out[i] = maps.Clone(r)
	}
	return out, true
}

// Keys returns the keys of the asset's written partitions, sorted.
func (d *MemoryDestination) Keys(asset string) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Sorted(maps.Keys(d.assets[asset]))
}

// String returns "memory", the destination's name in events.
func (d *MemoryDestination) String() string { return "memory" }

// destinationName is a destination's name in events: its String method's
// result, or its type.
func destinationName(d Destination) string {
	if s, ok := d.(fmt.Stringer); ok {
		return s.String()
	}
	return fmt.Sprintf("%T", d)
}

// split checks that every row of a partitioned asset holds one of the
// target's partitions in its column, and groups the rows by partition,
// oldest first, with a batch for every partition of the target.
func split(a *Asset, t *target, rows []Row) ([]Batch, error) {
	if !a.partitioned() {
		return []Batch{{Asset: a.Name, Rows: rows}}, nil
	}

	col := a.Partitioning.Column
	if !t.isWindow {
		p := t.partition
		for i, r := range rows {
			start, err := rowPartition(a, t, i, r)
			if err != nil {
				return nil, err
			}
			if start != p.Start.Unix() {
				return nil, fmt.Errorf("tranche: asset %q: row %d: %s %s is outside partition %s",
					a.Name, i, col, describe(r[col]), p.Key())
			}
		}
		return []Batch{{Asset: a.Name, Column: col, Partition: p, Rows: rows}}, nil
	}
	w := t.window
	batches := make([]Batch, 0, w.Len())
	pos := make(map[int64]int, w.Len())
	for p := range w.OldestFirst() {
		pos[p.Start.Unix()] = len(batches)
		batches = append(batches, Batch{Asset: a.Name, Column: col, Partition: p})
	}
	idx := make([]int, len(rows))
	counts := make([]int, len(batches))
	for i, r := range rows {
		start, err := rowPartition(a, t, i, r)
		if err != nil {
			return nil, err
		}
		k, ok := pos[start]
		if !ok {
			return nil, fmt.Errorf("tranche: asset %q: row %d: %s %s is outside window %s",
				a.Name, i, col, describe(r[col]), w)
		}
		idx[i] = k
		counts[k]++
	}
	for k := range batches {
		batches[k].Rows = make([]Row, 0, counts[k])
	}
	for i, r := range rows {
		batches[idx[i]].Rows = append(batches[idx[i]].Rows, r)
	}
	return batches, nil
}

// rowPartition returns the start (Unix seconds) of the partition a row's
// column names.
func rowPartition(a *Asset, t *target, i int, r Row) (int64, error) {
	col := a.Partitioning.Column
	v, ok := r[col]
	if !ok {
		return 0, fmt.Errorf("tranche: asset %q: row %d has no partition column %q", a.Name, i, col)
	}
	g, loc := t.granularity(), t.location()
	switch v := v.(type) {
	case time.Time:
		if v.IsZero() {
			return 0, fmt.Errorf("tranche: asset %q: row %d: %s is the zero time", a.Name, i, col)
		}
		return PartitionOf(g, v.In(loc)).Start.Unix(), nil
	case string:
		p, err := ParsePartitionKey(g, v, loc)
		if err != nil {
			return 0, fmt.Errorf("tranche: asset %q: row %d: %s %q is not a %v partition key: %w", a.Name, i, col, v, g, err)
		}
		return p.Start.Unix(), nil
	}
	return 0, fmt.Errorf("tranche: asset %q: row %d: %s holds %T %v; want a time.Time or a partition key string",
		a.Name, i, col, v, v)
}

func describe(v any) string {
	switch v := v.(type) {
	case time.Time:
		return v.Format(time.RFC3339Nano)
	case string:
		return fmt.Sprintf("%q", v)
	}
	return fmt.Sprint(v)
}
