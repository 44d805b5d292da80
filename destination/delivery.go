package destination

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/internal/idhash"
)

// DeliveryID returns an id of b that is the same for every delivery of
// one attempt's write, and differs between attempts, assets, partitions
// and runs; the rows are not part of it. A retried delivery of one write
// (a queue that redelivers, a client that retries) carries the same id;
// a takeover's write, a new attempt, carries another, which is why the
// readers of an appending destination keep each partition's newest
// delivery ([Newest]) rather than deduplicating by id alone. Its form is
// fixed: destinations store it.
func DeliveryID(b tranche.Batch) string {
	return idhash.Sum(fmt.Appendf(nil, "tranche/delivery/v1\nrun=%s\nasset=%s\npartition=%s\ntoken=%d\n",
		b.RunID, b.Asset, b.Partition.Key(), b.Token), 16)
}

// A Delivery is one write of a partition as an appending destination
// recorded it, read back: what the fencing rule reads of its batch, its
// delivery id, and the rows it appended. R is however the reader holds a
// row.
type Delivery[R any] struct {
	Asset     string
	Partition string // the partition's key; "" for an unpartitioned asset
	DAG       string
	Token     int64
	ID        string // the batch's DeliveryID, which all its rows carry
	Rows      []R
}

// Newest is the reading half of the recipe for appending destinations
// (tables, logs, queues that keep every write): given every delivery the
// destination holds, in the order they were appended, it returns for
// each partition the one delivery a replacing destination would hold
// after the same writes, sorted by asset and partition. Each delivery
// passes through [Fence.Admit] over its partition's fence in turn: one
// admitted replaces what the partition held, so a redelivery of the same
// attempt and a takeover's write both leave one delivery's rows; one
// refused (a stalled worker's write appended after the newer attempt's)
// is dropped. A reader that shows only these rows sees no partition
// twice, whatever the workers' crashes, takeovers and retries appended.
//
// The writing half is to append each batch's rows with its partition's
// key, token, DAG identity and [DeliveryID]. Within one DAG identity the
// order of the deliveries does not matter (the newest token wins, and
// deliveries of one token carry the same rows); across identities, and
// for token 0, it does, so a destination that holds writes of several
// identities appends an order (an increasing sequence) to read them by.
func Newest[R any](deliveries []Delivery[R]) []Delivery[R] {
	type key struct{ asset, partition string }
	type held struct {
		fence Fence
		d     Delivery[R]
	}
	parts := map[key]*held{}
	for _, d := range deliveries {
		k := key{d.Asset, d.Partition}
		h := parts[k]
		if h == nil {
			h = new(held)
			parts[k] = h
		}
		next, err := h.fence.Admit(tranche.Batch{Asset: d.Asset, DAG: d.DAG, Token: d.Token})
		if err != nil {
			continue
		}
		h.fence, h.d = next, d
	}
	out := make([]Delivery[R], 0, len(parts))
	for _, h := range parts {
		out = append(out, h.d)
	}
	slices.SortFunc(out, func(a, b Delivery[R]) int {
		return cmp.Or(cmp.Compare(a.Asset, b.Asset), cmp.Compare(a.Partition, b.Partition))
	})
	return out
}
