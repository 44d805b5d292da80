package cliargs

import (
	"slices"
	"testing"

	"pgregory.net/rapid"
)

func TestLedgerFirst(t *testing.T) {
	for _, tt := range []struct{ in, want []string }{
		{[]string{"ls"}, []string{"ls"}},
		{[]string{"ls", "--ledger", "sqlite:a.db"}, []string{"ls", "--ledger", "sqlite:a.db"}},
		{[]string{"--ledger", "sqlite:a.db", "ls"}, []string{"ls", "--ledger", "sqlite:a.db"}},
		{[]string{"-ledger", "sqlite:a.db", "status", "ID", "--watch"}, []string{"status", "-ledger", "sqlite:a.db", "ID", "--watch"}},
		{[]string{"--ledger=sqlite:a.db", "serve", "--addr", ":0"}, []string{"serve", "--ledger=sqlite:a.db", "--addr", ":0"}},
		{[]string{"--ledger", "a", "--ledger", "b", "ls"}, []string{"ls", "--ledger", "a", "--ledger", "b"}},
		// No subcommand after the flag: nothing to run.
		{[]string{"--ledger", "sqlite:a.db"}, nil},
		// A flag without its value is left for the usage error.
		{[]string{"--ledger"}, []string{"--ledger"}},
		{[]string{"--format", "json", "ls"}, []string{"--format", "json", "ls"}},
		{nil, nil},
	} {
		if got := LedgerFirst(slices.Clone(tt.in)); !slices.Equal(got, tt.want) {
			t.Errorf("LedgerFirst(%q) = %q; want %q", tt.in, got, tt.want)
		}
	}
}

// TestLedgerFirstKeepsArguments: LedgerFirst only moves arguments, and
// what a subcommand parses after the move holds every --ledger flag in
// the order given.
func TestLedgerFirstKeepsArguments(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		args := rapid.SliceOf(rapid.SampledFrom([]string{"--ledger", "-ledger", "--ledger=x", "sqlite:a.db", "ls", "serve", "--format", "json", "ID"})).Draw(t, "args")
		got := LedgerFirst(slices.Clone(args))
		if got == nil {
			return
		}
		a, b := slices.Clone(args), slices.Clone(got)
		slices.Sort(a)
		slices.Sort(b)
		if !slices.Equal(a, b) {
			t.Fatalf("LedgerFirst(%q) = %q: not the same arguments", args, got)
		}
		if len(args) > 0 && got[0] != args[0] && (args[0] != "--ledger" && args[0] != "-ledger" && args[0] != "--ledger=x") {
			t.Fatalf("LedgerFirst(%q) = %q moved an argument that is no --ledger flag", args, got)
		}
	})
}
