package backfill_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/memledger"
)

// TestBackfillDAGName runs a backfill of a named DAG: the ledger records
// the name beside the backfill and its events carry it; renamed, the
// DAG keeps its identity, its backfill's id and its history, and the
// record takes the new name.
func TestBackfillDAGName(t *testing.T) {
	l := memledger.New(nil)
	newDAG := func(name string) *tranche.DAG {
		d, err := tranche.NewDAG(tranche.Asset{Name: "events", Partitioning: tranche.Partitioning{Granularity: tranche.Day, Location: time.UTC},
			Materialize: func(context.Context, *tranche.Materialization) ([]tranche.Row, error) { return nil, nil }})
		if err != nil {
			t.Fatal(err)
		}
		if name != "" {
			d.Name = name
		}
		return d
	}
	w, err := tranche.NewTimePartitionWindow(tranche.Day, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 1, 3, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	names := map[string]bool{}
	run := func(d *tranche.DAG) string {
		b := &backfill.Backfill{DAG: d, Window: w, Ledger: l, OnEvent: func(_ context.Context, e tranche.Event) {
			mu.Lock()
			names[e.DAG] = true
			mu.Unlock()
		}}
		if _, err := b.Run(t.Context()); err != nil {
			t.Fatal(err)
		}
		id, err := b.ID()
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	if d := newDAG(""); d.Name != "events" {
		t.Errorf("the default name = %q; want events, its one asset", d.Name)
	}
	id := run(newDAG("Event loads"))
	rec, err := l.Backfill(t.Context(), id)
	if err != nil || rec.DAGName != "Event loads" {
		t.Errorf("the record = %+v, %v; want DAGName Event loads", rec, err)
	}
	if len(names) != 1 || !names["Event loads"] {
		t.Errorf("the events named DAGs %v; want Event loads only", names)
	}
	// Renamed: a run with nothing to run records nothing; a run of the
	// same backfill that runs something, or a new backfill, names the
	// DAG anew, and its older backfills are listed by the new name.
	if again := run(newDAG("events (v2 naming)")); again != id {
		t.Fatalf("renamed, the backfill's id is %s; want %s", again, id)
	}
	w, err = tranche.NewTimePartitionWindow(tranche.Day, time.Date(2026, 1, 4, 0, 0, 0, 0, time.UTC), time.Date(2026, 1, 4, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	second := run(newDAG("events (v2 naming)"))
	records, err := l.Backfills(t.Context())
	if err != nil || len(records) != 2 || records[1].ID != second {
		t.Fatalf("Backfills = %+v, %v", records, err)
	}
	if records[0].DAG != records[1].DAG {
		t.Errorf("renaming changed the DAG's identity: %s, %s", records[0].DAG, records[1].DAG)
	}
	if got := backfill.DAGNames(records); len(got) != 1 || got[records[0].DAG] != "events (v2 naming)" {
		t.Errorf("DAGNames = %v; want the DAG by its new name", got)
	}
	st, err := backfill.StatusOf(t.Context(), l, id, time.Now())
	if err != nil || st.Counts[ledger.StateSucceeded] != 3 {
		t.Errorf("after the rename, status %+v, %v; want the 3 days succeeded before", st, err)
	}
}
