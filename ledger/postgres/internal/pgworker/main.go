// Pgworker is the worker process of the PostgreSQL ledger's fault tests
// and benchmarks: the tests start several against one database, kill
// them, cut their connections and restart the server under them, and
// check what the ledger and the files destination hold after.
//
// In backfill mode it runs a backfill.Backfill of one daily asset,
// "events", into a files destination (or, with -sink sql, tables in the
// ledger's schema that commit with the ledger's record of success),
// appending a line to an executions log when each execution starts and
// when it ends. With -pause it stops itself (SIGSTOP) once, on partition
// -pausekey, at one of proctest.PausePoints, so that the tests can make
// it a zombie there and resume it (SIGCONT); -audit logs every write its
// destination took. With -loop (the
// default) it runs the backfill again, as a replica of a scaled-out job
// would, until every partition has succeeded: partitions held by others
// whose leases then expire are taken over, and calls that failed with the
// server are tried again. It prints a summary as one JSON object on
// stdout.
//
// In bench mode it claims and finishes hourly partitions, -chunk at a
// time, and prints the latencies: proctest.Bench, the loop of the SQLite
// ledger's crashworker too, so that the benchmarks compare like with like.
// In shared mode it is one replica of a backfill of -partitions hourly
// partitions that many processes share (proctest.Shared, crashworker's
// shared mode too), sleeping -work in each, with -concurrency, -lease and
// -heartbeat, run again until every partition has succeeded.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/internal/proctest"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/postgres"
)

var (
	url         = flag.String("url", "", "the ledger's connection string")
	schema      = flag.String("schema", "", "the ledger's schema")
	maxConns    = flag.Int("maxconns", 0, "the ledger's connection limit")
	mode        = flag.String("mode", "backfill", "backfill, bench or shared")
	worker      = flag.String("worker", "", "the worker's name")
	dest        = flag.String("dest", "", "the files destination's folder")
	logPath     = flag.String("log", "", "the executions log, appended to")
	from        = flag.String("from", "2020-01-01", "the first day")
	days        = flag.Int("days", 60, "how many days")
	lease       = flag.Duration("lease", time.Second, "the lease")
	heartbeat   = flag.Duration("heartbeat", 300*time.Millisecond, "the heartbeat")
	concurrency = flag.Int("concurrency", 2, "partitions at once")
	work        = flag.Duration("work", 10*time.Millisecond, "the work per partition")
	rows        = flag.Int("rows", 3, "rows per partition")
	loop        = flag.Bool("loop", true, "run the backfill again until every partition succeeded")
	deadline    = flag.Duration("deadline", 90*time.Second, "give up looping after this long without a partition succeeding")
	ops         = flag.Int("ops", 1000, "bench: claims and finishes")
	offset      = flag.Int("offset", 0, "bench: the first partition, in hours after -from")
	chunk       = flag.Int("chunk", 1, "bench: partitions per claim")
	partitions  = flag.Int("partitions", 1000, "shared: hourly partitions in the backfill")
	ignoreCtx   = flag.Bool("ignorectx", false, "work through a canceled context")
	pauseAt     = flag.String("pause", "", "where to stop itself once: materialize, beforewrite, write or staged")
	pauseKey    = flag.String("pausekey", "", "the partition whose execution -pause stops")
	auditPath   = flag.String("audit", "", "a log of every batch the destination wrote, appended to")
	sink        = flag.String("sink", "files", "where the rows go: files (under -dest), sql (tables in the ledger's schema, committed with the ledger), or sql-separate (the same tables, committed on their own)")
)

// summary is what backfill mode prints: the runs' reports added up.
type summary struct {
	Worker    string   `json:"worker"`
	Runs      int      `json:"runs"`
	Succeeded int      `json:"succeeded"` // partitions this worker ran that succeeded
	Failed    int      `json:"failed"`    // partitions this worker ran that failed
	Fenced    int      `json:"fenced"`    // of those, how many matched ErrFenced: lost to a newer attempt, or to a lease that lapsed by the worker's clock
	Lost      int      `json:"lost"`      // of those, and of run errors, how many lost the server
	Errors    []string `json:"errors"`    // the first run-level errors
	Done      bool     `json:"done"`      // every partition succeeded
	// FencedKeys are the partitions of the Fenced failures, once each:
	// those this worker knew it no longer held, and stopped.
	FencedKeys []string `json:"fenced_keys"`
}

