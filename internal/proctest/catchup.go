package proctest

import (
	"context"
	"iter"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/schedule"
)

// BenchCatchUp10k is the body of the ledgers' BenchmarkCatchUp10k: for
// each iteration, a ledger from open (a new file or schema) whose newest
// ordinary run is of the slot 10,001 minutes before now, on which a
// scheduler of a minutely DAG starts: 10,000 slots were missed, of which
// the default catch-up runs the newest 5 and records the other 9,995
// missed. It reports, in ms:
//
//   - catchup: from Run to the claim of the first catch-up slot, the
//     whole decision (where to resume, the history of the 10,000 slots,
//     the missed ones recorded canceled and reported);
//   - resume, read and record, parts of it: the scheduler's search for
//     its newest run (until its started event), its reads of the
//     slots' history (the Latest calls) and the claims and finishes
//     that record the missed slots;
//   - plan: Backfill.Plan of the same 10,000 slots on the same ledger
//     before the scheduler starts, the alternative a user has, and
//     plan-read: the same through ledger.Ledger alone, which reads every
//     latest attempt as the scheduler does rather than counting them;
//   - catchup/plan and read/plan-read: the ratios, the second that of
//     the two reads of the same history.
func BenchCatchUp10k(b *testing.B, open func(*testing.B) ledger.Ledger) {
	var sum catchUpTimes
	n := 0
	for b.Loop() {
		sum.add(catchUp10k(b, open(b)))
		n++
	}
	sum.report(b, n)
}

// catchUpTimes are the parts of one catch-up, and the plans beside it.
type catchUpTimes struct{ catchup, resume, read, record, plan, planRead time.Duration }

func (t *catchUpTimes) add(u catchUpTimes) {
	t.catchup += u.catchup
	t.resume += u.resume
	t.read += u.read
	t.record += u.record
	t.plan += u.plan
	t.planRead += u.planRead
}

func (t *catchUpTimes) report(b *testing.B, n int) {
	ms := func(d time.Duration) float64 { return float64(d) / float64(n) / 1e6 }
	b.ReportMetric(0, "ns/op") // an iteration includes a new ledger; the parts below are what is measured
	b.ReportMetric(ms(t.catchup), "catchup-ms")
	b.ReportMetric(ms(t.resume), "resume-ms")
	b.ReportMetric(ms(t.read), "read-ms")
	b.ReportMetric(ms(t.record), "record-ms")
	b.ReportMetric(ms(t.plan), "plan-ms")
	b.ReportMetric(ms(t.planRead), "plan-read-ms")
	b.ReportMetric(float64(t.catchup)/float64(t.plan), "catchup/plan")
	b.ReportMetric(float64(t.read)/float64(t.planRead), "read/plan-read")
}

// catchUpLedger times the calls the scheduler makes: its reads of
// history (Latest, with the scheduler's handling of each attempt) and the
// claims and finishes that record slots.
type catchUpLedger struct {
	ledger.Ledger
	read, record atomic.Int64 // ns
}

func (l *catchUpLedger) Latest(ctx context.Context, dag string, from, to time.Time) iter.Seq2[ledger.Attempt, error] {
	return func(yield func(ledger.Attempt, error) bool) {
		t0 := time.Now()
		defer func() { l.read.Add(int64(time.Since(t0))) }()
		for a, err := range l.Ledger.Latest(ctx, dag, from, to) {
			if !yield(a, err) {
				return
			}
		}
	}
}

func (l *catchUpLedger) Claim(ctx context.Context, req ledger.ClaimRequest) (*ledger.Lease, error) {
	t0 := time.Now()
	defer func() { l.record.Add(int64(time.Since(t0))) }()
	return l.Ledger.Claim(ctx, req)
}

func (l *catchUpLedger) Finish(ctx context.Context, lease *ledger.Lease, outcomes []ledger.Outcome) error {
	t0 := time.Now()
	defer func() { l.record.Add(int64(time.Since(t0))) }()
	return l.Ledger.Finish(ctx, lease, outcomes)
}

