package trancheweb

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/ledger"
)

// Options configure [NewHandler]. A nil *Options means the defaults.
type Options struct {
	// Names maps DAG identities (backfill.DAGIdentity) to the names the
	// pages show for them; a DAG not in it is shown by its identity.
	Names map[string]string

	// WriteToken, when not empty, enables cancel and resume: the pages
	// offer them, and the handler performs them for POST requests that
	// carry this token. Empty means the handler only reads.
	WriteToken string

	// MaxCells bounds the cells of a backfill's grid; 0 means
	// [DefaultMaxCells]. Beyond it, cells aggregate the partitions of an
	// hour, a day, a month or a year (see [backfill.Status.Grid]).
	MaxCells int

	// Refresh is how often the page of a backfill that is not done
	// polls its status; 0 means [DefaultRefresh].
	Refresh time.Duration

	// Now is the clock that judges leases; nil means time.Now.
	Now func() time.Time

	// Logger, when not nil, logs the ledger errors that requests met
	// (the page shows them too).
	Logger *slog.Logger

	// DAGs are the program's DAGs by name. The index lists each, with
	// or without backfills, under its name, and with WriteToken set, a
	// DAG's page offers a form that plans a backfill of it and starts
	// that plan (see the package documentation), run by this process.
	DAGs map[string]*tranche.DAG

	// Backfill, when not nil, is the template of the backfills the form
	// starts: its Runner, Worker, Lease, Budget and OnEvent, say. The
	// form sets DAG, Ledger, the window or partitions and the policies.
	Backfill *backfill.Backfill
}

// Defaults of [Options].
const (
	DefaultMaxCells = 2000
	DefaultRefresh  = 5 * time.Second
)

// handler serves the pages of one ledger.
type handler struct {
	l     ledger.Ledger
	opts  Options
	token [32]byte // the SHA-256 of Options.WriteToken, compared in constant time
	tmpl  *template.Template
	mux   *http.ServeMux

	registered map[string]string // the identities of Options.DAGs, by name
	byID       map[string]string // and their names, by identity
	launches   *launches

	mu        sync.Mutex
	polled    map[string]polled    // the status endpoint's last answers, by backfill id
	dagPolled map[string]dagPolled // the DAG status endpoint's, by DAG and query
}

//go:embed assets
var assets embed.FS

// NewHandler returns the handler that serves the backfills of l (see the
// package documentation for its endpoints). It panics if opts holds a
// negative MaxCells or Refresh, as http.ServeMux panics on a bad pattern:
// a program's mistake, not its input's.
func NewHandler(l ledger.Ledger, opts *Options) http.Handler {
	h := &handler{l: l, polled: map[string]polled{}, dagPolled: map[string]dagPolled{}}
	if opts != nil {
		h.opts = *opts
	}
	if h.opts.MaxCells < 0 || h.opts.Refresh < 0 {
		panic(fmt.Sprintf("trancheweb: MaxCells %d and Refresh %v; want them 0 (the default) or positive", h.opts.MaxCells, h.opts.Refresh))
	}
	if h.opts.MaxCells == 0 {
		h.opts.MaxCells = DefaultMaxCells
	}
	if h.opts.Refresh == 0 {
		h.opts.Refresh = DefaultRefresh
	}
	if h.opts.Now == nil {
		h.opts.Now = time.Now
	}
	h.registered, h.byID = map[string]string{}, map[string]string{}
	for name, dag := range h.opts.DAGs {
		if id := identityOf(dag); id != "" {
			h.registered[name], h.byID[id] = id, name
		}
	}
	h.launches = &launches{running: map[string]context.CancelFunc{}}
	h.token = sha256.Sum256([]byte(h.opts.WriteToken))
	h.tmpl = template.Must(template.New("").Funcs(template.FuncMap{
		"path":     url.PathEscape,
		"when":     when,
		"duration": duration,
	}).ParseFS(assets, "assets/*.html"))

	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", h.index)
	mux.HandleFunc("GET /assets/style.css", h.asset("assets/style.css", "text/css; charset=utf-8"))
	mux.HandleFunc("GET /assets/page.js", h.asset("assets/page.js", "text/javascript; charset=utf-8"))
	mux.HandleFunc("GET /backfills/{id}", h.backfillPage)
	mux.HandleFunc("GET /backfills/{id}/status.json", h.statusJSON)
	mux.HandleFunc("GET /backfills/{id}/live", h.live)
	mux.HandleFunc("GET /backfills/{id}/partition", h.partition)
	mux.HandleFunc("GET /backfills/{id}/span", h.span)
	mux.HandleFunc("POST /backfills/{id}/cancel", h.cancel)
	mux.HandleFunc("POST /backfills/{id}/resume", h.resume)
	mux.HandleFunc("POST /backfills/{id}/retry", h.retry)
	mux.HandleFunc("GET /dags/{dag}", h.byName(h.dagPage))
	mux.HandleFunc("GET /dags/{dag}/status.json", h.byName(h.dagStatusJSON))
	mux.HandleFunc("GET /dags/{dag}/live", h.byName(h.dagLive))
	mux.HandleFunc("GET /dags/{dag}/partition", h.byName(h.dagPartition))
	mux.HandleFunc("GET /dags/{dag}/span", h.byName(h.dagSpanPage))
	mux.HandleFunc("GET /dags/{dag}/plan", h.byName(h.planPage))
	mux.HandleFunc("POST /dags/{dag}/backfills", h.byName(h.start))
	h.mux = mux
	return h
}

