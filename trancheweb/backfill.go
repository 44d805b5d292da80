package trancheweb

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/ledger"
)

// liveData is the part of a backfill's page that its script redraws.
type liveData struct {
	ID, DAG, Name string
	Record        recordData
	State         string // succeeded, canceled, running, failed or pending
	Total         int
	Succeeded     float64 // percent
	Counts        []countData
	Blocked       []string
	Done          bool
	Signature     string
	Grid          gridData

	// Failure leads the page of a backfill with failed partitions.
	Failure *failureData
	// Here says the program registers the backfill's DAG: resume and
	// retry run it in this process.
	Here bool
	// Stuck says why the backfill is not progressing, when it is not:
	// nothing runs and partitions are left, or partitions are held and
	// none finished within Quiet. Running lists the held partitions of a
	// backfill that progresses.
	Stuck   string
	Running []string
	Quiet   time.Duration
}

// failureData sums up a backfill's failures: how many, the newest error,
// which partitions.
type failureData struct {
	N          int
	Newest     ledger.Attempt
	Partitions []string // the keys of the newest failures, newest first
	More       int      // failures beyond Partitions
}

// maxFailures is how many failed partitions the failure summary names.
const maxFailures = 10

// triage sets what leads a backfill's page: the failure summary, and
// whether it progresses. A backfill progresses while it holds partitions
// and one finished within the last lease (backfill.DefaultLease), or
// twice the newest finished run's duration when that is longer, so that
// a backfill of slow partitions is not called stuck between two.
func (h *handler) triage(ctx context.Context, s *backfill.Status, live *liveData) error {
	if s.Done() {
		return nil
	}
	bad := s.Counts[ledger.StateFailed] + s.Counts[ledger.StateCanceled]
	if bad > 0 {
		failures, err := s.Finished(ctx, maxFailures, ledger.StateFailed, ledger.StateCanceled)
		if err != nil {
			return err
		}
		if len(failures) > 0 {
			f := &failureData{N: bad, Newest: failures[0], More: bad - len(failures)}
			for _, a := range failures {
				f.Partitions = append(f.Partitions, a.Key)
			}
			live.Failure = f
		}
	}
	running := s.Counts[ledger.StateRunning]
	left := s.Counts[ledger.StatePending] + bad + running
	switch {
	case s.Record.Canceled:
		live.Stuck = "it is canceled: workers claim nothing more until it is resumed"
	case running == 0 && left > 0:
		live.Stuck = fmt.Sprintf("no worker runs it: %d partitions are left and none is running", left)
	case running > 0:
		// The last to finish: the newest failure of the backfill's
		// partitions (through the index of failures), or the newest of
		// the DAG's recent successes that the backfill ran (through the
		// index of successes by revision): a million partitions' finish
		// times are never sorted.
		last, err := s.Finished(ctx, 1, ledger.StateFailed, ledger.StateCanceled)
		if err != nil {
			return err
		}
		recent, err := h.l.RecentSuccesses(ctx, s.Record.DAG, 20)
		if err != nil {
			return err
		}
		for _, a := range recent {
			if a.Backfill == s.Record.ID && (len(last) == 0 || a.Finished.After(last[0].Finished)) {
				last = []ledger.Attempt{a}
				break
			}
		}
		live.Quiet = backfill.DefaultLease
		if len(last) > 0 {
			live.Quiet = max(live.Quiet, 2*last[0].Duration())
		}
		now := h.opts.Now()
		if len(last) > 0 && now.Sub(last[0].Finished) <= live.Quiet {
			live.Running, live.Blocked = live.Blocked, nil
			return nil
		}
		live.Stuck = fmt.Sprintf("no partition finished in the last %v while %d are held", live.Quiet.Round(time.Second), running)
	}
	return nil
}

// backfillData is a backfill's page's.
type backfillData struct {
	Live      liveData
	RefreshMS int64
}

