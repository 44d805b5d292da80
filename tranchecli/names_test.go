package tranchecli_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/ledger/memledger"
	"github.com/tranche-dev/tranche/tranchecli"
	"github.com/tranche-dev/tranche/trancheweb"
)

// TestNamesEverywhere names a DAG by the name its backfills recorded,
// berlin_orders, in a program without DAGs (as the tranche command is):
// status, history, cancel and resume take it, ls's and status's DAG lines
// and history's header show it beside the identity, and the pages send
// /dags/berlin_orders and /backfills/berlin_orders to the DAG's page.
func TestNamesEverywhere(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	dag, err := tranche.NewDAG(tranche.Asset{Name: "orders", Partitioning: tranche.Partitioning{Granularity: tranche.Day, Location: berlin},
		Materialize: func(_ context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
			if p, _ := m.Partition(); p.Key() == "2026-01-02" {
				return nil, errors.New("no file for 2026-01-02")
			}
			return nil, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	dag.Name = "berlin_orders"
	l := memledger.New(nil)
	run := func(p *tranchecli.Program, args ...string) (int, string) {
		var out, errs bytes.Buffer
		p.Stdout, p.Stderr = &out, &errs
		code := p.Main(context.Background(), args)
		return code, out.String() + errs.String()
	}
	loader := &tranchecli.Program{Name: "loader", Ledger: l, DAGs: map[string]*tranche.DAG{"orders": dag}}
	if code, out := run(loader, "run", "orders", "--yes", "--on-failure", "continue", "--from", "2026-01-01", "--to", "2026-01-03"); code != 1 {
		t.Fatalf("the run: exit %d:\n%s", code, out)
	}
	records, _ := l.Backfills(context.Background())
	id, identity := records[0].ID, records[0].DAG
	label := "berlin_orders (" + identity + ")"

	op := &tranchecli.Program{Name: "tranche", Ledger: l}
	for _, tc := range []struct {
		args []string
		code int
		want []string
	}{
		{[]string{"status", "berlin_orders"}, 0, []string{"dag " + label, "latest backfill  " + id}},
		{[]string{"ls"}, 0, []string{"\n" + label + "  "}},
		{[]string{"history", "berlin_orders", "2026-01-02"}, 0, []string{"partition 2026-01-02 of DAG " + label, "no file for 2026-01-02"}},
		{[]string{"history", id, "2026-01-02"}, 0, []string{"partition 2026-01-02 of backfill " + id + " (DAG " + label + ")"}},
		{[]string{"cancel", "berlin_orders"}, 0, []string{"Canceled backfill " + id}},
		{[]string{"cancel", "berlin_orders"}, 1, []string{"DAG " + label + " has no open (neither done nor canceled) backfill"}},
		{[]string{"resume", "berlin_orders"}, 0, []string{"Resumed backfill " + id}},
		{[]string{"status", "berlin_orders", "--watch"}, 2, []string{"--watch follows a backfill"}},
	} {
		code, out := run(op, tc.args...)
		if code != tc.code {
			t.Errorf("tranche %s: exit %d; want %d:\n%s", strings.Join(tc.args, " "), code, tc.code, out)
		}
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("tranche %s lacks %q:\n%s", strings.Join(tc.args, " "), w, out)
			}
		}
	}
	// No line of ls shows the identity without the name.
	_, out := run(op, "ls")
	if bare := regexp.MustCompile(`(?m)^` + identity + `\b`).FindString(out); bare != "" {
		t.Errorf("ls shows the DAG by its identity alone:\n%s", out)
	}

	srv := httptest.NewServer(trancheweb.NewHandler(l, nil))
	defer srv.Close()
	for _, path := range []string{"/dags/berlin_orders", "/backfills/berlin_orders", "/dags/berlin_orders/status.json", "/backfills/" + id[:6]} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		want := "/dags/" + identity
		if strings.HasPrefix(path, "/backfills/"+id[:6]) {
			want = "/backfills/" + id
		}
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Request.URL.Path, want) {
			t.Errorf("GET %s: %d at %s; want 200 at %s", path, resp.StatusCode, resp.Request.URL.Path, want)
		}
	}
}
