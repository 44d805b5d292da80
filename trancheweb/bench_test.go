package trancheweb

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/memledger"
)

// BenchmarkBackfillPage serves the page of a backfill of 1,000,000
// minutes with no attempt yet, on the in-memory ledger: the cost beyond
// backfill.StatusOf and Status.Grid is per cell (at most
// DefaultMaxCells), not per partition. The SQL ledgers' cost of those
// two calls at that size is measured in ledger/sqlite and
// ledger/postgres.
func BenchmarkBackfillPage(b *testing.B) {
	ctx := context.Background()
	l := memledger.New(nil)
	first := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	w, err := tranche.NewTimePartitionWindow(tranche.Minute, first, first.Add(999_999*time.Minute))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := l.PutBackfill(ctx, ledger.BackfillRecord{ID: "million", DAG: "dag", Window: w.String(), Chunk: 1, Created: first}); err != nil {
		b.Fatal(err)
	}
	h := NewHandler(l, nil)
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/backfills/million", nil))
		if rec.Code != 200 {
			b.Fatalf("status %d", rec.Code)
		}
		if n := strings.Count(rec.Body.String(), `<a class="cell `); n > DefaultMaxCells {
			b.Fatalf("%d cells; want at most %d", n, DefaultMaxCells)
		}
	}
}
