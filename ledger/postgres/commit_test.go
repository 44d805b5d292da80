package postgres_test

import (
	"bytes"
	"errors"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/internal/sqldesttest"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/postgres"
)

// cutter is a TCP proxy to the test server that, once armed, cuts the
// connection that sends the next COMMIT: before the server sees it (the
// commit is lost: the server rolls the transaction back), or after the
// server has run it but before the client hears back (the acknowledgment
// is lost: the transaction committed, and the client cannot know).
type cutter struct {
	t      *testing.T
	ln     net.Listener
	server string
	armed  atomic.Int32 // 0, cutBefore or cutAfter
	cut    chan struct{}
	wg     sync.WaitGroup
}

const (
	cutBefore = 1
	cutAfter  = 2
)

func newCutter(t *testing.T, server string) *cutter {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &cutter{t: t, ln: ln, server: server, cut: make(chan struct{}, 1)}
	c.wg.Go(c.accept)
	t.Cleanup(func() { ln.Close(); c.wg.Wait() })
	return c
}

// url returns the server's url with the proxy's address.
func (c *cutter) url(serverURL string) string {
	u, err := url.Parse(serverURL)
	if err != nil {
		c.t.Fatal(err)
	}
	u.Host = c.ln.Addr().String()
	return u.String()
}

func (c *cutter) accept() {
	for {
		client, err := c.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", c.server)
		if err != nil {
			client.Close()
			continue
		}
		c.wg.Go(func() { c.pipe(client, server) })
	}
}

// pipe relays one connection, watching the client's bytes for COMMIT
// (pgx sends it as a simple query, "commit").
func (c *cutter) pipe(client, server net.Conn) {
	var muted atomic.Bool // the server's replies are no longer relayed
	// answered is closed once the server, muted, has answered the COMMIT:
	// the tag of its CommandComplete, COMMIT (or ROLLBACK, had the
	// transaction failed), NUL-terminated.
	answered := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		// The server hung up (a cancel request it answered, say): so
		// does the proxy.
		defer client.Close()
		buf := make([]byte, 32<<10)
		var tail []byte
		told := false
		for {
			n, err := server.Read(buf)
			if n > 0 && !muted.Load() {
				if _, werr := client.Write(buf[:n]); werr != nil {
					return
				}
			} else if n > 0 && !told {
				seen := append(tail, buf[:n]...)
				if bytes.Contains(seen, []byte("COMMIT\x00")) || bytes.Contains(seen, []byte("ROLLBACK\x00")) {
					close(answered)
					told = true
				}
				tail = append(tail[:0], seen[max(0, len(seen)-9):]...)
			}
			if err != nil {
				return
			}
		}
	}()
	buf := make([]byte, 32<<10)
	var tail []byte
	for {
		n, err := client.Read(buf)
		if n > 0 {
			seen := append(tail, buf[:n]...)
			mode := c.armed.Load()
			// The word may straddle two reads, but must end in this one.
			at := bytes.LastIndex(seen, []byte("commit"))
			if mode != 0 && at >= 0 && at+len("commit") > len(tail) && c.armed.CompareAndSwap(mode, 0) {
				if mode == cutAfter {
					muted.Store(true)
					server.Write(buf[:n])
					// Cut once the server has committed, however long a
					// loaded machine makes that take.
					select {
					case <-answered:
					case <-time.After(time.Minute):
						c.t.Errorf("the server did not answer the COMMIT in a minute")
					}
				}
				client.Close()
				server.Close()
				c.cut <- struct{}{}
				<-done
				return
			}
			if _, werr := server.Write(buf[:n]); werr != nil {
				break
			}
			tail = append(tail[:0], seen[max(0, len(seen)-8):]...)
		}
		if err != nil {
			break
		}
	}
	client.Close()
	server.Close()
	<-done
}

// commitWorld is a ledger through the proxy, sharing its transactions
// with a destination of the events tables, and a view of the database
// that bypasses the proxy.
type commitWorld struct {
	cut    *cutter
	ledger *postgres.Ledger
	dest   *postgres.Destination
	env    *sqldesttest.Env
}

func newCommitWorld(t *testing.T) *commitWorld {
	serverURLs := serverURL(t)
	u, err := url.Parse(serverURLs)
	if err != nil {
		t.Fatal(err)
	}
	cut := newCutter(t, u.Host)
	schema := freshSchema(t, serverURLs)
	l, err := postgres.Open(t.Context(), cut.url(serverURLs), &postgres.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	d, err := postgres.NewDestination(t.Context(), l, sqldesttest.Events, sqldesttest.Audit)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.CreateTables(t.Context()); err != nil {
		t.Fatal(err)
	}
	return &commitWorld{cut: cut, ledger: l, dest: d,
		env: &sqldesttest.Env{Ledger: l.Ledger, DB: admin(t, withParams(t, serverURLs, "search_path", schema))}}
}

var cutDay = tranche.PartitionOf(tranche.Day, time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC))

func (w *commitWorld) claim(t *testing.T, worker string, lease time.Duration) (*ledger.Lease, error) {
	return w.ledger.Claim(t.Context(), ledger.ClaimRequest{DAG: "dag", Backfill: "bf", Worker: worker, RunID: "run",
		Partitions: []tranche.TimePartition{cutDay}, Lease: lease, Policy: ledger.RerunFailed})
}

// write writes the partition's rows under the lease, deferred to its
// finish.
func (w *commitWorld) write(t *testing.T, lease *ledger.Lease, worker string) {
	t.Helper()
	rows := []tranche.Row{{"day": cutDay.Start, "n": 0, "worker": worker}, {"day": cutDay.Start.Add(time.Hour), "n": 1, "worker": worker}}
	err := w.dest.Write(t.Context(), []tranche.Batch{{Asset: "events", Column: "day", Partition: cutDay, Rows: rows,
		RunID: lease.RunID, Token: lease.Tokens()[0]}})
	if err != nil {
		t.Fatal(err)
	}
}

