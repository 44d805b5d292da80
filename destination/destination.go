package destination

import (
	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/internal/fencing"
)

// Fence is what a fenced destination keeps beside each partition's data:
// the token of the partition's last fenced write and the DAG identity
// that numbered it. The zero Fence is a partition never fenced. Its JSON
// form, {"dag":"…","token":N}, is the files destination's .fence file.
type Fence struct {
	DAG   string `json:"dag"`
	Token int64  `json:"token"`
}

// Admit applies the fencing rule to a write of b over a partition whose
// fence is f: it returns the fence the partition holds once b is stored,
// or f and a [*tranche.StaleWriteError] (matching [tranche.ErrFenced])
// when b is stale and must not be stored. A destination calls it under
// whatever makes the check and the write one step (a lock, a
// transaction), for every batch before it stores any. This is the one
// statement of the rule (see the package documentation for the tokens):
//
//   - Token 0 is a write outside any ledger (a plain tranche.Runner.Run,
//     or an unpartitioned asset): it is admitted whatever token wrote the
//     partition last, and keeps f, so that a stale attempt is still
//     refused after it.
//   - A token of the DAG identity that holds the fence (b.DAG == f.DAG)
//     is stale when its attempt number (ledger.TokenAttempt) is below
//     the fence's: a ledger numbers a partition's attempts in order
//     within one identity, so even a ledger clock that stepped back
//     between two claims cannot reorder them.
//   - A token of another identity (a deploy) is stale when it is below
//     the fence's token: across identities only the claims' instants,
//     which the tokens count, order them.
//   - Any other write is admitted and sets the fence to b's DAG and
//     token: the same attempt delivering again, or a newer claim.
//
// A write refused here fails its attempt, which the ledger then records
// failed, never succeeded.
func (f Fence) Admit(b tranche.Batch) (Fence, error) {
	dag, token, ok := fencing.Next(f.DAG, f.Token, b.DAG, b.Token)
	if !ok {
		return f, &tranche.StaleWriteError{Asset: b.Asset, Key: b.Partition.Key(), Token: b.Token, Latest: f.Token}
	}
	return Fence{DAG: dag, Token: token}, nil
}
