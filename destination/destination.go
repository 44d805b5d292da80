package destination

import (
	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/internal/fencing"
)

// Destination stores the rows of assets, one partition at a time: Write
// replaces each batch's partition, all the batches or none (see the
// package documentation). It is tranche.Destination.
type Destination = tranche.Destination

// Batch is the rows of one asset for one partition, with the run, the
// fencing token and the DAG identity of the attempt that wrote them. It
// is tranche.Batch.
type Batch = tranche.Batch

// Fence is what a fenced destination keeps beside each partition's data:
// the token of the partition's last fenced write and the DAG identity
// that numbered it. The zero Fence is a partition never fenced. Its JSON
// form, {"dag":"…","token":N}, is the files destination's .fence file.
type Fence struct {
	DAG   string `json:"dag"`
	Token int64  `json:"token"`
}

// Admit applies the fencing rules (see the package documentation) to a
// write of b over a partition whose fence is f: it returns the fence the
// partition holds once b is stored, or f and a [*tranche.StaleWriteError]
// (matching [tranche.ErrFenced]) when b is stale and must not be stored.
// A destination calls it under whatever makes the check and the write
// one step (a lock, a transaction), for every batch before it stores any.
// An admitted write of a nonzero token sets the fence to b's DAG and
// token; token 0 keeps f.
func (f Fence) Admit(b Batch) (Fence, error) {
	dag, token, ok := fencing.Next(f.DAG, f.Token, b.DAG, b.Token)
	if !ok {
		return f, &tranche.StaleWriteError{Asset: b.Asset, Key: b.Partition.Key(), Token: b.Token, Latest: f.Token}
	}
	return Fence{DAG: dag, Token: token}, nil
}
