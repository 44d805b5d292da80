// Distributed shares one backfill between several worker processes
// through a PostgreSQL ledger: a year of days over two assets, each
// partition landing exactly once whichever worker runs it.
//
//	export TRANCHE_LEDGER=postgres://user@host:5432/database   # or postgres:host=HOST dbname=DATABASE, ?schema=NAME
//	go run ./examples/distributed              # start 4 worker processes, then show the status
//	go run ./examples/distributed -workers 8   # or 8
//	go run ./examples/distributed worker       # one worker: what each replica of a scaled-out job runs
//	go run ./examples/distributed status       # the shared progress, from any machine
//
// Each worker prints what it claims. A worker runs the backfill until
// every partition has succeeded: run more of them, on this machine or on
// others, and they share the rest; kill one, and the others take its
// partitions over once its lease expires. -url gives the connection
// string in place of TRANCHE_POSTGRES_URL, -dest the folder the files
// land in (shared by the workers of this example; a real deployment
// writes to a warehouse or an object store instead).
//
// With ledger/postgres/testserver.sh, a private server for a try:
//
//	eval "$(ledger/postgres/testserver.sh start)"
//	go run ./examples/distributed
//	ledger/postgres/testserver.sh stop
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/destination/files"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/address"
	"github.com/tranche-dev/tranche/ledger/postgres"
)

var (
	url     = flag.String("url", defaultLedger(), "the ledger's address, as the tranche command takes it: postgres://user@host:5432/database?schema=NAME or postgres:host=HOST dbname=DATABASE (default $TRANCHE_LEDGER, else $TRANCHE_POSTGRES_URL)")
	schema  = flag.String("schema", "", "the PostgreSQL schema of the ledger's tables, in place of the address's schema= (default: the connection's current schema)")
	dest    = flag.String("dest", filepath.Join(os.TempDir(), "tranche-distributed"), "the folder the files land in")
	workers = flag.Int("workers", 4, "how many worker processes to start")
	name    = flag.String("name", "", "this worker's name in the ledger (default: host-pid)")
	work    = flag.Duration("work", 30*time.Millisecond, "how long each partition's extraction takes, as a slow source would")
)

func main() {
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: distributed [flags] [start | worker | status]\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if *url == "" {
		fmt.Fprintln(os.Stderr, "distributed: no ledger: set TRANCHE_LEDGER or TRANCHE_POSTGRES_URL, or give -url")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch cmd := flag.Arg(0); cmd {
	case "", "start":
		err = start(ctx)
	case "worker":
		err = worker(ctx)
	case "status":
		err = status(ctx, os.Stdout)
	default:
		flag.Usage()
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "distributed:", err)
		os.Exit(1)
	}
}

// newBackfill returns the example's backfill: 2025, day by day, over
// "orders", extracted from a slow source, and "daily_totals", summed
// from it.
func newBackfill(l ledger.Ledger) (*backfill.Backfill, error) {
	year, err := tranche.NewTimePartitionWindow(tranche.Day,
		time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2025, 12, 31, 0, 0, 0, 0, time.UTC))
	if err != nil {
		return nil, err
	}
	daily := tranche.Partitioning{Granularity: tranche.Day, Location: time.UTC, Column: "day"}
	warehouse := &files.Destination{Dir: *dest}
	dag, err := tranche.NewDAG(
		tranche.Asset{Name: "orders", Partitioning: daily, Destinations: []tranche.Destination{warehouse},
			Materialize: func(ctx context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
				p, err := m.Partition()
				if err != nil {
					return nil, err
				}
				select { // the source takes its time
				case <-time.After(*work):
				case <-ctx.Done():
					return nil, ctx.Err()
				}
				var rows []tranche.Row
				for i := range 3 + p.Start.Day()%4 {
					rows = append(rows, tranche.Row{"day": p.Key(), "order": fmt.Sprintf("%s-%d", p.Key(), i), "cents": 500 + 125*((p.Start.Day()+i)%7)})
				}
				return rows, nil
			}},
		tranche.Asset{Name: "daily_totals", Partitioning: daily, Destinations: []tranche.Destination{warehouse}, Deps: []string{"orders"},
			Materialize: func(ctx context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
				p, err := m.Partition()
				if err != nil {
					return nil, err
				}
				orders, err := m.Input("orders")
				if err != nil {
					return nil, err
				}
				cents := 0
				for _, r := range orders {
					cents += r["cents"].(int)
				}
				return []tranche.Row{{"day": p.Key(), "orders": len(orders), "cents": cents}}, nil
			}},
	)
	if err != nil {
		return nil, err
	}
	return &backfill.Backfill{
		DAG: dag, Window: year, Ledger: l, Worker: *name, Concurrency: 4,
		OnFailure: tranche.FailContinue,
		// A short lease, so that the partitions of a killed worker are
		// taken over within seconds; the default is 30s.
		Lease: 6 * time.Second, Heartbeat: 2 * time.Second,
		// Each replica waits for the partitions the others hold, taking
		// over those of a replica that dies, so that a run ends when the
		// backfill is done or failed, not while others still work.
		WaitForOthers: true,
	}, nil
}

