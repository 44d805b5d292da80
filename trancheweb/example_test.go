package trancheweb_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/ledger/memledger"
	"github.com/tranche-dev/tranche/trancheweb"
)

// The pages of a ledger's backfills, served read-only, and the status
// a backfill's page polls.
func ExampleNewHandler() {
	ctx := context.Background()
	l := memledger.New(nil)
	daily := tranche.Partitioning{Granularity: tranche.Day, Location: time.UTC, Column: "day"}
	dag, _ := tranche.NewDAG(tranche.Asset{Name: "events", Partitioning: daily,
		Materialize: func(context.Context, *tranche.Materialization) ([]tranche.Row, error) { return nil, nil }})
	w, _ := tranche.NewTimePartitionWindow(tranche.Day, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 1, 7, 0, 0, 0, 0, time.UTC))
	b := &backfill.Backfill{DAG: dag, Window: w, Ledger: l}
	if _, err := b.Run(ctx); err != nil {
		fmt.Println(err)
		return
	}
	id, _ := b.ID()

	srv := httptest.NewServer(trancheweb.NewHandler(l, &trancheweb.Options{
		Names: map[string]string{backfill.DAGIdentity(dag, tranche.Day, time.UTC): "events"},
	}))
	defer srv.Close()

	res, err := http.Get(srv.URL + "/backfills/" + id + "/status.json")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer res.Body.Close()
	var status struct {
		Total  int            `json:"total"`
		Counts map[string]int `json:"counts"`
		Done   bool           `json:"done"`
	}
	if err := json.NewDecoder(res.Body).Decode(&status); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Status, status.Total, status.Counts["succeeded"], status.Done)
	// Output:
	// 200 OK 7 7 true
}
