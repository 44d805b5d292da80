package tranchecli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/ledger"
)

// newBackfill builds the backfill the command line names, checking every
// flag, without a ledger: nothing is opened or written before the
// command line is known to be good.
func (c *call) newBackfill() (*backfill.Backfill, error) {
	name := c.args[0]
	dag, ok := c.p.DAGs[name]
	if !ok {
		return nil, badUsage("unknown DAG %q; this program has %s", name, strings.Join(c.dagNames(), ", "))
	}
	g, _, err := backfill.PartitioningOf(dag)
	if err != nil {
		return nil, badUsage("DAG %q: %s", name, unprefixed(err))
	}
	b := &backfill.Backfill{
		DAG: dag, Runner: c.p.Runner, Worker: c.p.Worker, ChunkSize: c.opt.chunk, Order: c.opt.order,
		Rerun: c.opt.rerun, OnFailure: c.opt.onFailure, Concurrency: c.opt.maxConcurrency, MaxPartitions: c.opt.maxPartitions,
		Lease: c.opt.lease,
	}
	if err := c.checkPolicies(); err != nil {
		return nil, err
	}
	if c.opt.maxPartitions < 1 {
		return nil, badUsage("--max-partitions %d: want 1 or more", c.opt.maxPartitions)
	}
	if c.opt.chunk < 1 {
		return nil, badUsage("--chunk %d: want 1 or more partitions per run", c.opt.chunk)
	}
	// The bounds and slots are read by the library's one rule, as the
	// pages read them: in the DAG's zone (UTC when it names none), a
	// date meaning the start of its day for --from and its end for --to.
	switch {
	case len(c.opt.slots) > 0 && (c.opt.from != "" || c.opt.to != ""):
		return nil, badUsage("--slot and --from/--to both given; name a window or slots, not both")
	case len(c.opt.slots) > 0 && !g.IsSchedule():
		return nil, badUsage("--slot names fire times of a cron schedule, and DAG %q is partitioned by %v; give --from and --to", name, g)
	case len(c.opt.slots) > 0:
		ps, err := backfill.ParseSlots(dag, c.opt.slots)
		if err != nil {
			return nil, &usageErr{err}
		}
		b.Partitions = ps
	case c.opt.from == "":
		return nil, badUsage("no window: give --from and --to, or --slot")
	case c.opt.to == "" && !g.IsSchedule():
		return nil, badUsage("--from %s without --to: give the window's last day or bound (a date: through its end)", c.opt.from)
	default:
		w, err := backfill.ParseWindow(dag, c.opt.from, c.opt.to, time.Now())
		if err != nil {
			return nil, &usageErr{fmt.Errorf("--from %s --to %s: %w", c.opt.from, c.opt.to, err)}
		}
		b.Window = w
	}
	// ID checks every field before the ledger is opened.
	if _, err := b.ID(); err != nil {
		return nil, &usageErr{err}
	}
	return b, nil
}

// checkPolicies refuses a concurrency below 1: the library reads 0 as 1,
// but an operator who types 0 means something else.
func (c *call) checkPolicies() error {
	if c.opt.maxConcurrency < 1 {
		return badUsage("--max-concurrency %d: want 1 or more partitions at once", c.opt.maxConcurrency)
	}
	return nil
}

func runPlan(ctx context.Context, c *call) error {
	b, err := c.newBackfill()
	if err != nil {
		return err
	}
	l, err := c.reader(ctx)
	if err != nil {
		return err
	}
	plan, err := b.PlanFrom(ctx, l)
	if err != nil {
		return err
	}
	if c.opt.format == formatJSON {
		return plan.WriteJSON(ctx, c.stdout)
	}
	return plan.WriteText(ctx, c.stdout)
}

// confirmLines is how many lines of a plan run prints before it asks:
// the header and the first partitions. plan prints every one.
const confirmLines = 40

