// Package fencing holds the one rule by which a fenced destination admits
// a write: the root's in-memory destination calls it, and package
// destination exports it as destination.Fence.Admit, which every other
// destination calls. It knows nothing of batches, so that the root
// package, which package destination imports, can call it too.
package fencing

// Next returns the fence a partition holds after a write with the given
// token, by the DAG identity dag, when its fence was held (the token of
// its last fenced write, and the identity that wrote it), and whether the
// write is admitted:
//
//   - token 0 is not fenced: admitted, and the fence is kept, so that a
//     stale attempt is still refused after it;
//   - a token of the identity that holds the fence is stale when its
//     attempt number (the token's low bits, ledger.TokenAttempt) is
//     below the fence's: a ledger numbers a partition's attempts in
//     order within one identity, so this holds even if the ledger's
//     clock, which the rest of the token counts, stepped back between
//     two claims;
//   - a token of another identity is stale when it is below the fence's:
//     a ledger's tokens order the claims of a partition across DAG
//     identities by its clock (ledger.Lease.Tokens), as a deploy needs;
//   - a stale write is refused and the fence kept; any other write is
//     admitted and sets the fence: the same attempt delivering again, or
//     a newer claim.
func Next(heldDAG string, held int64, dag string, token int64) (nextDAG string, next int64, admitted bool) {
	switch {
	case token == 0:
		return heldDAG, held, true
	case dag == heldDAG && attempt(token) < attempt(held),
		dag != heldDAG && token < held:
		return heldDAG, held, false
	}
	return dag, token, true
}

// attempt is the attempt number a token holds in its low bits (as
// ledger.TokenAttempt reads it; this package may not import ledger).
func attempt(token int64) int64 { return token & (1<<20 - 1) }
