package backfill_test

import (
	"encoding"
	"encoding/json"
	"flag"
	"io"
	"testing"

	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/ledger"
)

// TestPolicyText checks that every policy and enum type a backfill is
// configured by takes text as slog.Level does (the root's TestPolicyText
// checks tranche.FailurePolicy): through
// flag.TextVar and JSON, each accepted form round-tripping, and every
// other form refused with an error.
func TestPolicyText(t *testing.T) {
	type textual interface {
		encoding.TextMarshaler
		encoding.TextUnmarshaler
	}
	tests := []struct {
		name  string
		fresh func() textual
		good  []string
		bad   string
	}{
		{"RerunPolicy", func() textual { return new(ledger.RerunPolicy) }, []string{"none", "failed", "all"}, "ALL"},
		{"Order", func() textual { return new(backfill.Order) }, []string{"newest-first", "oldest-first"}, "oldest first"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, s := range tt.good {
				fs := flag.NewFlagSet("t", flag.ContinueOnError)
				v := tt.fresh()
				fs.TextVar(v, "v", tt.fresh(), "")
				if err := fs.Parse([]string{"-v", s}); err != nil {
					t.Fatalf("flag -v %s: %v", s, err)
				}
				if got, err := v.MarshalText(); err != nil || string(got) != s {
					t.Errorf("flag -v %s: MarshalText = %q, %v; want %q", s, got, err, s)
				}
				data, err := json.Marshal(v)
				if err != nil || string(data) != `"`+s+`"` {
					t.Errorf("json.Marshal(%s) = %s, %v", s, data, err)
				}
				w := tt.fresh()
				if err := json.Unmarshal(data, w); err != nil {
					t.Errorf("json.Unmarshal(%s): %v", data, err)
				} else if got, _ := w.MarshalText(); string(got) != s {
					t.Errorf("json round trip of %s gives %s", s, got)
				}
			}
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			fs.TextVar(tt.fresh(), "v", tt.fresh(), "")
			if err := fs.Parse([]string{"-v", tt.bad}); err == nil {
				t.Errorf("flag -v %q accepted; want an error", tt.bad)
			}
			if err := json.Unmarshal([]byte(`"`+tt.bad+`"`), tt.fresh()); err == nil {
				t.Errorf("json.Unmarshal(%q) accepted; want an error", tt.bad)
			}
		})
	}
}
