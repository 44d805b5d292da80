package memledger

import (
	"context"
	"time"

	"github.com/tranche-dev/tranche/ledger"
)

var _ ledger.Limiter = (*Ledger)(nil)

// limitState is what the ledger holds of a DAG's limit: the limit and
// the demands of the slots that wait for it, until when by partition
// start (Unix nanoseconds).
type limitState struct {
	limit   ledger.Limit
	demands map[int64]time.Time
}

// SetLimit implements [ledger.Limiter].
func (l *Ledger) SetLimit(ctx context.Context, dag string, lim ledger.Limit) (ledger.Limit, error) {
	if err := lim.Check(); err != nil {
		return ledger.Limit{}, err
	}
	if err := ctx.Err(); err != nil {
		return ledger.Limit{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.limitOf(dag)
	st.limit = ledger.Limit{Max: lim.Max, By: lim.By, Note: lim.Note, Group: lim.Group, Since: l.now()}
	return l.readLimit(dag, l.now()), nil
}

// Limit implements [ledger.Limiter].
func (l *Ledger) Limit(ctx context.Context, dag string) (ledger.Limit, error) {
	if err := ctx.Err(); err != nil {
		return ledger.Limit{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.readLimit(dag, l.now()), nil
}

// limitOf returns, under l.mu, the limit state of dag, made if new.
func (l *Ledger) limitOf(dag string) *limitState {
	st := l.limits[dag]
	if st == nil {
		st = &limitState{demands: map[int64]time.Time{}}
		l.limits[dag] = st
	}
	return st
}

// readLimit returns, under l.mu, the limit of dag with its runs and the
// demands that last at now.
func (l *Ledger) readLimit(dag string, now time.Time) ledger.Limit {
	st := l.limits[dag]
	if st == nil {
		return ledger.Limit{}
	}
	lim := st.limit
	lim.Running, lim.Waiting = l.counts(dag, now)
	return lim
}

// counts returns, under l.mu, the runs holding live leases at now and
// the demands that last then of the DAGs dag's limit counts: dag, and
// under a group every DAG of it.
func (l *Ledger) counts(dag string, now time.Time) (running, waiting int) {
	st := l.limits[dag]
	if st == nil || st.limit.Group == "" {
		if st != nil {
			waiting = st.waiting(now)
		}
		return l.running(dag, now), waiting
	}
	for d, m := range l.limits {
		if d == dag || m.limit.Group == st.limit.Group {
			// A run's lease is of one DAG: the sum counts each once.
			running += l.running(d, now)
			waiting += m.waiting(now)
		}
	}
	return running, waiting
}

// waiting counts the demands that last at now.
func (st *limitState) waiting(now time.Time) int {
	n := 0
	for _, until := range st.demands {
		if now.Before(until) {
			n++
		}
	}
	return n
}

// running counts, under l.mu, the runs of dag (leases, by run id) that
// hold a partition under a live lease at now. It reads every partition:
// the in-memory ledger pays it only for a DAG with a limit.
func (l *Ledger) running(dag string, now time.Time) int {
	d := l.dags[dag]
	if d == nil {
		return 0
	}
	runs := map[string]bool{}
	for _, h := range d.history {
		if a := h[len(h)-1]; a.State == ledger.StateRunning && now.Before(a.LeaseUntil) {
			runs[a.Worker+"\x00"+a.RunID] = true
		}
	}
	return len(runs)
}

// admitLimit applies, under l.mu, the limit of req's DAG to req at now,
// recording the demand of a scheduler's slot it refuses.
func (l *Ledger) admitLimit(req ledger.ClaimRequest, now time.Time) error {
	st := l.limits[req.DAG]
	if st == nil || st.limit.Max <= 0 || req.Record {
		return nil
	}
	running, waiting := l.counts(req.DAG, now)
	err := req.AdmitsLimit(st.limit.Max, running, waiting > 0)
	if err != nil && req.Demands() {
		for _, p := range req.Partitions {
			st.demands[p.Start.UnixNano()] = now.Add(req.Lease)
		}
	}
	return err
}

// claimed drops, under l.mu, the demands of the partitions of a lease
// granted: their slots no longer wait.
func (l *Ledger) claimed(lease *ledger.Lease) {
	st := l.limits[lease.DAG]
	if st == nil || len(st.demands) == 0 {
		return
	}
	for _, p := range lease.Partitions {
		delete(st.demands, p.Start.UnixNano())
	}
}

// allowance returns, under l.mu, how many jobs a ClaimNext of req may
// claim at now under its DAG's limit, with the refusal to give when none.
func (l *Ledger) allowance(req ledger.NextRequest, now time.Time) (int, error) {
	st := l.limits[req.DAG]
	if st == nil || st.limit.Max <= 0 {
		return req.Want, nil
	}
	running, waiting := l.counts(req.DAG, now)
	demand := waiting > 0
	n := req.Allowance(st.limit.Max, running, demand)
	if n == 0 {
		return 0, &ledger.LimitError{DAG: req.DAG, Max: st.limit.Max, Running: running, Demand: demand}
	}
	return n, nil
}
