// Crashworker is the worker process of the SQLite ledger's crash tests and
// benchmarks: the tests start several, kill, interrupt, pause and resume
// them, and check what the ledger and the files destination hold after.
//
// In stale mode it claims one partition as the backfill would, works, and
// then finishes it directly, printing Finish's error: paused past its
// lease meanwhile, it must be fenced.
//
// In backfill mode it runs a backfill.Backfill of one daily asset, "events",
// into a files destination (or, with -sink sql, tables in the ledger's
// file that commit with the ledger's record of success), appending a
// line to an executions log when each execution starts and when it ends,
// and prints its Result as one JSON object on stdout. With -pause it stops
// itself (SIGSTOP) once, on partition -pausekey, at one of
// proctest.PausePoints: inside its materializer, after the materializer
// returned and before the write, inside the write, or between the write
// and the ledger's record of it, so that the tests can make it a zombie
// at each point and resume it (SIGCONT); -audit logs every write its
// destination took. In bench mode it claims and finishes hourly
// partitions, -chunk at a time, and prints the latencies (see
// proctest.Bench). In shared mode it is one replica of a backfill of
// -partitions hourly partitions that many processes share, sleeping -work
// in each, run again until every partition has succeeded
// (proctest.Shared, pgworker's shared mode too).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/destination/files"
	"github.com/tranche-dev/tranche/internal/proctest"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/sqlite"
	"github.com/tranche-dev/tranche/ledger/sqlledger"
)

var (
	ledgerPath  = flag.String("ledger", "", "the ledger's SQLite file")
	mode        = flag.String("mode", "backfill", "backfill, bench, stale or shared")
	worker      = flag.String("worker", "", "the worker's name")
	dest        = flag.String("dest", "", "the files destination's folder")
	logPath     = flag.String("log", "", "the executions log, appended to")
	from        = flag.String("from", "2025-01-01", "the first day")
	days        = flag.Int("days", 60, "how many days")
	lease       = flag.Duration("lease", time.Second, "the lease")
	heartbeat   = flag.Duration("heartbeat", 300*time.Millisecond, "the heartbeat")
	concurrency = flag.Int("concurrency", 2, "partitions at once")
	work        = flag.Duration("work", 20*time.Millisecond, "the work per partition, in 5ms steps")
	ignoreCtx   = flag.Bool("ignorectx", false, "work through a canceled context")
	gateKey     = flag.String("gate", "", "a partition whose execution waits for -gatefile to exist before it ends")
	gateFile    = flag.String("gatefile", "", "see -gate")
	gatePoint   = flag.String("gatepoint", "work", "where -gate waits: in the work, or after the destination's write (logging \"wrote KEY WORKER TOKEN\")")
	rows        = flag.Int("rows", 3, "rows per partition")
	ops         = flag.Int("ops", 1000, "bench: claims and finishes")
	offset      = flag.Int("offset", 0, "stale: the partition, in days after -from; bench: the first, in hours after -from")
	chunk       = flag.Int("chunk", 1, "bench: partitions per claim")
	ahead       = flag.Int("ahead", 0, "bench: partitions claimed a call, each finished alone (-chunk 1)")
	partitions  = flag.Int("partitions", 1000, "shared: hourly partitions in the backfill")
	sink        = flag.String("sink", "files", "where the rows go: files (under -dest), sql (tables in the ledger's file, committed with the ledger), or sql-separate (the same tables, committed on their own)")
	waitOthers  = flag.Bool("waitothers", false, "wait for the partitions other workers hold (Backfill.WaitForOthers)")
	pauseAt     = flag.String("pause", "", "where to stop itself once: materialize, beforewrite, write or staged")
	pauseKey    = flag.String("pausekey", "", "the partition whose execution -pause stops")
	fsize       = flag.Int64("fsize", 0, "limit every file this process writes to this many bytes (RLIMIT_FSIZE), SIGXFSZ ignored: a write past it fails with EFBIG, as on a full disk; 0 means no limit")
	skew        = flag.Duration("skew", 0, "how far the worker's clock (Backfill.Now) is ahead of the machine's, the ledger's: negative is behind")
	auditPath   = flag.String("audit", "", "a log of every batch the destination wrote, appended to")
	version     = flag.String("version", "", "the DAG's version: another adds an asset, and so makes another DAG identity (a deploy)")
	dagName     = flag.String("name", "", "the DAG's name (tranche.DAG.Name): DAGs of one name are versions of one DAG")
)

