package trancheweb

import (
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/ledger"
)

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
