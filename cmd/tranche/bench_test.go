package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/internal/proctest"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/sqlite"
	"github.com/tranche-dev/tranche/trancheweb"
)

// BenchmarkPageMillion serves the page of a backfill of 1,000,000 hourly
// partitions, each with one finished attempt (a tenth failed), from a
// SQLite ledger, and its status endpoint: the page must come in under
// 2 s. Filling the ledger takes a minute or two, outside the timing.
//
//	go test -run '^$' -bench PageMillion -benchtime 3x ./cmd/tranche
func BenchmarkPageMillion(b *testing.B) {
	const n = 1_000_000
	l, err := sqlite.Open(b.Context(), filepath.Join(b.TempDir(), "ledger.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	dag, w := proctest.Hourly(b, n)
	id := backfill.DAGIdentity(dag, tranche.Hour, time.UTC)
	proctest.Fill(b, l, id, w, "host-12345")
	// proctest.Fill records its attempts under this backfill id.
	if _, err := l.PutBackfill(b.Context(), ledger.BackfillRecord{ID: "0123456789ab", DAG: id, Window: w.String(), Chunk: 1, Created: time.Now()}); err != nil {
		b.Fatal(err)
	}
	h := trancheweb.NewHandler(l, nil)
	var page, status time.Duration
	for b.Loop() {
		for _, path := range []string{"/backfills/0123456789ab", "/backfills/0123456789ab/status.json"} {
			start := time.Now()
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
			took := time.Since(start)
			if rec.Code != 200 {
				b.Fatalf("%s: status %d: %s", path, rec.Code, rec.Body)
			}
			if strings.HasSuffix(path, ".json") {
				status += took
				continue
			}
			page += took
			if c := strings.Count(rec.Body.String(), `<a class="cell `); c == 0 || c > trancheweb.DefaultMaxCells {
				b.Fatalf("%d cells; want 1 to %d", c, trancheweb.DefaultMaxCells)
			}
		}
	}
	b.ReportMetric(float64(page.Milliseconds())/float64(b.N), "page-ms")
	b.ReportMetric(float64(status.Milliseconds())/float64(b.N), "status-ms")
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		b.ReportMetric(float64(ru.Maxrss)/1024, "maxrss-MB")
	}
}

// BenchmarkDAGPageMillion serves the page of a DAG of 1,000,000 hourly
// partitions, each with one finished attempt (a tenth failed), from a
// SQLite ledger: the grid and counts of the DAG across its two
// backfills, the whole window and its newest 100,000 hours, and its
// status endpoint. The page must come in under 2 s. The grid's cells
// give the page's counts and the first backfill's; the second backfill,
// whose start falls inside a cell, is counted apart. Filling the ledger
// takes a minute or two, outside the timing.
//
//	go test -run '^$' -bench DAGPageMillion -benchtime 3x ./cmd/tranche
func BenchmarkDAGPageMillion(b *testing.B) {
	const n = 1_000_000
	l, err := sqlite.Open(b.Context(), filepath.Join(b.TempDir(), "ledger.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	dag, w := proctest.Hourly(b, n)
	id := backfill.DAGIdentity(dag, tranche.Hour, time.UTC)
	proctest.Fill(b, l, id, w, "host-12345")
	newest, err := tranche.NewTimePartitionWindow(tranche.Hour, w.End().Add(-100_000*time.Hour), w.Newest().Start)
	if err != nil {
		b.Fatal(err)
	}
	// proctest.Fill records its attempts under the first backfill's id.
	for _, r := range []ledger.BackfillRecord{
		{ID: "0123456789ab", DAG: id, Window: w.String(), Chunk: 1, Created: time.Now()},
		{ID: "ba9876543210", DAG: id, Window: newest.String(), Chunk: 1, Created: time.Now()},
	} {
		if _, err := l.PutBackfill(b.Context(), r); err != nil {
			b.Fatal(err)
		}
	}
	h := trancheweb.NewHandler(l, nil)
	var page, status time.Duration
	for b.Loop() {
		for _, path := range []string{"/dags/" + id, "/dags/" + id + "/status.json"} {
			start := time.Now()
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
			took := time.Since(start)
			if rec.Code != 200 {
				b.Fatalf("%s: status %d: %s", path, rec.Code, rec.Body)
			}
			if strings.HasSuffix(path, ".json") {
				status += took
				continue
			}
			page += took
			body := rec.Body.String()
			if c := strings.Count(body, `<a class="cell `); c == 0 || c > trancheweb.DefaultMaxCells {
				b.Fatalf("%d cells; want 1 to %d", c, trancheweb.DefaultMaxCells)
			}
			if !strings.Contains(body, "1000000 partitions") || strings.Count(body, `data-state="failed">`+"\n"+`<td><a class="backfill"`) != 2 {
				b.Fatalf("the page lacks the DAG's million partitions or its two failed backfills:\n%s", body)
			}
		}
	}
	b.ReportMetric(float64(page.Milliseconds())/float64(b.N), "page-ms")
	b.ReportMetric(float64(status.Milliseconds())/float64(b.N), "status-ms")
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		b.ReportMetric(float64(ru.Maxrss)/1024, "maxrss-MB")
	}
}

// BenchmarkIndexThousand serves the index of a SQLite ledger of 1,000
// backfills (ten DAGs of 100 backfills, each of 30 days, every day
// attempted, a tenth of the backfills failed): every backfill's state,
// progress and age, counted a few at a time. It must come in under a
// second. Filling the ledger takes some seconds, outside the timing.
//
//	go test -run '^$' -bench IndexThousand -benchtime 5x ./cmd/tranche
func BenchmarkIndexThousand(b *testing.B) {
	l, err := sqlite.Open(b.Context(), filepath.Join(b.TempDir(), "ledger.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	ctx := b.Context()
	first := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 1000 {
		dag := fmt.Sprintf("dag-%d", i%10)
		w, err := tranche.NewTimePartitionWindow(tranche.Day, first.AddDate(0, 0, 30*(i/10)), first.AddDate(0, 0, 30*(i/10)+29))
		if err != nil {
			b.Fatal(err)
		}
		id := fmt.Sprintf("bf%010d", i)
		if _, err := l.PutBackfill(ctx, ledger.BackfillRecord{ID: id, DAG: dag, Window: w.String(), Chunk: 1, Created: time.Now()}); err != nil {
			b.Fatal(err)
		}
		lease, err := l.Claim(ctx, ledger.ClaimRequest{DAG: dag, Backfill: id, Worker: "w", RunID: id, Partitions: slices.Collect(w.OldestFirst()),
			Lease: time.Minute, Policy: ledger.RerunFailed})
		if err != nil {
			b.Fatal(err)
		}
		outcomes := make([]ledger.Outcome, w.Len())
		for k := range outcomes {
			outcomes[k] = ledger.Outcome{State: ledger.StateSucceeded, Rows: 1}
			if i%10 == 3 && k == 7 {
				outcomes[k] = ledger.Outcome{State: ledger.StateFailed, Err: "boom"}
			}
		}
		if err := l.Finish(ctx, lease, outcomes); err != nil {
			b.Fatal(err)
		}
	}
	h := trancheweb.NewHandler(l, nil)
	var took time.Duration
	for b.Loop() {
		start := time.Now()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
		took += time.Since(start)
		body := rec.Body.String()
		if rec.Code != 200 || strings.Count(body, `<tr class="bf-row"`) != 1000 || strings.Count(body, `data-state="failed"`) != 100 {
			b.Fatalf("index: %d, %d rows, %d failed; want 200, 1000 rows, 100 failed", rec.Code, strings.Count(body, `<tr class="bf-row"`), strings.Count(body, `data-state="failed"`))
		}
	}
	b.ReportMetric(float64(took.Milliseconds())/float64(b.N), "index-ms")
}