// report is the worker's output: the backfill's Result, flattened.
type report struct {
	Worker    string `json:"worker"`
	Total     int    `json:"total"`
	Succeeded int    `json:"succeeded"`
	Failed    int    `json:"failed"`
	Skipped   int    `json:"skipped"`
	// Superseded counts those of Skipped that another version of the
	// DAG landed (Report.Superseded).
	Superseded int       `json:"superseded"`
	Elsewhere  int       `json:"elsewhere"`
	Held       int       `json:"held"`
	NotRun     int       `json:"not_run"`
	Unclaimed  int       `json:"unclaimed"`
	Failures   []failure `json:"failures"`
	// ClaimFailures are the partitions Unclaimed counts.
	ClaimFailures []failure `json:"claim_failures,omitempty"`
	Err           string    `json:"err,omitempty"`
	ErrFull       bool      `json:"err_full,omitempty"` // Err names a full disk (see full)
}

type failure struct {
	Key    string `json:"key"`
	Err    string `json:"err"`
	Fenced bool   `json:"fenced"`         // matches tranche.ErrFenced
	Full   bool   `json:"full,omitempty"` // names a full disk: matches sqlledger.ErrFull, ENOSPC or EFBIG
	IO     bool   `json:"io,omitempty"`   // matches sqlledger.ErrIO
	Claim  bool   `json:"claim,omitempty"`
}

// full reports whether err names a full disk, or a file at the
// process's size limit.
func full(err error) bool {
	return errors.Is(err, sqlledger.ErrFull) || errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EFBIG)
}

