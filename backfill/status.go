package backfill

import (
	"context"
	"fmt"
	"iter"
	"slices"
	"strings"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/internal/slotmatch"
	"github.com/tranche-dev/tranche/ledger"
)

// Status is the state of a backfill as its ledger records it.
type Status struct {
	Record ledger.BackfillRecord
	// Window is the backfill's window: for chosen partitions
	// (Record.Partitions), the span from the oldest to the newest.
	Window tranche.TimePartitionWindow

	// Counts counts the backfill's partitions by the state of their
	// latest attempt, matched as plans match them (a moved schedule's
	// slots by their fire); partitions never attempted are
	// StatePending.
	Counts map[ledger.State]int

	// Blocked says why the backfill is not progressing, if it is not:
	// partitions held by a worker, leases waiting to expire, a failure
	// that stopped it, a cancellation. Empty when it is done or running
	// freely.
	Blocked []string

	// Superseded counts the partitions not succeeded under the
	// backfill's DAG that another version of it (an identity whose
	// backfills share its DAG name) succeeded at after the backfill was
	// created: a deploy's new code landed them, and the backfill leaves
	// them to it (see ledger.ClaimRequest.JudgeVersion). They count as
	// done.
	Superseded int

	ledger ledger.Reader
	sel    selection
	match  slotmatch.Matcher
}

// Done reports whether every partition succeeded, here or, after a
// deploy, under a newer version of the DAG (Superseded).
func (s *Status) Done() bool { return s.Counts[ledger.StateSucceeded]+s.Superseded == s.sel.total }

// State is where the backfill stands as a whole, as the commands and
// pages show it: StateSucceeded when it is Done; StateCanceled when its
// record is canceled; StateRunning while a partition runs; StateFailed
// when none runs and a partition failed or was canceled; StatePending
// otherwise.
func (s *Status) State() ledger.State {
	switch {
	case s.Done():
		return ledger.StateSucceeded
	case s.Record.Canceled:
		return ledger.StateCanceled
	case s.Counts[ledger.StateRunning] > 0:
		return ledger.StateRunning
	case s.Counts[ledger.StateFailed] > 0 || s.Counts[ledger.StateCanceled] > 0:
		return ledger.StateFailed
	}
	return ledger.StatePending
}

// String summarizes the status in one line.
func (s *Status) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "backfill %s of %s:", s.Record.ID, s.Window)
	for _, st := range []ledger.State{ledger.StateSucceeded, ledger.StateRunning, ledger.StateFailed, ledger.StateCanceled, ledger.StatePending} {
		fmt.Fprintf(&b, " %d %s,", s.Counts[st], st)
	}
	out := strings.TrimSuffix(b.String(), ",")
	if s.Superseded > 0 {
		out += fmt.Sprintf(" (%d of them landed by a newer version)", s.Superseded)
	}
	if s.Record.Canceled {
		out += " (canceled)"
	}
	return out
}

// statusOf returns the status of a backfill of the window and chosen
// partitions the record holds.
func statusOf(l ledger.Reader, record ledger.BackfillRecord) (*Status, error) {
	w, err := tranche.ParseTimePartitionWindow(record.Window)
	if err != nil {
		return nil, fmt.Errorf("tranche: backfill %s: its recorded window: %w", record.ID, err)
	}
	sel := selection{window: w, total: w.Len()}
	if len(record.Partitions) > 0 {
		ps := make([]tranche.TimePartition, len(record.Partitions))
		for i, start := range record.Partitions {
			ps[i] = tranche.PartitionOf(w.Granularity(), start.In(w.Location()))
			if !ps[i].Start.Equal(start) || !w.Contains(start) {
				return nil, fmt.Errorf("tranche: backfill %s: its recorded partition %s is not a partition of window %s", record.ID, start.Format(time.RFC3339), w)
			}
		}
		if sel, err = selectionOf(sortPartitions(ps)); err != nil {
			return nil, fmt.Errorf("tranche: backfill %s: its recorded partitions: %w", record.ID, err)
		}
	}
	return &Status{Record: record, Window: sel.window, Counts: map[ledger.State]int{}, ledger: l, sel: sel,
		match: slotmatch.New(w.Granularity(), w.Location())}, nil
}

