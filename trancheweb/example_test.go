package trancheweb_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
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

// A program's DAGs registered with the pages: with a write token, a DAG's
// page plans a backfill of it and starts that plan, behind the token, in
// this process. Here the plan is fetched as an operator's browser would,
// and started with the revision it shows.
func ExampleOptions_dAGs() {
	l := memledger.New(nil)
	daily := tranche.Partitioning{Granularity: tranche.Day, Column: "day"}
	events, _ := tranche.NewDAG(tranche.Asset{Name: "events", Partitioning: daily,
		Materialize: func(context.Context, *tranche.Materialization) ([]tranche.Row, error) { return nil, nil }})

	h := trancheweb.NewHandler(l, &trancheweb.Options{
		DAGs:       map[string]*tranche.DAG{"events": events},
		WriteToken: "a-long-random-token",
		Backfill:   &backfill.Backfill{Worker: "pages"}, // the runner, worker, lease... of the backfills it starts
	})
	srv := httptest.NewServer(h)
	defer srv.Close()

	dag := backfill.DAGIdentity(events, tranche.Day, time.UTC)
	week := url.Values{"from": {"2026-01-01"}, "to": {"2026-01-07"}, "rerun": {"failed"}, "on_failure": {"stop"}, "concurrency": {"2"}}
	res, err := http.Get(srv.URL + "/dags/" + dag + "/plan?" + week.Encode())
	if err != nil {
		fmt.Println(err)
		return
	}
	page, _ := io.ReadAll(res.Body)
	res.Body.Close()
	revision := regexp.MustCompile(`name="revision" value="(\d+)"`).FindSubmatch(page)[1]

	start := url.Values{"token": {"a-long-random-token"}, "revision": {string(revision)}}
	for k, v := range week {
		start[k] = v
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err = client.PostForm(srv.URL+"/dags/"+dag+"/backfills", start)
	if err != nil {
		fmt.Println(err)
		return
	}
	res.Body.Close()
	fmt.Println(res.Status, strings.HasPrefix(res.Header.Get("Location"), "/backfills/"))
	// Output:
	// 303 See Other true
}