// state returns the partition's rows in both tables and its history.
func (w *commitWorld) state(t *testing.T) (events, audit []sqldesttest.Row, history []ledger.Attempt) {
	t.Helper()
	e, err := sqldesttest.ReadRows(t.Context(), w.env.DB, "events")
	if err != nil {
		t.Fatal(err)
	}
	a, err := sqldesttest.ReadRows(t.Context(), w.env.DB, "events_audit")
	if err != nil {
		t.Fatal(err)
	}
	h, err := w.ledger.History(t.Context(), "dag", cutDay.Start)
	if err != nil {
		t.Fatal(err)
	}
	return e[cutDay.Key()], a[cutDay.Key()], h
}

func (w *commitWorld) finishCut(t *testing.T, lease *ledger.Lease, mode int32) error {
	t.Helper()
	w.cut.armed.Store(mode)
	err := w.ledger.Finish(t.Context(), lease, []ledger.Outcome{{State: ledger.StateSucceeded, Rows: 2}})
	select {
	case <-w.cut.cut:
	case <-time.After(10 * time.Second):
		t.Fatal("the finish sent no COMMIT")
	}
	if err == nil {
		t.Fatal("Finish through a cut connection succeeded")
	}
	if !errors.Is(err, postgres.ErrConnectionLost) {
		t.Errorf("Finish = %v; want ErrConnectionLost", err)
	}
	return err
}

// TestCommitLost cuts the connection of a finish sharing its transaction
// with the destination before the server sees its COMMIT: neither the
// rows nor the success are recorded. The worker's Finish tried again
// commits both, once; and had the worker died instead, the partition's
// takeover lands the newer attempt's rows alone.
func TestCommitLost(t *testing.T) {
	for _, then := range []string{"retry", "takeover"} {
		t.Run(then, func(t *testing.T) {
			w := newCommitWorld(t)
			lease, err := w.claim(t, "a", 500*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			w.write(t, lease, "a")
			t.Logf("Finish, its COMMIT lost: %v", w.finishCut(t, lease, cutBefore))
			events, audit, h := w.state(t)
			if len(events)+len(audit) != 0 || len(h) != 1 || h[0].State != ledger.StateRunning {
				t.Fatalf("after the lost commit: %d rows, %d audited, history %+v; want none, and the attempt running", len(events), len(audit), h)
			}
			want := "a"
			switch then {
			case "retry":
				if err := w.ledger.Finish(t.Context(), lease, []ledger.Outcome{{State: ledger.StateSucceeded, Rows: 2}}); err != nil {
					t.Fatalf("Finish tried again = %v", err)
				}
			case "takeover":
				time.Sleep(time.Second) // past the lease
				newer, err := w.claim(t, "b", time.Minute)
				if err != nil {
					t.Fatal(err)
				}
				w.write(t, newer, "b")
				if err := w.ledger.Finish(t.Context(), newer, []ledger.Outcome{{State: ledger.StateSucceeded, Rows: 2}}); err != nil {
					t.Fatal(err)
				}
				// The first worker comes back and tries its finish again:
				// fenced, and its rows never land.
				if err := w.ledger.Finish(t.Context(), lease, []ledger.Outcome{{State: ledger.StateSucceeded, Rows: 2}}); !errors.Is(err, tranche.ErrFenced) {
					t.Errorf("the stale Finish tried again = %v; want ErrFenced", err)
				}
				want = "b"
			}
			events, audit, h = w.state(t)
			if len(events) != 2 || len(audit) != 2 || events[0].Worker != want || audit[0].Worker != want {
				t.Errorf("rows %+v, audited %+v; want %s's 2 rows once in each table", events, audit, want)
			}
			if last := h[len(h)-1]; last.State != ledger.StateSucceeded || last.Worker != want {
				t.Errorf("history %+v; want %s's attempt succeeded", h, want)
			}
		})
	}
}

// TestAcknowledgmentLost cuts the connection of a finish after the
// server committed it, before the worker hears back: the worker sees an
// error, but the rows and the success committed together, and the next
// claimer finds the partition succeeded. The worker's Finish tried again
// is fenced and writes nothing twice.
func TestAcknowledgmentLost(t *testing.T) {
	w := newCommitWorld(t)
	lease, err := w.claim(t, "a", 500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	w.write(t, lease, "a")
	t.Logf("Finish, its acknowledgment lost: %v", w.finishCut(t, lease, cutAfter))
	events, audit, h := w.state(t)
	if len(events) != 2 || len(audit) != 2 || len(h) != 1 || h[0].State != ledger.StateSucceeded {
		t.Fatalf("after the lost acknowledgment: %d rows, %d audited, history %+v; want both tables' 2 rows and the attempt succeeded", len(events), len(audit), h)
	}
	time.Sleep(time.Second) // past the lease
	if _, err := w.claim(t, "b", time.Minute); !errors.Is(err, ledger.ErrNotClaimable) {
		t.Errorf("the next claim = %v; want ErrNotClaimable: the partition succeeded", err)
	}
	if err := w.ledger.Finish(t.Context(), lease, []ledger.Outcome{{State: ledger.StateSucceeded, Rows: 2}}); !errors.Is(err, tranche.ErrFenced) {
		t.Errorf("Finish tried again = %v; want ErrFenced", err)
	}
	if events, audit, _ := w.state(t); len(events) != 2 || len(audit) != 2 {
		t.Errorf("after the retried finish: %d rows, %d audited; want 2 each", len(events), len(audit))
	}
}
