package trancheweb

import (
	"maps"
	"net/http"
	"slices"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/internal/granularities"
	"github.com/tranche-dev/tranche/ledger"
)

// indexData is the index page's.
type indexData struct {
	DAGs   []dagData
	Launch map[string]bool // the DAGs a backfill may be planned of, by identity
}

type dagData struct {
	Identity, Name string
	Backfills      []recordData
	Failing        int // backfills whose state is failed
	// Assets: a registered DAG of several granularities, whose
	// backfills record each asset apart (backfill.AssetsOf).
	Assets []assetRow
}

// assetRow is an asset of a DAG of several granularities on the index.
type assetRow struct {
	Asset, Granularity, Identity, Name       string
	Total, Succeeded, Failed, Running, Other int
	Blocked, Stale                           int
}

// assetRows returns the rows of dag's assets when it has several
// granularities; none otherwise.
func (h *handler) assetRows(r *http.Request, dag *tranche.DAG) ([]assetRow, error) {
	if !granularities.Several(dag) {
		return nil, nil
	}
	_, plans, err := backfill.AssetsOf(r.Context(), h.l, dag, h.opts.Now())
	var rows []assetRow
	for _, a := range plans {
		st := a.States
		rows = append(rows, assetRow{Asset: a.Asset, Granularity: a.Granularity.String(), Identity: a.DAG, Name: a.DAGName,
			Total: a.Counts.Total, Succeeded: st[ledger.StateSucceeded], Failed: st[ledger.StateFailed] + st[ledger.StateCanceled],
			Running: st[ledger.StateRunning], Other: st[ledger.StatePending], Blocked: a.Blocked, Stale: a.Stale})
	}
	return rows, err
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
			s, err := backfill.CountStatus(r.Context(), h.l, b)
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
		if id := h.registered[name]; id != "" {
			if byDAG[id].Assets, err = h.assetRows(r, h.opts.DAGs[name]); err != nil {
				h.fail(w, r, err)
				return
			}
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
