package tranche

import (
	"crypto/sha256"
	"encoding/hex"
)

// The root names one thing by a hash: a batch's delivery
// ([Batch.DeliveryID]). The identities of DAGs, backfills and runs live in
// the package backfill (backfill.DAGIdentity), beside the ledgers that key
// their history by them. Each is a short hash of a versioned canonical
// text form, fixed by tests against literal values.

func shortHash(s string, n int) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:n]
}
