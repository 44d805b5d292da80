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
// destination took; -runlog writes what the network fault tests compare
// with the ledger's clock: each run, each failure and its error, and the
// instants of each execution's start, write and lease renewal that
// failed. With -loop (the
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
	"sync"
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
	ahead       = flag.Int("ahead", 0, "bench: partitions claimed a call, each finished alone (-chunk 1)")
	partitions  = flag.Int("partitions", 1000, "shared: hourly partitions in the backfill")
	ignoreCtx   = flag.Bool("ignorectx", false, "work through a canceled context")
	pauseAt     = flag.String("pause", "", "where to stop itself once: materialize, beforewrite, write or staged")
	pauseKey    = flag.String("pausekey", "", "the partition whose execution -pause stops")
	skew        = flag.Duration("skew", 0, "how far the worker's clock (Backfill.Now) is ahead of the machine's, the ledger's: negative is behind")
	auditPath   = flag.String("audit", "", "a log of every batch the destination wrote, appended to")
	version     = flag.String("version", "", "the DAG's version: another adds an asset, and so makes another DAG identity (a deploy)")
	dagName     = flag.String("name", "", "the DAG's name (tranche.DAG.Name): DAGs of one name are versions of one DAG")
	sink        = flag.String("sink", "files", "where the rows go: files (under -dest), sql (tables in the ledger's schema, committed with the ledger), or sql-separate (the same tables, committed on their own)")
	runLogPath  = flag.String("runlog", "", "a log of this worker's runs, failures, executions, writes and failed lease renewals, one JSON object a line, appended to")
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
	// Superseded counts the partitions its runs skipped as landed by a
	// newer version of the DAG (Report.Superseded), over all its runs.
	Superseded int `json:"superseded"`
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

