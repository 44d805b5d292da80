package ledger_test

import (
	"testing"

	"github.com/tranche-dev/tranche/ledger"
)

// TestRerunPolicyText round-trips every policy through its text form;
// MarshalText refused "stale" before, which UnmarshalText accepts.
func TestRerunPolicyText(t *testing.T) {
	for _, p := range []ledger.RerunPolicy{ledger.RerunNone, ledger.RerunFailed, ledger.RerunAll, ledger.RerunStale} {
		text, err := p.MarshalText()
		if err != nil {
			t.Fatalf("%q.MarshalText: %v", p, err)
		}
		var back ledger.RerunPolicy
		if err := back.UnmarshalText(text); err != nil || back != p {
			t.Errorf("UnmarshalText(%q) = %q, %v; want %q", text, back, err, p)
		}
	}
	if _, err := ledger.RerunPolicy("sometimes").MarshalText(); err == nil {
		t.Error(`MarshalText of "sometimes" = nil error`)
	}
}
