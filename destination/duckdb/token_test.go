package duckdb_test

import (
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/destination/duckdb"
)

// TestConcurrentFirstWrites writes each of many new partitions twice at
// once, by two attempts of one DAG (tokens 1 and 2), through the
// dialect's token check (a read, then an insert or an update), under
// DuckDB's optimistic transactions: both find no token row, and the
// second to insert one fails. By the destination's rules the newer
// attempt wins either way: the older one is refused (tranche.ErrFenced)
// when it comes second, and replaced when it comes first; no write
// fails otherwise, and the partition holds the newer attempt's rows and
// token alone.
func TestConcurrentFirstWrites(t *testing.T) {
	d, err := duckdb.Open(t.Context(), filepath.Join(t.TempDir(), "race.duckdb"), events)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.CreateTables(t.Context()); err != nil {
		t.Fatal(err)
	}
	const partitions = 40
	fenced := 0
	for i := range partitions {
		p := dayOf(i)
		write := func(token int64, run string, n int) error {
			rows := []tranche.Row{{"day": p.Start, "n": n}, {"day": p.Start.Add(1), "n": n + 1}}
			return d.Write(t.Context(), []tranche.Batch{{Asset: "events", Column: "day", Partition: p, Rows: rows,
				RunID: run, Token: token, DAG: "dag"}})
		}
		var wg sync.WaitGroup
		var errs [2]error
		start := make(chan struct{})
		for k, w := range []struct {
			token int64
			run   string
			n     int
		}{{1, "older", 10}, {2, "newer", 20}} {
			wg.Go(func() {
				<-start
				errs[k] = write(w.token, w.run, w.n)
			})
		}
		close(start)
		wg.Wait()
		if errs[1] != nil {
			t.Fatalf("partition %s: the newer attempt's write: %v", p.Key(), errs[1])
		}
		if errs[0] != nil {
			if !errors.Is(errs[0], tranche.ErrFenced) {
				t.Fatalf("partition %s: the older attempt's write: %v; want nil or an error matching tranche.ErrFenced", p.Key(), errs[0])
			}
			fenced++
		}
		var token int64
		var run string
		if err := d.DB().QueryRowContext(t.Context(), "SELECT token, run_id FROM tranche_tokens WHERE table_name = 'events' AND start_s = ?",
			p.Start.Unix()).Scan(&token, &run); err != nil {
			t.Fatal(err)
		}
		var rows, sum int
		if err := d.DB().QueryRowContext(t.Context(), "SELECT count(*), coalesce(sum(n), 0) FROM events WHERE day >= ? AND day < ?",
			p.Start, p.End).Scan(&rows, &sum); err != nil {
			t.Fatal(err)
		}
		if token != 2 || run != "newer" || rows != 2 || sum != 41 {
			t.Fatalf("partition %s holds token %d of run %q and %d rows summing to %d; want token 2 of run \"newer\" and its 2 rows, 41",
				p.Key(), token, run, rows, sum)
		}
	}
	t.Logf("the older attempt was refused in %d of %d partitions, and replaced in the others", fenced, partitions)
}

// TestTokenInsertFailsOnce: an insert of a first token row that fails
// for another reason than a concurrent first write (a run id that is
// not UTF-8, which DuckDB cannot bind) is the write's error at once,
// not tried again eight times and blamed on a concurrent write.
func TestTokenInsertFailsOnce(t *testing.T) {
	d, err := duckdb.Open(t.Context(), filepath.Join(t.TempDir(), "bad-run.duckdb"), events)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.CreateTables(t.Context()); err != nil {
		t.Fatal(err)
	}
	p := dayOf(0)
	err = d.Write(t.Context(), []tranche.Batch{{Asset: "events", Column: "day", Partition: p,
		Rows: []tranche.Row{{"day": p.Start, "n": 1}}, RunID: "run-\xff", Token: 1, DAG: "dag"}})
	if err == nil {
		t.Fatal("a run id that is not UTF-8 was written; want the driver's refusal")
	}
	if strings.Contains(err.Error(), "tried again") || strings.Contains(err.Error(), "concurrent") {
		t.Errorf("error %q blames a concurrent write; want the driver's own refusal", err)
	}
	var rows int
	if err := d.DB().QueryRowContext(t.Context(), "SELECT count(*) FROM events").Scan(&rows); err != nil || rows != 0 {
		t.Errorf("events holds %d rows (%v); want none", rows, err)
	}
}
