package tranchecli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/schedule"
)

// scheduleHelp is what help schedule says beyond the summary.
const scheduleHelp = `With no DAG named, every DAG of the program. Each slot runs once it closes
(plus --delay), once across every process that schedules the DAG on the
ledger. After downtime the newest --max-catch-up missed slots run, and
older ones are reported missed, for 'run' to backfill. A line is printed
as each slot starts and ends. SIGINT or SIGTERM stops it: a slot still
running is canceled and left to its lease, which the next scheduler on
the ledger takes over once it expires.`

func scheduleFlags(c *call, fs *flag.FlagSet) {
	fs.DurationVar(&c.opt.delay, "delay", 0, "how long after a slot closes it runs (2h: the day, two hours after it ends)")
	c.opt.maxCatchUp = schedule.DefaultMaxCatchUp
	fs.IntVar(&c.opt.maxCatchUp, "max-catch-up", schedule.DefaultMaxCatchUp, "how many missed slots, the newest, run after downtime; 0: none")
	fs.DurationVar(&c.opt.catchUpWindow, "catch-up-window", 0, "run a missed slot only if it came due within this `duration`; 0: no bound by time")
	c.opt.overlap = schedule.OverlapQueue
	fs.TextVar(&c.opt.overlap, "overlap", schedule.OverlapQueue, "what a slot due while an earlier one runs does, the `policy`: queue (waits for it), buffer-one (waits unless one waits), skip (is not run), concurrent, or cancel-other (stops it)")
	fs.IntVar(&c.opt.maxQueue, "max-queue", 0, "under --overlap queue, how many slots may wait; the others are skipped (0: no bound)")
	fs.DurationVar(&c.opt.lease, "lease", backfill.DefaultLease, "how long a claim holds without a heartbeat (renewed every third of it)")
	worker := "host-pid"
	if c.p.Worker != "" {
		worker = c.p.Worker
	}
	fs.StringVar(&c.opt.worker, "worker", "", "this process's `name` in the ledger (default "+worker+")")
}

// newSchedulers builds a scheduler for each DAG the command line names
// (every registered one when it names none), checking every flag, without
// a ledger. The names are in the order they run.
func (c *call) newSchedulers() ([]*schedule.Scheduler, []string, error) {
	o := c.opt
	switch {
	case o.delay < 0:
		return nil, nil, badUsage("--delay %v: want 0 or more", o.delay)
	case o.maxCatchUp < 0:
		return nil, nil, badUsage("--max-catch-up %d: want 0 (none) or more", o.maxCatchUp)
	case o.catchUpWindow < 0:
		return nil, nil, badUsage("--catch-up-window %v: want 0 (no bound by time) or more", o.catchUpWindow)
	case o.lease <= 0:
		return nil, nil, badUsage("--lease %v: want more than 0", o.lease)
	}
	names := c.args
	if len(names) == 0 {
		if len(c.p.DAGs) == 0 {
			return nil, nil, badUsage("no DAG to schedule: %s registers none", c.name)
		}
		names = c.dagNames()
	}
	maxCatchUp := o.maxCatchUp
	if maxCatchUp == 0 {
		maxCatchUp = -1 // the library's none; its 0 is the default
	}
	worker := o.worker
	if worker == "" {
		worker = c.p.Worker
	}
	var scheds []*schedule.Scheduler
	seen := map[string]bool{}
	for _, name := range names {
		dag, ok := c.p.DAGs[name]
		switch {
		case !ok:
			return nil, nil, badUsage("unknown DAG %q; this program has %s", name, strings.Join(c.dagNames(), ", "))
		case seen[name]:
			return nil, nil, badUsage("DAG %q named twice", name)
		}
		seen[name] = true
		if _, _, err := backfill.PartitioningOf(dag); err != nil {
			return nil, nil, badUsage("DAG %q: %s", name, unprefixed(err))
		}
		scheds = append(scheds, &schedule.Scheduler{
			DAG: dag, Runner: c.p.Runner, Worker: worker, Delay: o.delay, MaxCatchUp: maxCatchUp,
			CatchUpWindow: o.catchUpWindow, Overlap: o.overlap, MaxQueue: o.maxQueue, Lease: o.lease, Now: c.p.now, After: c.p.after,
		})
	}
	return scheds, names, nil
}

