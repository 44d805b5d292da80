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
//   - a token below the fence's is stale, whatever the identities:
//     refused, the fence kept (a ledger's tokens order the claims of a
//     partition across DAG identities, ledger.Lease.Tokens);
//   - any other write is admitted and sets the fence: the same attempt
//     delivering again, or a newer claim.
func Next(heldDAG string, held int64, dag string, token int64) (nextDAG string, next int64, admitted bool) {
	switch {
	case token == 0:
		return heldDAG, held, true
	case token < held:
		return heldDAG, held, false
	}
	return dag, token, true
}