// plainLedger hides the ledger.LatestReader of the ledger it holds.
type plainLedger struct{ ledger.Ledger }

// catchUp10k seeds l, plans the missed slots as a backfill, then starts
// a scheduler and times its catch-up until it claims the first slot.
func catchUp10k(b *testing.B, l ledger.Ledger) catchUpTimes {
	b.Helper()
	const missed, caught = 10_000, schedule.DefaultMaxCatchUp
	ctx := b.Context()
	dag, err := tranche.NewDAG(tranche.Asset{Name: "minutes", Partitioning: tranche.Partitioning{Granularity: tranche.Minute, Location: time.UTC},
		Materialize: func(context.Context, *tranche.Materialization) ([]tranche.Row, error) { return nil, nil }})
	if err != nil {
		b.Fatal(err)
	}
	id := backfill.DAGIdentity(dag, tranche.Minute, time.UTC)
	now := time.Date(2026, 3, 1, 12, 0, 30, 0, time.UTC)
	last := tranche.PartitionOf(tranche.Minute, now.Add(-(missed+1)*time.Minute)) // the newest ordinary run
	lease, err := l.Claim(ctx, ledger.ClaimRequest{DAG: id, Worker: "before", RunID: backfill.RunID(id, last.Start, last.End),
		Partitions: []tranche.TimePartition{last}, Lease: time.Minute, Policy: ledger.RerunAll})
	if err != nil {
		b.Fatal(err)
	}
	if err := l.Finish(ctx, lease, []ledger.Outcome{{State: ledger.StateSucceeded}}); err != nil {
		b.Fatal(err)
	}
	var times catchUpTimes
	window, err := tranche.NewTimePartitionWindow(tranche.Minute, last.End, now.Add(-90*time.Second))
	if err != nil || window.Len() != missed {
		b.Fatalf("window of the missed slots: %v, %d slots", err, window.Len())
	}
	for _, side := range []struct {
		l    ledger.Ledger
		took *time.Duration
	}{{l, &times.plan}, {plainLedger{l}, &times.planRead}} {
		bf := &backfill.Backfill{DAG: dag, Window: window, Ledger: side.l, Now: func() time.Time { return now }}
		t0 := time.Now()
		plan, err := bf.Plan(ctx)
		*side.took = time.Since(t0)
		if err != nil || plan.Counts.Run != missed {
			b.Fatalf("plan of the missed slots: %v, %v", plan, err)
		}
	}

	timed := &catchUpLedger{Ledger: l}
	var started, claimed time.Time
	reported := 0
	firstClaim := make(chan struct{})
	runCtx, cancel := context.WithCancel(ctx)
	t0 := time.Now()
	s := &schedule.Scheduler{DAG: dag, Ledger: timed, Worker: "bench", Now: func() time.Time { return now.Add(time.Since(t0)) },
		OnEvent: func(_ context.Context, e tranche.Event) {
			switch e.Kind {
			case schedule.KindStarted:
				started = time.Now()
			case schedule.KindMissed:
				reported++
			case schedule.KindClaimed:
				if claimed.IsZero() {
					// The loop made every timed call so far; the
					// slot's run, which records it, starts after.
					claimed = time.Now()
					times.read, times.record = time.Duration(timed.read.Load()), time.Duration(timed.record.Load())
					close(firstClaim)
				}
			}
		}}
	done := make(chan error, 1)
	go func() { done <- s.Run(runCtx) }()
	select {
	case <-firstClaim:
	case err := <-done:
		b.Fatalf("Run returned %v before it claimed a slot", err)
	}
	times.catchup, times.resume = claimed.Sub(t0), started.Sub(t0)
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	if reported != missed-caught {
		b.Fatalf("%d slots reported missed; want %d", reported, missed-caught)
	}
	return times
}
