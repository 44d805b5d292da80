// Worker runs schedulers of an hourly DAG on a SQLite ledger (-db) or a
// PostgreSQL one (-pg, -schema), for the process tests of package
// schedule (process_test.go), which build it in a module of their own:
// the root module does not require the drivers. Its clock starts at -base at the real instant -epoch and runs
// -rate times the system's pace, so that processes started apart share
// it; it stops when that clock reads -until. With -report it prints the
// history of every slot from -base to -until instead, one JSON object a
// line; with -drop, it drops the PostgreSQL schema after.
//
// Each run writes its slot's row to a destination that appends a line
// "write KEY WORKER TOKEN PID" to the -audit log, beside the
// materializer's "start" and "end" lines, and a scheduler's "started"
// (Run began: KEY is the first slot it waits for) and "slot.missed".
//
// With -setlimit N it sets the DAG's limit in the ledger and exits; with
// -backfill FROM/TO it runs a backfill of that window (RFC 3339 bounds)
// as a worker of -concurrency instead of schedulers, each partition
// before -base taking -bftake. -timing appends "start|end KEY WHO
// UNIXNANO" lines, by the system's clock, for every run. With -mixed
// the DAG holds a daily rollup of the hours too ("rollup KEY WORKER PID"
// in the audit; "rollup-KEY" in -timing), both from -first (else
// -base), and -report -asset rollup reports its days; -setlimit then
// sets the limit of both assets' identities, in one group.
package main

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/postgres"
	"github.com/tranche-dev/tranche/ledger/sqlite"
	"github.com/tranche-dev/tranche/schedule"
)

var (
	db        = flag.String("db", "", "the SQLite ledger")
	pgURL     = flag.String("pg", "", "the PostgreSQL ledger's connection string, in place of -db")
	pgSchema  = flag.String("schema", "", "the PostgreSQL ledger's schema")
	drop      = flag.Bool("drop", false, "with -report and -pg: drop the schema after the report")
	worker    = flag.String("worker", "w", "the worker's name; replicas add -N")
	replicas  = flag.Int("replicas", 1, "schedulers in this process, each with its own connections")
	zone      = flag.String("zone", "America/New_York", "the slots' zone")
	base      = flag.String("base", "", "what the clock reads at -epoch (RFC 3339)")
	until     = flag.String("until", "", "stop when the clock reads this (RFC 3339)")
	epoch     = flag.Int64("epoch", 0, "the real instant the clock reads -base, Unix nanoseconds")
	rate      = flag.Int64("rate", 3600, "how many times faster than the system's the clock runs")
	lease     = flag.Duration("lease", time.Second, "the lease (real time)")
	heartbeat = flag.Duration("heartbeat", 300*time.Millisecond, "the heartbeat (real time)")
	take      = flag.Duration("take", 20*time.Millisecond, "how long a slot's run takes (real time)")
	slow      = flag.String("slow", "", "a slot key whose run takes -slowtake")
	slowTake  = flag.Duration("slowtake", 2*time.Second, "how long the -slow slot's run takes (real time)")
	audit     = flag.String("audit", "", "append a line per run's start and end here")
	report    = flag.Bool("report", false, "print the slots' histories and exit")

	setLimit    = flag.Int("setlimit", -1, "set the DAG's limit in the ledger and exit")
	backfillWin = flag.String("backfill", "", "run a backfill of FROM/TO (RFC 3339) instead of schedulers")
	concurrency = flag.Int("concurrency", 1, "the backfill's concurrency")
	bfTake      = flag.Duration("bftake", time.Second, "how long a partition before -base takes (real time)")
	timing      = flag.String("timing", "", "append start and end lines with the system's time here")

	mixed    = flag.Bool("mixed", false, "add a daily rollup of the hours, both assets from -base: a DAG of two granularities")
	waitUp   = flag.Duration("waitupstream", 0, "with -mixed: the scheduler's WaitUpstream (the clock's time)")
	asset    = flag.String("asset", "events", "with -mixed and -report: the asset whose slots to report")
	runLate  = flag.Bool("runlate", false, "with -mixed: the scheduler's RunLate")
	firstAt  = flag.String("first", "", "with -mixed: the assets' first partition (RFC 3339); -base when empty")
	rollTake = flag.Duration("rolltake", 0, "with -mixed: how long a day before -base takes (real time); -bftake when 0")
	stale    = flag.Bool("rerunstale", false, "with -mixed: the scheduler's RerunStale")
)

func main() {
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
}