func main() {
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "pgworker:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	first, err := time.Parse(time.DateOnly, *from)
	if err != nil {
		return err
	}
	var l *postgres.Ledger
	// The server may be restarting: keep trying for a while.
	for start := time.Now(); ; time.Sleep(100 * time.Millisecond) {
		l, err = postgres.Open(ctx, *url, &postgres.Options{Schema: *schema, MaxConns: *maxConns})
		if err == nil || time.Since(start) > 20*time.Second || ctx.Err() != nil ||
			!errors.Is(err, postgres.ErrConnect) && !errors.Is(err, postgres.ErrConnectionLost) {
			break
		}
	}
	if err != nil {
		return err
	}
	defer l.Close()
	switch *mode {
	case "bench":
		return proctest.Bench{Worker: *worker, First: first, Offset: *offset, Ops: *ops, Chunk: *chunk}.Run(ctx, l, os.Stdin, os.Stdout)
	case "shared":
		return proctest.Shared{Worker: *worker, Partitions: *partitions, Concurrency: *concurrency, Work: *work,
			Lease: *lease, Heartbeat: *heartbeat, Deadline: *deadline}.Run(ctx, l, os.Stdin, os.Stdout)
	}
	w, err := tranche.NewTimePartitionWindow(tranche.Day, first, first.AddDate(0, 0, *days-1))
	if err != nil {
		return err
	}
	logFile, err := proctest.OpenLog(*logPath)
	if err != nil {
		return err
	}
	defer logFile.Close()
	events := proctest.Events{Worker: *worker, Dest: *dest, Log: logFile, Rows: *rows, Pause: proctest.Pause{At: *pauseAt, Key: *pauseKey}, Work: func(ctx context.Context, key string) error {
		if *ignoreCtx {
			time.Sleep(*work)
			return nil
		}
		select {
		case <-time.After(*work):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}}
	closeAudit, err := events.AuditTo(*auditPath)
	if err != nil {
		return err
	}
	defer closeAudit()
	if *sink == "sql" || *sink == "sql-separate" {
		var d *postgres.Destination
		if *sink == "sql" {
			d, err = postgres.NewDestination(ctx, l, proctest.EventsTable, proctest.AuditTable)
		} else {
			d, err = postgres.OpenDestination(ctx, *url, &postgres.Options{Schema: *schema}, proctest.EventsTable, proctest.AuditTable)
		}
		if err != nil {
			return err
		}
		defer d.Close()
		if err := d.CreateTables(ctx); err != nil {
			return err
		}
		events.Destination = d
	}
	b, err := events.Backfill(w, l)
	if err != nil {
		return err
	}
	b.Concurrency, b.Lease, b.Heartbeat = *concurrency, *lease, *heartbeat
	id, err := b.ID()
	if err != nil {
		return err
	}
	out := summary{Worker: *worker}
	lost := func(err error) bool {
		return errors.Is(err, postgres.ErrConnectionLost) || errors.Is(err, postgres.ErrConnect)
	}
	progressed, succeeded := time.Now(), 0
	for ctx.Err() == nil {
		r, err := b.Run(ctx)
		out.Runs++
		if r != nil {
			out.Succeeded += r.Succeeded
			out.Failed += r.Failed
			for _, f := range r.Failures {
				switch {
				case errors.Is(f.Err, tranche.ErrFenced):
					out.Fenced++
					if !slices.Contains(out.FencedKeys, f.Key) {
						out.FencedKeys = append(out.FencedKeys, f.Key)
					}
				case lost(f.Err):
					out.Lost++
				}
			}
			for _, f := range r.ClaimFailures {
				if lost(f.Err) {
					out.Lost++
				}
			}
		}
		held := r != nil && r.Failed == 0 && r.Unclaimed == 0 && errors.Is(err, backfill.ErrHeldElsewhere)
		if !held && (err != nil && r == nil || err != nil && r.Failed == 0) {
			if lost(err) {
				out.Lost++
			}
			if len(out.Errors) < 10 {
				out.Errors = append(out.Errors, err.Error())
			}
		}
		if !*loop {
			break
		}
		if s, err := backfill.StatusOf(ctx, l, id, time.Now()); err == nil {
			if s.Done() {
				out.Done = true
				break
			}
			// The deadline counts from the last progress, by any worker:
			// a loaded machine slows the backfill, which is no reason to
			// give up while it moves.
			if n := s.Counts[ledger.StateSucceeded]; n > succeeded {
				succeeded, progressed = n, time.Now()
			}
		}
		if time.Since(progressed) > *deadline {
			out.Errors = append(out.Errors, fmt.Sprintf("gave up after %v without a partition succeeding", *deadline))
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	return json.NewEncoder(os.Stdout).Encode(out)
}
