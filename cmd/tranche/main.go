// Command tranche operates the backfills of a ledger from the shell and
// the browser: it lists them, shows a backfill's status and its
// partitions as a calendar grid, watches it, shows a partition's
// history, cancels and resumes it, and serves the same as web pages.
//
//	go install github.com/tranche-dev/tranche/cmd/tranche@v0.1.0
//	export TRANCHE_LEDGER=sqlite:tranche.db      # or postgres://user@host:5432/warehouse
//	tranche ls
//	tranche status ID --watch
//	tranche history ID 2026-11-15
//	tranche cancel ID --stop-running
//	tranche resume ID
//	tranche pause DAG --note maintenance
//	tranche unpause DAG
//	tranche serve --addr 127.0.0.1:8080
//
// The ledger is named by an address ([address.Parse]), given by
// --ledger or $TRANCHE_LEDGER: sqlite:PATH (a relative or absolute path;
// sqlite:///abs/path too), which must exist, or a PostgreSQL URL
// (postgres://… and postgresql://…) or key=value string
// (postgres:host=db dbname=warehouse), as pgx reads them, with one
// parameter of tranche's own, schema=NAME, the schema holding the
// ledger's tables. Errors name the address with its password masked.
// The command never creates a ledger's file, schema or tables, and never
// migrates an older ledger; it refuses a database without a ledger, or
// with one at an older schema version, and says to run a worker on it,
// which creates or upgrades it. The read commands (ls, status, history,
// serve) write nothing either: a read-only SQLite file (mode 0444, a
// backup copy) or a PostgreSQL role allowed only SELECT can be listed,
// shown and served, and cancel and resume of such a ledger are refused
// with why. docs/operating.md is the operator's guide.
//
// Every subcommand but serve is github.com/tranche-dev/tranche/tranchecli's
// (see its documentation for their flags and their --format json). The
// command has no DAGs of its own, so plan and run belong to a program
// that registers its DAGs with tranchecli; resume here marks a backfill
// resumed for the workers that run it.
//
// serve serves the backfills as pages (package trancheweb): an index of
// DAGs and backfills, per backfill its counts, progress, grid and
// partition histories, and per DAG the grid and counts of its partitions
// across all its backfills (/dags/IDENTITY). It listens on loopback
// (127.0.0.1:8080) unless --addr says otherwise. With --allow-writes the
// pages offer cancel and resume to whoever gives the token, read from
// $TRANCHE_TOKEN or the file --token-file names; without a token it
// refuses to start.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/tranche-dev/tranche/internal/cliargs"
	"github.com/tranche-dev/tranche/tranchecli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// name is the command's name in usage and errors.
const name = "tranche"

// serveUsage is serve's line in the usage.
const serveUsage = "  serve    [flags] serve the backfills as web pages (see 'tranche help serve')\n"

// run runs the command with args (os.Args[1:]) and returns its exit
// code: 0 for success, 1 for a failure, 2 for bad usage.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if moved := cliargs.LedgerFirst(args); len(moved) > 0 && moved[0] == "serve" {
		args = moved // "tranche --ledger URL serve", as tranchecli reads its commands
	}
	if len(args) > 0 && args[0] == "serve" {
		return serve(ctx, args[1:], stdout, stderr)
	}
	if len(args) > 1 && isHelp(args[0]) && args[1] == "serve" {
		return serve(ctx, []string{"-h"}, stdout, stderr)
	}
	p := &tranchecli.Program{Name: name, OpenLedger: openAddress, Stdin: stdin, Stdout: stdout, Stderr: stderr}
	code := p.Main(ctx, args)
	// tranchecli lists its own subcommands; serve is the command's.
	switch {
	case len(args) == 0:
		fmt.Fprint(stderr, "\nand:\n"+serveUsage)
	case len(args) == 1 && isHelp(args[0]):
		fmt.Fprint(stdout, "\nand:\n"+serveUsage)
	}
	return code
}

func isHelp(arg string) bool {
	switch arg {
	case "help", "-h", "-help", "--help":
		return true
	}
	return false
}
