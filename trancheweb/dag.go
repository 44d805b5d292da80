package trancheweb

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/internal/zone"
	"github.com/tranche-dev/tranche/ledger"
)

// stateMissing is how the DAG page names a partition never attempted,
// as a partition health bar does: no backfill is waiting to run it, as
// "pending" would say.
const stateMissing ledger.State = "missing"

// maxListed bounds the backfills the DAG page lists with their states,
// newest first: each may cost a count of its own (see backfillStates).
const maxListed = 100

// notFound is a request for something the ledger does not hold.
type notFound struct{ msg string }

func (e *notFound) Error() string { return e.msg }

// dagSpan is what the DAG page draws: the DAG's backfills, newest first,
// and the window of its granularity over the union of theirs, narrowed by
// the query.
type dagSpan struct {
	DAG     string
	Records []ledger.BackfillRecord // newest first
	spans   []tranche.TimePartitionWindow
	G       tranche.TimeGranularity
	Loc     *time.Location
	From    time.Time // the union's first instant, before narrowing
	To      time.Time // the union's end
	Window  tranche.TimePartitionWindow
	Empty   bool // the query leaves no partition of the union
}

// recordedName is the DAG name the newest of records gave, or "".
func recordedName(records []ledger.BackfillRecord) string {
	for _, r := range records {
		if r.DAGName != "" {
			return r.DAGName
		}
	}
	return ""
}

// dagSpanOf reads the backfills of dag and the window of the union of
// what they cover. A DAG's identity names its granularity and zone
// ([backfill.DAGIdentity]), so its backfills share them, but for a daily
// or hourly cron schedule moved to another minute or hour, which keeps
// its identity: the page then draws the newest backfill's schedule, and
// the ledger's attempts at the former slots match it by their fire.
// Backfills that disagree otherwise are an inconsistent ledger, which the
// page reports rather than guesses at.
func (h *handler) dagSpanOf(ctx context.Context, dag string) (*dagSpan, error) {
	records, err := h.l.Backfills(ctx)
	if err != nil {
		return nil, err
	}
	d := &dagSpan{DAG: dag}
	for _, b := range slices.Backward(records) {
		if b.DAG == dag {
			d.Records = append(d.Records, b)
		}
	}
	if len(d.Records) == 0 {
		return nil, &notFound{fmt.Sprintf("the ledger records no backfill of DAG %q; the index lists every DAG that has one", dag)}
	}
	for i, b := range d.Records {
		s, err := spanOf(b)
		if err != nil {
			return nil, err
		}
		d.spans = append(d.spans, s)
		if i == 0 {
			d.G, d.Loc, d.From, d.To = s.Granularity(), s.Location(), s.Start(), s.End()
			continue
		}
		newest := d.Records[0]
		switch g := s.Granularity(); {
		case !zone.Same(s.Location(), d.Loc):
			return nil, fmt.Errorf("DAG %s: its backfill %s is in zone %s, its newest backfill %s in %s; a DAG's identity names one zone, so the ledger holds a record that backfill.DAGIdentity did not name",
				dag, b.ID, zone.Name(s.Location()), newest.ID, zone.Name(d.Loc))
		case g != d.G && !(g.IsSchedule() && d.G.IsSchedule()):
			return nil, fmt.Errorf("DAG %s: its backfill %s is in granularity %v, its newest backfill %s in %v; a DAG's identity names one granularity (only a daily or hourly schedule may move), so the ledger holds a record that backfill.DAGIdentity did not name",
				dag, b.ID, g, newest.ID, d.G)
		}
		d.From, d.To = minTime(d.From, s.Start()), maxTime(d.To, s.End())
	}
	return d, d.narrow(time.Time{}, time.Time{})
}

