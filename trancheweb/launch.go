package trancheweb

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/ledger"
)

// launches are the backfills the form started in this process, running
// until they end, by id: a second start of a running one is refused
// rather than run beside it.
type launches struct {
	mu      sync.Mutex
	running map[string]context.CancelFunc
}

// identityOf returns the identity a backfill of dag records: that of its
// assets' granularity and zone (UTC when none names one), or "" when its
// assets are not partitioned alike.
func identityOf(dag *tranche.DAG) string {
	g, loc, err := backfill.PartitioningOf(dag)
	if err != nil {
		return ""
	}
	return backfill.DAGIdentity(dag, g, loc)
}

// planQuery is what the form asks: a window (from, to) or slots, and the
// policies, as text, so that the page shows them back as typed.
type planQuery struct {
	From, To    string
	Slots       string // fire times, one a line or separated by spaces
	Rerun       string
	OnFailure   string
	Concurrency string
	Revision    string // the plan's, on a start
}

func queryOf(r *http.Request) planQuery {
	v := func(k string) string { return strings.TrimSpace(r.Form.Get(k)) }
	return planQuery{From: v("from"), To: v("to"), Slots: v("slots"), Rerun: v("rerun"), OnFailure: v("on_failure"),
		Concurrency: v("concurrency"), Revision: v("revision")}
}

// empty reports whether the query names no partitions: the form alone.
func (q planQuery) empty() bool { return q.From == "" && q.To == "" && q.Slots == "" }

// backfillOf builds the backfill the query names of the registered DAG
// name, from Options.Backfill's template; a wrong query is a badRequest.
func (h *handler) backfillOf(name string, q planQuery) (*backfill.Backfill, error) {
	dag := h.opts.DAGs[name]
	g, _, err := backfill.PartitioningOf(dag)
	if err != nil {
		return nil, &badRequest{fmt.Sprintf("DAG %s: %v", name, err)}
	}
	b := &backfill.Backfill{}
	if h.opts.Backfill != nil {
		*b = *h.opts.Backfill
	}
	b.DAG, b.Ledger, b.Window, b.Partitions = dag, h.w, tranche.TimePartitionWindow{}, nil
	bad := func(format string, args ...any) error { return &badRequest{fmt.Sprintf(format, args...)} }
	if err := b.Rerun.UnmarshalText([]byte(q.Rerun)); err != nil {
		return nil, bad("rerun: %v", err)
	}
	if err := b.OnFailure.UnmarshalText([]byte(q.OnFailure)); err != nil {
		return nil, bad("on failure: %v", err)
	}
	b.Concurrency = max(b.Concurrency, 1)
	if q.Concurrency != "" {
		n, err := strconv.Atoi(q.Concurrency)
		if err != nil || n < 1 || n > 1000 {
			return nil, bad("concurrency %q: want a whole number from 1 to 1000", q.Concurrency)
		}
		b.Concurrency = n
	}
	// The library's one rule, as tranchecli's --from and --to: in the
	// DAG's zone, a date the start of its day for from and its end for to.
	switch slots := strings.Fields(q.Slots); {
	case len(slots) > 0 && (q.From != "" || q.To != ""):
		return nil, bad("slots and a window both given: name a window (from, to) or slots, not both")
	case len(slots) > 0 && !g.IsSchedule():
		return nil, bad("slots name the fire times of a cron schedule, and DAG %s is partitioned by %v: give from and to", name, g)
	case len(slots) > 0:
		if b.Partitions, err = backfill.ParseSlots(dag, slots); err != nil {
			return nil, &badRequest{err.Error()}
		}
	case q.From == "" || q.To == "":
		return nil, bad("no window: give from and to (a date: through its end), or slots")
	default:
		if b.Window, err = backfill.ParseWindow(dag, q.From, q.To, h.opts.Now()); err != nil {
			return nil, bad("from %s to %s: %v", q.From, q.To, err)
		}
	}
	if _, err := b.ID(); err != nil {
		return nil, &badRequest{err.Error()}
	}
	return b, nil
}

// maxPlanItems is how many partitions the plan page lists; the counts
// cover them all.
const maxPlanItems = 200

