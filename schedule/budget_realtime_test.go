package schedule_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/ledger/memledger"
	"github.com/tranche-dev/tranche/schedule"
)

// TestBudgetBesideYearBackfill is issue 19's: a backfill of a year of
// days running beside the scheduler of the same DAG in one process, both
// in one budget of a single place: every live slot starts within one
// partition's duration of its close. It runs in real time, the backfill's
// partitions taking 4 ms each, eight of them claimed and waiting for the
// place at any time, the scheduler under a clock that runs a day in 25
// ms; it logs the median and 99th percentile of the delays from a slot's
// close to its run's start (BENCHMARKS.md). A slot queued behind the
// backfill's waiting partitions, as Acquire would queue it, would start
// some 30 ms late.
func TestBudgetBesideYearBackfill(t *testing.T) {
	if testing.Short() {
		t.Skip("two seconds of real time: not with -short")
	}
	const (
		partition = 4 * time.Millisecond  // a backfill partition's run
		day       = 25 * time.Millisecond // a day of the scheduler's clock, in real time
		// margin is what a slot may take beyond the partition it waits
		// for: the timer's wake, a read of the ledger and a claim, the
		// budget's hand-over and the run's start.
		margin = 10 * time.Millisecond
	)
	rate := time.Duration(24 * time.Hour / day)
	// The scheduler starts at noon: its first slot is the 2nd of January,
	// after the backfill's year.
	base := time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)
	year := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	t0 := time.Now()
	now := func() time.Time { return base.Add(time.Since(t0) * rate) }
	after := func(d time.Duration) <-chan time.Time { return time.After(d / rate) }
	closed := func(p tranche.TimePartition) time.Time { return t0.Add(p.End.Sub(base) / rate) } // by the system's clock

	var mu sync.Mutex
	started := map[string]time.Time{} // the live slots' runs, by the system's clock
	ended := map[string]time.Time{}   // and when they were recorded
	dag, err := tranche.NewDAG(tranche.Asset{
		Name:         "events",
		Partitioning: tranche.Partitioning{Granularity: tranche.Day, Location: time.UTC},
		Materialize: func(ctx context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
			p, err := m.Partition()
			if err != nil {
				return nil, err
			}
			if p.Start.Before(year.AddDate(1, 0, 0)) { // the backfill's
				select {
				case <-time.After(partition):
				case <-ctx.Done():
					return nil, ctx.Err()
				}
				return nil, nil
			}
			mu.Lock()
			started[p.Key()] = time.Now()
			mu.Unlock()
			return nil, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	l := memledger.New(nil)
	budget := backfill.NewBudget(1)
	begun := make(chan struct{})
	s := &schedule.Scheduler{DAG: dag, Ledger: l, Budget: budget, Now: now, After: after,
		OnEvent: func(_ context.Context, e tranche.Event) {
			if e.Kind == schedule.KindStarted {
				close(begun)
			}
			if e.Kind == schedule.KindSucceeded {
				mu.Lock()
				ended[e.Target] = time.Now()
				mu.Unlock()
			}
		}}
	stop := start(t, s)
	<-begun // the scheduler waits for the next slot to close, and will run it
	window, err := tranche.WindowBetween(tranche.Day, year, year.AddDate(1, 0, 0))
	if err != nil {
		t.Fatal(err)
	}
	watch := watchStalls(t)
	bf := &backfill.Backfill{DAG: dag, Ledger: l, Window: window, Budget: budget, Concurrency: 8}
	from := time.Now()
	res, err := bf.Run(t.Context())
	until := time.Now()
	// The slots that closed during the backfill start, the last of
	// them within a partition and the margin unless the machine stalls
	// it: wait for them (a fixed sleep failed when a stall under -race
	// outlasted it), then stop.
	for deadline := until.Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(day / 5) {
		mu.Lock()
		all := true
		for p := tranche.PartitionOf(tranche.Day, base); closed(p).Before(until) && all; p = p.Next() {
			_, ran := started[p.Key()]
			all = ran || closed(p).Before(from)
		}
		mu.Unlock()
		if all {
			break
		}
	}
	stop()
	if err != nil || res.Succeeded != window.Len() {
		t.Fatalf("backfill: %v, %v; want %d partitions succeeded", res, err, window.Len())
	}

	// A slot is ready at its close, or, when the live slot before it
	// still runs (the default overlap policy queues them), once that one
	// is recorded. Its delay is from its close; its wait, from when it is
	// ready, must be at most the backfill partition it waits for, the
	// margin, and any stall of the process meanwhile.
	var delays []time.Duration
	var late []string
	stalled := 0
	for p := tranche.PartitionOf(tranche.Day, base); closed(p).Before(until); p = p.Next() {
		if closed(p).Before(from) {
			continue
		}
		mu.Lock()
		at, ok := started[p.Key()]
		prevEnd := ended[p.Prev().Key()]
		mu.Unlock()
		if !ok {
			t.Errorf("slot %s, closed during the backfill, did not run", p.Key())
			continue
		}
		delays = append(delays, at.Sub(closed(p)))
		ready := maxTime(closed(p), prevEnd)
		stall := watch.stalled(ready, at)
		if stall > 0 {
			stalled++
		}
		if wait := at.Sub(ready); wait > partition+margin+stall {
			late = append(late, fmt.Sprintf("slot %s started %v after its close, %v after it was ready; want at most a partition's %v, %v more, and the %v the process was stalled",
				p.Key(), at.Sub(closed(p)), wait, partition, margin, stall))
		}
	}
	// One slot late is the machine's (a goroutine not scheduled for a
	// moment the stall watch did not see); a slot queued behind the
	// backfill's waiting partitions makes most of them late.
	if len(late) > 1 {
		t.Errorf("%d of %d slots late:\n%s", len(late), len(delays), strings.Join(late, "\n"))
	}
	if len(delays) < 20 {
		t.Fatalf("%d live slots closed during the backfill of %v; want 20 or more", len(delays), until.Sub(from))
	}
	slices.Sort(delays)
	q := func(q float64) time.Duration { return delays[min(len(delays)-1, int(q*float64(len(delays))))] }
	t.Logf("backfill of %d days in %v beside %d live slots (%d of them ready during a stall of the process): delay from close to start median %v, p99 %v, max %v",
		res.Succeeded, until.Sub(from).Round(time.Millisecond), len(delays), stalled,
		q(0.5).Round(10*time.Microsecond), q(0.99).Round(10*time.Microsecond), delays[len(delays)-1].Round(10*time.Microsecond))
}

// stallWatch tells when the process was not given the CPU: a goroutine
// that sleeps a millisecond at a time records each wake, and a gap well
// beyond the millisecond is a stall (a loaded machine, which delays a
// slot whatever the budget does; CI runs this test beside every other
// package).
type stallWatch struct {
	mu    sync.Mutex
	wakes []time.Time
}

// stallSlack is how late a wake of the watch may be and not count as a
// stall.
const stallSlack = 2 * time.Millisecond

func watchStalls(t *testing.T) *stallWatch {
	w := &stallWatch{wakes: []time.Time{time.Now()}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			time.Sleep(time.Millisecond)
			w.mu.Lock()
			w.wakes = append(w.wakes, time.Now())
			w.mu.Unlock()
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return w
}

// stalled returns how long, in all, the process was stalled between from
// and to: the part of each gap between wakes, beyond the sleep and its
// slack, that falls between them.
func (w *stallWatch) stalled(from, to time.Time) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	var sum time.Duration
	for i := 1; i < len(w.wakes); i++ {
		a, b := w.wakes[i-1], w.wakes[i]
		if b.Sub(a) <= time.Millisecond+stallSlack || !b.After(from) || !a.Before(to) {
			continue
		}
		if lo, hi := maxTime(a, from), minTime(b, to); hi.After(lo) {
			sum += max(hi.Sub(lo)-time.Millisecond-stallSlack, 0)
		}
	}
	return sum
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