// narrow sets d.Window to the partitions of the union that start in
// [from, to), each bound ignored when zero, or d.Empty when none does.
func (d *dagSpan) narrow(from, to time.Time) error {
	first := tranche.PartitionOf(d.G, d.From.In(d.Loc))
	if !from.IsZero() {
		p := tranche.PartitionOf(d.G, from.In(d.Loc))
		if p.Start.Before(from) {
			p = p.Next()
		}
		if p.Start.After(first.Start) {
			first = p
		}
	}
	last := tranche.PartitionOf(d.G, d.To.Add(-time.Nanosecond).In(d.Loc))
	if !to.IsZero() {
		if p := tranche.PartitionOf(d.G, to.Add(-time.Nanosecond).In(d.Loc)); p.Start.Before(last.Start) {
			last = p
		}
	}
	d.Window, d.Empty = tranche.TimePartitionWindow{}, first.Start.After(last.Start)
	if d.Empty {
		return nil
	}
	var err error
	if d.Window, err = tranche.NewTimePartitionWindow(d.G, first.Start, last.Start); err != nil {
		return fmt.Errorf("DAG %s: %w", d.DAG, err)
	}
	return nil
}

// spanOf returns what backfill b covers: its window, or the span of its
// chosen partitions.
func spanOf(b ledger.BackfillRecord) (tranche.TimePartitionWindow, error) {
	w, err := tranche.ParseTimePartitionWindow(b.Window)
	if err != nil {
		return w, fmt.Errorf("backfill %s: its recorded window: %w", b.ID, err)
	}
	if len(b.Partitions) == 0 {
		return w, nil
	}
	first := slices.MinFunc(b.Partitions, time.Time.Compare)
	last := slices.MaxFunc(b.Partitions, time.Time.Compare)
	s, err := tranche.NewTimePartitionWindow(w.Granularity(), first.In(w.Location()), last.In(w.Location()))
	if err != nil {
		return w, fmt.Errorf("backfill %s: its recorded partitions: %w", b.ID, err)
	}
	return s, nil
}

// boundsOf reads the DAG page's optional from and to as
// backfill.ParseSpan reads them in the DAG's zone: RFC 3339, a wall
// time, or a date, whose day to includes.
func boundsOf(r *http.Request, loc *time.Location) (from, to time.Time, err error) {
	q := r.URL.Query()
	if from, to, err = backfill.ParseSpan(q.Get("from"), q.Get("to"), loc); err != nil {
		return from, to, &badRequest{fmt.Sprintf("query from=%q to=%q: %v", q.Get("from"), q.Get("to"), err)}
	}
	return from, to, nil
}

// dagLiveData is the part of the DAG page that its script redraws.
type dagLiveData struct {
	DAG, Name string
	Window    string // the window drawn, "" when the query leaves none
	From, To  time.Time
	Total     int
	Succeeded float64 // percent
	Counts    []countData
	Grid      gridData
	Backfills []backfillRow
	More      int  // backfills beyond maxListed, listed on the index
	Running   bool // a backfill is neither done nor canceled, or a partition runs: the page polls
	Signature string

	// LatestRun is the DAG's newest live, catch-up or manual attempt
	// (never a backfill's); LatestBackfill its open backfill, else the
	// newest failed, else the newest; Scheduler what the ledger shows of
	// its live scheduler, Waiting when no scheduler ran the slot due.
	LatestRun      *ledger.Attempt
	LatestBackfill *backfillRow
	Scheduler      []string
	Waiting        bool
	Pause          ledger.SchedulePause // the schedule's pause: while Paused, no scheduler starts a slot
	Limit          ledger.Limit         // the DAG's limit of runs at once across every process; Max 0: none
	Plan           bool                 // the DAG is registered: a backfill may be planned of it
}

// backfillRow is a backfill of the DAG page's list.
type backfillRow struct {
	recordData
	State     ledger.State // its one state: succeeded (done), canceled, running, failed or pending
	Succeeded float64      // percent
	Summary   string       // its counts in words
}

// dagPageData is the DAG page's.
type dagPageData struct {
	Live      dagLiveData
	Query     string // from and to, for the live and status URLs
	FromText  string // as typed, for the form
	ToText    string
	RefreshMS int64
}

