package sqlite_test

import (
	"database/sql"
	"os"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/internal/proctest"
	"github.com/tranche-dev/tranche/ledger"
)

func TestScratchRead(t *testing.T) {
	path := os.Getenv("SCRATCH_DB")
	if path == "" {
		t.Skip()
	}
	l := openLedgerAt(t, path, nil)
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	w, _ := tranche.WindowBetween(tranche.Hour, time.Date(1921, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	if os.Getenv("SCRATCH_SEED") != "" {
		t0 := time.Now()
		base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		proctest.Seed(t, db, "", "d1", "v1", w, func(p tranche.TimePartition) proctest.SeedAttempt {
			st := ledger.StateSucceeded
			if p.Start.Unix()%10 == 0 {
				st = ledger.StateFailed
			}
			return proctest.SeedAttempt{State: st, Started: base, Finished: base.Add(time.Second), LeaseUntil: base.Add(time.Minute)}
		})
		t.Logf("seeded %d in %v", w.Len(), time.Since(t0))
	}
	t0 := time.Now()
	n := 0
	for _, err := range l.Latest(t.Context(), "d1", w.Start(), w.End()) {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	t.Logf("Latest: %d in %v", n, time.Since(t0))
	for range 3 {
		t0 = time.Now()
		n = 0
		for _, err := range l.LatestBriefs(t.Context(), "d1", w.Start(), w.End()) {
			if err != nil {
				t.Fatal(err)
			}
			n++
		}
		t.Logf("LatestBriefs: %d in %v", n, time.Since(t0))
	}
	if os.Getenv("SCRATCH_ONLY") != "" {
		return
	}
	for _, q := range []string{
		`SELECT count(*) FROM (SELECT a.start_s FROM tranche_attempts a WHERE a.dag_id = 1 AND a.start_s >= ? AND a.start_s < ? ORDER BY a.start_s, a.attempt)`,
		`SELECT sum(a.start_s+a.started_ms+a.finished_ms + (a.state = 'succeeded')) FROM tranche_attempts a WHERE a.dag_id = 1 AND a.start_s >= ? AND a.start_s < ?`,
		`SELECT group_concat(a.start_s) FROM tranche_attempts a WHERE a.dag_id = 1 AND a.start_s >= ? AND a.start_s < ? GROUP BY a.start_s / 40000`,
		`SELECT group_concat((a.start_s - 1000000) || ' ' || (a.started_ms - 10000) || ' ' || a.finished_ms || ' ' || a.state, ' ') FROM tranche_attempts a WHERE a.dag_id = 1 AND a.start_s >= ? AND a.start_s < ? GROUP BY a.start_s / 40000`,
		`SELECT a.start_s, a.state, a.started_ms, a.finished_ms, a.lease_until_ms, a.code_version FROM tranche_attempts a WHERE a.dag_id = 1 AND a.start_s >= ? AND a.start_s < ? ORDER BY a.start_s, a.attempt`,
		`SELECT a.start_s, a.state, a.started_ms, a.finished_ms, a.lease_until_ms FROM tranche_attempts a WHERE a.dag_id = 1 AND a.start_s >= ? AND a.start_s < ? ORDER BY a.start_s, a.attempt`,
		`SELECT a.start_s, a.started_ms, a.finished_ms FROM tranche_attempts a WHERE a.dag_id = 1 AND a.start_s >= ? AND a.start_s < ? ORDER BY a.start_s, a.attempt`,
		`SELECT a.start_s FROM tranche_attempts a WHERE a.dag_id = 1 AND a.start_s >= ? AND a.start_s < ? ORDER BY a.start_s, a.attempt`,
	} {
		t0 := time.Now()
		rows, err := db.Query(q, w.Start().Unix(), w.End().Unix())
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rows.Columns()
		vals := make([]any, len(cols))
		n := 0
		for rows.Next() {
			var ints [6]int64
			var s sql.RawBytes
			var fin sql.NullInt64
			var x sql.RawBytes
			switch len(cols) {
			case 6:
				vals = []any{&ints[0], &s, &ints[1], &fin, &ints[2], &s}
			case 5:
				vals = []any{&ints[0], &s, &ints[1], &fin, &ints[2]}
			case 3:
				vals = []any{&ints[0], &ints[1], &fin}
			case 1:
				vals = []any{&x}
			}
			if err := rows.Scan(vals...); err != nil {
				t.Fatal(err)
			}
			n++
		}
		rows.Close()
		t.Logf("%d cols: %d in %v", len(cols), n, time.Since(t0))
	}
}
