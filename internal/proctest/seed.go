package proctest

import (
	"context"
	"database/sql"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/ledger"
)

// SeedAttempt is the one attempt [Seed] records at a partition.
type SeedAttempt struct {
	State             ledger.State
	Started, Finished time.Time // Finished is ignored while running
	LeaseUntil        time.Time
}

// seedRows is how many rows one INSERT of Seed writes.
const seedRows = 500

// Seed records one attempt at every partition of w for the DAG dag
// straight into the tables of a SQL ledger (package sqlledger's schema,
// each table's name after prefix: "" or "schema."), by bulk inserts in
// one transaction: a million partitions in seconds, where claims and
// finishes ([Fill]) take minutes. attempt gives each partition's
// attempt; its code version is version. The ledger must have been
// opened once, so that its schema exists; the revisions go on from the
// ledger's highest.
func Seed(t testing.TB, db *sql.DB, prefix, dag, version string, w tranche.TimePartitionWindow, attempt func(tranche.TimePartition) SeedAttempt) {
	t.Helper()
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	var id, rev int64
	if err := tx.QueryRowContext(ctx, "SELECT id FROM "+prefix+"tranche_dags WHERE dag = '"+dag+"'").Scan(&id); err != nil {
		if _, err := tx.ExecContext(ctx, "INSERT INTO "+prefix+"tranche_dags (dag) VALUES ('"+dag+"')"); err != nil {
			t.Fatal(err)
		}
		if err := tx.QueryRowContext(ctx, "SELECT id FROM "+prefix+"tranche_dags WHERE dag = '"+dag+"'").Scan(&id); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.QueryRowContext(ctx, "SELECT COALESCE(MAX(revision), 0) FROM "+prefix+"tranche_attempts").Scan(&rev); err != nil {
		t.Fatal(err)
	}
	itoa := func(n int64) string { return strconv.FormatInt(n, 10) }
	var parts, attempts strings.Builder
	n := 0
	flush := func() {
		if n == 0 {
			return
		}
		for _, q := range []string{
			"INSERT INTO " + prefix + "tranche_partitions (dag_id, start_s, latest) VALUES " + parts.String(),
			"INSERT INTO " + prefix + `tranche_attempts (dag_id, start_s, attempt, end_s, partition_key, backfill, run_id, worker, state,
				started_ms, finished_ms, lease_until_ms, error, row_count, revision, code_version, run_trigger) VALUES ` + attempts.String(),
		} {
			if _, err := tx.ExecContext(ctx, q); err != nil {
				t.Fatal(err)
			}
		}
		parts.Reset()
		attempts.Reset()
		n = 0
	}
	for p := range w.OldestFirst() {
		a := attempt(p)
		if n > 0 {
			parts.WriteByte(',')
			attempts.WriteByte(',')
		}
		rev++
		finished, errText := "NULL", ""
		if a.State != ledger.StateRunning {
			finished = itoa(a.Finished.UnixMilli())
		}
		if a.State == ledger.StateFailed {
			errText = "connection reset by peer"
		}
		start := itoa(p.Start.Unix())
		parts.WriteString("(" + itoa(id) + "," + start + ",1)")
		attempts.WriteString("(" + itoa(id) + "," + start + ",1," + itoa(p.End.Unix()) + ",'" + p.Key() + "','0123456789ab','" +
			backfill.RunID(dag, p.Start, p.End) + "','host-12345','" + string(a.State) + "'," + itoa(a.Started.UnixMilli()) + "," + finished + "," +
			itoa(a.LeaseUntil.UnixMilli()) + ",'" + errText + "',1000," + itoa(rev) + ",'" + version + "','backfill')")
		if n++; n == seedRows {
			flush()
		}
	}
	flush()
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}