// dagLiveOf reads what the DAG page shows.
func (h *handler) dagLiveOf(ctx context.Context, r *http.Request, dag string) (dagLiveData, error) {
	d, err := h.dagSpanOfRequest(ctx, r, dag)
	if err != nil {
		return dagLiveData{}, err
	}
	live := dagLiveData{DAG: dag, Name: h.name(dag, recordedName(d.Records)), From: d.From, To: d.To}
	var g *backfill.Grid
	m := map[ledger.State]int{}
	if !d.Empty {
		live.Window = d.Window.String()
		if g, err = backfill.WindowGrid(ctx, h.l, dag, d.Window, h.opts.MaxCells); err != nil {
			return dagLiveData{}, err
		}
		// The grid's cells count every partition of the window: the
		// page's counts are theirs, with no count of its own.
		for _, c := range g.Cells {
			for st, n := range c.Counts {
				if n > 0 {
					m[st] += n
				}
			}
		}
		live.Total = d.Window.Len()
		live.Grid = gridOf("/dags/"+url.PathEscape(dag), d.Window, g, stateMissing)
	}
	live.Succeeded = percent(m[ledger.StateSucceeded], live.Total)
	live.Running = m[ledger.StateRunning] > 0
	if n := m[ledger.StatePending]; n > 0 {
		delete(m, ledger.StatePending)
		m[stateMissing] = n
	}
	live.Counts = dagCounts(m, live.Total)
	if live.Backfills, err = h.backfillStates(ctx, d, g); err != nil {
		return dagLiveData{}, err
	}
	live.More = len(d.Records) - len(live.Backfills)
	for _, b := range live.Backfills {
		if b.State != ledger.StateSucceeded && b.State != ledger.StateCanceled {
			live.Running = true
		}
	}
	live.Signature = dagSignature(m, live.Backfills)
	live.LatestBackfill = latestRow(live.Backfills)
	runs, err := backfill.RunSummary(ctx, h.l, dag, d.G, d.Loc, h.opts.Now())
	if err != nil {
		return dagLiveData{}, err
	}
	live.LatestRun, live.Waiting, live.Pause, live.Limit = runs.LatestRun, runs.Scheduler.Waiting, runs.Scheduler.Pause, runs.Limit
	if live.Pause.Paused {
		// A page open when the schedule is paused or resumed redraws.
		live.Signature += " paused"
	}
	if lim := live.Limit; lim.Max > 0 {
		// And one whose limit, or what it holds back, changes.
		live.Signature += fmt.Sprintf(" limit %d/%d/%d", lim.Max, lim.Running, lim.Waiting)
	}
	live.Scheduler = schedulerLines(runs.Scheduler, h.opts.Now())
	_, live.Plan = h.byID[dag]
	return live, nil
}

// latestRow is the DAG's latest backfill among rows (newest first): the
// open one, else the newest failed, else the newest.
func latestRow(rows []backfillRow) *backfillRow {
	for _, want := range []func(ledger.State) bool{
		func(s ledger.State) bool { return s == ledger.StateRunning || s == ledger.StatePending },
		func(s ledger.State) bool { return s == ledger.StateFailed },
		func(ledger.State) bool { return true },
	} {
		for i := range rows {
			if want(rows[i].State) {
				return &rows[i]
			}
		}
	}
	return nil
}

// schedulerLines says what the ledger shows of a DAG's scheduler, as
// tranche status of a DAG does.
func schedulerLines(sc backfill.SchedulerSeen, now time.Time) []string {
	if sc.Last == nil {
		return []string{"none seen: no slot was run live or caught up"}
	}
	lines := []string{fmt.Sprintf("last slot %s %s (%s), started %s, %s ago", sc.Last.Key, sc.Last.State, sc.Last.Trigger,
		when(sc.Last.Started), age(now.Sub(sc.Last.Started)))}
	if sc.Next.Granularity.IsValid() {
		next := fmt.Sprintf("next slot %s due %s", sc.Next.Key(), when(sc.NextDue))
		if sc.Missed > 0 {
			next += fmt.Sprintf("; %d due since with no run", sc.Missed)
		}
		lines = append(lines, next)
	}
	if sc.Waiting {
		lines = append(lines, fmt.Sprintf("waiting for scheduler: slot %s came due %s ago and none has run it", sc.Next.Key(), age(now.Sub(sc.NextDue))))
	}
	return lines
}

