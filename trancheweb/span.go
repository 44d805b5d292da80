package trancheweb

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/ledger"
)

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
	sl := &spanLedger{Reader: h.l, from: from, to: to}
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
	ledger.Reader
	from, to time.Time
	empty    bool // the backfill has no partition in the span
}

func (s *spanLedger) Backfill(ctx context.Context, id string) (ledger.BackfillRecord, error) {
	b, err := s.Reader.Backfill(ctx, id)
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
