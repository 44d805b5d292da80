package idhash_test

import (
	"testing"

	"github.com/tranche-dev/tranche/internal/idhash"
)

func TestSum(t *testing.T) {
	// sha256("abc") = ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad
	for _, c := range []struct {
		n    int
		want string
	}{
		{12, "ba7816bf8f01"}, {16, "ba7816bf8f01cfea"}, {7, "ba7816b"},
		{32, "ba7816bf8f01cfea414140de5dae2223"},
		{64, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
	} {
		if got := idhash.Sum("abc", c.n); got != c.want {
			t.Errorf("Sum(abc, %d) = %s, want %s", c.n, got, c.want)
		}
		if got := idhash.Sum([]byte("abc"), c.n); got != c.want {
			t.Errorf("Sum([]byte(abc), %d) = %s, want %s", c.n, got, c.want)
		}
	}
}

func BenchmarkSum(b *testing.B) {
	text := []byte("tranche/run/v1\ndag=0123456789abcdef\nfrom=2026-01-01T00:00:00Z\nto=2026-01-02T00:00:00Z\n")
	b.ReportAllocs()
	for b.Loop() {
		idhash.Sum(text, 16)
	}
}
