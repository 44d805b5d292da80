package cliargs

import (
	"slices"
	"testing"
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
