package tranchecli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/internal/granularities"
	"github.com/tranche-dev/tranche/ledger"
)

// dagRef is a DAG that status and ls name: its identity, the program's
// name of it ("" when the program did not register it), and its
// granularity and zone when known (zero: those of its newest backfill).
type dagRef struct {
	id, name string
	g        tranche.TimeGranularity
	loc      *time.Location
}

// label names the DAG in a line: the program's name and the identity, or
// the identity alone.
func (d dagRef) label() string {
	if d.name != "" {
		return fmt.Sprintf("%s (%s)", d.name, d.id)
	}
	return d.id
}

// dags returns the DAGs of the program and of the ledger's backfills,
// the program's first, by name, then the others by identity.
func (c *call) dags(records []ledger.BackfillRecord) []dagRef {
	var out []dagRef
	seen := map[string]bool{}
	for _, name := range c.dagNames() {
		d := c.registeredDAG(name, records)
		seen[d.id] = true
		out = append(out, d)
	}
	// The others by the name their newest backfill recorded, in the zone
	// and granularity of that backfill's window.
	names := backfill.DAGNames(records)
	var others []dagRef
	for _, r := range slices.Backward(records) {
		if !seen[r.DAG] {
			seen[r.DAG] = true
			d := dagRef{id: r.DAG, name: names[r.DAG]}
			if w, err := tranche.ParseTimePartitionWindow(r.Window); err == nil {
				d.g, d.loc = w.Granularity(), w.Location()
			}
			others = append(others, d)
		}
	}
	slices.SortFunc(others, func(a, b dagRef) int {
		switch {
		case a.id < b.id:
			return -1
		case a.id > b.id:
			return 1
		}
		return 0
	})
	return append(out, others...)
}

// registeredDAG returns the program's DAG name: its identity is that of a
// backfill of it, if any (whose window names the schedule's zone), else
// that of its assets' granularity and zone (UTC if none).
func (c *call) registeredDAG(name string, records []ledger.BackfillRecord) dagRef {
	dag := c.p.DAGs[name]
	d := dagRef{name: name}
	if dag == nil {
		return d
	}
	g, loc, err := backfill.PartitioningOf(dag)
	if err != nil {
		return d
	}
	for _, r := range slices.Backward(records) {
		w, err := tranche.ParseTimePartitionWindow(r.Window)
		if err == nil && backfill.DAGIdentity(dag, w.Granularity(), w.Location()) == r.DAG {
			d.id, d.g, d.loc = r.DAG, w.Granularity(), w.Location()
			return d
		}
	}
	d.id, d.g, d.loc = backfill.DAGIdentity(dag, g, loc), g, loc
	return d
}

// findDAG returns the DAG arg names, a program's name or a DAG identity
// that a backfill records, and whether it names one.
func (c *call) findDAG(ctx context.Context, l ledger.Reader, arg string) (dagRef, bool, error) {
	records, err := l.Backfills(ctx)
	if err != nil {
		return dagRef{}, false, err
	}
	if arg == "" {
		return dagRef{}, false, nil
	}
	for _, d := range c.dags(records) {
		if d.id != "" && (d.name == arg || d.id == arg) {
			return d, true, nil
		}
	}
	// A name that an older identity's backfills recorded (the DAG before
	// a deploy): the newest identity of that name.
	for _, r := range slices.Backward(records) {
		if r.DAGName == arg {
			for _, d := range c.dags(records) {
				if d.id == r.DAG {
					return d, true, nil
				}
			}
		}
	}
	return dagRef{}, false, nil
}

// dagBackfill returns the backfill of DAG d that cancel (canceled false:
// its open backfill, neither canceled nor done) or resume (canceled true:
// its canceled one) means when named by the DAG, refusing none and
// several with what to type instead.
func (c *call) dagBackfill(ctx context.Context, l ledger.Reader, d dagRef, canceled bool) (string, error) {
	records, err := l.Backfills(ctx)
	if err != nil {
		return "", err
	}
	var ids []string
	for _, r := range slices.Backward(records) {
		if r.DAG != d.id || r.Canceled != canceled {
			continue
		}
		if !canceled {
			s, err := backfill.CountStatus(ctx, l, r)
			if err != nil {
				return "", err
			}
			if s.Done() {
				continue
			}
		}
		ids = append(ids, r.ID)
	}
	what := "open (neither done nor canceled)"
	if canceled {
		what = "canceled"
	}
	switch len(ids) {
	case 1:
		return ids[0], nil
	case 0:
		return "", &unknownError{fmt.Sprintf("DAG %s has no %s backfill; '%s status %s' shows its latest", d.label(), what, c.name, d.nameOrID())}
	}
	return "", &unknownError{fmt.Sprintf("DAG %s has %d %s backfills (%s); name one by its id", d.label(), len(ids), what, strings.Join(ids, ", "))}
}

