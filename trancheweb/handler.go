package trancheweb

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

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
	l     ledger.Reader // what the pages read
	w     ledger.Ledger // what the writes write: l, when it is a Ledger
	opts  Options
	token [32]byte // the SHA-256 of Options.WriteToken, compared in constant time
	// origins refuses a browser's write from a page of another origin.
	origins *http.CrossOriginProtection
	tmpl    *template.Template
	mux     *http.ServeMux

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
// a program's mistake, not its input's. The pages only read l; the
// writes that [Options.WriteToken] enables need it to be a
// [ledger.Ledger], and NewHandler panics if it is not (a reader alone,
// as sqlite.OpenReader opens one).
func NewHandler(l ledger.Reader, opts *Options) http.Handler {
	h := &handler{l: l, polled: map[string]polled{}, dagPolled: map[string]dagPolled{}}
	h.w, _ = l.(ledger.Ledger)
	if opts != nil {
		h.opts = *opts
	}
	if h.opts.WriteToken != "" && h.w == nil {
		panic(fmt.Sprintf("trancheweb: Options.WriteToken enables writes, and the ledger, a %T, cannot write: give a ledger.Ledger", l))
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
	h.origins = http.NewCrossOriginProtection()
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
	mux.HandleFunc("POST /dags/{dag}/pause", h.byName(h.pauseSchedule(true)))
	mux.HandleFunc("POST /dags/{dag}/resume", h.byName(h.pauseSchedule(false)))
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
	if assets, err := backfill.AssetBackfills(ctx, h.l, arg); err == nil && len(assets) > 0 {
		// A backfill of several granularities, as its plan names it:
		// the index shows its DAG's assets and their backfills.
		return "/"
	}
	return ""
}
