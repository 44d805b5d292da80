package tranchecli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/ledger"
)

// stale counts the stale partitions of the backfill of s: those whose
// latest success ran other code than its DAG's, as the program
// registers it, or else than the DAG's newest success. It returns the
// code version it judged by. The DAG's recent successes tell whether
// any code version is declared; only then is every partition read.
func (c *call) stale(ctx context.Context, l ledger.Reader, s *backfill.Status) ([]tranche.TimePartition, string, error) {
	recent, err := l.RecentSuccesses(ctx, s.Record.DAG, 20)
	if err != nil {
		return nil, "", err
	}
	version, known := "", false
	if b, _, err := c.registered(s.Record); err == nil && b != nil {
		version, known = backfill.CodeVersion(b.DAG), true
	}
	if !known {
		if len(recent) == 0 {
			return nil, "", nil
		}
		version = recent[0].CodeVersion
	}
	if version == "" && !slices.ContainsFunc(recent, func(a ledger.Attempt) bool { return a.CodeVersion != "" }) {
		return nil, "", nil // no code versions declared
	}
	stale, err := s.Stale(ctx, version)
	return stale, version, err
}

// versionText names a code version in text: quoted, or "none declared".
func versionText(v string) string {
	if v == "" {
		return "none declared"
	}
	return strconv.Quote(v)
}

// unknownError is an id that names no backfill of the ledger; it
// matches ledger.ErrUnknownBackfill.
type unknownError struct{ msg string }

func (e *unknownError) Error() string        { return e.msg }
func (e *unknownError) Is(target error) bool { return target == ledger.ErrUnknownBackfill }

// minPrefix is the fewest characters of an id that name its backfill:
// a character or two would act on whichever backfill happens to start
// with them.
const minPrefix = 4

// resolve returns what arg names: a backfill's whole id; else a DAG, by
// the program's name of it, the name its backfills recorded, or its
// identity (isDAG true); else the backfill whose id starts with arg, of
// minPrefix characters or more, when only one does. An empty arg is bad
// usage; an arg that names nothing is refused with what lists them, and
// a prefix of several ids with those ids.
func (c *call) resolve(ctx context.Context, l ledger.Reader, arg string) (id string, d dagRef, isDAG bool, err error) {
	if strings.TrimSpace(arg) == "" {
		return "", d, false, badUsage("an empty ID: give a backfill's id (or its first %d characters or more) or a DAG's name", minPrefix)
	}
	_, err = l.Backfill(ctx, arg)
	if err == nil || !errors.Is(err, ledger.ErrUnknownBackfill) {
		return arg, d, false, err
	}
	if d, ok, err := c.findDAG(ctx, l, arg); err != nil || ok {
		return "", d, ok, err
	}
	records, err := l.Backfills(ctx)
	if err != nil {
		return "", d, false, err
	}
	var ids []string
	for _, r := range records {
		if strings.HasPrefix(r.ID, arg) {
			ids = append(ids, r.ID)
		}
	}
	switch {
	case len(ids) > 0 && len(arg) < minPrefix:
		return "", d, false, &unknownError{fmt.Sprintf("%q is too short a start of an id (%d backfills' ids start with it): give %d characters or more", arg, len(ids), minPrefix)}
	case len(ids) == 1:
		return ids[0], d, false, nil
	case len(ids) > 1:
		if len(ids) > 5 {
			ids = append(ids[:5], fmt.Sprintf("and %d more", len(ids)-5))
		}
		return "", d, false, &unknownError{fmt.Sprintf("%q is the start of %d backfills' ids (%s); give more of it", arg, len(ids), strings.Join(ids, ", "))}
	}
	return "", d, false, &unknownError{fmt.Sprintf("no backfill or DAG %q in the ledger; '%s ls' lists them", arg, c.name)}
}

// backfillID returns the id of the backfill arg names, as resolve reads
// it; a DAG stands for its backfill that cancel (canceled false) or
// resume (canceled true) means (see dagBackfill).
func (c *call) backfillID(ctx context.Context, l ledger.Reader, arg string, canceled bool) (string, error) {
	id, d, isDAG, err := c.resolve(ctx, l, arg)
	if err != nil || !isDAG {
		return id, err
	}
	return c.dagBackfill(ctx, l, d, canceled)
}