// planData is the plan page's.
type planData struct {
	Name, DAG string
	Query     planQuery
	Plan      *backfill.Plan
	Items     []backfill.PlanItem
	More      int    // partitions planned beyond Items
	Stale     bool   // a start was refused: the history changed, this is the new plan
	Message   string // why a start was refused
	Running   bool   // the plan's backfill runs in this process already
	Schedule  bool   // the DAG's granularity is a cron schedule: slots may be named
	Rerun     []string
	OnFailure []string
}

// registeredName returns the name of the registered DAG of identity dag,
// or a notFound.
func (h *handler) registeredName(dag string) (string, error) {
	if name := h.byID[dag]; name != "" {
		return name, nil
	}
	return "", &notFound{fmt.Sprintf("DAG %q is not one of the program's DAGs (Options.DAGs): the pages plan backfills of those only", dag)}
}

// planPage shows the form and, when the query names partitions, the plan
// it makes, and, with writes enabled, the form that starts it.
func (h *handler) planPage(w http.ResponseWriter, r *http.Request) {
	dag := r.PathValue("dag")
	name, err := h.registeredName(dag)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	r.ParseForm()
	q := queryOf(r)
	data, err := h.planDataOf(r.Context(), name, dag, q)
	if err != nil {
		var bad *badRequest
		if errors.As(err, &bad) {
			data.Message = bad.msg
			h.render(w, r, http.StatusBadRequest, "plan.html", page{Title: "Plan a backfill of " + name, Data: data})
			return
		}
		h.fail(w, r, err)
		return
	}
	h.render(w, r, http.StatusOK, "plan.html", page{Title: "Plan a backfill of " + name, Data: data})
}

// planDataOf plans the backfill q names; an empty query is the form
// alone.
func (h *handler) planDataOf(ctx context.Context, name, dag string, q planQuery) (planData, error) {
	data := h.formData(name, dag, q)
	if q.empty() {
		return data, nil
	}
	b, err := h.backfillOf(name, q)
	if err != nil {
		return data, err
	}
	p, err := b.PlanFrom(ctx, h.l) // the plan page reads alone
	if err != nil {
		return data, err
	}
	return data, h.fillPlan(ctx, &data, p)
}

// formData is the plan page's form for DAG name, filled with q.
func (h *handler) formData(name, dag string, q planQuery) planData {
	g, _, _ := backfill.PartitioningOf(h.opts.DAGs[name])
	return planData{Name: name, DAG: dag, Query: q, Schedule: g.IsSchedule(),
		Rerun:     []string{string(ledger.RerunFailed), string(ledger.RerunNone), string(ledger.RerunAll)},
		OnFailure: []string{string(tranche.FailStop), string(tranche.FailContinue)}}
}

// fillPlan sets the plan and its first items.
func (h *handler) fillPlan(ctx context.Context, data *planData, p *backfill.Plan) error {
	data.Plan, data.Items, data.More = p, nil, 0
	for item, err := range p.Items(ctx) {
		if err != nil {
			return err
		}
		if len(data.Items) == maxPlanItems {
			data.More = p.Counts.Total - maxPlanItems
			break
		}
		data.Items = append(data.Items, item)
	}
	h.launches.mu.Lock()
	_, data.Running = h.launches.running[p.Backfill]
	h.launches.mu.Unlock()
	return nil
}

// start starts the plan the form shows, behind the token: the plan is
// made again from the same query and given the revision the operator saw,
// and the backfill runs it (backfill.Backfill.Execute) in this process.
// A plan whose partitions' history changed since that revision is not
// started: 409 Conflict, with the new plan to start instead.
func (h *handler) start(w http.ResponseWriter, r *http.Request) {
	dag := r.PathValue("dag")
	if !h.allowWrite(w, r, "nothing was started") {
		return
	}
	name, err := h.registeredName(dag)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	q := queryOf(r)
	b, err := h.backfillOf(name, q)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	revision, err := strconv.ParseInt(q.Revision, 10, 64)
	if err != nil || revision < 0 {
		h.fail(w, r, &badRequest{fmt.Sprintf("revision %q: start the plan the plan page shows, whose revision the form carries", q.Revision)})
		return
	}
	p, err := b.Plan(r.Context())
	if err != nil {
		h.fail(w, r, err)
		return
	}
	p.Revision = revision // the plan as the operator saw it: Execute checks the history since

	err = h.runHere(r.Context(), p.Backfill, b, func(ctx context.Context) error {
		_, err := b.Execute(ctx, p)
		return err
	})
	if errors.Is(err, errRunningHere) {
		http.Redirect(w, r, "/backfills/"+url.PathEscape(p.Backfill), http.StatusSeeOther)
		return
	}
	var stale *backfill.StalePlanError
	switch {
	case errors.As(err, &stale):
		data := h.formData(name, dag, q)
		data.Stale = true
		data.Message = fmt.Sprintf("The history of these partitions changed since revision %d, when the plan was made: nothing was started. This is the plan now; start it if it is still what you want.", revision)
		if err := h.fillPlan(r.Context(), &data, stale.Plan); err != nil {
			h.fail(w, r, err)
			return
		}
		data.Query.Revision = strconv.FormatInt(stale.Plan.Revision, 10)
		h.render(w, r, http.StatusConflict, "plan.html", page{Title: "Plan a backfill of " + name, Data: data})
		return
	case err != nil:
		if _, rerr := h.l.Backfill(r.Context(), p.Backfill); rerr != nil {
			h.fail(w, r, err) // it never started
			return
		}
	}
	http.Redirect(w, r, "/backfills/"+url.PathEscape(p.Backfill), http.StatusSeeOther)
}

