// Package cliargs holds what tranchecli and the tranche command share in
// reading a command line before its subcommand's flags.
package cliargs

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

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

// Once makes every flag of fs but those named in repeatable refuse a
// second value: "--ledger a --ledger b" would otherwise keep b without a
// word. Call it once every flag is defined.
func Once(fs *flag.FlagSet, repeatable ...string) {
	fs.VisitAll(func(f *flag.Flag) {
		if slices.Contains(repeatable, f.Name) {
			return
		}
		o := &once{Value: f.Value, name: f.Name}
		if b, ok := f.Value.(boolFlag); ok && b.IsBoolFlag() {
			f.Value = &onceBool{o}
			return
		}
		f.Value = o
	})
}

type boolFlag interface{ IsBoolFlag() bool }

// once is a flag's value that takes one value only.
type once struct {
	flag.Value
	name string
	set  bool
}

func (o *once) Set(s string) error {
	if o.set {
		return fmt.Errorf("given twice; --%s takes one value", o.name)
	}
	o.set = true
	return o.Value.Set(s)
}

// Get returns the value's, for PrintDefaults' quoting of strings.
func (o *once) Get() any {
	if g, ok := o.Value.(flag.Getter); ok {
		return g.Get()
	}
	return o.Value.String()
}

// onceBool is a boolean flag's once, which needs no value after it.
type onceBool struct{ *once }

func (onceBool) IsBoolFlag() bool { return true }

// PrintDefaults writes the flags of fs to w as fs.PrintDefaults does, but
// each with the two dashes the usage lines and the docs give them.
func PrintDefaults(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		inner := *f // the value's own type names it ("string", "duration")
		switch v := f.Value.(type) {
		case *once:
			inner.Value = v.Value
		case *onceBool:
			inner.Value = v.Value
		}
		name, usage := flag.UnquoteUsage(&inner)
		var b strings.Builder
		fmt.Fprintf(&b, "  --%s", f.Name)
		if name != "" {
			b.WriteString(" " + name)
		}
		b.WriteString("\n    \t")
		b.WriteString(strings.ReplaceAll(usage, "\n", "\n    \t"))
		if def := f.DefValue; def != "" && def != "false" && def != "0" && def != "[]" {
			if _, isString := getValue(inner.Value).(string); isString {
				def = strconv.Quote(def)
			}
			fmt.Fprintf(&b, " (default %s)", def)
		}
		fmt.Fprintln(w, b.String())
	})
}

func getValue(v flag.Value) any {
	if g, ok := v.(flag.Getter); ok {
		return g.Get()
	}
	return nil
}