// csp allows the handler's own script and style sheet and nothing else:
// no inline script, no other origin.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", csp)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("Cache-Control", "no-store")
	h.mux.ServeHTTP(w, r)
}

func (h *handler) asset(name, contentType string) http.HandlerFunc {
	body, err := assets.ReadFile(name)
	if err != nil {
		panic(err) // embedded at build time
	}
	if name == "assets/style.css" {
		body = append(body, columnRules()...)
	}
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		w.Write(body)
	}
}

// maxColumns is the most columns a grid row has: an hour of minutes, a
// day of 25 hours as clocks fall back, a month of 31 days.
const maxColumns = 64

// columnRules places a cell in column c of its row by its class, so that
// the pages need no style attribute (which the policy forbids).
func columnRules() []byte {
	var b bytes.Buffer
	for c := range maxColumns {
		fmt.Fprintf(&b, ".c%d{grid-column:%d}\n", c, c+1)
	}
	for w := range 101 { // the progress bar's parts, by percent
		fmt.Fprintf(&b, ".w%d{width:%d%%}\n", w, w)
	}
	return b.Bytes()
}

// page is what every template gets.
type page struct {
	Title    string
	Writes   bool
	Fragment bool // the part shown beside the grid, without the page around it
	Data     any
}

// render writes template name with data, or an error page if it fails.
func (h *handler) render(w http.ResponseWriter, r *http.Request, status int, name string, p page) {
	p.Writes = h.opts.WriteToken != ""
	var buf bytes.Buffer
	if err := h.tmpl.ExecuteTemplate(&buf, name, p); err != nil {
		h.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Add("Vary", "X-Tranche-Fragment")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

// errorData is the error page's.
type errorData struct {
	Status  int
	Message string
}

// fail answers an error: 404 for an unknown backfill or DAG, 400 for a
// bad query, 500 for the rest, logged.
func (h *handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	status := errorStatus(err)
	if status == http.StatusInternalServerError {
		if r.Context().Err() != nil {
			return // the client left
		}
		h.logFailure(r, err)
	}
	h.refuse(w, r, status, err.Error())
}

// errorStatus is the HTTP status of a request that failed with err: 404
// for an unknown backfill or DAG, 400 for a wrong query, 500 otherwise.
func errorStatus(err error) int {
	var bad *badRequest
	var nf *notFound
	switch {
	case errors.Is(err, ledger.ErrUnknownBackfill), errors.As(err, &nf):
		return http.StatusNotFound
	case errors.As(err, &bad):
		return http.StatusBadRequest
	}
	return http.StatusInternalServerError
}

// logFailure logs a request that failed on the server's side.
func (h *handler) logFailure(r *http.Request, err error) {
	if h.opts.Logger != nil {
		h.opts.Logger.ErrorContext(r.Context(), "trancheweb: request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
}

// writeJSON answers v as JSON, or, when err is not nil, err's status
// (errorStatus) and {"error": err's text}.
func (h *handler) writeJSON(w http.ResponseWriter, r *http.Request, v any, err error) {
	w.Header().Set("Content-Type", "application/json")
	if err != nil {
		status := errorStatus(err)
		if status == http.StatusInternalServerError && r.Context().Err() == nil {
			h.logFailure(r, err)
		}
		w.WriteHeader(status)
		v = map[string]string{"error": err.Error()}
	}
	json.NewEncoder(w).Encode(v)
}

// refuse answers status with message on the error page.
func (h *handler) refuse(w http.ResponseWriter, r *http.Request, status int, message string) {
	var buf bytes.Buffer
	p := page{Title: http.StatusText(status), Writes: h.opts.WriteToken != "", Data: errorData{status, message}}
	if err := h.tmpl.ExecuteTemplate(&buf, "error.html", p); err != nil {
		http.Error(w, message, status)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

// badRequest is a request whose query is wrong.
type badRequest struct{ msg string }

func (e *badRequest) Error() string { return e.msg }

// name returns the name the pages give a DAG: Options.Names', a
// registered DAG's, or else the name its newest backfill recorded
// (recorded, when the caller read it), so that a backfill recorded after
// the handler was made shows its DAG's name too.
func (h *handler) name(dag string, recorded ...string) string {
	if n := h.opts.Names[dag]; n != "" {
		return n
	}
	if n := h.byID[dag]; n != "" {
		return n
	}
	for _, n := range recorded {
		if n != "" {
			return n
		}
	}
	return dag
}

// indexData is the index page's.
type indexData struct {
	DAGs   []dagData
	Launch map[string]bool // the DAGs a backfill may be planned of, by identity
}

type dagData struct {
	Identity, Name string
	Backfills      []recordData
	Failing        int // backfills whose state is failed
}

type recordData struct {
	ID, Window  string
	Partitions  int
	Chunk       int
	Created     time.Time
	Canceled    bool
	StopRunning bool
	CanceledAt  time.Time
	ResumedAt   time.Time

	// Filled on the index only: the backfill's state, in the words of
	// the commands, its progress and its age.
	State     string
	Succeeded int
	Failed    int // failed or canceled partitions
	Percent   int // succeeded, of Partitions
	Age       string
}

func recordOf(b ledger.BackfillRecord) recordData {
	n := len(b.Partitions)
	if n == 0 {
		if w, err := tranche.ParseTimePartitionWindow(b.Window); err == nil {
			n = w.Len()
		}
	}
	return recordData{ID: b.ID, Window: b.Window, Partitions: n, Chunk: b.Chunk, Created: b.Created,
		Canceled: b.Canceled, StopRunning: b.StopRunning, CanceledAt: b.CanceledAt, ResumedAt: b.ResumedAt}
}

// indexWorkers is how many backfills the index counts at once: a
// SQLite or PostgreSQL ledger answers reads on several connections.
const indexWorkers = 4

func (h *handler) index(w http.ResponseWriter, r *http.Request) {
	records, err := h.l.Backfills(r.Context())
	if err != nil {
		h.fail(w, r, err)
		return
	}
	// Every backfill's counts, a few at a time: each is one aggregate
	// query through a ledger.LatestReader.
	rows := make([]recordData, len(records))
	now := h.opts.Now()
	var g errgroup.Group
	g.SetLimit(indexWorkers)
	for i, b := range records {
		rows[i] = recordOf(b)
		g.Go(func() error {
			s, err := backfill.CountOf(r.Context(), h.l, b)
			if err != nil {
				return err
			}
			d := &rows[i]
			d.State, d.Succeeded = string(s.State()), s.Counts[ledger.StateSucceeded]
			d.Failed = s.Counts[ledger.StateFailed] + s.Counts[ledger.StateCanceled]
			if d.Partitions > 0 {
				d.Percent = d.Succeeded * 100 / d.Partitions
			}
			d.Age = age(now.Sub(b.Created))
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		h.fail(w, r, err)
		return
	}
	byDAG := map[string]*dagData{}
	var order []string
	// Newest backfill first, and the DAG of the newest first; then the
	// failed backfills ahead of the others, and the DAGs with one ahead.
	for i, b := range slices.Backward(records) {
		d := byDAG[b.DAG]
		if d == nil {
			d = &dagData{Identity: b.DAG, Name: h.name(b.DAG, b.DAGName)}
			byDAG[b.DAG] = d
			order = append(order, b.DAG)
		}
		d.Backfills = append(d.Backfills, rows[i])
		if rows[i].State == "failed" {
			d.Failing++
		}
	}
	for _, name := range slices.Sorted(maps.Keys(h.opts.DAGs)) {
		if id := h.registered[name]; id != "" && byDAG[id] == nil {
			byDAG[id] = &dagData{Identity: id, Name: h.name(id)}
			order = append(order, id)
		}
	}
	data := indexData{Launch: map[string]bool{}}
	for id := range h.byID {
		data.Launch[id] = true
	}
	for _, dag := range order {
		d := byDAG[dag]
		slices.SortStableFunc(d.Backfills, func(a, b recordData) int { return failedFirst(a.State, b.State) })
		data.DAGs = append(data.DAGs, *d)
	}
	slices.SortStableFunc(data.DAGs, func(a, b dagData) int { return failedFirst(stateIf(a.Failing > 0), stateIf(b.Failing > 0)) })
	h.render(w, r, http.StatusOK, "index.html", page{Title: "Backfills", Data: data})
}

// failedFirst orders failed before every other state, keeping the rest.
func failedFirst(a, b string) int {
	switch {
	case a == "failed" && b != "failed":
		return -1
	case b == "failed" && a != "failed":
		return 1
	}
	return 0
}

func stateIf(failing bool) string {
	if failing {
		return "failed"
	}
	return ""
}

// age rounds d for a person: seconds, minutes, hours or days.
func age(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", max(int(d/time.Second), 0))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d/time.Hour))
	}
	return fmt.Sprintf("%dd", int(d/(24*time.Hour)))
}

// stateOrder is the order the pages list states in.
var stateOrder = []ledger.State{ledger.StateSucceeded, ledger.StateFailed, ledger.StateRunning, ledger.StateCanceled, ledger.StatePending}

// countData is one state's count.
type countData struct {
	State   ledger.State
	N       int
	Percent float64
}

// counts lists the counts of every state in stateOrder, then any other
// state a newer ledger may record, by name.
func counts(m map[ledger.State]int, total int) []countData {
	var out []countData
	for _, s := range stateOrder {
		out = append(out, countData{s, m[s], percent(m[s], total)})
	}
	for _, s := range slices.Sorted(maps.Keys(m)) {
		if !slices.Contains(stateOrder, s) {
			out = append(out, countData{s, m[s], percent(m[s], total)})
		}
	}
	return out
}

func percent(n, total int) float64 {
	if total == 0 {
		return 0
	}
	return float64(n) * 100 / float64(total)
}

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

// parseInstant reads an RFC 3339 time from query field name.
func parseInstant(r *http.Request, name string) (time.Time, error) {
	v := r.URL.Query().Get(name)
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, &badRequest{fmt.Sprintf("query %s=%q: want an RFC 3339 time such as 2026-01-05T00:00:00Z", name, v)}
	}
	return t, nil
}

// historyData is a partition's page's: of a backfill's partition, or
// with DAG set of a DAG's.
type historyData struct {
	BackfillID, DAG, Name, Key string
	Start, End                 time.Time
	Attempts                   []attemptData
}

type attemptData struct {
	ledger.Attempt
	ThisBackfill bool
}

func (h *handler) partition(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	start, err := parseInstant(r, "start")
	if err != nil {
		h.fail(w, r, err)
		return
	}
	record, err := h.l.Backfill(r.Context(), id)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	win, err := tranche.ParseTimePartitionWindow(record.Window)
	if err != nil {
		h.fail(w, r, fmt.Errorf("backfill %s: its recorded window: %w", id, err))
		return
	}
	p := tranche.PartitionOf(win.Granularity(), start.In(win.Location()))
	if !p.Start.Equal(start) {
		h.fail(w, r, &badRequest{fmt.Sprintf("no partition of %s starts at %s; the partition holding it starts at %s",
			win.Granularity(), instant(start), instant(p.Start))})
		return
	}
	if !win.Contains(p.Start) {
		h.fail(w, r, &badRequest{fmt.Sprintf("partition %s is not in backfill %s's window %s", p.Key(), id, record.Window)})
		return
	}
	attempts, err := h.l.History(r.Context(), record.DAG, p.Start)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	data := historyData{BackfillID: id, Name: h.name(record.DAG, record.DAGName), Key: p.Key(), Start: p.Start, End: p.End}
	// Newest attempt first, as an operator reads them.
	for _, a := range slices.Backward(attempts) {
		data.Attempts = append(data.Attempts, attemptData{a, a.Backfill == id})
	}
	h.render(w, r, http.StatusOK, "partition.html", page{Title: "Partition " + p.Key(), Fragment: fragment(r), Data: data})
}

// fragment reports whether the request asks for the part of a page shown
// beside the grid.
func fragment(r *http.Request) bool { return r.Header.Get("X-Tranche-Fragment") == "1" }

// spanData is the page of an aggregated cell's partitions: of a
// backfill's grid, or with DAG set of a DAG's.
type spanData struct {
	BackfillID, DAG, Name, Key string
	From, To                   time.Time
	Partitions                 []partitionData
}

type partitionData struct {
	Key    string
	State  ledger.State
	Latest *ledger.Attempt
	Href   string
}

// parseSpan reads the span a span page lists from its from and to
// parameters: instants, from before to.
func parseSpan(r *http.Request) (from, to time.Time, err error) {
	if from, err = parseInstant(r, "from"); err != nil {
		return from, to, err
	}
	if to, err = parseInstant(r, "to"); err != nil {
		return from, to, err
	}
	if !from.Before(to) {
		return from, to, &badRequest{fmt.Sprintf("span from %s to %s is empty; want from before to", instant(from), instant(to))}
	}
	return from, to, nil
}

// maxSpan bounds the partitions the span page lists: a day of minutes.
const maxSpan = 1440 * 31

func (h *handler) span(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	from, to, err := parseSpan(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	sl := &spanLedger{Ledger: h.l, from: from, to: to}
	s, err := backfill.StatusOf(r.Context(), sl, id, h.opts.Now())
	if err != nil {
		h.fail(w, r, err)
		return
	}
	data := spanData{BackfillID: id, Name: h.name(s.Record.DAG, s.Record.DAGName), From: from, To: to}
	if sl.empty {
		h.render(w, r, http.StatusOK, "span.html", page{Title: "Partitions", Fragment: fragment(r), Data: data})
		return
	}
	data.Key = s.Window.String()
	base := "/backfills/" + url.PathEscape(id) + "/partition?"
	for ps, err := range s.Partitions(r.Context()) {
		if err != nil {
			h.fail(w, r, err)
			return
		}
		if len(data.Partitions) == maxSpan {
			break
		}
		data.Partitions = append(data.Partitions, partitionData{Key: ps.Partition.Key(), State: ps.State, Latest: ps.Latest,
			Href: base + url.Values{"start": {instant(ps.Partition.Start)}}.Encode()})
	}
	h.render(w, r, http.StatusOK, "span.html", page{Title: "Partitions " + data.Key, Fragment: fragment(r), Data: data})
}

// spanLedger narrows the record of a backfill to its partitions that
// start in [from, to), so that backfill.StatusOf reads those alone, and
// matches their attempts as it matches the whole backfill's.
type spanLedger struct {
	ledger.Ledger
	from, to time.Time
	empty    bool // the backfill has no partition in the span
}

func (s *spanLedger) Backfill(ctx context.Context, id string) (ledger.BackfillRecord, error) {
	b, err := s.Ledger.Backfill(ctx, id)
	if err != nil {
		return b, err
	}
	w, err := tranche.ParseTimePartitionWindow(b.Window)
	if err != nil {
		return b, fmt.Errorf("tranche: backfill %s: its recorded window: %w", id, err)
	}
	if len(b.Partitions) > 0 {
		var in []time.Time
		for _, t := range b.Partitions {
			if !t.Before(s.from) && t.Before(s.to) {
				in = append(in, t)
			}
		}
		if len(in) == 0 {
			s.empty = true
			in = b.Partitions[:1] // a valid record; the page lists nothing
		}
		b.Partitions = in
		return b, nil
	}
	g, loc := w.Granularity(), w.Location()
	first := tranche.PartitionOf(g, maxTime(s.from, w.Start()).In(loc))
	if first.Start.Before(s.from) {
		first = first.Next()
	}
	last := tranche.PartitionOf(g, minTime(s.to, w.End()).Add(-time.Nanosecond).In(loc))
	if first.Start.After(last.Start) {
		s.empty = true
		return b, nil
	}
	narrow, err := tranche.NewTimePartitionWindow(g, first.Start, last.Start)
	if err != nil {
		return b, err
	}
	b.Window = narrow.String()
	return b, nil
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// checkToken reports whether r carries the write token, comparing
// digests in constant time (whatever the lengths).
func (h *handler) checkToken(r *http.Request) bool {
	if h.opts.WriteToken == "" {
		return false
	}
	got := sha256.Sum256([]byte(r.PostFormValue("token")))
	return subtle.ConstantTimeCompare(got[:], h.token[:]) == 1
}

// write performs a write for a POST that carries the token, then sends
// the browser back to the backfill's page.
func (h *handler) write(w http.ResponseWriter, r *http.Request, do func(ctx context.Context, id string) error) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	switch {
	case h.opts.WriteToken == "":
		h.refuse(w, r, http.StatusForbidden, "this server is read-only: it was started without writes enabled")
		return
	case !h.checkToken(r):
		h.refuse(w, r, http.StatusForbidden, "a missing or wrong token: nothing was changed")
		return
	}
	id := r.PathValue("id")
	if err := do(r.Context(), id); err != nil {
		h.fail(w, r, err)
		return
	}
	http.Redirect(w, r, "/backfills/"+url.PathEscape(id), http.StatusSeeOther)
}

func (h *handler) cancel(w http.ResponseWriter, r *http.Request) {
	h.write(w, r, func(ctx context.Context, id string) error {
		return h.l.CancelBackfill(ctx, id, ledger.CancelOptions{StopRunning: r.PostFormValue("stop_running") == "on"})
	})
}

// resume undoes a cancel; a backfill of a registered DAG then runs here,
// as tranchecli's resume runs it, since the program serving the pages may
// be the only one that has its DAG.
func (h *handler) resume(w http.ResponseWriter, r *http.Request) {
	h.write(w, r, func(ctx context.Context, id string) error {
		return h.runAgain(ctx, id, true)
	})
}

// retry runs the failed and canceled partitions of a backfill of a
// registered DAG again, here, as a rerun of its command does.
func (h *handler) retry(w http.ResponseWriter, r *http.Request) {
	h.write(w, r, func(ctx context.Context, id string) error {
		return h.runAgain(ctx, id, false)
	})
}

// runAgain resumes backfill id (resume) or runs it again (retry) in this
// process when its DAG is registered; a resume of another DAG's backfill
// only marks it resumed, for its workers, and a retry of one is refused.
func (h *handler) runAgain(ctx context.Context, id string, resume bool) error {
	record, err := h.l.Backfill(ctx, id)
	if err != nil {
		return err
	}
	b, err := h.registeredBackfill(record)
	switch {
	case err != nil:
		return err
	case b == nil && resume:
		return h.l.ResumeBackfill(ctx, id)
	case b == nil:
		return &badRequest{fmt.Sprintf("backfill %s is of DAG %s, which this program does not register (Options.DAGs): its workers retry it when run again", id, record.DAG)}
	}
	err = h.runHere(ctx, id, b, func(ctx context.Context) error {
		_, err := b.Resume(ctx)
		return err
	})
	if errors.Is(err, errRunningHere) && resume {
		return h.l.ResumeBackfill(ctx, id) // its run here goes on once resumed
	}
	if errors.Is(err, errRunningHere) {
		return nil
	}
	return err
}

// instant formats t for a URL: RFC 3339 in UTC.
func instant(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// when formats a time for a person, in its own location; "" if zero.
func when(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.Format("2006-01-02 15:04:05 Z07:00")
}

// duration formats how long an attempt ran; "" while it runs.
func duration(d time.Duration) string {
	if d == 0 {
		return ""
	}
	if d < time.Second {
		return d.Round(time.Millisecond).String()
	}
	return d.Round(100 * time.Millisecond).String()
}

// minPrefix is the fewest characters of a backfill's id that name it, as
// tranchecli's commands take them.
const minPrefix = 4

// byName sends a request that names a DAG by its name (a registered
// name, an Options.Names name, or the name its backfills recorded)
// rather than its identity to the identity's URL, which every link of
// the pages uses: 307, so that a form's POST is sent again as it was.
func (h *handler) byName(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		dag := r.PathValue("dag")
		if id := h.identityNamed(r.Context(), dag); id != "" && id != dag {
			u := *r.URL
			u.Path = "/dags/" + id + strings.TrimPrefix(r.URL.Path, "/dags/"+dag)
			u.RawPath = ""
			http.Redirect(w, r, u.String(), http.StatusTemporaryRedirect)
			return
		}
		next(w, r)
	}
}

// identityNamed returns the identity of the DAG that name names, or ""
// when name is an identity the ledger or the program knows, or names
// none.
func (h *handler) identityNamed(ctx context.Context, name string) string {
	if name == "" || h.byID[name] != "" {
		return ""
	}
	if id := h.registered[name]; id != "" {
		return id
	}
	for id, n := range h.opts.Names {
		if n == name {
			return id
		}
	}
	records, err := h.l.Backfills(ctx)
	if err != nil {
		return ""
	}
	for _, r := range slices.Backward(records) {
		switch {
		case r.DAG == name:
			return ""
		case r.DAGName == name:
			return r.DAG
		}
	}
	return ""
}

// pageNamed returns the page of what arg names that is no backfill's id:
// a DAG by its name or identity, or the one backfill whose id starts
// with arg (minPrefix characters or more); "" for none.
func (h *handler) pageNamed(ctx context.Context, arg string) string {
	if id := h.identityNamed(ctx, arg); id != "" {
		return "/dags/" + url.PathEscape(id)
	}
	if h.byID[arg] != "" {
		return "/dags/" + url.PathEscape(arg)
	}
	records, err := h.l.Backfills(ctx)
	if err != nil {
		return ""
	}
	var found []string
	for _, r := range records {
		switch {
		case r.DAG == arg:
			return "/dags/" + url.PathEscape(arg)
		case len(arg) >= minPrefix && strings.HasPrefix(r.ID, arg):
			found = append(found, r.ID)
		}
	}
	if len(found) == 1 {
		return "/backfills/" + url.PathEscape(found[0])
	}
	return ""
}