// dagSpanOfRequest is dagSpanOf narrowed by the bounds of r's query,
// which are read in the DAG's zone.
func (h *handler) dagSpanOfRequest(ctx context.Context, r *http.Request, dag string) (*dagSpan, error) {
	d, err := h.dagSpanOf(ctx, dag)
	if err != nil {
		return nil, err
	}
	from, to, err := boundsOf(r, d.Loc)
	if err != nil {
		return nil, err
	}
	return d, d.narrow(from, to)
}

// dagOrder is the order the DAG page lists states in: missing in
// pending's place, since no backfill need be waiting to run them.
var dagOrder = []ledger.State{ledger.StateSucceeded, ledger.StateFailed, ledger.StateRunning, ledger.StateCanceled, stateMissing}

// dagCounts lists the counts of every state in dagOrder, then any other
// state a newer ledger may record, by name.
func dagCounts(m map[ledger.State]int, total int) []countData {
	var out []countData
	for _, s := range dagOrder {
		out = append(out, countData{s, m[s], percent(m[s], total)})
	}
	for _, s := range slices.Sorted(maps.Keys(m)) {
		if !slices.Contains(dagOrder, s) {
			out = append(out, countData{s, m[s], percent(m[s], total)})
		}
	}
	return out
}

// backfillStates returns the newest maxListed backfills of d with their
// states. A backfill of a whole window whose bounds fall on the bounds of
// g's cells is counted from them; any other is read with
// backfill.StatusOf, a count of its own.
func (h *handler) backfillStates(ctx context.Context, d *dagSpan, g *backfill.Grid) ([]backfillRow, error) {
	var out []backfillRow
	for i, b := range d.Records[:min(len(d.Records), maxListed)] {
		m, ok := countFromCells(d, g, b, d.spans[i])
		if !ok {
			s, err := backfill.StatusOf(ctx, h.l, b.ID, h.opts.Now())
			if err != nil {
				return nil, err
			}
			m = s.Counts
		}
		total := 0
		for _, n := range m {
			total += n
		}
		row := backfillRow{recordData: recordOf(b), Succeeded: percent(m[ledger.StateSucceeded], total)}
		switch {
		case b.Canceled:
			row.State = ledger.StateCanceled
		case m[ledger.StateSucceeded] == total:
			row.State = ledger.StateSucceeded
		case m[ledger.StateRunning] > 0:
			row.State = ledger.StateRunning
		case m[ledger.StateFailed]+m[ledger.StateCanceled] > 0:
			row.State = ledger.StateFailed
		default:
			row.State = ledger.StatePending
		}
		var words []string
		for _, c := range counts(m, total) {
			if c.N > 0 {
				words = append(words, fmt.Sprintf("%d %s", c.N, c.State))
			}
		}
		row.Summary = strings.Join(words, " · ")
		out = append(out, row)
	}
	return out, nil
}

// countFromCells counts the partitions of backfill b, whose span is s,
// from g's cells, if b covers a whole window of the grid's granularity
// and every cell lies wholly inside s or wholly outside.
func countFromCells(d *dagSpan, g *backfill.Grid, b ledger.BackfillRecord, s tranche.TimePartitionWindow) (map[ledger.State]int, bool) {
	if g == nil || len(b.Partitions) > 0 || s.Granularity() != d.G || s.Start().Before(d.Window.Start()) || s.End().After(d.Window.End()) {
		return nil, false
	}
	m := map[ledger.State]int{}
	for _, c := range g.Cells {
		from, to := maxTime(c.Span.Start, d.Window.Start()), minTime(c.Span.End, d.Window.End())
		switch {
		case !to.After(s.Start()) || !from.Before(s.End()): // outside
		case !from.Before(s.Start()) && !to.After(s.End()): // inside
			for st, n := range c.Counts {
				if n > 0 {
					m[st] += n
				}
			}
		default:
			return nil, false
		}
	}
	return m, true
}

// dagSignature changes whenever the DAG's counts or a listed backfill's
// state or counts change.
func dagSignature(m map[ledger.State]int, rows []backfillRow) string {
	var b strings.Builder
	for _, st := range slices.Sorted(maps.Keys(m)) {
		fmt.Fprintf(&b, "%s=%d,", st, m[st])
	}
	for _, r := range rows {
		fmt.Fprintf(&b, "%s:%s:%s,", r.ID, r.State, r.Summary)
	}
	return b.String()
}

