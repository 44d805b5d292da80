package tranche

import "github.com/tranche-dev/tranche/internal/idhash"

// The root names one thing by a hash: a batch's delivery
// ([Batch.DeliveryID]). The identities of DAGs, backfills and runs live in
// the package backfill (backfill.DAGIdentity), beside the ledgers that key
// their history by them. Each is a short hash of a versioned canonical
// text form, fixed by tests against literal values.

// shortHash is the first n hexadecimal digits of the SHA-256 of s, as
// every identity of the module is (internal/idhash).
func shortHash(s string, n int) string { return idhash.Sum(s, n) }
