package postgres_test

import (
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/postgres"
)

// TestDatabaseClock runs a worker whose clock is 26 years slow: inside a
// synctest bubble, time.Now reads 2000-01-01. Its claims are stamped and
// its leases judged by the database's clock all the same: the lease ends
// a minute after the server's now, and another worker, whose clock is
// right, finds the partition held.
func TestDatabaseClock(t *testing.T) {
	url := serverURL(t)
	schema := freshSchema(t, url)
	other, err := postgres.Open(t.Context(), url, &postgres.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	var serverNow time.Time
	if err := admin(t, url).QueryRowContext(t.Context(), "SELECT clock_timestamp()").Scan(&serverNow); err != nil {
		t.Fatal(err)
	}
	var lease *ledger.Lease
	synctest.Test(t, func(t *testing.T) {
		if time.Now().Year() != 2000 {
			t.Fatalf("the bubble's clock reads %v; want 2000", time.Now())
		}
		slow, err := postgres.Open(t.Context(), url, &postgres.Options{Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		defer slow.Close()
		if lease, err = slow.Claim(t.Context(), claimReq("slow-clock", day(0))); err != nil {
			t.Fatal(err)
		}
	})
	if d := lease.Until.Sub(serverNow); d < time.Minute-time.Second || d > time.Minute+30*time.Second {
		t.Errorf("lease.Until = %v, %v after the server's clock read before the claim; want about the lease, a minute", lease.Until, d)
	}
	h, err := other.History(t.Context(), "dag-bad-input", day(0).Start)
	if err != nil || len(h) != 1 || h[0].Started.Before(serverNow.Add(-time.Second)) {
		t.Fatalf("History = %v, %v; want one attempt started by the server's clock, about %v", h, err, serverNow)
	}
	if _, err := other.Claim(t.Context(), claimReq("right-clock", day(0))); !errors.Is(err, ledger.ErrNotClaimable) {
		t.Errorf("Claim by a worker with the right clock = %v; want ErrNotClaimable: the lease holds by the server's clock", err)
	}
}

// TestClaimsDoNotWait holds a partition's row locked, as a claim in
// flight does, and claims it: the claim is refused at once (FOR UPDATE
// SKIP LOCKED), never waiting, while a claim of another partition goes
// through. The holder's finish of the locked partition does not wait
// either: a finish changes only its attempt's row, fenced in its WHERE
// clause, so a claim in flight never holds up or fences a live lease.
func TestClaimsDoNotWait(t *testing.T) {
	url := serverURL(t)
	l := openFresh(t, url, nil)
	lease, err := l.Claim(t.Context(), claimReq("holder", day(0)))
	if err != nil {
		t.Fatal(err)
	}
	schema := l.Name()[strings.LastIndex(l.Name(), " ")+1:]
	tx, err := admin(t, url).BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	var start int64
	if err := tx.QueryRowContext(t.Context(), "SELECT start_s FROM "+schema+".tranche_partitions WHERE start_s = $1 FOR UPDATE", day(0).Start.Unix()).Scan(&start); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	_, err = l.Claim(t.Context(), claimReq("claimer", day(0)))
	if !errors.Is(err, ledger.ErrNotClaimable) || !strings.Contains(err.Error(), "being claimed by another worker") {
		t.Errorf("Claim of a locked partition = %v; want ErrNotClaimable, being claimed elsewhere", err)
	}
	if took := time.Since(t0); took > 2*time.Second {
		t.Errorf("Claim of a locked partition took %v; want it refused at once", took)
	}
	if _, err := l.Claim(t.Context(), claimReq("claimer", day(1))); err != nil {
		t.Errorf("Claim of another partition = %v", err)
	}
	t0 = time.Now()
	if err := l.Finish(t.Context(), lease, []ledger.Outcome{{State: ledger.StateSucceeded}}); err != nil {
		t.Errorf("Finish while the partition's row was locked = %v", err)
	}
	if took := time.Since(t0); took > 2*time.Second {
		t.Errorf("Finish while the partition's row was locked took %v; want it at once", took)
	}
}

// TestNotBeforeByDatabaseClock runs a worker whose clock is 26 years
// slow, as TestDatabaseClock does, and claims partitions bounded by
// NotBefore: the server's clock judges the bound. A claim bounded a
// minute after the server's now is refused, with an *ledger.EarlyError
// carrying the server's time, by the single statement of a fresh
// partition's claim and by the transaction of any other; one bounded a
// second before it is granted, its attempt starting after the bound.
func TestNotBeforeByDatabaseClock(t *testing.T) {
	url := serverURL(t)
	schema := freshSchema(t, url)
	var serverNow time.Time
	if err := admin(t, url).QueryRowContext(t.Context(), "SELECT clock_timestamp()").Scan(&serverNow); err != nil {
		t.Fatal(err)
	}
	synctest.Test(t, func(t *testing.T) {
		l, err := postgres.Open(t.Context(), url, &postgres.Options{Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		early := func(r ledger.ClaimRequest, what string) {
			t.Helper()
			r.NotBefore = serverNow.Add(time.Minute)
			_, err := l.Claim(t.Context(), r)
			var e *ledger.EarlyError
			if !errors.As(err, &e) || !errors.Is(err, ledger.ErrNotClaimable) {
				t.Fatalf("%s a minute before its NotBefore = %v; want an *ledger.EarlyError matching ErrNotClaimable", what, err)
			}
			if d := e.Now.Sub(serverNow); d < -time.Second || d > 30*time.Second || !e.NotBefore.Equal(r.NotBefore) {
				t.Errorf("%s: refused at %v (%v after the server's clock read before), bound %v; want the server's clock, and the bound %v",
					what, e.Now, d, e.NotBefore, r.NotBefore)
			}
		}
		early(claimReq("slow-clock", day(0)), "the first claim of a DAG")
		lease, err := l.Claim(t.Context(), claimReq("slow-clock", day(1)))
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Finish(t.Context(), lease, []ledger.Outcome{{State: ledger.StateFailed, Err: "boom"}}); err != nil {
			t.Fatal(err)
		}
		early(claimReq("slow-clock", day(0)), "a claim of a fresh partition, in one statement")
		early(claimReq("slow-clock", day(1)), "a rerun of a failed partition")
		early(claimReq("slow-clock", day(2), day(3)), "a chunk claim")
		for _, p := range []tranche.TimePartition{day(0), day(1)} {
			r := claimReq("slow-clock", p)
			r.NotBefore = serverNow.Add(-time.Second)
			lease, err := l.Claim(t.Context(), r)
			if err != nil {
				t.Fatalf("claim of %s after its NotBefore = %v", p.Key(), err)
			}
			if lease.Claimed.Before(serverNow.Add(-time.Second)) {
				t.Errorf("claim of %s granted at %v; want at the server's clock, after %v", p.Key(), lease.Claimed, r.NotBefore)
			}
		}
	})
}