func runSchedule(ctx context.Context, c *call) error {
	scheds, names, err := c.newSchedulers()
	if err != nil {
		return err
	}
	l, err := c.writer(ctx)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	pr := &slotPrinter{w: c.stdout, now: c.p.now, program: c.name, width: maxLen(names)}
	if pr.now == nil {
		pr.now = time.Now
	}
	errs := make([]error, len(scheds))
	var wg sync.WaitGroup
	for i, s := range scheds {
		s.Ledger, s.OnEvent = l, pr.hook(names[i], s)
		wg.Go(func() {
			if errs[i] = s.Run(ctx); errs[i] != nil {
				// Refused at once: the others stop too, rather than run
				// a part of what was asked.
				errs[i] = fmt.Errorf("DAG %s: %w", names[i], errs[i])
				cancel(errs[i])
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

func maxLen(names []string) int {
	n := 0
	for _, s := range names {
		n = max(n, len(s))
	}
	return n
}

// slotPrinter writes a line for each event of the schedulers worth an
// operator's eye: a scheduler's start and end, and each slot's start,
// end, or why it did not run here. Lines start with the time by the
// program's clock, in the zone of the DAG's slots, then the DAG's name.
type slotPrinter struct {
	w       io.Writer
	now     func() time.Time
	program string
	width   int // of the widest DAG name

	mu sync.Mutex // one line at a time, whichever scheduler writes it
}

// hook returns the OnEvent hook of the scheduler s of DAG name.
func (pr *slotPrinter) hook(name string, s *schedule.Scheduler) func(context.Context, tranche.Event) {
	loc := time.UTC
	return func(_ context.Context, e tranche.Event) {
		if e.Partition.Granularity.IsValid() {
			loc = e.Partition.Start.Location()
		}
		line := pr.describe(e, s)
		if line == "" {
			return
		}
		pr.mu.Lock()
		defer pr.mu.Unlock()
		fmt.Fprintf(pr.w, "%s  %-*s  %s\n", pr.now().In(loc).Format(time.RFC3339), pr.width, name, line)
	}
}

// describe returns the line of event e, or "" for an event not printed
// (those of the runs, which the slot's lines sum up).
func (pr *slotPrinter) describe(e tranche.Event, s *schedule.Scheduler) string {
	slot := e.Target
	switch e.Kind {
	case schedule.KindStarted:
		catchUp := "none"
		if s.MaxCatchUp > 0 {
			catchUp = fmt.Sprint(s.MaxCatchUp)
		}
		if s.CatchUpWindow > 0 {
			catchUp += fmt.Sprintf(" within %v", s.CatchUpWindow)
		}
		overlap, _ := s.Overlap.MarshalText()
		return fmt.Sprintf("scheduling %v slots in %v as %s (delay %v, catch-up %s, overlap %s, lease %v): next %s, due %s",
			e.Partition.Granularity, e.Partition.Start.Location(), s.Status().Worker, s.Delay, catchUp, overlap, s.Lease,
			slot, e.Partition.End.Add(s.Delay).Format(time.RFC3339))
	case schedule.KindStopped:
		st := s.Status()
		return fmt.Sprintf("stopped (%v): %d succeeded, %d failed, %d interrupted, %d missed, %d skipped, %d done elsewhere",
			e.Err, st.Succeeded, st.Failed, st.Interrupted, st.Missed, st.Skipped, st.Elsewhere)
	case schedule.KindClaimed:
		return fmt.Sprintf("%s started (%s, attempt %d)", slot, schedule.TriggerOf(e), e.Attempt)
	case schedule.KindSucceeded:
		line := fmt.Sprintf("%s succeeded in %v", slot, brief(e.Duration))
		if e.Rows > 0 {
			// Counted per partition only by assets with a
			// Partitioning.Column, as in a backfill.
			line += ", " + counted(e.Rows, "row")
		}
		return line
	case schedule.KindFailed:
		return fmt.Sprintf("%s failed in %v: %v", slot, brief(e.Duration), e.Err)
	case schedule.KindInterrupted:
		return fmt.Sprintf("%s interrupted: %v", slot, e.Err)
	case schedule.KindHeld:
		return fmt.Sprintf("%s held by %s: watched until it ends", slot, attr(e, "worker"))
	case schedule.KindElsewhere:
		return fmt.Sprintf("%s done elsewhere: %s by %s", slot, attr(e, "state"), attr(e, "worker"))
	case schedule.KindMissed:
		return fmt.Sprintf("%s missed: it came due before the catch-up window; '%s run' backfills it", slot, pr.program)
	case schedule.KindSkipped:
		overlap, _ := s.Overlap.MarshalText()
		return fmt.Sprintf("%s skipped under --overlap %s; '%s run' backfills it", slot, overlap, pr.program)
	case schedule.KindCanceled:
		return fmt.Sprintf("%s canceled: a later slot came due (--overlap cancel-other); '%s run' backfills it", slot, pr.program)
	case schedule.KindPaused:
		return fmt.Sprintf("paused by %s since %s: no slot starts until '%s resume' of the DAG (%s)", attr(e, "by"), attr(e, "since"), pr.program, attr(e, "note"))
	case schedule.KindResumed:
		return fmt.Sprintf("resumed by %s", attr(e, "by"))
	case schedule.KindLedgerError:
		return fmt.Sprintf("ledger error: %v; trying again", e.Err)
	case backfill.KindLeaseRenewFailed:
		return fmt.Sprintf("%s: renewing the lease failed: %v", slot, e.Err)
	case backfill.KindLeaseRenewSlow:
		return fmt.Sprintf("%s: renewing the lease took %v", slot, brief(e.Duration))
	}
	return ""
}

// brief rounds d for a line: to the microsecond below a second, to the
// millisecond from one.
func brief(d time.Duration) time.Duration {
	if d < time.Second {
		return d.Round(time.Microsecond)
	}
	return d.Round(time.Millisecond)
}

// attr returns the string value of the event's attribute key, or "?".
func attr(e tranche.Event, key string) string {
	for _, a := range e.Attrs {
		switch {
		case a.Key != key:
		case a.Value.Kind() == slog.KindString:
			return a.Value.String()
		case a.Value.Kind() == slog.KindTime:
			return stamp(a.Value.Time())
		}
	}
	return "?"
}
