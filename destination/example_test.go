package destination_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/destination"
	"github.com/tranche-dev/tranche/destination/destinationtest"
)

// keyValue is a user's own replacing destination: a map of partitions,
// fenced by the shared rule. Its test is one call of
// destinationtest.Run.
type keyValue struct {
	mu     sync.Mutex
	fences map[string]destination.Fence
	rows   map[string][]tranche.Row
}

func (d *keyValue) Write(ctx context.Context, batches []tranche.Batch) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	// Every batch is judged before any is stored: all or nothing.
	next := make([]destination.Fence, len(batches))
	for i, b := range batches {
		f, err := d.fences[b.Asset+"/"+b.Partition.Key()].Admit(b)
		if err != nil {
			return err // a *tranche.StaleWriteError, matching tranche.ErrFenced
		}
		next[i] = f
	}
	for i, b := range batches {
		key := b.Asset + "/" + b.Partition.Key()
		d.fences[key], d.rows[key] = next[i], b.Rows
	}
	return nil
}

// A destination of one's own calls Fence.Admit, under whatever makes the
// check and the write one step, for every batch before it stores any.
func ExampleFence_Admit() {
	d := &keyValue{fences: map[string]destination.Fence{}, rows: map[string][]tranche.Row{}}
	day := tranche.PartitionOf(tranche.Day, time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))
	write := func(token int64, n int) {
		b := tranche.Batch{Asset: "sales", Column: "day", Partition: day, DAG: "v1", Token: token,
			Rows: []tranche.Row{{"day": day.Start, "n": n}}}
		err := d.Write(context.Background(), []tranche.Batch{b})
		fmt.Printf("token %d: %v; holds %v\n", token, err, d.rows["sales/2026-03-01"][0]["n"])
	}
	write(2, 1) // the attempt that took the partition over
	write(1, 2) // the stalled attempt it took over, resumed
	write(3, 3) // a newer claim
	// Output:
	// token 2: <nil>; holds 1
	// token 1: tranche: asset "sales", partition 2026-03-01: write of token 1 refused: token 2 wrote it since (tranche: lease lost to a newer attempt); holds 1
	// token 3: <nil>; holds 3
}

// An appending destination keeps every delivery; its reader keeps each
// partition's newest, and sees no partition twice.
func ExampleNewest() {
	appended := []destination.Delivery[string]{
		{Asset: "sales", Partition: "2026-03-01", Token: 1, ID: "a", Rows: []string{"first attempt"}},
		{Asset: "sales", Partition: "2026-03-01", Token: 2, ID: "b", Rows: []string{"takeover"}},
		{Asset: "sales", Partition: "2026-03-01", Token: 2, ID: "b", Rows: []string{"takeover"}}, // redelivered
		{Asset: "sales", Partition: "2026-03-02", Token: 2, ID: "c", Rows: []string{"only write"}},
	}
	for _, d := range destination.Newest(appended) {
		fmt.Println(d.Partition, d.Rows)
	}
	// Output:
	// 2026-03-01 [takeover]
	// 2026-03-02 [only write]
}

// The example's destination keeps the contract: one test away.
func TestKeyValueContract(t *testing.T) {
	destinationtest.Run(t, func(t *testing.T) destinationtest.Subject {
		d := &keyValue{fences: map[string]destination.Fence{}, rows: map[string][]tranche.Row{}}
		return destinationtest.Subject{Destination: d, Read: func(_ context.Context, p tranche.TimePartition) ([]tranche.Row, error) {
			d.mu.Lock()
			defer d.mu.Unlock()
			return d.rows[destinationtest.Asset+"/"+p.Key()], nil
		}}
	})
}