// nameOrID is what a command takes for the DAG: its name, else its
// identity.
func (d dagRef) nameOrID() string {
	if d.name != "" {
		return d.name
	}
	return d.id
}

// dagStatus writes the status of a DAG: its latest run, its latest
// backfill and its scheduler, as text or JSON.
func (c *call) dagStatus(ctx context.Context, l ledger.Reader, d dagRef) error {
	sum, err := backfill.SummaryOf(ctx, l, d.id, d.g, d.loc, time.Now())
	if err != nil {
		return err
	}
	var span tranche.TimePartitionWindow
	var assets []backfill.AssetPlan
	if dag := c.p.DAGs[d.name]; dag != nil && granularities.Several(dag) {
		if span, assets, err = backfill.AssetsOf(ctx, l, dag, time.Now()); err != nil {
			return err
		}
	}
	if c.opt.format == formatJSON {
		j := dagStatusOf(d.name, sum)
		j.Assets = assetsJSON(assets)
		line, err := json.Marshal(j)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(c.stdout, "%s\n", line)
		return err
	}
	w := bufio.NewWriter(c.stdout)
	fmt.Fprintf(w, "dag %s\n", d.label())
	writeSummary(w, sum, time.Now())
	if len(assets) > 0 {
		fmt.Fprintf(w, "  assets           each recorded on its own, over %s:\n", span)
	}
	for _, a := range assets {
		fmt.Fprintf(w, "    %s (%v, %s): %d partitions: succeeded %d, failed %d, running %d, pending %d; blocked %d; stale %d\n",
			a.Asset, a.Granularity, a.DAGName, a.Counts.Total, a.States[ledger.StateSucceeded], a.States[ledger.StateFailed]+a.States[ledger.StateCanceled],
			a.States[ledger.StateRunning], a.States[ledger.StatePending], a.Blocked, a.Stale)
	}
	return w.Flush()
}

// assetJSON is an asset of a DAG of several granularities in the JSON
// form of its status.
type assetJSON struct {
	Asset       string               `json:"asset"`
	Granularity string               `json:"granularity"`
	DAG         string               `json:"dag"`
	DAGName     string               `json:"dag_name"`
	Total       int                  `json:"total"`
	States      map[ledger.State]int `json:"states"`
	Blocked     int                  `json:"blocked"`
	Stale       int                  `json:"stale"`
}

func assetsJSON(assets []backfill.AssetPlan) []assetJSON {
	var out []assetJSON
	for _, a := range assets {
		out = append(out, assetJSON{Asset: a.Asset, Granularity: a.Granularity.String(), DAG: a.DAG, DAGName: a.DAGName,
			Total: a.Counts.Total, States: a.States, Blocked: a.Blocked, Stale: a.Stale})
	}
	return out
}

// writeSummary writes the lines of a DAG's summary: latest run, latest
// backfill, scheduler.
func writeSummary(w io.Writer, sum *backfill.Summary, now time.Time) {
	run := "none"
	if a := sum.LatestRun; a != nil {
		run = fmt.Sprintf("%s %s, %s", a.Key, a.State, attemptText(*a))
	}
	fmt.Fprintf(w, "  latest run       %s\n", run)
	bf := "none"
	if s := sum.LatestBackfill; s != nil {
		bf = backfillLine(s, now)
	}
	fmt.Fprintf(w, "  latest backfill  %s\n", bf)
	for _, line := range schedulerLines(sum.Scheduler, now) {
		fmt.Fprintf(w, "  scheduler        %s\n", line)
	}
	if sum.Limit.Max > 0 {
		fmt.Fprintf(w, "  limit            %s\n", limitLine(sum.Limit, now))
	}
}