func (h *handler) dagPage(w http.ResponseWriter, r *http.Request) {
	live, err := h.dagLiveOf(r.Context(), r, r.PathValue("dag"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	q := url.Values{}
	for _, k := range []string{"from", "to"} {
		if v := r.URL.Query().Get(k); v != "" {
			q.Set(k, v)
		}
	}
	data := dagPageData{Live: live, FromText: q.Get("from"), ToText: q.Get("to"), RefreshMS: h.opts.Refresh.Milliseconds()}
	if len(q) > 0 {
		data.Query = "?" + q.Encode()
	}
	h.render(w, r, http.StatusOK, "dag.html", page{Title: "DAG " + live.Name, Data: data})
}

func (h *handler) dagLive(w http.ResponseWriter, r *http.Request) {
	live, err := h.dagLiveOf(r.Context(), r, r.PathValue("dag"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.render(w, r, http.StatusOK, "dag-live-fragment", page{Fragment: true, Data: live})
}

// dagStatusDoc is the DAG status endpoint's answer (see the package
// documentation).
type dagStatusDoc struct {
	DAG       string            `json:"dag"`
	Window    string            `json:"window"`
	Total     int               `json:"total"`
	Counts    map[string]int    `json:"counts"`
	Backfills map[string]string `json:"backfills"`
	Running   bool              `json:"running"`
	Signature string            `json:"signature"`

	LatestRun      *runDoc   `json:"latest_run"`       // the newest live, catch-up or manual attempt; null if none
	LatestBackfill string    `json:"latest_backfill"`  // the open backfill, else the newest failed, else the newest; "" if none
	Waiting        bool      `json:"waiting"`          // waiting for scheduler: the slot due came due over a lease ago and has not run
	Paused         *pauseDoc `json:"paused,omitempty"` // present while the schedule is paused
}

// pauseDoc is a schedule's pause in the DAG status endpoint's answer.
type pauseDoc struct {
	By    string `json:"by"`
	Note  string `json:"note,omitempty"`
	Since string `json:"since"`
}

// runDoc is an attempt in the DAG status endpoint's answer.
type runDoc struct {
	Key     string `json:"key"`
	State   string `json:"state"`
	Trigger string `json:"trigger"`
	Started string `json:"started"`
}

// dagPolled is the DAG status endpoint's last answer for a DAG and
// query, and what it was read at.
type dagPolled struct {
	doc      dagStatusDoc
	revision int64  // the DAG's revision before the status was read
	records  string // the DAG's backfills and whether each is canceled
	at       time.Time
}

func (h *handler) dagStatusJSON(w http.ResponseWriter, r *http.Request) {
	doc, err := h.dagStatusDocOf(r.Context(), r, r.PathValue("dag"))
	h.writeJSON(w, r, doc, err)
}

// dagStatusDocOf returns the status of dag over the request's span. As
// for a backfill's (statusDocOf), an open page polls it, so it is read
// again only when the DAG's revision moved, its backfills changed (a new
// one, a cancel, a resume), or the last read is older than polledAge.
func (h *handler) dagStatusDocOf(ctx context.Context, r *http.Request, dag string) (dagStatusDoc, error) {
	records, err := h.l.Backfills(ctx)
	if err != nil {
		return dagStatusDoc{}, err
	}
	var fp strings.Builder
	for _, b := range records {
		if b.DAG == dag {
			fmt.Fprintf(&fp, "%s:%t,", b.ID, b.Canceled)
		}
	}
	rev, err := h.l.Revision(ctx, dag)
	if err != nil {
		return dagStatusDoc{}, err
	}
	key := dag + "\n" + r.URL.Query().Get("from") + "\n" + r.URL.Query().Get("to")
	now := h.opts.Now()
	h.mu.Lock()
	p, ok := h.dagPolled[key]
	h.mu.Unlock()
	if ok && p.revision == rev && p.records == fp.String() && now.Sub(p.at) < polledAge && !now.Before(p.at) {
		return p.doc, nil
	}
	live, err := h.dagLiveOf(ctx, r, dag)
	if err != nil {
		return dagStatusDoc{}, err
	}
	doc := dagStatusDoc{DAG: dag, Window: live.Window, Total: live.Total, Counts: map[string]int{}, Backfills: map[string]string{},
		Running: live.Running, Signature: live.Signature}
	for _, c := range live.Counts {
		if c.N > 0 {
			doc.Counts[string(c.State)] = c.N
		}
	}
	for _, b := range live.Backfills {
		doc.Backfills[b.ID] = string(b.State)
	}
	if a := live.LatestRun; a != nil {
		doc.LatestRun = &runDoc{Key: a.Key, State: string(a.State), Trigger: string(a.Trigger), Started: instant(a.Started)}
	}
	if b := live.LatestBackfill; b != nil {
		doc.LatestBackfill = b.ID
	}
	doc.Waiting = live.Waiting
	if pz := live.Pause; pz.Paused {
		doc.Paused = &pauseDoc{By: pz.By, Note: pz.Note, Since: instant(pz.Since)}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.dagPolled[key]; !ok && len(h.dagPolled) >= maxPolled {
		for k := range h.dagPolled { // any one: a page no longer polled
			delete(h.dagPolled, k)
			break
		}
	}
	h.dagPolled[key] = dagPolled{doc: doc, revision: rev, records: fp.String(), at: now}
	return doc, nil
}

// dagPartition shows the history of a partition of the DAG, every
// attempt whatever made it.
func (h *handler) dagPartition(w http.ResponseWriter, r *http.Request) {
	dag := r.PathValue("dag")
	start, err := parseInstant(r, "start")
	if err != nil {
		h.fail(w, r, err)
		return
	}
	d, err := h.dagSpanOf(r.Context(), dag)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	p := tranche.PartitionOf(d.G, start.In(d.Loc))
	if !p.Start.Equal(start) {
		h.fail(w, r, &badRequest{fmt.Sprintf("no partition of %s starts at %s; the partition holding it starts at %s",
			d.G, instant(start), instant(p.Start))})
		return
	}
	attempts, err := h.l.History(r.Context(), dag, p.Start)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	data := historyData{DAG: dag, Name: h.name(dag), Key: p.Key(), Start: p.Start, End: p.End}
	for _, a := range slices.Backward(attempts) {
		data.Attempts = append(data.Attempts, attemptData{a, true})
	}
	h.render(w, r, http.StatusOK, "partition.html", page{Title: "Partition " + p.Key(), Fragment: fragment(r), Data: data})
}

// dagSpanPage lists the DAG's partitions in [from, to) of its window: an
// aggregated cell's.
func (h *handler) dagSpanPage(w http.ResponseWriter, r *http.Request) {
	dag := r.PathValue("dag")
	from, to, err := parseSpan(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	d, err := h.dagSpanOf(r.Context(), dag)
	if err == nil {
		err = d.narrow(from, to)
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	data := spanData{DAG: dag, Name: h.name(dag), From: from, To: to}
	if d.Empty {
		h.render(w, r, http.StatusOK, "span.html", page{Title: "Partitions", Fragment: fragment(r), Data: data})
		return
	}
	s, err := backfill.WindowStatus(r.Context(), h.l, dag, d.Window)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	data.Key = d.Window.String()
	base := "/dags/" + url.PathEscape(dag) + "/partition?"
	for ps, err := range s.Partitions(r.Context()) {
		if err != nil {
			h.fail(w, r, err)
			return
		}
		if len(data.Partitions) == maxSpan {
			break
		}
		st := ps.State
		if st == ledger.StatePending {
			st = stateMissing
		}
		data.Partitions = append(data.Partitions, partitionData{Key: ps.Partition.Key(), State: st, Latest: ps.Latest,
			Href: base + url.Values{"start": {instant(ps.Partition.Start)}}.Encode()})
	}
	h.render(w, r, http.StatusOK, "span.html", page{Title: "Partitions " + data.Key, Fragment: fragment(r), Data: data})
}