// gridData is a grid as the page draws it.
type gridData struct {
	Cell, Row  string // the granularities of a cell and a row
	Aggregated bool   // a cell may cover several partitions
	Columns    int    // the most cells in a row
	Rows       []rowData
	Cells      int
}

type rowData struct {
	Key   string
	Cells []cellData
}

type cellData struct {
	Key        string
	State      ledger.State
	Column     int
	Partitions int
	Title      string
	Href       string // the partition's history, or the span's partitions
}

// liveOf reads the status and grid of backfill id, whose counts are the
// grid's cells': the backfill is counted once.
func (h *handler) liveOf(ctx context.Context, id string) (liveData, error) {
	s, g, err := backfill.GridOf(ctx, h.l, id, h.opts.Now(), h.opts.MaxCells)
	if err != nil {
		return liveData{}, err
	}
	total := 0
	for _, n := range s.Counts {
		total += n
	}
	live := liveData{
		ID: s.Record.ID, DAG: s.Record.DAG, Name: h.name(s.Record.DAG, s.Record.DAGName), Record: recordOf(s.Record), State: string(s.State()),
		Total: total, Succeeded: percent(s.Counts[ledger.StateSucceeded], total),
		Counts: counts(s.Counts, total), Blocked: s.Blocked, Done: s.Done(), Signature: signature(s),
		Grid: gridOf("/backfills/"+url.PathEscape(s.Record.ID), s.Window, g, ledger.StatePending),
	}
	if b, err := h.registeredBackfill(s.Record); err == nil && b != nil {
		live.Here = true
	}
	return live, h.triage(ctx, s, &live)
}

// gridOf lays out g for the page whose partition and span pages are
// under base, naming partitions never attempted pending: the work is per
// cell, never per partition.
func gridOf(base string, w tranche.TimePartitionWindow, g *backfill.Grid, pending ledger.State) gridData {
	out := gridData{Cell: g.Cell.String(), Row: g.Row.String(), Aggregated: g.Cell != w.Granularity(), Cells: len(g.Cells)}
	name := func(s ledger.State) ledger.State {
		if s == ledger.StatePending {
			return pending
		}
		return s
	}
	for _, cells := range g.Rows() {
		row := rowData{Key: cells[0].Row.Key()}
		for _, c := range cells {
			cd := cellData{Key: c.Span.Key(), State: name(c.State()), Column: min(c.Column, maxColumns-1), Partitions: c.Partitions}
			var b strings.Builder
			fmt.Fprintf(&b, "%s: %s", cd.Key, cd.State)
			if c.Partitions > 1 || out.Aggregated {
				fmt.Fprintf(&b, " (%d partitions:", c.Partitions)
				for _, s := range stateOrder {
					if n := c.Counts[s]; n > 0 {
						fmt.Fprintf(&b, " %d %s", n, name(s))
					}
				}
				b.WriteString(")")
				cd.Href = base + "/span?" + url.Values{"from": {instant(c.Span.Start)}, "to": {instant(c.Span.End)}}.Encode()
			} else {
				cd.Href = base + "/partition?" + url.Values{"start": {instant(c.Span.Start)}}.Encode()
			}
			cd.Title = b.String()
			out.Columns = max(out.Columns, cd.Column+1)
			row.Cells = append(row.Cells, cd)
		}
		out.Rows = append(out.Rows, row)
	}
	return out
}

// signature changes whenever the counts or the cancellation change. A
// state counted 0 is left out, so that the page, whose counts are its
// grid's, and the status endpoint, which counts the whole backfill, sign
// the same counts alike.
func signature(s *backfill.Status) string {
	var b strings.Builder
	for _, st := range slices.Sorted(maps.Keys(s.Counts)) {
		if n := s.Counts[st]; n != 0 {
			fmt.Fprintf(&b, "%s=%d,", st, n)
		}
	}
	fmt.Fprintf(&b, "canceled=%t", s.Record.Canceled)
	return b.String()
}

