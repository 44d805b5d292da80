package postgres_test

import (
	"context"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/internal/netfault"
)

// A worker whose network is cut, both ways and without a reset, the
// moment its last partition ends, so that its finish's packets are
// swallowed, returns from Run within the lease of that end, its run's
// context alive: the finish's context ends the lease less a heartbeat
// interval after it was sent, and a call still in flight a heartbeat
// later is left behind. (Run used to wait for the finish until the
// network healed: here, until the test gave up and healed it.)
func TestNetCutRunReturns(t *testing.T) {
	if testing.Short() {
		t.Skip("a network fault test")
	}
	u, err := url.Parse(serverURL(t))
	if err != nil || u.Host == "" {
		t.Fatalf("the test needs TRANCHE_POSTGRES_URL as a URL with a host:port (%v)", err)
	}
	proxy, err := netfault.Listen(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	u.Host = proxy.Addr()
	l := openFresh(t, u.String(), nil)

	const (
		lease     = 2 * time.Second
		heartbeat = 500 * time.Millisecond
		slack     = 500 * time.Millisecond // a busy machine's scheduling
		giveUp    = 5 * lease
	)
	w, err := tranche.NewTimePartitionWindow(tranche.Day,
		time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 1, 4, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	lastKey := "2026-01-04"
	var mu sync.Mutex
	var cutAt time.Time
	dag, err := tranche.NewDAG(tranche.Asset{
		Name:         "raw",
		Partitioning: tranche.Partitioning{Granularity: tranche.Day, Location: time.UTC, Column: "day"},
		Destinations: []tranche.Destination{new(tranche.MemoryDestination)},
		Materialize: func(ctx context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
			p, err := m.Partition()
			if err != nil {
				return nil, err
			}
			d := 100 * time.Millisecond
			if p.Key() == lastKey {
				d = time.Second // ends after the others are recorded
			}
			time.Sleep(d)
			if p.Key() == lastKey {
				proxy.Cut(netfault.Both, 0)
				mu.Lock()
				cutAt = time.Now()
				mu.Unlock()
			}
			return []tranche.Row{{"day": p.Key()}}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	b := &backfill.Backfill{DAG: dag, Window: w, Ledger: l, Worker: "cut", Concurrency: 4,
		Lease: lease, Heartbeat: heartbeat, OnFailure: tranche.FailContinue}
	type ran struct {
		res *backfill.Report
		err error
		at  time.Time
	}
	done := make(chan ran, 1)
	go func() {
		res, err := b.Run(t.Context())
		done <- ran{res, err, time.Now()}
	}()
	var r ran
	select {
	case r = <-done:
	case <-time.After(giveUp):
		healed := time.Now()
		proxy.Heal()
		r = <-done
		t.Errorf("Run had not returned %v after the start; it returned once the network healed, %v later", giveUp, r.at.Sub(healed))
	}
	proxy.Heal()
	mu.Lock()
	end := cutAt
	mu.Unlock()
	if end.IsZero() {
		t.Fatalf("the network was never cut: %v, %v", r.res, r.err)
	}
	t.Logf("Run returned %v after the cut: %s: %v", r.at.Sub(end), r.res, r.err)
	if after := r.at.Sub(end); after > lease+slack {
		t.Errorf("Run returned %v after its last partition ended; want within the lease, %v", after, lease)
	}
	if r.res == nil || r.err == nil || r.res.Succeeded != 3 || r.res.Failed != 1 || r.res.Failures[0].Key != lastKey {
		t.Errorf("Run = %v, %v; want %s alone failed, its finish lost in the cut", r.res, r.err, lastKey)
	}
}