// untilConnected calls f until it succeeds, fails other than by the
// server being unreachable or the connection lost, ctx ends, or 20 s
// have passed, and returns its last error.
func untilConnected(ctx context.Context, f func() error) error {
	for start := time.Now(); ; time.Sleep(100 * time.Millisecond) {
		err := f()
		if err == nil || time.Since(start) > 20*time.Second || ctx.Err() != nil ||
			!errors.Is(err, postgres.ErrConnect) && !errors.Is(err, postgres.ErrConnectionLost) {
			return err
		}
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
	err = untilConnected(ctx, func() (err error) {
		l, err = postgres.Open(ctx, *url, &postgres.Options{Schema: *schema, MaxConns: *maxConns})
		return err
	})
	if err != nil {
		return err
	}
	defer l.Close()
	switch *mode {
	case "bench":
		return proctest.Bench{Worker: *worker, First: first, Offset: *offset, Ops: *ops, Chunk: *chunk, Ahead: *ahead}.Run(ctx, l, os.Stdin, os.Stdout)
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
	events := proctest.Events{Worker: *worker, Dest: *dest, Log: logFile, Rows: *rows, Version: *version, Name: *dagName, Pause: proctest.Pause{At: *pauseAt, Key: *pauseKey}, Work: func(ctx context.Context, key string) error {
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
		// As the ledger's opening: the network may drop a reply
		// (TestNetLostReplies failed once on it here, before any run).
		if err := untilConnected(ctx, func() error { return d.CreateTables(ctx) }); err != nil {
			return err
		}
		events.Destination = d
	}
	b, err := events.Backfill(w, l)
	if err != nil {
		return err
	}
	b.Concurrency, b.Lease, b.Heartbeat = *concurrency, *lease, *heartbeat
	if *skew != 0 {
		b.Now = func() time.Time { return time.Now().Add(*skew) }
	}
	id, err := b.ID()
	if err != nil {
		return err
	}
	out := summary{Worker: *worker}
	lost := func(err error) bool {
		return errors.Is(err, postgres.ErrConnectionLost) || errors.Is(err, postgres.ErrConnect)
	}
	rl, err := openRunLog(*runLogPath, lost)
	if err != nil {
		return err
	}
	defer rl.close()
	rl.hook(b)
	progressed, succeeded := time.Now(), 0
	for ctx.Err() == nil {
		began := time.Now()
		r, err := b.Run(ctx)
		out.Runs++
		rl.run(out.Runs, began, r, err)
		if r != nil {
			out.Succeeded += r.Succeeded
			out.Failed += r.Failed
			out.Superseded += r.Superseded
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
		if err != nil && (r == nil || r.Failed == 0) {
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

// runLog is the log of -runlog: one JSON object a line, each a
// runLogEntry. Instants are the worker's clock, the machine's, which the
// tests compare with the ledger's (the server's, on the same machine).
type runLog struct {
	mu   sync.Mutex
	f    *os.File
	enc  *json.Encoder
	lost func(error) bool
	// runs maps a run id to the partition and the ledger's attempt it
	// runs, and writes to the instant the write of a run started.
	runs   map[string]runLogEntry
	writes map[string]time.Time
}

// runLogEntry is a line of the run log; Ev says which: "run" (a Run
// returned: its counts and error), "failure" (a partition the run ran
// that failed, or, with Claim, one whose claim failed), "start" (an
// execution started: the runner's KindRunStarted), "write" (a write
// ended: At is when it was announced, before the runner's last check of
// the lease, and End when the destination returned; Err and Fenced say
// how it failed, Stale that a destination refused it as older than a
// write it holds) and "renew" (a lease renewal failed).
type runLogEntry struct {
	Ev        string    `json:"ev"`
	Run       int       `json:"run,omitempty"`
	Key       string    `json:"key,omitempty"`
	Attempt   int       `json:"attempt,omitempty"`
	At        time.Time `json:"at"`
	End       time.Time `json:"end,omitzero"`
	Succeeded int       `json:"succeeded,omitempty"`
	Failed    int       `json:"failed,omitempty"`
	Unclaimed int       `json:"unclaimed,omitempty"`
	Held      int       `json:"held,omitempty"`
	Err       string    `json:"err,omitempty"`
	Fenced    bool      `json:"fenced,omitempty"` // the error matches tranche.ErrFenced
	Lost      bool      `json:"lost,omitempty"`   // the error matches postgres.ErrConnectionLost or ErrConnect
	Stale     bool      `json:"stale,omitempty"`  // the error is a *tranche.StaleWriteError
	Claim     bool      `json:"claim,omitempty"`
}

// openRunLog opens the run log at path, or returns a log that writes
// nothing when path is "".
func openRunLog(path string, lost func(error) bool) (*runLog, error) {
	if path == "" {
		return nil, nil
	}
	f, err := proctest.OpenLog(path)
	if err != nil {
		return nil, err
	}
	return &runLog{f: f, enc: json.NewEncoder(f), lost: lost, runs: map[string]runLogEntry{}, writes: map[string]time.Time{}}, nil
}

func (l *runLog) close() {
	if l != nil {
		l.f.Close()
	}
}

func (l *runLog) add(e runLogEntry) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.enc.Encode(e)
}

// entry fills e's error fields from err.
func (l *runLog) entry(e runLogEntry, err error) runLogEntry {
	if err != nil {
		_, stale := errors.AsType[*tranche.StaleWriteError](err)
		e.Err, e.Fenced, e.Lost, e.Stale = err.Error(), errors.Is(err, tranche.ErrFenced), l.lost(err), stale
	}
	return e
}

// hook logs the executions, writes and failed renewals of b's runs,
// after the hooks b has.
func (l *runLog) hook(b *backfill.Backfill) {
	if l == nil {
		return
	}
	inner := b.Runner.OnEvent
	b.Runner.OnEvent = func(ctx context.Context, ev tranche.Event) {
		now := time.Now() // before the runner goes on: a write's, before its check of the lease
		if inner != nil {
			inner(ctx, ev)
		}
		l.mu.Lock()
		run := l.runs[ev.RunID]
		switch ev.Kind {
		case tranche.KindRunStarted:
			run = runLogEntry{Ev: "start", Key: ev.Target, Attempt: ev.Attempt, At: now}
			l.runs[ev.RunID] = run
		case tranche.KindWriteStarted:
			l.writes[ev.RunID] = now
		case tranche.KindRunSucceeded, tranche.KindRunFailed, tranche.KindRunCanceled:
			delete(l.runs, ev.RunID)
			delete(l.writes, ev.RunID)
		}
		at := l.writes[ev.RunID]
		l.mu.Unlock()
		switch ev.Kind {
		case tranche.KindRunStarted:
			l.add(run)
		case tranche.KindWriteSucceeded, tranche.KindWriteFailed:
			l.add(l.entry(runLogEntry{Ev: "write", Key: run.Key, Attempt: run.Attempt, At: at, End: now}, ev.Err))
		}
	}
	b.OnEvent = func(_ context.Context, ev tranche.Event) {
		if ev.Kind == backfill.KindLeaseRenewFailed {
			l.add(l.entry(runLogEntry{Ev: "renew", Key: ev.Target, At: time.Now()}, ev.Err))
		}
	}
}

// run logs a Run that began at began and returned r and err.
func (l *runLog) run(n int, began time.Time, r *backfill.Report, err error) {
	if l == nil {
		return
	}
	e := runLogEntry{Ev: "run", Run: n, At: began, End: time.Now()}
	if r != nil {
		e.Succeeded, e.Failed, e.Unclaimed, e.Held = r.Succeeded, r.Failed, r.Unclaimed, r.Held
		for _, f := range r.Failures {
			l.add(l.entry(runLogEntry{Ev: "failure", Run: n, Key: f.Key, At: e.End}, f.Err))
		}
		for _, f := range r.ClaimFailures {
			l.add(l.entry(runLogEntry{Ev: "failure", Run: n, Key: f.Key, At: e.End, Claim: true}, f.Err))
		}
	}
	l.add(l.entry(e, err))
}