// PartitionStatus is one partition of a backfill with its latest attempt.
type PartitionStatus struct {
	Partition tranche.TimePartition
	State     ledger.State
	Latest    *ledger.Attempt // nil while pending
}

// Partitions streams the backfill's partitions newest first, each with
// its latest attempt as the ledger holds it now.
func (s *Status) Partitions(ctx context.Context) iter.Seq2[PartitionStatus, error] {
	return func(yield func(PartitionStatus, error) bool) {
		cfg := config{selection: s.sel}
		for batch := range cfg.batches(planBatch, NewestFirst) {
			parts := slices.Collect(batch.OldestFirst())
			latest := make([]*ledger.Attempt, len(parts))
			if err := s.match.ReadLatest(ctx, s.ledger, s.Record.DAG, parts, latest); err != nil {
				yield(PartitionStatus{}, err)
				return
			}
			for i := len(parts) - 1; i >= 0; i-- {
				ps := PartitionStatus{Partition: parts[i], State: ledger.StatePending}
				if a := latest[i]; a != nil {
					ps.State, ps.Latest = a.State, a
				}
				if !yield(ps, nil) {
					return
				}
			}
		}
	}
}

// Stale returns the backfill's stale partitions, newest first: those
// whose latest attempt succeeded under another code version than
// version (see [CodeVersion]), which rerun policy stale runs again. It
// reads every partition's latest attempt, as [Status.Partitions] does.
func (s *Status) Stale(ctx context.Context, version string) ([]tranche.TimePartition, error) {
	var stale []tranche.TimePartition
	for ps, err := range s.Partitions(ctx) {
		if err != nil {
			return nil, err
		}
		if ps.State == ledger.StateSucceeded && ps.Latest.CodeVersion != version {
			stale = append(stale, ps.Partition)
		}
	}
	return stale, nil
}

// StatusOf reads the state of backfill id from l, judging leases against
// now: counts per state, and why it is not progressing.
//
// From a ledger that is a [ledger.LatestReader] (the in-memory and SQL
// ledgers are), the counts are one aggregate query and the reasons a few
// small ones, however many partitions the backfill has, a cron
// schedule's slots as any partitions; from another ledger, StatusOf
// reads every partition's latest attempt, as it does for a daily or
// hourly schedule whose former schedules left attempts among its slots
// (see [Backfill]: those are matched by their fire, which counts by
// start cannot tell; finding none costs a read of the attempted
// partitions' starts).
func StatusOf(ctx context.Context, l ledger.Reader, id string, now time.Time) (*Status, error) {
	record, err := l.Backfill(ctx, id)
	if err != nil {
		return nil, err
	}
	s, err := statusOf(l, record)
	if err != nil {
		return nil, err
	}
	var b blockers
	lr, err := s.tally(ctx, b.see)
	if err != nil {
		return nil, err
	}
	if s.Superseded, err = s.superseded(ctx); err != nil {
		return nil, err
	}
	if lr != nil {
		return s, s.explain(ctx, lr, now)
	}
	s.block(b.running, b.lastFailure, now)
	return s, nil
}