// backfillLine is a backfill in one line: id, state, progress and age.
func backfillLine(s *backfill.Status, now time.Time) string {
	j := statusOf(s)
	line := fmt.Sprintf("%s %s, %d/%d succeeded", j.Backfill.ID, j.State, j.Counts.Succeeded, j.Total)
	if n := j.Counts.Failed + j.Counts.Canceled; n > 0 {
		line += fmt.Sprintf(", %d failed", n)
	}
	return line + ", created " + age(now.Sub(s.Record.Created)) + " ago"
}

// schedulerLines says what the ledger shows of the DAG's scheduler: the
// last slot it ran and when, the next due, the missed, and a warning
// when none has been seen since the next came due.
func schedulerLines(sc backfill.SchedulerSeen, now time.Time) []string {
	var lines []string
	if pz := sc.Pause; pz.Paused {
		line := fmt.Sprintf("PAUSED by %s since %s, %s ago", pz.By, stamp(pz.Since), age(now.Sub(pz.Since)))
		if pz.Note != "" {
			line += fmt.Sprintf(": %q", pz.Note)
		}
		lines = append(lines, line+"; no slot starts until it is resumed")
	}
	if sc.Last == nil {
		return append(lines, "none seen: no slot was run live or caught up (a program's 'schedule' command runs one)")
	}
	lines = append(lines, fmt.Sprintf("last slot %s %s (%s) at %s, %s ago", sc.Last.Key, sc.Last.State, sc.Last.Trigger,
		stamp(sc.Last.Started), age(now.Sub(sc.Last.Started))))
	if sc.Next.Granularity.IsValid() {
		next := fmt.Sprintf("next slot %s due %s", sc.Next.Key(), stamp(sc.NextDue))
		if sc.Delay > 0 {
			next += fmt.Sprintf(" (its close plus %v)", sc.Delay)
		}
		if sc.Missed > 0 {
			next += fmt.Sprintf("; %s due since with no run", counted(sc.Missed, "slot"))
		}
		lines = append(lines, next)
	}
	if sc.Waiting {
		lines = append(lines, fmt.Sprintf("waiting for scheduler: slot %s came due %s ago and none has run it; is the scheduler running?",
			sc.Next.Key(), age(now.Sub(sc.NextDue))))
	}
	return lines
}

// age rounds d for a person: seconds, minutes, hours or days.
func age(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return d.Round(time.Second).String()
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
	}
	return fmt.Sprintf("%dd", int(d/(24*time.Hour)))
}

// writeDAGs writes the DAGs section of ls: a line per DAG with its latest
// run, its latest backfill and its scheduler.
func (c *call) writeDAGs(ctx context.Context, l ledger.Reader, records []ledger.BackfillRecord) error {
	dags := c.dags(records)
	if len(dags) == 0 {
		return nil
	}
	now := time.Now()
	tw := tabwriter.NewWriter(c.stdout, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "\nDAG\tLATEST RUN\tLATEST BACKFILL\tSCHEDULER")
	for _, d := range dags {
		if d.id == "" {
			continue
		}
		sum, err := backfill.SummaryOf(ctx, l, d.id, d.g, d.loc, now)
		if err != nil {
			return errors.Join(tw.Flush(), err)
		}
		run, bf := "-", "-"
		if a := sum.LatestRun; a != nil {
			run = fmt.Sprintf("%s %s (%s)", a.Key, a.State, a.Trigger)
		}
		if s := sum.LatestBackfill; s != nil {
			bf = backfillLine(s, now)
		}
		sched := "-"
		if sc := sum.Scheduler; sc.Last != nil {
			sched = fmt.Sprintf("last %s, %s ago", sc.Last.Key, age(now.Sub(sc.Last.Started)))
			if sc.Next.Granularity.IsValid() {
				sched += ", next " + sc.Next.Key()
			}
			if sc.Missed > 0 {
				sched += fmt.Sprintf(", %d missed", sc.Missed)
			}
			if sc.Waiting {
				sched += ": waiting for scheduler"
			}
		}
		if pz := sum.Scheduler.Pause; pz.Paused {
			sched = fmt.Sprintf("PAUSED by %s %s ago; %s", pz.By, age(now.Sub(pz.Since)), sched)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", d.label(), run, bf, sched)
	}
	return tw.Flush()
}
