package tranche

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"
)

// Destination stores the rows of assets, one partition at a time.
//
// After each successful call of an asset, the runner calls Write once per
// destination of the asset, with one [Batch] per partition of the run,
// oldest first: one batch for a single-partition run, one for each
// partition of a window, including the partitions with no rows, and one
// batch without a partition for an unpartitioned asset. Each batch
// replaces what the destination held for that asset and partition (for an
// unpartitioned asset, all it held), so running the same partition again
// never duplicates rows.
//
// The runner has already checked that every row holds its partition; a
// destination checks that the rows suit it (their shape, their types) and
// should check all the batches before storing any, so that a refused
// write leaves every partition as it was. Write may be called from
// several goroutines at once, for different assets or runs. Events name a
// destination by its String method when it has one ([fmt.Stringer]), and
// by its type otherwise.
//
// # What lands, and how often
//
// A backfill claims each partition in its ledger before it runs it, and
// a worker writes only while its lease holds by its own clock. That alone
// cannot make a write land exactly once: a worker may be paused (a long
// garbage collection, a frozen machine) after its last check and write
// once it resumes, after another worker took the partition over; and a
// worker killed between its write and the ledger's record of it leaves a
// partition that the next attempt writes again. Every batch therefore
// carries a fencing token ([Batch.Token]): the ledger's number of the
// attempt that wrote it, which grows with each attempt at the partition.
// What a destination guarantees depends on what it does with it:
//
//   - Transactional destinations sharing the ledger's database (the SQL
//     destinations of their own modules, given the ledger's
//     transaction) commit the rows, the token check and the ledger's
//     record of success in one transaction: each partition lands exactly
//     once, and its data and its state in the ledger never disagree.
//   - Fenced replacing destinations ([MemoryDestination],
//     the files destination of package destination/files, and a SQL
//     destination with a separate ledger)
//     replace a partition only with a write whose token is at least the
//     one that last wrote it, checked atomically with the write, and
//     refuse an older one with an error matching [ErrFenced]. The newest
//     attempt wins: a stale worker's rows never replace a newer
//     attempt's, and a partition written twice holds one attempt's rows.
//     The ledger may still record an attempt failed whose rows landed
//     (the worker died before recording it); the next attempt replaces
//     them.
//   - Other destinations (appending ones, queues, APIs) receive each
//     attempt's batches at least once, and more than once when a worker
//     dies between its write and its record: deduplicate by
//     [Batch.DeliveryID], the same for every delivery of one attempt's
//     write, and refuse tokens older than the newest seen, per partition,
//     to keep a stalled worker's writes out.
//
// A batch of a plain [Runner.Run], outside any ledger, has token 0: it is
// not fenced. Fenced destinations let it replace its partition whatever
// token wrote it last, and keep that token, so that a stale attempt is
// still refused after it.
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

	// Token is the batch's fencing token: the ledger's number of the
	// attempt that wrote it, which grows with every attempt at the
	// partition, so that a write by an attempt that was taken over has a
	// lower token than the write of the attempt that took it over. A
	// destination that stores the token of each partition's last write
	// refuses an older one (see [Destination]). Zero when the run is not
	// recorded in a ledger ([Runner.Run]), and for an unpartitioned
	// asset: such a write is not fenced.
	Token int64

	// DAG is the identity of the DAG whose ledger history numbered Token
	// (see backfill.DAGIdentity); empty when Token is 0. The tokens of one
	// partition are comparable only within one DAG identity, since a
	// ledger numbers the attempts of each DAG apart: when a DAG changes
	// (an asset added, say) its attempts start again from 1. A fenced
	// destination compares a write's token only with a token stored under
	// the same DAG identity, and lets a write of another identity replace
	// the partition, as the ledger lets both DAGs run it.
	DAG string
}

// DeliveryID returns an id of the batch that is the same for every
// delivery of the same attempt's write, and differs between attempts,
// assets and partitions: a destination that may receive a write twice
// (a worker killed after its write and before the ledger recorded it)
// deduplicates by it.
func (b Batch) DeliveryID() string {
	return shortHash(fmt.Sprintf("tranche/delivery/v1\nrun=%s\nasset=%s\npartition=%s\ntoken=%d\n",
		b.RunID, b.Asset, b.Partition.Key(), b.Token), 16)
}

// MemoryDestination is a [Destination] that keeps rows in memory, by
// asset and partition key. The zero value is ready to use, and it is safe
// for concurrent use. Tests read it back with [MemoryDestination.Rows].
//
// It is a fenced destination (see [Destination]): it keeps the token of
// each partition's last fenced write, and refuses a write whose token is
// older, with an error matching [ErrFenced].
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
// identity that numbered it.
type fence struct {
	DAG   string `json:"dag"`
	Token int64  `json:"token"`
}

// admit returns the fence a partition holds after a write of b, or an
// error matching ErrFenced when b is older than the write that set f.
// A write with token 0 is not fenced: it keeps f.
func (f fence) admit(b *Batch) (fence, error) {
	switch {
	case b.Token == 0:
		return f, nil
	case b.DAG == f.DAG && b.Token < f.Token:
		return f, &StaleWriteError{Asset: b.Asset, Key: b.Partition.Key(), Token: b.Token, Latest: f.Token}
	}
	return fence{DAG: b.DAG, Token: b.Token}, nil
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
