package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/internal/cliargs"
	"github.com/tranche-dev/tranche/ledger/address"
	"github.com/tranche-dev/tranche/tranchecli"
	"github.com/tranche-dev/tranche/trancheweb"
)

// TokenEnv is the environment variable that holds serve's write token.
const TokenEnv = "TRANCHE_TOKEN"

// minToken is the shortest write token serve takes: one a person could
// guess in a few tries is no token.
const minToken = 16

// names collects --name IDENTITY=NAME flags.
type names map[string]string

func (n names) String() string { return "" }

func (n names) Set(v string) error {
	id, name, ok := strings.Cut(v, "=")
	if !ok || id == "" || name == "" {
		return fmt.Errorf("%q: want IDENTITY=NAME, a DAG's identity and the name the pages show for it", v)
	}
	n[id] = name
	return nil
}

// serve runs the serve subcommand: the backfills of the ledger as web
// pages, until ctx ends.
func serve(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet(name+" serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	ledgerURL := fs.String("ledger", "", "the ledger's address: sqlite:PATH or postgres://…; default $"+tranchecli.LedgerEnv)
	addr := fs.String("addr", "127.0.0.1:8080", "the address to listen on: loopback unless it names another (\":8080\" is every interface)")
	allowWrites := fs.Bool("allow-writes", false, "offer cancel and resume on the pages, to whoever gives the token ($"+TokenEnv+" or --token-file)")
	tokenFile := fs.String("token-file", "", "a file holding the write token (surrounding white space is dropped); default $"+TokenEnv)
	dagNames := names{}
	fs.Var(dagNames, "name", "IDENTITY=NAME: show the DAG of that identity by NAME, in place of the name its backfills recorded (repeatable)")
	maxCells := fs.Int("max-cells", trancheweb.DefaultMaxCells, "the most cells of a backfill's or a DAG's grid")
	refresh := fs.Duration("refresh", trancheweb.DefaultRefresh, "how often the page of a running backfill, or of a DAG with one, polls its status")
	cliargs.Once(fs, "name")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: %s serve [flags]\n\nServes the backfills of the ledger as web pages: an index of DAGs and backfills;\nper backfill its counts, progress, grid and partition histories; and per DAG\n(/dags/IDENTITY?from=&to=) the grid and counts of its partitions across all its\nbackfills, each in the state of its latest attempt, missing where none was made.\n\nflags:\n", name)
		cliargs.PrintDefaults(fs.Output(), fs)
	}
	if isHelpArgs(args) {
		fs.SetOutput(stdout)
		fs.Usage()
		return 0
	}
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "%s serve: %s\n", name, fmt.Sprintf(format, a...))
		fmt.Fprintf(stderr, "usage: %s serve [flags] (see '%s help serve')\n", name, name)
		return 2
	}
	// A refused flag in two lines, as tranchecli's commands report one.
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		return usageErr("%v", err)
	}
	switch {
	case fs.NArg() > 0:
		return usageErr("takes no arguments; got %q", fs.Args())
	case *maxCells < 1:
		return usageErr("--max-cells %d; want 1 or more", *maxCells)
	case *refresh < time.Second:
		return usageErr("--refresh %v; want 1s or more", *refresh)
	}
	token, err := writeToken(*tokenFile)
	if err != nil {
		return usageErr("%v", err)
	}
	switch {
	case *allowWrites && token == "":
		return usageErr("--allow-writes needs a token, which the pages ask for before they cancel or resume: set $%s or give --token-file FILE", TokenEnv)
	case *allowWrites && len(token) < minToken:
		return usageErr("the write token has %d characters; want %d or more (for instance: openssl rand -hex 16)", len(token), minToken)
	case !*allowWrites:
		token = ""
	}
	if *ledgerURL == "" {
		*ledgerURL = os.Getenv(tranchecli.LedgerEnv)
	}
	if *ledgerURL == "" {
		return usageErr("no ledger: give --ledger URL or set $%s", tranchecli.LedgerEnv)
	}

	// Without the token the pages only read: the ledger is opened
	// read-only, so that a read-only file or role can be served.
	access := address.AccessRead
	if token != "" {
		access = address.AccessWrite
	}
	where, err := address.Parse(*ledgerURL)
	if err != nil {
		return usageErr("%v", err)
	}
	l, err := openAddress(ctx, where, access)
	if err != nil {
		// As tranchecli reports its commands' errors: one prefix.
		fmt.Fprintf(stderr, "%s serve: %s\n", name, strings.ReplaceAll(strings.TrimPrefix(err.Error(), "tranche: "), ": tranche: ", ": "))
		return 1
	}
	defer l.(io.Closer).Close()
	// The pages show each DAG by the name its backfills recorded; a
	// --name flag overrides it.
	records, err := l.Backfills(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "%s serve: %v\n", name, err)
		return 1
	}
	shown := backfill.DAGNames(records)
	maps.Copy(shown, dagNames)

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintf(stderr, "%s serve: %v\n", name, err)
		return 1
	}
	logger := slog.New(slog.NewTextHandler(stderr, nil))
	srv := &http.Server{
		Handler: trancheweb.NewHandler(l, &trancheweb.Options{Names: shown, WriteToken: token, MaxCells: *maxCells,
			Refresh: *refresh, Logger: logger}),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          log.New(stderr, name+" serve: ", 0),
	}
	mode := "read-only"
	if token != "" {
		mode = "cancel and resume enabled with the token"
	}
	fmt.Fprintf(stderr, "%s serve: http://%s/ (ledger %s, %s)\n", name, ln.Addr(), address.Redact(*ledgerURL), mode)
	if host, _, _ := net.SplitHostPort(ln.Addr().String()); !net.ParseIP(host).IsLoopback() {
		fmt.Fprintf(stderr, "%s serve: listening beyond loopback, on %s: anyone who reaches it reads the ledger's backfills\n", name, ln.Addr())
	}

	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		fmt.Fprintf(stderr, "%s serve: %v\n", name, err)
		return 1
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		// Past a few seconds the connections still open are closed: the
		// operator asked to stop, which is no failure of the command.
		fmt.Fprintf(stderr, "%s serve: %v waiting for the requests in flight; closing their connections\n", name, err)
		srv.Close()
	}
	if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintf(stderr, "%s serve: %v\n", name, err)
		return 1
	}
	return 0
}

func isHelpArgs(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if a == "-h" || a == "-help" || a == "--help" {
			return true
		}
	}
	return false
}

// writeToken reads the token from file, or else from $TRANCHE_TOKEN.
func writeToken(file string) (string, error) {
	if file == "" {
		return strings.TrimSpace(os.Getenv(TokenEnv)), nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	t := strings.TrimSpace(string(b))
	if t == "" {
		return "", fmt.Errorf("--token-file %s is empty; want the token in it", file)
	}
	return t, nil
}
