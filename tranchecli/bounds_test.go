package tranchecli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/ledger/memledger"
	"github.com/tranche-dev/tranche/tranchecli"
	"github.com/tranche-dev/tranche/trancheweb"
)

// zonedDAG is a DAG of one asset partitioned by g in loc (nil: none).
func zonedDAG(t *testing.T, g tranche.TimeGranularity, loc *time.Location) *tranche.DAG {
	t.Helper()
	dag, err := tranche.NewDAG(tranche.Asset{Name: "orders", Partitioning: tranche.Partitioning{Granularity: g, Location: loc},
		Materialize: func(context.Context, *tranche.Materialization) ([]tranche.Row, error) { return nil, nil }})
	if err != nil {
		t.Fatal(err)
	}
	return dag
}

// TestOneDateRule reads the same bounds through the library
// (backfill.ParseWindow), the command (plan --from --to) and the pages'
// form (/dags/ID/plan), on the DST days of Berlin and New York, and wants
// one window from all three: a date is the start of its day for from and
// its end for to, in the DAG's zone (UTC when it names none), and a time
// without an offset is read in that zone. A cron DAG's slots on the same
// day are as many as its hours.
func TestOneDateRule(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	newYork, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	hourlyBerlin, err := tranche.ParseCron("CRON_TZ=Europe/Berlin 0 * * * *")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for _, tc := range []struct {
		name     string
		g        tranche.TimeGranularity
		loc      *time.Location
		from, to string
		window   string // "" when refused
		n        int
	}{
		{"UTC dates, no zone named", tranche.Day, nil, "2026-02-01", "2026-02-07", "day 2026-02-01..2026-02-07 UTC", 7},
		{"UTC, an offset converted", tranche.Day, nil, "2026-02-01T01:00:00+01:00", "2026-02-03", "day 2026-02-01..2026-02-03 UTC", 3},
		{"Berlin spring day", tranche.Day, berlin, "2026-03-29", "2026-03-29", "day 2026-03-29..2026-03-29 Europe/Berlin", 1},
		{"Berlin spring hours", tranche.Hour, berlin, "2026-03-29", "2026-03-29", "hour 2026-03-29T00:00+01:00..2026-03-29T23:00+02:00 Europe/Berlin", 23},
		{"Berlin autumn hours", tranche.Hour, berlin, "2026-10-25", "2026-10-25", "hour 2026-10-25T00:00+02:00..2026-10-25T23:00+01:00 Europe/Berlin", 25},
		{"Berlin wall times across the gap", tranche.Hour, berlin, "2026-03-29T01:00", "2026-03-29T04:00", "hour 2026-03-29T01:00+01:00..2026-03-29T03:00+02:00 Europe/Berlin", 2},
		{"Berlin a skipped wall time", tranche.Hour, berlin, "2026-03-29T02:30", "2026-03-29T04:00", "", 0},
		{"Berlin a repeated wall time", tranche.Hour, berlin, "2026-10-25T02:00", "2026-10-25T04:00", "", 0},
		{"New York spring hours", tranche.Hour, newYork, "2026-03-08", "2026-03-08", "hour 2026-03-08T00:00-05:00..2026-03-08T23:00-04:00 America/New_York", 23},
		{"New York autumn hours", tranche.Hour, newYork, "2026-11-01", "2026-11-01", "hour 2026-11-01T00:00-04:00..2026-11-01T23:00-05:00 America/New_York", 25},
		{"New York month of days", tranche.Day, newYork, "2026-03-01", "2026-03-31", "day 2026-03-01..2026-03-31 America/New_York", 31},
		{"Berlin cron slots of the autumn day", hourlyBerlin, nil, "2026-10-25", "2026-10-25", "", 25},
		{"to before from", tranche.Day, berlin, "2026-03-29", "2026-03-28", "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dag := zonedDAG(t, tc.g, tc.loc)
			// The library.
			w, err := backfill.ParseWindow(dag, tc.from, tc.to, now)
			if (err == nil) != (tc.n > 0) || (err == nil && (w.Len() != tc.n || tc.window != "" && w.String() != tc.window)) {
				t.Fatalf("ParseWindow(%q, %q) = %v (%d partitions), %v; want %q, %d", tc.from, tc.to, w, w.Len(), err, tc.window, tc.n)
			}
			want := w.String()

			// The command.
			var out, errs bytes.Buffer
			p := &tranchecli.Program{Name: "tr", Ledger: memledger.New(nil), DAGs: map[string]*tranche.DAG{"orders": dag}, Stdout: &out, Stderr: &errs}
			code := p.Main(context.Background(), []string{"plan", "orders", "--from", tc.from, "--to", tc.to, "--format", "json"})
			var plan struct {
				Window string `json:"window"`
			}
			switch {
			case tc.n == 0 && code != 2:
				t.Errorf("the command: exit %d; want 2, refused:\n%s%s", code, out.String(), errs.String())
			case tc.n > 0 && code != 0:
				t.Errorf("the command: exit %d:\n%s", code, errs.String())
			case tc.n > 0:
				if err := json.Unmarshal(out.Bytes(), &plan); err != nil || plan.Window != want {
					t.Errorf("the command's plan window %q (%v); want %q", plan.Window, err, want)
				}
			}

			// The pages' form.
			g, loc, _ := backfill.PartitioningOf(dag)
			h := trancheweb.NewHandler(memledger.New(nil), &trancheweb.Options{DAGs: map[string]*tranche.DAG{"orders": dag}})
			rec := httptest.NewRecorder()
			q := url.Values{"from": {tc.from}, "to": {tc.to}}
			h.ServeHTTP(rec, httptest.NewRequest("GET", "/dags/"+url.PathEscape(backfill.DAGIdentity(dag, g, loc))+"/plan?"+q.Encode(), nil))
			body, _ := io.ReadAll(rec.Body)
			switch {
			case tc.n == 0 && rec.Code != 400:
				t.Errorf("the page: %d; want 400", rec.Code)
			case tc.n > 0 && (rec.Code != 200 || !strings.Contains(strings.ReplaceAll(string(body), "&#43;", "+"), want+" · ")):
				t.Errorf("the page: %d; want 200 and the window %q:\n%s", rec.Code, want, body)
			}
		})
	}
}