func runRun(ctx context.Context, c *call) error {
	b, err := c.newBackfill()
	if err != nil {
		return err
	}
	ask := !c.opt.yes && !c.opt.dryRun
	if ask && !isTerminal(c.stdin) {
		return badUsage("standard input is not a terminal, so the plan cannot be confirmed: give --yes to run it without asking, or --dry-run to see it")
	}
	if b.Ledger, err = c.writer(ctx); err != nil {
		return err
	}
	plan, err := b.Plan(ctx)
	if err != nil {
		return err
	}
	if c.opt.dryRun {
		return plan.WriteText(ctx, c.stdout)
	}
	lw := &lineLimiter{w: c.stdout, left: confirmLines}
	if err := plan.WriteText(ctx, lw); err != nil && !errors.Is(err, errEnough) {
		return err
	}
	if lw.cut {
		fmt.Fprintf(c.stdout, "  ... (%d partitions in all: '%s plan' lists every one)\n", plan.Counts.Total, c.name)
	}
	if plan.Counts.Run == 0 && plan.Counts.SkipRunning == 0 {
		fmt.Fprintln(c.stdout, "Nothing to run.")
		return nil
	}
	if ask {
		what := counted(plan.Counts.Run, "partition")
		if plan.Counts.Runs != plan.Counts.Run {
			what += " in " + counted(plan.Counts.Runs, "run")
		}
		if plan.Counts.Run == 0 {
			// Held elsewhere: a worker killed leaves them running until
			// their leases lapse, and the run takes them over then.
			what = counted(plan.Counts.SkipRunning, "partition") + " held by other workers, should their leases lapse"
		}
		fmt.Fprintf(c.stderr, "Run %s? [y/N] ", what)
		answer, err := bufio.NewReader(c.stdin).ReadString('\n')
		if err != nil && (!errors.Is(err, io.EOF) || answer == "") {
			fmt.Fprintln(c.stderr)
		}
		switch strings.ToLower(strings.TrimSpace(answer)) {
		case "y", "yes":
		default:
			fmt.Fprintln(c.stderr, "Not run: nothing was written to the ledger.")
			return exitErr(exitFail)
		}
	}
	b.OnEvent = backfill.NewProgressReporter(c.stdout)
	res, err := b.Execute(ctx, plan)
	return c.report(res, err)
}

// report prints a run's result and returns its error.
func (c *call) report(res *backfill.Report, err error) error {
	if res != nil {
		fmt.Fprintln(c.stdout, res)
		for i, f := range res.Failures {
			if i == 10 {
				fmt.Fprintf(c.stdout, "  ... and %d more failures ('%s status %s --partitions' lists them)\n", len(res.Failures)-10, c.name, res.Backfill)
				break
			}
			fmt.Fprintf(c.stdout, "  failed: %s: %v\n", f.Key, f.Err)
		}
	}
	if heldOnly(res, err) {
		fmt.Fprintf(c.stdout, "Not done yet: %d %s held by other workers, running there or failed there; run it again later to finish it.\n",
			res.Held, plural(res.Held, "partition is", "partitions are"))
		return exitErr(exitHeld)
	}
	return err
}

// heldOnly reports whether a backfill's run left nothing wrong but
// partitions other workers hold: everything it ran succeeded, nothing
// was left unclaimed or unrun. The library reports that in
// Report.Held, not as an error; an operator meets it as exit code 4,
// so that a script can tell "done" from "others still run the rest".
func heldOnly(res *backfill.Report, err error) bool {
	return res != nil && err == nil && res.Held > 0 && res.Failed == 0 && res.Unclaimed == 0 && res.NotRun == 0
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func runResume(ctx context.Context, c *call) error {
	if err := c.checkPolicies(); err != nil {
		return err
	}
	l, err := c.writer(ctx)
	if err != nil {
		return err
	}
	if assets, err := c.assetBackfills(ctx, l, c.args[0]); err != nil || len(assets) > 0 {
		if err != nil {
			return err
		}
		return c.mixedResume(ctx, l, c.args[0], assets)
	}
	id, err := c.backfillID(ctx, l, c.args[0], true)
	if err != nil {
		return err
	}
	record, err := l.Backfill(ctx, id)
	if err != nil {
		return err
	}
	if !record.Canceled {
		fmt.Fprintf(c.stdout, "Backfill %s is not canceled: nothing to resume; nothing was changed. Its workers run it; 'run' runs a backfill of a registered DAG here.\n", id)
		return exitErr(exitNothing)
	}
	b, name, err := c.registered(record)
	if err != nil {
		return err
	}
	if b == nil {
		if err := l.ResumeBackfill(ctx, id); err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "Resumed backfill %s. Its DAG, %s, is not registered in %s: the workers running it take it up.\n", id, c.dagLabelOf(ctx, l, record), c.name)
		return nil
	}
	return c.resumeHere(ctx, l, b, id, name, record.Window)
}

