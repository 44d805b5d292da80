package postgres_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/ledger"
)

// TestRevisionIsAWatermark reads the DAG's revision R while eight
// workers claim and finish partitions as fast as they can, and right
// after each read notes every attempt at or below R. Revisions come from
// a sequence, so a transaction may take a lower number than another and
// commit after it; the ledger's barrier must keep that from happening
// across a read: at the end, no attempt holds a revision at or below R
// that it did not hold when R was read. A plan relies on it: whatever
// commits after it read the revision is newer than the plan.
func TestRevisionIsAWatermark(t *testing.T) {
	url := serverURL(t)
	l := openFresh(t, url, nil)
	db := admin(t, url)
	schema := l.Name()[strings.LastIndex(l.Name(), " ")+1:]
	const workers, each = 8, 12
	ctx := t.Context()

	type version struct {
		start    int64
		attempt  int
		revision int64
	}
	below := func(r int64) (map[version]bool, error) {
		rows, err := db.QueryContext(ctx, "SELECT start_s, attempt, revision FROM "+schema+".tranche_attempts WHERE revision <= $1", r)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		out := map[version]bool{}
		for rows.Next() {
			var v version
			if err := rows.Scan(&v.start, &v.attempt, &v.revision); err != nil {
				return nil, err
			}
			out[v] = true
		}
		return out, rows.Err()
	}

	// One claim creates the DAG, so that the reader reads it throughout.
	first, err := l.Claim(ctx, claimReq("setup", day(-1)))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Finish(ctx, first, []ledger.Outcome{{State: ledger.StateSucceeded}}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	done := make(chan struct{})
	for w := range workers {
		// Half the workers claim chunks, whose transactions hold their
		// revision while they write hundreds of rows: the others' take
		// higher revisions and commit first.
		chunk := 1
		if w%2 == 0 {
			chunk = 200
		}
		wg.Go(func() {
			for i := range each {
				ps := make([]tranche.TimePartition, chunk)
				for k := range ps {
					ps[k] = day(w*each*200 + i*chunk + k) // each worker its own days
				}
				lease, err := l.Claim(ctx, claimReq(fmt.Sprintf("w%d", w), ps...))
				if err != nil {
					t.Errorf("worker %d: Claim = %v", w, err)
					return
				}
				outcomes := make([]ledger.Outcome, chunk)
				for k := range outcomes {
					outcomes[k] = ledger.Outcome{State: ledger.StateSucceeded}
				}
				if err := l.Finish(ctx, lease, outcomes); err != nil {
					t.Errorf("worker %d: Finish = %v", w, err)
					return
				}
			}
		})
	}
	type reading struct {
		rev  int64
		seen map[version]bool
	}
	var readings []reading
	read := make(chan struct{})
	go func() {
		defer close(read)
		for {
			select {
			case <-done:
				return
			default:
			}
			r, err := l.Revision(ctx, "dag-bad-input")
			if err != nil {
				t.Errorf("Revision = %v", err)
				return
			}
			seen, err := below(r)
			if err != nil {
				t.Errorf("reading attempts: %v", err)
				return
			}
			readings = append(readings, reading{r, seen})
		}
	}()
	wg.Wait()
	close(done)
	<-read
	if t.Failed() {
		return
	}
	late := 0
	for _, rd := range readings {
		now, err := below(rd.rev)
		if err != nil {
			t.Fatal(err)
		}
		for v := range now {
			if !rd.seen[v] {
				late++
				if late <= 5 {
					t.Errorf("attempt %d of %d holds revision %d, at or below a revision read before (%d), but did not when it was read", v.attempt, v.start, v.revision, rd.rev)
				}
			}
		}
	}
	t.Logf("%d readings of the revision during %d claims and finishes; %d late revisions", len(readings), 2*workers*each, late)
	if len(readings) < 10 {
		t.Errorf("only %d readings of the revision; want the reader to have raced the writers", len(readings))
	}
}