// defaultLedger is $TRANCHE_LEDGER, which the tranche command reads
// too, or else $TRANCHE_POSTGRES_URL.
func defaultLedger() string {
	if v := os.Getenv("TRANCHE_LEDGER"); v != "" {
		return v
	}
	return os.Getenv("TRANCHE_POSTGRES_URL")
}

// ledgerAddress returns the ledger's address, -url with -schema.
func ledgerAddress() (address.Address, error) {
	addr, err := address.Parse(*url)
	if err != nil {
		return addr, err
	}
	if *schema != "" {
		addr.Schema = *schema
	}
	return addr, nil
}

// open opens the ledger at -url for the workers, which create it.
func open(ctx context.Context) (*postgres.Ledger, error) {
	addr, err := ledgerAddress()
	if err != nil {
		return nil, err
	}
	return postgres.Open(ctx, addr.Conn, &postgres.Options{Schema: addr.Schema})
}

// worker runs the backfill, printing each partition it claims, until
// every partition has succeeded: what each replica of a scaled-out job
// runs.
func worker(ctx context.Context) error {
	l, err := open(ctx)
	if err != nil {
		return err
	}
	defer l.Close()
	b, err := newBackfill(l)
	if err != nil {
		return err
	}
	if b.Worker == "" {
		host, err := os.Hostname()
		if err != nil {
			host = "worker" // the pid still tells the replicas apart on one machine
		}
		b.Worker = host + "-" + strconv.Itoa(os.Getpid())
	}
	b.OnEvent = func(_ context.Context, e tranche.Event) {
		switch e.Kind {
		case backfill.KindPartitionClaimed:
			fmt.Printf("%s claimed %s\n", b.Worker, e.Target)
		case backfill.KindPartitionFailed:
			fmt.Printf("%s failed %s: %v\n", b.Worker, e.Target, e.Err)
		}
	}
	id, err := b.ID()
	if err != nil {
		return err
	}
	ran := 0
	for {
		report, err := b.Run(ctx)
		if report != nil {
			ran += report.Succeeded
		}
		if ctx.Err() != nil {
			return err
		}
		if err != nil && !errors.Is(err, postgres.ErrConnectionLost) && !errors.Is(err, postgres.ErrConnect) &&
			(report == nil || report.Failed == 0) {
			return err
		}
		// Partitions held by other workers, or that failed, are not done
		// yet: run again until every one has succeeded. A worker that
		// died leaves its partitions held until its lease expires; the
		// next run takes them over.
		s, err := backfill.StatusOf(ctx, l, id, time.Now())
		if err == nil && s.Done() {
			fmt.Printf("%s done: it ran %d partitions\n", b.Worker, ran)
			return nil
		}
		select {
		case <-time.After(time.Second):
		case <-ctx.Done():
			return nil
		}
	}
}

// status prints the shared progress of the backfill.
func status(ctx context.Context, w io.Writer) error {
	addr, err := ledgerAddress()
	if err != nil {
		return err
	}
	// The status only reads: a reader has no method that writes.
	l, err := postgres.OpenReader(ctx, addr.Conn, &postgres.Options{Schema: addr.Schema})
	if err != nil {
		return err
	}
	defer l.Close()
	b, err := newBackfill(nil)
	if err != nil {
		return err
	}
	id, err := b.ID()
	if err != nil {
		return err
	}
	s, err := backfill.StatusOf(ctx, l, id, time.Now())
	if errors.Is(err, ledger.ErrUnknownBackfill) {
		fmt.Fprintf(w, "backfill %s has not started: no worker has run it yet\n", id)
		return nil
	}
	if err != nil {
		return err
	}
	fmt.Fprintln(w, s)
	// Who ran what, from the latest attempts.
	byWorker := map[string]int{}
	for ps, err := range s.Partitions(ctx) {
		if err != nil {
			return err
		}
		if ps.Latest != nil && ps.State == ledger.StateSucceeded {
			byWorker[ps.Latest.Worker]++
		}
	}
	names := make([]string, 0, len(byWorker))
	for n := range byWorker {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %s: %d partitions\n", n, byWorker[n])
	}
	for _, why := range s.Blocked {
		fmt.Fprintln(w, "  blocked:", why)
	}
	return nil
}

// start runs -workers worker processes of this program, each printing
// what it claims, and shows the status when they are done.
func start(ctx context.Context) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	// The first Open creates the ledger's tables; the workers would
	// also manage racing to, one after the other.
	l, err := open(ctx)
	if err != nil {
		return err
	}
	if err := l.Close(); err != nil {
		return err
	}
	fmt.Printf("starting %d workers; the files land in %s\n", *workers, *dest)
	var wg sync.WaitGroup
	errs := make([]error, *workers)
	for i := range *workers {
		cmd := exec.CommandContext(ctx, self, "-url", *url, "-schema", *schema, "-dest", *dest, "-work", work.String(),
			"-name", fmt.Sprintf("worker-%d", i+1), "worker")
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Start(); err != nil {
			return err
		}
		wg.Go(func() { errs[i] = cmd.Wait() })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	fmt.Println()
	return status(ctx, os.Stdout)
}
