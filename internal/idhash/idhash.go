// Package idhash computes the hashes by which tranche names things in
// every process and release alike: a DAG's identity, a backfill's and a
// run's ids, a batch's delivery id, an event's id. Each is a prefix of
// the SHA-256 of a versioned canonical text, in hexadecimal; the texts
// are their packages', fixed by tests against literal values.
package idhash

import (
	"crypto/sha256"
	"encoding/hex"
)

// Sum returns the first n hexadecimal digits (at most 64) of the SHA-256
// of text.
func Sum[T string | []byte](text T, n int) string {
	sum := sha256.Sum256([]byte(text))
	var digits [2 * sha256.Size]byte
	hex.Encode(digits[:], sum[:(n+1)/2])
	return string(digits[:n])
}