func (h *handler) backfillPage(w http.ResponseWriter, r *http.Request) {
	live, err := h.liveOf(r.Context(), r.PathValue("id"))
	if errors.Is(err, ledger.ErrUnknownBackfill) {
		// A DAG's name or identity, or the start of one backfill's id, as
		// the commands take them: their page.
		if to := h.pageNamed(r.Context(), r.PathValue("id")); to != "" {
			http.Redirect(w, r, to, http.StatusFound)
			return
		}
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.render(w, r, http.StatusOK, "backfill.html", page{Title: "Backfill " + live.ID, Data: backfillData{Live: live, RefreshMS: h.opts.Refresh.Milliseconds()}})
}

func (h *handler) live(w http.ResponseWriter, r *http.Request) {
	live, err := h.liveOf(r.Context(), r.PathValue("id"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.render(w, r, http.StatusOK, "live-fragment", page{Fragment: true, Data: live})
}

// statusDoc is the status endpoint's answer (see the package
// documentation).
type statusDoc struct {
	ID        string         `json:"id"`
	DAG       string         `json:"dag"`
	Window    string         `json:"window"`
	Total     int            `json:"total"`
	Counts    map[string]int `json:"counts"`
	Done      bool           `json:"done"`
	Canceled  bool           `json:"canceled"`
	Blocked   []string       `json:"blocked"`
	Signature string         `json:"signature"`
}

func (h *handler) statusJSON(w http.ResponseWriter, r *http.Request) {
	doc, err := h.statusDocOf(r.Context(), r.PathValue("id"))
	h.writeJSON(w, r, doc, err)
}

// polled is the status endpoint's last answer for a backfill, and what
// it was read at.
type polled struct {
	doc      statusDoc
	revision int64 // the DAG's revision before the status was read
	canceled bool
	at       time.Time
}

// Bounds of the status endpoint's cache.
const (
	maxPolled = 64               // backfills remembered
	polledAge = 30 * time.Second // how long an unchanged status is served again, its Blocked texts judged at its time
)

// statusDocOf returns the status of backfill id. A page polls it every
// few seconds, and the status of a large backfill takes a while to
// count, so it is counted again only when the DAG's revision moved (an
// attempt at one of its partitions was claimed or finished), the
// backfill was canceled or resumed, or the last count is older than
// polledAge: otherwise a poll costs two small reads.
func (h *handler) statusDocOf(ctx context.Context, id string) (statusDoc, error) {
	rec, err := h.l.Backfill(ctx, id)
	if err != nil {
		return statusDoc{}, err
	}
	rev, err := h.l.Revision(ctx, rec.DAG)
	if err != nil {
		return statusDoc{}, err
	}
	now := h.opts.Now()
	h.mu.Lock()
	p, ok := h.polled[id]
	h.mu.Unlock()
	if ok && p.revision == rev && p.canceled == rec.Canceled && now.Sub(p.at) < polledAge && !now.Before(p.at) {
		return p.doc, nil
	}
	s, err := backfill.StatusOf(ctx, h.l, id, now)
	if err != nil {
		return statusDoc{}, err
	}
	doc := statusDoc{ID: s.Record.ID, DAG: s.Record.DAG, Window: s.Record.Window, Counts: map[string]int{},
		Done: s.Done(), Canceled: s.Record.Canceled, Blocked: s.Blocked, Signature: signature(s)}
	if doc.Blocked == nil {
		doc.Blocked = []string{}
	}
	for st, n := range s.Counts {
		doc.Counts[string(st)] = n
		doc.Total += n
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.polled[id]; !ok && len(h.polled) >= maxPolled {
		for k := range h.polled { // any one: a page no longer polled
			delete(h.polled, k)
			break
		}
	}
	h.polled[id] = polled{doc: doc, revision: rev, canceled: s.Record.Canceled, at: now}
	return doc, nil
}