func runLs(ctx context.Context, c *call) error {
	l, err := c.reader(ctx)
	if err != nil {
		return err
	}
	records, err := l.Backfills(ctx)
	if err != nil {
		return err
	}
	// A DAG is shown by its newest name beside all its backfills.
	names := backfill.DAGNames(records)
	for i := range records {
		if n, ok := names[records[i].DAG]; ok {
			records[i].DAGName = n
		}
	}
	if c.opt.format == formatJSON {
		out := make([]backfillJSON, len(records))
		for i, r := range records {
			out[i] = backfillOf(r)
		}
		return writeJSON(c.stdout, out)
	}
	if len(records) == 0 {
		fmt.Fprintln(c.stdout, "No backfills.")
		return nil
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tDAG\tWINDOW\tCHUNK\tCREATED\tCANCELED")
	for _, r := range records {
		j := backfillOf(r)
		window := j.Window
		if j.Chosen > 0 {
			window += fmt.Sprintf(" (%d chosen)", j.Chosen)
		}
		canceled := "-"
		if r.Canceled {
			canceled = j.CanceledAt
			if canceled == "" {
				canceled = "yes"
			}
			if r.StopRunning {
				canceled += " (stop running)"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", j.ID, dagLabel(j), window, j.Chunk, j.Created, canceled)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return c.writeDAGs(ctx, l, records)
}

// gridCells is how many cells status asks a grid for: a month of hours,
// two years of days, or sixty years of months fit a screen.
const gridCells = 800

func runStatus(ctx context.Context, c *call) error {
	if c.opt.interval <= 0 {
		return badUsage("--interval %v: want a positive interval", c.opt.interval)
	}
	l, err := c.reader(ctx)
	if err != nil {
		return err
	}
	arg := c.args[0]
	if assets, err := c.assetBackfills(ctx, l, arg); err != nil || len(assets) > 0 {
		if err != nil {
			return err
		}
		return c.mixedStatus(ctx, l, arg, assets)
	}
	id, d, isDAG, err := c.resolve(ctx, l, arg)
	switch {
	case err != nil:
		return err
	case isDAG && c.opt.watch:
		return badUsage("--watch follows a backfill; %s is a DAG", arg)
	case isDAG:
		return c.dagStatus(ctx, l, d)
	}
	if c.opt.watch {
		return c.watch(ctx, l, id)
	}
	return c.statusOne(ctx, l, id)
}

// statusOne writes the status of backfill id.
func (c *call) statusOne(ctx context.Context, l ledger.Reader, id string) error {
	s, err := backfill.StatusOf(ctx, l, id, time.Now())
	if err != nil {
		return err
	}
	g, err := s.Grid(ctx, gridCells)
	if err != nil {
		return err
	}
	var stale []tranche.TimePartition
	if stale, c.codeVersion, err = c.stale(ctx, l, s); err != nil {
		return err
	}
	c.staleCount = len(stale)
	pace, err := c.triage(ctx, l, s)
	if err != nil {
		return err
	}
	if c.opt.format == formatJSON {
		return c.statusJSON(ctx, s, g, pace)
	}
	w := bufio.NewWriter(c.stdout)
	writeStatus(w, s, pace)
	if c.staleCount > 0 {
		fmt.Fprintf(w, "  %-11s %s ran other code than %s; '--rerun stale' runs %s again\n", "stale", counted(c.staleCount, "partition"),
			versionText(c.codeVersion), map[bool]string{true: "it", false: "them"}[c.staleCount == 1])
	}
	fmt.Fprintln(w)
	style := c.gridStyle()
	style.stale = stale
	writeGrid(w, g, s.Counts, style)
	if c.opt.partitions {
		fmt.Fprintln(w, "\npartitions, newest first:")
		if err := writePartitions(ctx, w, s); err != nil {
			w.Flush()
			return err
		}
	}
	return w.Flush()
}

// statusJSON writes the status as one JSON object, streaming its
// partitions when they are asked for.
func (c *call) statusJSON(ctx context.Context, s *backfill.Status, g *backfill.Grid, pc pace) error {
	j := statusOf(s)
	j.Running, j.ETAMS = pc.running, pc.eta.Milliseconds()
	j.Grid = gridOf(g)
	j.Stale, j.CodeVersion = c.staleCount, c.codeVersion
	head, err := json.Marshal(j)
	if err != nil {
		return err
	}
	if !c.opt.partitions {
		_, err := fmt.Fprintf(c.stdout, "%s\n", head)
		return err
	}
	w := bufio.NewWriter(c.stdout)
	fmt.Fprintf(w, "%s,\"partitions\":[", head[:len(head)-1])
	sep := ""
	for ps, err := range s.Partitions(ctx) {
		if err != nil {
			w.Flush()
			return err
		}
		line, err := json.Marshal(partitionOf(ps))
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "%s\n%s", sep, line)
		sep = ","
	}
	io.WriteString(w, "]}\n")
	return w.Flush()
}

// writeStatus writes the header of a status: the backfill, its counts
// and why it is not progressing.
func writeStatus(w io.Writer, s *backfill.Status, pc pace) {
	j := statusOf(s)
	chosen := ""
	if j.Backfill.Chosen > 0 {
		chosen = " chosen"
	}
	fmt.Fprintf(w, "backfill %s\n", j.Backfill.ID)
	fmt.Fprintf(w, "  dag         %s\n", dagLabel(j.Backfill))
	fmt.Fprintf(w, "  window      %s (%d%s partitions, %d per run)\n", j.Window, j.Total, chosen, j.Backfill.Chunk)
	fmt.Fprintf(w, "  created     %s\n", j.Backfill.Created)
	fmt.Fprintf(w, "  state       %s\n", j.State)
	fmt.Fprintf(w, "  counts      %s\n", countsText(j.Counts))
	if pc.eta > 0 {
		fmt.Fprintf(w, "  %-11s about %s left at the pace of the DAG's recent successes\n", "eta", left(pc.eta))
	}
	for i, b := range pc.running {
		label := ""
		if i == 0 {
			label = "running"
		}
		fmt.Fprintf(w, "  %-11s %s\n", label, b)
	}
	for i, b := range j.Blocked {
		label := ""
		if i == 0 {
			label = "blocked"
		}
		fmt.Fprintf(w, "  %-11s %s\n", label, b)
	}
}

// pace is how a backfill moves: the partitions its workers hold while it
// progresses, and the time left.
type pace struct {
	running []string
	eta     time.Duration
}

// triage judges whether backfill s progresses, as its page does: it holds
// partitions and one finished within the last lease (backfill.DefaultLease,
// or twice the newest run's duration when longer). Then its held
// partitions are running, not a reason it is stuck, and leave s.Blocked.
// The time left is the median of the DAG's recent successes for every
// round of the partitions left, as many at once as run now.
func (c *call) triage(ctx context.Context, l ledger.Reader, s *backfill.Status) (pace, error) {
	var pc pace
	if s.Done() {
		return pc, nil
	}
	recent, err := l.RecentSuccesses(ctx, s.Record.DAG, 20)
	if err != nil {
		return pc, err
	}
	running := s.Counts[ledger.StateRunning]
	if left := s.Counts[ledger.StatePending] + running; left > 0 && len(recent) > 0 && !s.Record.Canceled {
		ds := make([]time.Duration, len(recent))
		for i, a := range recent {
			ds[i] = a.Duration()
		}
		slices.Sort(ds)
		at := max(running, 1)
		pc.eta = max(ds[len(ds)/2], time.Millisecond) * time.Duration((left+at-1)/at)
	}
	if running == 0 || s.Record.Canceled {
		return pc, nil
	}
	last, err := s.Finished(ctx, 1, ledger.StateFailed, ledger.StateCanceled)
	if err != nil {
		return pc, err
	}
	for _, a := range recent {
		if a.Backfill == s.Record.ID && (len(last) == 0 || a.Finished.After(last[0].Finished)) {
			last = []ledger.Attempt{a}
			break
		}
	}
	// A backfill created or resumed within a lease has had no time to
	// finish one; else one must have finished within the lease, or twice
	// the newest run's duration.
	since, quiet := s.Record.Created, backfill.DefaultLease
	if s.Record.ResumedAt.After(since) {
		since = s.Record.ResumedAt
	}
	if len(last) > 0 {
		since, quiet = maxTime(since, last[0].Finished), max(quiet, 2*last[0].Duration())
	}
	if time.Since(since) > quiet {
		return pc, nil
	}
	var blocked []string
	for _, b := range s.Blocked {
		if strings.Contains(b, " held by worker ") {
			pc.running = append(pc.running, b)
		} else {
			blocked = append(blocked, b)
		}
	}
	s.Blocked = blocked
	return pc, nil
}

// dagLabel names a backfill's DAG as the text output shows it: by its
// name and identity, or by its identity alone when it has no name.
func dagLabel(j backfillJSON) string {
	if j.DAGName == "" {
		return j.DAG
	}
	return j.DAGName + " (" + j.DAG + ")"
}

func countsText(c countsJSON) string {
	return fmt.Sprintf("%d succeeded, %d running, %d failed, %d canceled, %d pending",
		c.Succeeded, c.Running, c.Failed, c.Canceled, c.Pending)
}

// writePartitions lists every partition with its latest attempt, as the
// ledger streams them: a million partitions are never held at once.
func writePartitions(ctx context.Context, w io.Writer, s *backfill.Status) error {
	width := len(s.Window.Newest().Key())
	for ps, err := range s.Partitions(ctx) {
		if err != nil {
			return err
		}
		line := fmt.Sprintf("  %-*s  %-9s", width, ps.Partition.Key(), ps.State)
		if a := ps.Latest; a != nil {
			line += "  " + attemptText(*a)
		}
		if _, err := fmt.Fprintln(w, strings.TrimRight(line, " ")); err != nil {
			return err
		}
	}
	return nil
}

// attemptText is one attempt in a line.
func attemptText(a ledger.Attempt) string {
	s := fmt.Sprintf("attempt %d by %s", a.Number, a.Worker)
	if a.Trigger != ledger.TriggerBackfill {
		s += " (" + string(a.Trigger) + ")"
	}
	s += ", started " + stamp(a.Started)
	if a.State == ledger.StateRunning {
		s += ", lease until " + stamp(a.LeaseUntil)
	} else if !a.Finished.IsZero() {
		s += fmt.Sprintf(", took %v, %d rows", a.Duration().Round(time.Millisecond), a.Rows)
	}
	if a.Err != "" {
		s += ": " + oneLine(a.Err)
	}
	return s
}

// oneLine folds an error text onto one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// ended reports whether a backfill that has not succeeded stopped: no
// partition runs, and it was canceled or a partition failed.
func ended(s *backfill.Status) bool {
	return !s.Done() && s.Counts[ledger.StateRunning] == 0 &&
		(s.Record.Canceled || s.Counts[ledger.StateFailed] > 0 || s.Counts[ledger.StateCanceled] > 0)
}

// watch prints a line each time the backfill's progress changes, and
// ends when it succeeded (nil: exit 0) or stopped otherwise (exit 1). A
// backfill that looks stopped is read again one interval later, so that
// a worker between a failure and its next claim is not taken for one
// that gave up.
func (c *call) watch(ctx context.Context, l ledger.Reader, id string) error {
	for s, err := range backfill.Watch(ctx, l, id, c.opt.interval) {
		if err != nil {
			return err
		}
		pc, err := c.triage(ctx, l, s)
		if err != nil {
			return err
		}
		c.watchLine(s, pc)
		if s.Done() {
			if c.opt.format == formatText {
				fmt.Fprintf(c.stdout, "Backfill %s succeeded.\n", id)
			}
			return nil
		}
		if !ended(s) {
			continue
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(c.opt.interval):
		}
		again, err := backfill.StatusOf(ctx, l, id, time.Now())
		if err != nil {
			return err
		}
		if ended(again) && maps.Equal(again.Counts, s.Counts) && again.Record.Canceled == s.Record.Canceled {
			if c.opt.format == formatText {
				fmt.Fprintf(c.stdout, "Backfill %s ended %s, not succeeded.\n", id, again.State())
			} else {
				c.watchLine(again, pace{})
			}
			return exitErr(exitFail)
		}
	}
	return fmt.Errorf("watching backfill %s: the watch ended early", id)
}

func (c *call) watchLine(s *backfill.Status, pc pace) {
	j := statusOf(s)
	j.Running, j.ETAMS = pc.running, pc.eta.Milliseconds()
	if c.opt.format == formatJSON {
		line, _ := json.Marshal(j) // plain fields: cannot fail
		fmt.Fprintf(c.stdout, "%s\n", line)
		return
	}
	line := fmt.Sprintf("%s  %s  %d/%d succeeded, %d running, %d failed, %d canceled, %d pending",
		time.Now().UTC().Format(time.TimeOnly), j.State, j.Counts.Succeeded, j.Total, j.Counts.Running,
		j.Counts.Failed, j.Counts.Canceled, j.Counts.Pending)
	if pc.eta > 0 {
		line += ", about " + left(pc.eta) + " left"
	}
	if len(j.Blocked) > 0 {
		line += "; " + j.Blocked[0]
		if n := len(j.Blocked); n > 1 {
			line += fmt.Sprintf(" (and %d more)", n-1)
		}
	}
	fmt.Fprintln(c.stdout, line)
}

func runHistory(ctx context.Context, c *call) error {
	l, err := c.reader(ctx)
	if err != nil {
		return err
	}
	arg, key := c.args[0], c.args[1]
	id, d, isDAG, err := c.resolve(ctx, l, arg)
	if err != nil {
		return err
	}
	var p tranche.TimePartition
	dag, label := d.id, d.label()
	if isDAG {
		// Every attempt at the DAG's partition, whichever backfill or run
		// made it.
		if !d.g.IsValid() {
			return fmt.Errorf("DAG %s: its granularity is unknown: no backfill of it recorded one", label)
		}
		if p, err = tranche.ParsePartitionKey(d.g, key, d.loc); err != nil {
			return err
		}
	} else {
		record, err := l.Backfill(ctx, id)
		if err != nil {
			return err
		}
		w, err := tranche.ParseTimePartitionWindow(record.Window)
		if err != nil {
			return fmt.Errorf("backfill %s: its recorded window: %w", id, err)
		}
		if p, err = tranche.ParsePartitionKey(w.Granularity(), key, w.Location()); err != nil {
			return err
		}
		if !w.Contains(p.Start) {
			return fmt.Errorf("partition %s is not in the window of backfill %s, %s", key, id, w)
		}
		if len(record.Partitions) > 0 && !slices.ContainsFunc(record.Partitions, p.Start.Equal) {
			return fmt.Errorf("partition %s is not one of the %d chosen partitions of backfill %s", key, len(record.Partitions), id)
		}
		dag, label = record.DAG, c.dagLabelOf(ctx, l, record)
	}
	attempts, err := l.History(ctx, dag, p.Start)
	if err != nil {
		return err
	}
	if c.opt.format == formatJSON {
		j := historyJSON{Backfill: id, DAG: dag, Key: p.Key(), Attempts: make([]attemptJSON, len(attempts))}
		for i, a := range attempts {
			j.Attempts[i] = attemptOf(a)
		}
		return writeJSON(c.stdout, j)
	}
	if isDAG {
		fmt.Fprintf(c.stdout, "partition %s of DAG %s\n", p.Key(), label)
	} else {
		fmt.Fprintf(c.stdout, "partition %s of backfill %s (DAG %s)\n", p.Key(), id, label)
	}
	if len(attempts) == 0 {
		fmt.Fprintln(c.stdout, "  no attempt yet: pending")
		return nil
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 8, 2, ' ', 0)
	// The code versions, where any attempt declared one.
	code := slices.ContainsFunc(attempts, func(a ledger.Attempt) bool { return a.CodeVersion != "" })
	header := "  #\tSTATE\tWORKER\tSTARTED\tFINISHED\tTOOK\tROWS\tBACKFILL\tTRIGGER\tERROR"
	if code {
		header = "  #\tSTATE\tWORKER\tSTARTED\tFINISHED\tTOOK\tROWS\tBACKFILL\tTRIGGER\tCODE\tERROR"
	}
	fmt.Fprintln(tw, header)
	for _, a := range attempts {
		j := attemptOf(a)
		finished, took := j.Finished, a.Duration().Round(time.Millisecond).String()
		if a.State == ledger.StateRunning {
			finished, took = "lease until "+j.LeaseUntil, "-"
		}
		bf := a.Backfill
		if bf == "" {
			bf = "-"
		}
		bf += "\t" + string(a.Trigger)
		if code {
			v := a.CodeVersion
			if v == "" {
				v = "-"
			}
			bf += "\t" + v
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.Number, a.State, a.Worker, j.Started, finished, took,
			strconv.FormatInt(a.Rows, 10), bf, oneLine(a.Err))
	}
	return tw.Flush()
}

// writeJSON writes v as indented JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// gridStyle chooses how the grid is drawn: coloured on a terminal
// unless $NO_COLOR or --color says otherwise, as wide as $COLUMNS.
func (c *call) gridStyle() gridStyle {
	st := gridStyle{width: 80}
	if n, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && n > 0 {
		st.width = n
	}
	switch c.opt.color {
	case "always":
		st.color = true
	case "never":
	default:
		st.color = isTerminal(c.stdout) && os.Getenv("NO_COLOR") == ""
	}
	return st
}

// dagLabelOf names the DAG of record in text: the program's name of it,
// else the newest name its backfills recorded, beside its identity.
func (c *call) dagLabelOf(ctx context.Context, l ledger.Reader, record ledger.BackfillRecord) string {
	records, err := l.Backfills(ctx)
	if err != nil {
		records = []ledger.BackfillRecord{record}
	}
	for _, d := range c.dags(records) {
		if d.id == record.DAG {
			return d.label()
		}
	}
	return record.DAG
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// left rounds a time left for a person, as age does, a second at least.
func left(d time.Duration) string {
	return age(max(d, time.Second))
}