func main() {
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "crashworker:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *fsize > 0 {
		// Ignored, SIGXFSZ no longer kills the process: the write past
		// the limit fails with EFBIG instead.
		signal.Ignore(syscall.SIGXFSZ)
		var lim syscall.Rlimit
		if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
			return err
		}
		lim.Cur = uint64(*fsize)
		if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
			return err
		}
	}
	l, err := sqlite.Open(ctx, *ledgerPath, nil)
	if err != nil {
		return err
	}
	defer l.Close()
	first, err := time.Parse(time.DateOnly, *from)
	if err != nil {
		return err
	}
	w, err := tranche.NewTimePartitionWindow(tranche.Day, first, first.AddDate(0, 0, *days-1))
	if err != nil {
		return err
	}
	switch *mode {
	case "bench":
		return proctest.Bench{Worker: *worker, First: first, Offset: *offset, Ops: *ops, Chunk: *chunk, Ahead: *ahead}.Run(ctx, l, os.Stdin, os.Stdout)
	case "stale":
		return stale(ctx, l, first)
	case "shared":
		return proctest.Shared{Worker: *worker, Partitions: *partitions, Concurrency: *concurrency, Work: *work,
			Lease: *lease, Heartbeat: *heartbeat}.Run(ctx, l, os.Stdin, os.Stdout)
	}
	logFile, err := proctest.OpenLog(*logPath)
	if err != nil {
		return err
	}
	defer logFile.Close()
	events := proctest.Events{Worker: *worker, Dest: *dest, Log: logFile, Rows: *rows, Version: *version, Name: *dagName, Pause: proctest.Pause{At: *pauseAt, Key: *pauseKey}, Work: func(ctx context.Context, key string) error {
		for range int(*work / (5 * time.Millisecond)) {
			if err := ctx.Err(); err != nil && !*ignoreCtx {
				return err
			}
			time.Sleep(5 * time.Millisecond)
		}
		for key == *gateKey && *gatePoint == "work" {
			if _, err := os.Stat(*gateFile); err == nil {
				break
			}
			if err := ctx.Err(); err != nil && !*ignoreCtx {
				return err
			}
			time.Sleep(5 * time.Millisecond)
		}
		return nil
	}}
	if *sink == "sql" || *sink == "sql-separate" {
		var d *sqlite.Destination
		if *sink == "sql" {
			d, err = sqlite.NewDestination(ctx, l, proctest.EventsTable, proctest.AuditTable)
		} else {
			d, err = sqlite.OpenDestination(ctx, *ledgerPath, nil, proctest.EventsTable, proctest.AuditTable)
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
	if *gatePoint == "write" {
		inner := events.Destination
		if inner == nil {
			inner = &files.Destination{Dir: *dest}
		}
		events.Destination = gated{Destination: inner, log: logFile}
	}
	closeAudit, err := events.AuditTo(*auditPath)
	if err != nil {
		return err
	}
	defer closeAudit()
	b, err := events.Backfill(w, l)
	if err != nil {
		return err
	}
	b.Concurrency, b.Lease, b.Heartbeat, b.WaitForOthers = *concurrency, *lease, *heartbeat, *waitOthers
	if *skew != 0 {
		b.Now = func() time.Time { return time.Now().Add(*skew) }
	}
	r, err := b.Run(ctx)
	out := report{Worker: *worker}
	if r != nil {
		out = report{Worker: r.Worker, Total: r.Total, Succeeded: r.Succeeded, Failed: r.Failed,
			Skipped: r.Skipped, Superseded: r.Superseded, Elsewhere: r.Elsewhere, Held: r.Held, NotRun: r.NotRun, Unclaimed: r.Unclaimed}
		for _, f := range r.Failures {
			out.Failures = append(out.Failures, failure{Key: f.Key, Err: f.Err.Error(), Fenced: errors.Is(f.Err, tranche.ErrFenced), Full: full(f.Err), IO: errors.Is(f.Err, sqlledger.ErrIO)})
		}
		for _, f := range r.ClaimFailures {
			out.ClaimFailures = append(out.ClaimFailures, failure{Key: f.Key, Err: f.Err.Error(), Full: full(f.Err), IO: errors.Is(f.Err, sqlledger.ErrIO), Claim: true})
		}
	}
	if err != nil {
		out.Err, out.ErrFull = err.Error(), full(err)
	}
	return json.NewEncoder(os.Stdout).Encode(out)
}

// gated waits after the write of partition -gate for -gatefile to exist,
// between the write and the ledger's record of it, where the tests kill
// the worker.
type gated struct {
	tranche.Destination
	log *os.File
}

func (g gated) Write(ctx context.Context, batches []tranche.Batch) error {
	if err := g.Destination.Write(ctx, batches); err != nil {
		return err
	}
	for _, b := range batches {
		if b.Partition.Key() != *gateKey {
			continue
		}
		fmt.Fprintf(g.log, "wrote %s %s %d\n", b.Partition.Key(), *worker, b.Token)
		for {
			if _, err := os.Stat(*gateFile); err == nil {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	return nil
}

// staleResult is what stale mode prints.
type staleResult struct {
	Attempt   int    `json:"attempt"`
	FinishErr string `json:"finish_err"`
	Fenced    bool   `json:"fenced"`
}

// stale claims the day -offset days after first in the backfill's DAG and
// backfill, logs the claim, works through -work whatever happens, then
// records success.
func stale(ctx context.Context, l ledger.Ledger, first time.Time) error {
	dag, err := tranche.NewDAG(tranche.Asset{Name: "events",
		Partitioning: tranche.Partitioning{Granularity: tranche.Day, Location: time.UTC, Column: "day"},
		Destinations: []tranche.Destination{&files.Destination{Dir: *dest}},
		Materialize:  func(context.Context, *tranche.Materialization) ([]tranche.Row, error) { return nil, nil }})
	if err != nil {
		return err
	}
	w, err := tranche.NewTimePartitionWindow(tranche.Day, first, first.AddDate(0, 0, *days-1))
	if err != nil {
		return err
	}
	b := &backfill.Backfill{DAG: dag, Window: w, Ledger: l}
	id, err := b.ID()
	if err != nil {
		return err
	}
	dagID := backfill.DAGIdentity(dag, tranche.Day, time.UTC)
	p := tranche.PartitionOf(tranche.Day, first.AddDate(0, 0, *offset))
	lease, err := l.Claim(ctx, ledger.ClaimRequest{DAG: dagID, Backfill: id, Worker: *worker,
		RunID: backfill.RunID(dagID, p.Start, p.End), Partitions: []tranche.TimePartition{p}, Lease: *lease})
	if err != nil {
		return err
	}
	logFile, err := proctest.OpenLog(*logPath)
	if err != nil {
		return err
	}
	fmt.Fprintf(logFile, "claimed %s %s %d\n", p.Key(), *worker, lease.Attempts[0])
	logFile.Close()
	for range int(*work / (5 * time.Millisecond)) {
		time.Sleep(5 * time.Millisecond)
	}
	out := staleResult{Attempt: lease.Attempts[0]}
	if err := l.Finish(ctx, lease, []ledger.Outcome{{State: ledger.StateSucceeded, Rows: int64(*rows)}}); err != nil {
		out.FinishErr, out.Fenced = err.Error(), errors.Is(err, tranche.ErrFenced)
	}
	return json.NewEncoder(os.Stdout).Encode(out)
}