// superseded counts Status.Superseded: nothing to read for a backfill
// whose DAG has no name or no other version; otherwise the other
// versions' latest attempts in the window, then, if they landed any
// partition since the backfill was created, the backfill's own.
func (s *Status) superseded(ctx context.Context) (int, error) {
	if s.Record.DAGName == "" {
		return 0, nil
	}
	records, err := s.ledger.Backfills(ctx)
	if err != nil {
		return 0, err
	}
	landed := map[int64]time.Time{} // start (Unix ns) -> end
	for _, dag := range s.Record.Versions(records) {
		for a, err := range s.ledger.Latest(ctx, dag, s.sel.window.Start(), s.sel.window.End()) {
			if err != nil {
				return 0, err
			}
			if (ledger.ClaimRequest{Backfill: s.Record.ID}).JudgeVersion(&a, s.Record.Created, time.Time{}) == ledger.ActionSkipSuperseded {
				landed[a.Start.UnixNano()] = a.End
			}
		}
	}
	if len(landed) == 0 {
		return 0, nil
	}
	n := 0
	for ps, err := range s.Partitions(ctx) {
		if err != nil {
			return 0, err
		}
		if end, ok := landed[ps.Partition.Start.UnixNano()]; ok && ps.State != ledger.StateSucceeded && end.Equal(ps.Partition.End) {
			n++
		}
	}
	return n, nil
}

// blockers gathers what block reports from a walk of every partition's
// latest attempt, newest partition first.
type blockers struct {
	running     []*ledger.Attempt // newest partition first
	lastFailure *ledger.Attempt
}

func (b *blockers) see(ps PartitionStatus) {
	switch a := ps.Latest; {
	case a == nil:
	case a.State == ledger.StateRunning:
		b.running = append(b.running, a)
	case a.State == ledger.StateFailed || a.State == ledger.StateCanceled:
		if b.lastFailure == nil || a.Finished.After(b.lastFailure.Finished) {
			b.lastFailure = a
		}
	}
}

// tally sets s.Counts: through lr's counts where s's ledger is a
// [ledger.LatestReader] whose counts stand for s's partitions (see
// latestReader), returning it; otherwise from every partition's latest
// attempt, passed to each when it is not nil, returning nil.
func (s *Status) tally(ctx context.Context, each func(PartitionStatus)) (ledger.LatestReader, error) {
	lr, ok, err := s.latestReader(ctx)
	switch {
	case err != nil:
		return nil, err
	case ok:
		return lr, s.count(ctx, lr)
	}
	for ps, err := range s.Partitions(ctx) {
		if err != nil {
			return nil, err
		}
		s.Counts[ps.State]++
		if each != nil {
			each(ps)
		}
	}
	return nil, nil
}

// latestReader returns the status's ledger as a [ledger.LatestReader] if
// it is one and its answers, by start, stand for those of readLatest over
// the backfill's partitions now (see countable).
func (s *Status) latestReader(ctx context.Context) (ledger.LatestReader, bool, error) {
	lr, ok := s.ledger.(ledger.LatestReader)
	if !ok {
		return nil, false, nil
	}
	ok, err := countable(ctx, lr, s.Record.DAG, s.match, &s.sel)
	return lr, ok, err
}

// countable reports whether lr's counts of the latest attempts starting
// in ranges of sel's partitions stand for readLatest's matching of them
// by m. They do wherever m matches by start: a DAG identity names the
// granularity (a schedule by its text), so the DAG's attempts start at
// partitions of sel's granularity, never inside one, and ranges of
// starts hold the very attempts readLatest finds, whatever the gaps
// between chosen slots, the excluded dates a slot spans or its length.
//
// A daily or hourly schedule's identity is shared by every schedule of
// its days (see DAGIdentity), whose slots readLatest matches by their
// fire, from attempts that start inside the slots of sel's. Those exist
// only once the schedule moved, so countable looks for them: it reads
// the starts of every attempted partition in the span readLatest reads,
// m.span of each run of sel ([ledger.LatestReader.ChangedIn] after
// revision 0: revisions are positive), and reports false if one of them
// is not a slot start, for the caller to read every latest attempt.
// That costs the ledger a read of the starts alone, five to ten times
// less than every latest attempt; counting the starts between slot
// starts instead, a range per slot, cost SQLite more than reading every
// latest attempt (BENCHMARKS.md).
func countable(ctx context.Context, lr ledger.LatestReader, dag string, m slotmatch.Matcher, sel *selection) (bool, error) {
	if !m.ByFire() {
		return true, nil
	}
	g := sel.window.Granularity()
	for _, r := range sel.spans(m) {
		starts, err := lr.ChangedIn(ctx, dag, r.From, r.To, 0)
		if err != nil {
			return false, fmt.Errorf("tranche: reading ledger: %w", err)
		}
		if len(starts) == 0 {
			continue
		}
		// The slots from the one holding the first start to the one
		// holding the last, walked beside the starts, oldest first.
		slots, err := tranche.NewTimePartitionWindow(g, starts[0].In(sel.window.Location()), starts[len(starts)-1].In(sel.window.Location()))
		if err != nil {
			return false, fmt.Errorf("tranche: the slots of %v from %s to %s: %w", g, starts[0].Format(time.RFC3339), starts[len(starts)-1].Format(time.RFC3339), err)
		}
		k := 0
		for p := range slots.OldestFirst() {
			if starts[k].Before(p.Start) {
				return false, nil // inside the slot before p
			}
			if starts[k].Equal(p.Start) {
				if k++; k == len(starts) {
					break
				}
			}
		}
		if k < len(starts) {
			return false, nil // inside the last slot
		}
	}
	return true, nil
}