func run() error {
	loc, err := time.LoadLocation(*zone)
	if err != nil {
		return err
	}
	from, err := time.Parse(time.RFC3339, *base)
	if err != nil {
		return err
	}
	to, err := time.Parse(time.RFC3339, *until)
	if err != nil {
		return err
	}
	t0 := time.Unix(0, *epoch)
	now := func() time.Time { return from.Add(time.Since(t0) * time.Duration(*rate)).In(loc) }
	after := func(d time.Duration) <-chan time.Time { return time.After(d / time.Duration(*rate)) }

	var logMu sync.Mutex
	var logFile *os.File
	var note func(what, key, who string)
	if *audit != "" {
		if logFile, err = os.OpenFile(*audit, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err != nil {
			return err
		}
		defer logFile.Close()
	}
	var timingMu sync.Mutex
	var timingFile *os.File
	if *timing != "" {
		if timingFile, err = os.OpenFile(*timing, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err != nil {
			return err
		}
		defer timingFile.Close()
	}
	clocked := func(what, key, who string) {
		if timingFile == nil {
			return
		}
		timingMu.Lock()
		defer timingMu.Unlock()
		fmt.Fprintf(timingFile, "%s %s %s %d\n", what, key, who, time.Now().UnixNano())
	}
	note = func(what, key, who string) {
		if logFile == nil {
			return
		}
		logMu.Lock()
		defer logMu.Unlock()
		fmt.Fprintf(logFile, "%s %s %s %d\n", what, key, who, os.Getpid())
	}
	dag := func(who string) (*tranche.DAG, error) {
		var first time.Time
		var more []tranche.Asset
		if *mixed {
			// From -base: the hours before it never run, so the first
			// day reads the hours from -base on.
			first = from
			if *firstAt != "" {
				f, err := time.Parse(time.RFC3339, *firstAt)
				if err != nil {
					return nil, err
				}
				first = f
			}
			more = append(more, tranche.Asset{Name: "rollup", Deps: []string{"events"},
				Partitioning: tranche.Partitioning{Granularity: tranche.Day, Location: loc, First: first},
				Materialize: func(ctx context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
					p, err := m.Partition()
					if err != nil {
						return nil, err
					}
					note("rollup", p.Key(), who)
					clocked("start", "rollup-"+p.Key(), who)
					d := *take
					if p.End.Before(from) {
						d = cmp.Or(*rollTake, *bfTake)
					}
					select {
					case <-time.After(d):
					case <-ctx.Done():
						return nil, ctx.Err()
					}
					clocked("end", "rollup-"+p.Key(), who)
					return nil, nil
				}})
		}
		d, err := tranche.NewDAG(append([]tranche.Asset{{
			Name:         "events",
			Partitioning: tranche.Partitioning{Granularity: tranche.Hour, Location: loc, Column: "slot", First: first},
			Materialize: func(ctx context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
				p, err := m.Partition()
				if err != nil {
					return nil, err
				}
				note("start", p.Key(), who)
				clocked("start", p.Key(), who)
				d := *take
				switch {
				case p.Key() == *slow:
					d = *slowTake
				case p.Start.Before(from):
					d = *bfTake
				}
				select {
				case <-time.After(d):
				case <-ctx.Done():
					return nil, ctx.Err()
				}
				note("end", p.Key(), who)
				clocked("end", p.Key(), who)
				return []tranche.Row{{"slot": p.Key()}}, nil
			},
			Destinations: []tranche.Destination{auditDest{note: note, who: who}},
		}}, more...)...)
		if d != nil && *mixed {
			d.Name = "platform"
		}
		return d, err
	}

	ctx := context.Background()
	if *report {
		return printReport(ctx, dag, loc, from, to)
	}
	if *setLimit >= 0 {
		return limit(ctx, dag, loc)
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		for now().Before(to) {
			time.Sleep(5 * time.Millisecond)
		}
		stop()
	}()
	if *backfillWin != "" {
		return runBackfill(ctx, dag, loc)
	}
	var wg sync.WaitGroup
	errs := make(chan error, *replicas)
	for i := range *replicas {
		who := *worker
		if *replicas > 1 {
			who = fmt.Sprintf("%s-%d", *worker, i)
		}
		l, err := open(ctx, false)
		if err != nil {
			return err
		}
		defer l.Close()
		d, err := dag(who)
		if err != nil {
			return err
		}
		s := &schedule.Scheduler{DAG: d, Ledger: l, Worker: who, Lease: *lease, Heartbeat: *heartbeat, Now: now, After: after,
			Runner: &tranche.Runner{Read: readNothing}, WaitUpstream: *waitUp, RunLate: *runLate, RerunStale: *stale,
			OnEvent: func(_ context.Context, e tranche.Event) {
				switch e.Kind {
				case schedule.KindLedgerError:
					fmt.Fprintf(os.Stderr, "%s: %v\n", who, e.Err)
				case schedule.KindStarted, schedule.KindMissed:
					// In the audit's order: a replica that joined while a
					// slot ran begins before that slot's end line.
					note(strings.TrimPrefix(string(e.Kind), "schedule."), e.Target, who)
				}
			}}
		wg.Go(func() { errs <- s.Run(ctx) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// limit sets the DAG's limit to -setlimit.
func limit(ctx context.Context, dag func(string) (*tranche.DAG, error), loc *time.Location) error {
	l, err := open(ctx, false)
	if err != nil {
		return err
	}
	defer l.Close()
	d, err := dag("limit")
	if err != nil {
		return err
	}
	if !*mixed {
		_, err = l.(ledger.Limiter).SetLimit(ctx, backfill.DAGIdentity(d, tranche.Hour, loc), ledger.Limit{Max: *setLimit, By: "test"})
		return err
	}
	// Each asset's identity, in one group: as tranche limit DAG N does.
	for a, g := range map[string]tranche.TimeGranularity{"events": tranche.Hour, "rollup": tranche.Day} {
		one, err := backfill.AssetDAG(d, a, readNothing)
		if err != nil {
			return err
		}
		if _, err := l.(ledger.Limiter).SetLimit(ctx, backfill.DAGIdentity(one, g, loc), ledger.Limit{Max: *setLimit, By: "test", Group: d.Name}); err != nil {
			return err
		}
	}
	return nil
}

// runBackfill runs a backfill of -backfill as worker -worker until ctx
// ends or the backfill does.
func runBackfill(ctx context.Context, dag func(string) (*tranche.DAG, error), loc *time.Location) error {
	from, to, ok := strings.Cut(*backfillWin, "/")
	if !ok {
		return fmt.Errorf("-backfill %q: want FROM/TO", *backfillWin)
	}
	lo, err := time.Parse(time.RFC3339, from)
	if err != nil {
		return err
	}
	hi, err := time.Parse(time.RFC3339, to)
	if err != nil {
		return err
	}
	window, err := tranche.WindowBetween(tranche.Hour, lo.In(loc), hi.In(loc))
	if err != nil {
		return err
	}
	l, err := open(ctx, false)
	if err != nil {
		return err
	}
	defer l.Close()
	d, err := dag(*worker)
	if err != nil {
		return err
	}
	b := &backfill.Backfill{DAG: d, Ledger: l, Window: window, Concurrency: *concurrency, Worker: *worker, Lease: *lease,
		Runner: &tranche.Runner{Read: readNothing},
		OnEvent: func(_ context.Context, e tranche.Event) {
			if e.Kind == backfill.KindPartitionFailed || e.Kind == backfill.KindPartitionUnclaimed {
				fmt.Fprintf(os.Stderr, "%s: %s %s: %v\n", *worker, e.Kind, e.Target, e.Err)
			}
		}}
	_, err = b.Run(ctx)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// slotReport is one slot's history, as the report prints it.
type slotReport struct {
	Key      string          `json:"key"`
	Attempts []attemptReport `json:"attempts"`
}

type attemptReport struct {
	Worker string `json:"worker"`
	State  string `json:"state"`
	Err    string `json:"err,omitempty"`
}

func printReport(ctx context.Context, dag func(string) (*tranche.DAG, error), loc *time.Location, from, to time.Time) error {
	l, err := open(ctx, true)
	if err != nil {
		return err
	}
	defer l.Close()
	d, err := dag("report")
	if err != nil {
		return err
	}
	id := backfill.DAGIdentity(d, tranche.Hour, loc)
	if *mixed {
		a, err := backfill.AssetDAG(d, *asset, readNothing)
		if err != nil {
			return err
		}
		g := tranche.Hour
		if *asset == "rollup" {
			g = tranche.Day
		}
		id = backfill.DAGIdentity(a, g, loc)
	}
	lo := from.Add(-time.Hour)
	if *mixed {
		lo = from.Add(-48 * time.Hour) // the day holding -base
	}
	enc := json.NewEncoder(os.Stdout)
	for a, err := range l.Latest(ctx, id, lo, to) {
		if err != nil {
			return err
		}
		h, err := l.History(ctx, id, a.Start)
		if err != nil {
			return err
		}
		r := slotReport{Key: a.Key}
		for _, at := range h {
			r.Attempts = append(r.Attempts, attemptReport{Worker: at.Worker, State: string(at.State), Err: strings.TrimSpace(at.Err)})
		}
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	if *drop && *pgURL != "" {
		// The ledger's driver registered itself as "pgx".
		db, err := sql.Open("pgx", *pgURL)
		if err != nil {
			return err
		}
		defer db.Close()
		_, err = db.ExecContext(ctx, `DROP SCHEMA "`+strings.ReplaceAll(*pgSchema, `"`, `""`)+`" CASCADE`)
		return err
	}
	return nil
}

// readNothing is the runner's Read under -mixed: the rollup counts on
// the scheduler, which runs a day once the ledger holds its hours.
func readNothing(context.Context, string, tranche.TimePartition) ([]tranche.Row, error) {
	return nil, nil
}

// closingLedger is a ledger the worker closes.
type closingLedger interface {
	ledger.Ledger
	Close() error
}

// open opens the ledger -db or -pg names; existing opens only a ledger
// that exists.
func open(ctx context.Context, existing bool) (closingLedger, error) {
	if *pgURL != "" {
		return postgres.Open(ctx, *pgURL, &postgres.Options{Schema: *pgSchema, Existing: existing})
	}
	return sqlite.Open(ctx, *db, &sqlite.Options{Existing: existing})
}

// auditDest is the destination of the slots' rows: it appends a line per
// batch to the audit log, with the batch's fencing token.
type auditDest struct {
	note func(what, key, who string)
	who  string
}

func (d auditDest) Write(_ context.Context, batches []tranche.Batch) error {
	for _, b := range batches {
		d.note("write", b.Partition.Key(), fmt.Sprintf("%s %d", d.who, b.Token))
	}
	return nil
}