// resumeHere resumes backfill id, b of the registered DAG name over
// window, in this process on l, reporting its progress and outcome.
func (c *call) resumeHere(ctx context.Context, l ledger.Ledger, b *backfill.Backfill, id, name, window string) error {
	fmt.Fprintf(c.stdout, "Resuming backfill %s of DAG %s over %s here.\n", id, name, window)
	b.Ledger = l
	b.OnEvent = backfill.NewProgressReporter(c.stdout)
	res, err := b.Resume(ctx)
	return c.report(res, err)
}

// registered returns the backfill of the record over the registered DAG
// it was made of, its Ledger unset, and the DAG's name, or nil when no
// registered DAG matches its identity.
func (c *call) registered(record ledger.BackfillRecord) (*backfill.Backfill, string, error) {
	w, err := tranche.ParseTimePartitionWindow(record.Window)
	if err != nil {
		return nil, "", fmt.Errorf("backfill %s: its recorded window: %w", record.ID, err)
	}
	for _, name := range c.dagNames() {
		dag := c.p.DAGs[name]
		if dag == nil || backfill.DAGIdentity(dag, w.Granularity(), w.Location()) != record.DAG {
			continue
		}
		b := &backfill.Backfill{
			DAG: dag, Window: w, Runner: c.p.Runner, Worker: c.p.Worker, ChunkSize: record.Chunk,
			Rerun: c.opt.rerun, OnFailure: c.opt.onFailure, Concurrency: c.opt.maxConcurrency, Lease: c.opt.lease,
		}
		for _, start := range record.Partitions {
			b.Partitions = append(b.Partitions, tranche.PartitionOf(w.Granularity(), start.In(w.Location())))
		}
		id, err := b.ID()
		if err != nil {
			return nil, "", fmt.Errorf("backfill %s of DAG %s: %w", record.ID, name, err)
		}
		if id != record.ID {
			// Another backfill of the same DAG and window (a
			// different window text for the same span): run it
			// elsewhere rather than under a new id.
			continue
		}
		return b, name, nil
	}
	return nil, "", nil
}

func runCancel(ctx context.Context, c *call) error {
	l, err := c.writer(ctx)
	if err != nil {
		return err
	}
	if assets, err := c.assetBackfills(ctx, l, c.args[0]); err != nil || len(assets) > 0 {
		if err != nil {
			return err
		}
		return c.mixedCancel(ctx, l, c.args[0], assets)
	}
	id, err := c.backfillID(ctx, l, c.args[0], false)
	if err != nil {
		return err
	}
	record, err := l.Backfill(ctx, id)
	if err != nil {
		return err
	}
	if record.Canceled && (record.StopRunning || !c.opt.stopRunning) {
		at := ""
		if !record.CanceledAt.IsZero() {
			at = " at " + stamp(record.CanceledAt)
		}
		fmt.Fprintf(c.stdout, "Backfill %s was canceled already%s: nothing was changed. '%s resume %s' lets it go on.\n", id, at, c.name, id)
		return exitErr(exitNothing)
	}
	s, err := backfill.StatusOf(ctx, l, id, time.Now())
	if err != nil {
		return err
	}
	if s.Done() {
		fmt.Fprintf(c.stdout, "Backfill %s is finished: all %s succeeded; nothing to cancel, nothing was changed.\n", id, counted(s.Counts[ledger.StateSucceeded], "partition"))
		return exitErr(exitNothing)
	}
	if err := l.CancelBackfill(ctx, id, ledger.CancelOptions{StopRunning: c.opt.stopRunning}); err != nil {
		return err
	}
	if c.opt.stopRunning {
		fmt.Fprintf(c.stdout, "Canceled backfill %s: workers claim nothing more for it and stop its running partitions at their next heartbeat.\n", id)
	} else {
		fmt.Fprintf(c.stdout, "Canceled backfill %s: workers claim nothing more for it; its running partitions finish. '%s resume %s' lets it go on.\n", id, c.name, id)
	}
	return nil
}

// errEnough stops a writer that has written enough lines.
var errEnough = errors.New("enough lines")

// lineLimiter passes on the first left lines written to it, then fails
// with errEnough, which stops a streaming writer.
type lineLimiter struct {
	w    io.Writer
	left int
	cut  bool // a line was refused
}

func (l *lineLimiter) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		if l.left == 0 {
			l.cut = true
			return n, errEnough
		}
		line := p
		if i := strings.IndexByte(string(p), '\n'); i >= 0 {
			line = p[:i+1]
			l.left--
		}
		m, err := l.w.Write(line)
		n += m
		if err != nil {
			return n, err
		}
		p = p[len(line):]
	}
	return n, nil
}

// counted writes n of noun: "1 partition", "3 partitions".
func counted(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