// spans returns the spans readLatest reads for sel's runs under m,
// m.span of each, merged where they meet, oldest first.
func (sel *selection) spans(m slotmatch.Matcher) []ledger.Range {
	var spans []ledger.Range
	for w := range sel.windows(OldestFirst) {
		from, to := m.Span(w.Start(), w.End())
		if n := len(spans); n > 0 && !from.After(spans[n-1].To) {
			spans[n-1].To = later(spans[n-1].To, to)
			continue
		}
		spans = append(spans, ledger.Range{From: from, To: to})
	}
	return spans
}

// slotStart reports whether t is the start of one of sel's granularity's
// partitions in its location: false for the start of another schedule's
// slot, which a watch of a schedule matched by fire cannot count.
func (sel *selection) slotStart(t time.Time) bool {
	return tranche.PartitionOf(sel.window.Granularity(), t.In(sel.window.Location())).Start.Equal(t)
}

// ranges returns the spans of the selection's windows, oldest first.
func (sel *selection) ranges() []ledger.Range {
	var out []ledger.Range
	for w := range sel.windows(OldestFirst) {
		out = append(out, ledger.Range{From: w.Start(), To: w.End()})
	}
	return out
}

// count sets s.Counts from lr's counts of the latest attempts of the
// backfill's partitions, in one query.
func (s *Status) count(ctx context.Context, lr ledger.LatestReader) error {
	counts, err := lr.CountLatest(ctx, ledger.CountRequest{DAG: s.Record.DAG, Ranges: s.sel.ranges()})
	if err != nil {
		return fmt.Errorf("tranche: reading ledger: %w", err)
	}
	attempted := 0
	for _, c := range counts {
		s.Counts[c.State] += c.N
		attempted += c.N
	}
	if n := s.sel.total - attempted; n > 0 {
		s.Counts[ledger.StatePending] = n
	}
	return nil
}

// explain sets s.Blocked from s.Counts and lr's running attempts and
// newest failure, read with small queries.
func (s *Status) explain(ctx context.Context, lr ledger.LatestReader, now time.Time) error {
	var running []*ledger.Attempt
	if s.Counts[ledger.StateRunning] > 0 {
		for a, err := range lr.FindLatest(ctx, ledger.FindRequest{DAG: s.Record.DAG, Ranges: s.sel.ranges(), States: []ledger.State{ledger.StateRunning}}) {
			if err != nil {
				return fmt.Errorf("tranche: reading ledger: %w", err)
			}
			running = append(running, &a)
		}
		slices.Reverse(running) // newest partition first, as Partitions yields them
	}
	held := slices.ContainsFunc(running, func(a *ledger.Attempt) bool { return now.Before(a.LeaseUntil) })
	var lastFailure *ledger.Attempt // block reports it only when nothing is held
	if !held && s.Counts[ledger.StatePending] > 0 && s.Counts[ledger.StateFailed]+s.Counts[ledger.StateCanceled] > 0 {
		for a, err := range lr.FindLatest(ctx, ledger.FindRequest{DAG: s.Record.DAG, Ranges: s.sel.ranges(),
			States: []ledger.State{ledger.StateFailed, ledger.StateCanceled}, Newest: 1}) {
			if err != nil {
				return fmt.Errorf("tranche: reading ledger: %w", err)
			}
			lastFailure = &a
		}
	}
	s.block(running, lastFailure, now)
	return nil
}

