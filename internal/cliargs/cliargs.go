// Package cliargs holds what tranchecli and the tranche command share in
// reading a command line before its subcommand's flags.
package cliargs

import "strings"

// LedgerFirst moves a --ledger flag given before the subcommand
// ("tranche --ledger URL ls", as operators write a global flag) to after
// it, where the subcommand's flags are read (a program whose ledger is
// fixed then refuses it as an unknown flag), and returns nil when no
// subcommand follows the flag. Other arguments are returned as they are.
func LedgerFirst(args []string) []string {
	var flags []string
	for len(args) > 0 {
		switch a := args[0]; {
		case (a == "--ledger" || a == "-ledger") && len(args) > 1:
			flags, args = append(flags, args[:2]...), args[2:]
		case strings.HasPrefix(a, "--ledger=") || strings.HasPrefix(a, "-ledger="):
			flags, args = append(flags, a), args[1:]
		default:
			if len(flags) == 0 {
				return args
			}
			return append(append([]string{args[0]}, flags...), args[1:]...)
		}
	}
	return nil
}
