package tranchecli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/address"
	"github.com/tranche-dev/tranche/trancheweb"
)

// TokenEnv is the environment variable that holds serve's write token,
// as the tranche command's serve reads it.
const TokenEnv = "TRANCHE_TOKEN"

// minToken is the shortest write token serve takes.
const minToken = 16

const serveHelp = `Serves the ledger's backfills as web pages (package trancheweb), the
program's DAGs among them by name. With --allow-writes and a token
($TRANCHE_TOKEN or --token-file), a DAG's page also plans a backfill of it
(a window or slots, rerun, concurrency, on-failure) and starts that plan,
run by this process; a plan whose partitions' history changed since it was
shown is refused with the new plan. Cancel and resume take the same token.`

func serveFlags(c *call, fs *flag.FlagSet) {
	fs.StringVar(&c.opt.addr, "addr", "127.0.0.1:8080", "the `address` to listen on: loopback unless it names another")
	fs.BoolVar(&c.opt.allowWrites, "allow-writes", false, "plan and start backfills, cancel and resume, for whoever gives the token")
	fs.StringVar(&c.opt.tokenFile, "token-file", "", "a `file` holding the write token (default $"+TokenEnv+")")
}

// runServe serves the pages until the context ends.
func runServe(ctx context.Context, c *call) error {
	token := strings.TrimSpace(os.Getenv(TokenEnv))
	if c.opt.tokenFile != "" {
		b, err := os.ReadFile(c.opt.tokenFile)
		if err != nil {
			return badUsage("--token-file: %v", err)
		}
		token = strings.TrimSpace(string(b))
	}
	switch {
	case c.opt.allowWrites && len(token) < minToken:
		return badUsage("--allow-writes needs a token of %d characters or more in $%s or --token-file (for instance: openssl rand -hex 16)", minToken, TokenEnv)
	case !c.opt.allowWrites:
		token = ""
	default:
		// The pages cancel, resume and retry, and run the backfills they
		// start here: the ledger is opened as run opens it.
		c.access = address.AccessCreate
	}
	// The pages alone read a reader; the writes need a ledger.
	var l ledger.Reader
	var err error
	if token != "" {
		l, err = c.writer(ctx)
	} else {
		l, err = c.reader(ctx)
	}
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", c.opt.addr)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(c.stderr, nil))
	srv := &http.Server{
		Handler: trancheweb.NewHandler(l, &trancheweb.Options{DAGs: c.p.DAGs, WriteToken: token, Logger: logger,
			Backfill: &backfill.Backfill{Runner: c.p.Runner, Worker: c.p.Worker}}),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          log.New(c.stderr, c.name+" serve: ", 0),
	}
	mode := "read-only"
	if token != "" {
		mode = "plans, starts, cancels, resumes and retries with the token"
	}
	fmt.Fprintf(c.stderr, "%s serve: http://%s/ (%s; DAGs %s)\n", c.name, ln.Addr(), mode, strings.Join(c.dagNames(), ", "))
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	// The requests in flight get a few seconds to finish; past that the
	// connections still open are closed: the operator asked to stop,
	// which is no failure of the command.
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		fmt.Fprintf(c.stderr, "%s serve: %v waiting for the requests in flight; closing their connections\n", c.name, err)
		srv.Close()
	}
	if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