// block sets s.Blocked from the running latest attempts of the backfill,
// newest partition first, and the failure that finished last, if any.
func (s *Status) block(running []*ledger.Attempt, lastFailure *ledger.Attempt, now time.Time) {
	var held, expired []string
	for _, a := range running {
		if now.Before(a.LeaseUntil) {
			held = append(held, fmt.Sprintf("partition %s held by worker %s until %s", a.Key, a.Worker, a.LeaseUntil.Format(time.RFC3339)))
		} else {
			expired = append(expired, fmt.Sprintf("partition %s: the lease of worker %s expired at %s; the next worker to run the backfill takes it over",
				a.Key, a.Worker, a.LeaseUntil.Format(time.RFC3339)))
		}
	}
	s.Blocked = nil
	if s.Record.Canceled {
		s.Blocked = append(s.Blocked, "canceled: workers claim nothing more until it is resumed (the resume command)")
	}
	s.Blocked = append(s.Blocked, held...)
	s.Blocked = append(s.Blocked, expired...)
	if lastFailure != nil && s.Counts[ledger.StatePending] > 0 && len(held) == 0 {
		s.Blocked = append(s.Blocked, fmt.Sprintf("stopped after the failure of partition %s by worker %s: %s",
			lastFailure.Key, lastFailure.Worker, lastFailure.Err))
	}
}

// Finished returns up to n latest attempts of the backfill's partitions
// that are in one of states, those that finished last first (by
// [ledger.FinishedLater]): the newest failures of a failed backfill, or
// the last partition it finished. Through a [ledger.LatestReader] it is
// one small query however many partitions the backfill has; from another
// ledger, a walk of every partition's latest attempt.
func (s *Status) Finished(ctx context.Context, n int, states ...ledger.State) ([]ledger.Attempt, error) {
	if n < 1 || len(states) == 0 {
		return nil, nil
	}
	var out []ledger.Attempt
	lr, ok, err := s.latestReader(ctx)
	switch {
	case err != nil:
		return nil, err
	case ok:
		for a, err := range lr.FindLatest(ctx, ledger.FindRequest{DAG: s.Record.DAG, Ranges: s.sel.ranges(), States: states, Newest: n}) {
			if err != nil {
				return nil, fmt.Errorf("tranche: reading ledger: %w", err)
			}
			out = append(out, a)
		}
	default:
		for ps, err := range s.Partitions(ctx) {
			if err != nil {
				return nil, err
			}
			if ps.Latest != nil && slices.Contains(states, ps.Latest.State) {
				out = append(out, *ps.Latest)
			}
		}
	}
	slices.SortFunc(out, ledger.FinishedLater)
	if len(out) > n {
		out = out[:n]
	}
	return out, nil
}

// CountStatus counts the partitions of the backfill record describes by the
// state of their latest attempt, as [StatusOf] does, without reading why
// it is not progressing (its Blocked is empty): the state of a backfill
// in a list of them, one aggregate query through a [ledger.LatestReader].
func CountStatus(ctx context.Context, l ledger.Reader, record ledger.BackfillRecord) (*Status, error) {
	s, err := statusOf(l, record)
	if err != nil {
		return nil, err
	}
	if _, err := s.tally(ctx, nil); err != nil {
		return nil, err
	}
	return s, nil
}
