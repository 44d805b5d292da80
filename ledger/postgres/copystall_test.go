package postgres_test

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/stdlib"

	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/postgres"
	"github.com/tranche-dev/tranche/ledger/sqlledger"
)

// stalledReader is the rows of a COPY whose sender stopped: it sends
// nothing until released.
type stalledReader struct{ release chan struct{} }

func (r stalledReader) Read([]byte) (int, error) {
	<-r.release
	return 0, io.EOF
}

// TestStalledCopy stalls a worker inside the COPY of work deferred to
// its finish, as a worker stopped (SIGSTOP) or cut off while a
// destination sharing the ledger copies a partition's rows: the server
// waits for the rows in an active session, holding the partition's row
// locked by the finish's fence. Another worker should take the
// partition over once its lease expired and a lease more has passed,
// as the stalled worker itself gives the finish up then; the stalled
// finish should record nothing.
//
// No server timeout ends that session: idle_in_transaction_session_timeout
// spares a session inside a statement, and statement_timeout is not
// heeded while a COPY reads from its client. The taker ends it
// (Dialect.EndStalled). This was the cause of
// TestSkewedClocks/sql/*-stopped's partitions not taken over a minute
// after the stop (a worker stopped inside the COPY of its finish).
func TestStalledCopy(t *testing.T) {
	url := serverURL(t)
	schema := freshSchema(t, url)
	const lease = time.Second
	open := func() *postgres.Ledger {
		l, err := postgres.Open(t.Context(), url, &postgres.Options{Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}
	a, b := open(), open()
	db := admin(t, url)
	if _, err := db.ExecContext(t.Context(), "CREATE TABLE "+schema+".copied (n int)"); err != nil {
		t.Fatal(err)
	}
	req := func(worker string) ledger.ClaimRequest {
		r := claimReq(worker, day(0))
		r.Lease = lease
		return r
	}
	held, err := a.Claim(t.Context(), req("a"))
	if err != nil {
		t.Fatal(err)
	}
	claimed := time.Now()
	release := make(chan struct{})
	defer close(release)
	err = a.Defer("copy", []sqlledger.Deferred{{RunID: held.RunID, Start: day(0).Start, Token: held.Tokens()[0],
		Work: func(ctx context.Context, conn *sql.Conn, _ *sql.Tx) error {
			return conn.Raw(func(dc any) error {
				_, err := dc.(*stdlib.Conn).Conn().PgConn().CopyFrom(ctx, stalledReader{release}, "COPY "+schema+".copied FROM STDIN")
				return err
			})
		}}})
	if err != nil {
		t.Fatal(err)
	}
	finished := make(chan error, 1)
	go func() {
		finished <- a.Finish(context.Background(), held, []ledger.Outcome{{State: ledger.StateSucceeded}})
	}()

	// b takes it over: refused while a's lease holds, and then held up
	// by a's finish, which holds its row.
	var took time.Duration
	for {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		l, err := b.Claim(ctx, req("b"))
		cancel()
		if err == nil {
			took = time.Since(claimed)
			if err := b.Release(t.Context(), l); err != nil {
				t.Fatal(err)
			}
			break
		}
		if !errors.Is(err, ledger.ErrNotClaimable) && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatal(err)
		}
		if time.Since(claimed) > 20*time.Second {
			var state, wait string
			db.QueryRowContext(t.Context(), `SELECT state, coalesce(wait_event, '') FROM pg_stat_activity WHERE query LIKE 'COPY%copied%' AND pid <> pg_backend_pid()`).Scan(&state, &wait)
			t.Fatalf("partition %s not taken over 20 s after its claim, under a lease of %v; the stalled COPY's session: %s, waiting for %s", day(0).Key(), lease, state, wait)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Its lease, a lease more, and slack for a loaded machine.
	if limit := 2*lease + 2*time.Second; took > limit {
		t.Errorf("partition %s taken over %v after its claim; want within %v", day(0).Key(), took.Round(time.Millisecond), limit)
	}
	select {
	case err := <-finished:
		if err == nil {
			t.Error("the stalled finish succeeded; want it refused")
		}
		t.Logf("taken over %v after the claim (lease %v); the stalled finish: %v", took.Round(time.Millisecond), lease, err)
	case <-time.After(10 * time.Second):
		t.Error("the stalled finish had not returned 10 s after the takeover")
	}
	var n int
	if err := db.QueryRowContext(t.Context(), "SELECT count(*) FROM "+schema+".copied").Scan(&n); err != nil || n != 0 {
		t.Errorf("%d rows copied (%v); want none", n, err)
	}
}