// errRunningHere is runHere's refusal of a backfill this process runs
// already: a second start would only race the first for its partitions.
var errRunningHere = errors.New("tranche: the backfill runs in this process already")

// runHere runs backfill id in this process, in the background, with run
// (b's Execute or Resume): under a context of its own, which the request's
// end does not cancel, and in h.launches until it ends. It returns once
// the backfill started (backfill.KindStarted) or run returned, with run's
// error then; errRunningHere when id runs here already.
func (h *handler) runHere(ctx context.Context, id string, b *backfill.Backfill, run func(context.Context) error) error {
	h.launches.mu.Lock()
	_, running := h.launches.running[id]
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	if !running {
		h.launches.running[id] = cancel
	}
	h.launches.mu.Unlock()
	if running {
		cancel()
		return errRunningHere
	}
	// The answer waits for the first of a refusal (a stale plan, a
	// canceled backfill) and the backfill's start.
	started := make(chan struct{})
	var once sync.Once
	own := b.OnEvent
	b.OnEvent = func(ctx context.Context, e tranche.Event) {
		if e.Kind == backfill.KindStarted {
			once.Do(func() { close(started) })
		}
		if own != nil {
			own(ctx, e)
		}
	}
	done := make(chan error, 1)
	go func() {
		err := run(ctx)
		// No longer running before the answer is given: a stale plan's
		// page, drawn from it, offers the new plan's start.
		cancel()
		h.launches.mu.Lock()
		delete(h.launches.running, id)
		h.launches.mu.Unlock()
		if err != nil && h.opts.Logger != nil {
			h.opts.Logger.Warn("trancheweb: a backfill run from the page ended", "backfill", id, "err", err)
		}
		done <- err
	}()
	select {
	case <-started:
		return nil
	case err := <-done:
		return err
	}
}

// registeredBackfill returns the backfill of record over the registered
// DAG it was made of, from Options.Backfill's template, or nil when no
// registered DAG has its identity and id: then workers elsewhere run it.
func (h *handler) registeredBackfill(record ledger.BackfillRecord) (*backfill.Backfill, error) {
	if len(h.opts.DAGs) == 0 {
		return nil, nil
	}
	w, err := tranche.ParseTimePartitionWindow(record.Window)
	if err != nil {
		return nil, fmt.Errorf("tranche: backfill %s: its recorded window: %w", record.ID, err)
	}
	for _, dag := range h.opts.DAGs {
		if backfill.DAGIdentity(dag, w.Granularity(), w.Location()) != record.DAG {
			continue
		}
		b := &backfill.Backfill{}
		if h.opts.Backfill != nil {
			*b = *h.opts.Backfill
		}
		b.DAG, b.Ledger, b.Window, b.Partitions, b.ChunkSize = dag, h.w, w, nil, record.Chunk
		b.Rerun, b.Concurrency = ledger.RerunFailed, max(b.Concurrency, 1)
		for _, start := range record.Partitions {
			b.Partitions = append(b.Partitions, tranche.PartitionOf(w.Granularity(), start.In(w.Location())))
		}
		if id, err := b.ID(); err != nil || id != record.ID {
			continue // another backfill of the DAG: its workers run it
		}
		return b, nil
	}
	return nil, nil
}
