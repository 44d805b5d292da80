// Package memledger is a [ledger.Ledger] held in memory: the ledger of
// tests, dry runs and single-process backfills that need not survive the
// process. The SQL ledgers live in ledger/sqlite and ledger/postgres.
package memledger

import (
	"cmp"
	"context"
	"fmt"
	"iter"
	"slices"
	"sync"
	"time"

	"github.com/tranche-dev/tranche/ledger"
)

// Ledger is a [ledger.Ledger] held in memory: for tests, dry runs and
// single-process backfills that need not survive the process. It is safe
// for concurrent use. Create it with [New].
type Ledger struct {
	now func() time.Time

	mu        sync.Mutex
	dags      map[string]*memoryDAG
	backfills map[string]ledger.BackfillRecord
	pauses    map[string]ledger.SchedulePause // by DAG identity
	limits    map[string]*limitState          // by DAG identity
	order     []string                        // backfill ids, oldest first
	cursors   map[cursorKey]cursor
}

// cursorKey names the cursor of ClaimNext: one per DAG, backfill and
// order.
type cursorKey struct {
	dag, backfill string
	descending    bool
}

// cursor is the start of the last job ClaimNext examined, and the
// revision at which it moved there.
type cursor struct {
	start    time.Time
	revision int64
}

type memoryDAG struct {
	revision int64
	history  map[int64][]ledger.Attempt // by partition start, Unix nanoseconds
	starts   []int64                    // the keys of history, sorted when !unsorted
	unsorted bool

	// changes logs every change of an attempt, in the order of their
	// revisions, so that RevisionIn reads only the changes after its
	// revision; successes logs every success the same way, for
	// RecentSuccesses.
	changes   changeLog
	successes changeLog
}

// memoryChange is a change of an attempt at the partition starting at
// start (Unix nanoseconds), at revision rev.
type memoryChange struct{ rev, start int64 }

// changeLog is a log of changes in blocks, which it never copies as it
// grows; it is read from its end.
type changeLog struct{ blocks [][]memoryChange }

// changeBlock is how many changes a block of a changeLog holds.
const changeBlock = 512

func (lg *changeLog) add(c memoryChange) {
	if n := len(lg.blocks); n == 0 || len(lg.blocks[n-1]) == changeBlock {
		lg.blocks = append(lg.blocks, make([]memoryChange, 0, changeBlock))
	}
	last := &lg.blocks[len(lg.blocks)-1]
	*last = append(*last, c)
}

// backward yields the changes, the latest first.
func (lg *changeLog) backward(yield func(memoryChange) bool) {
	for i := len(lg.blocks) - 1; i >= 0; i-- {
		b := lg.blocks[i]
		for j := len(b) - 1; j >= 0; j-- {
			if !yield(b[j]) {
				return
			}
		}
	}
}

// recorded reports whether an attempt still records change c: not when
// Release withdrew the attempt c made, as a SQL ledger deletes its row.
func (d *memoryDAG) recorded(c memoryChange) bool {
	for _, a := range d.history[c.start] {
		if a.Revision == c.rev {
			return true
		}
	}
	return false
}

// sortedStarts returns the partition starts in order, sorting them once
// after claims added new ones.
func (d *memoryDAG) sortedStarts() []int64 {
	if d.unsorted {
		slices.Sort(d.starts)
		d.unsorted = false
	}
	return d.starts
}

// New returns an empty ledger. now is its clock, by which
// leases expire; nil means time.Now.
func New(now func() time.Time) *Ledger {
	if now == nil {
		now = time.Now
	}
	return &Ledger{now: now, dags: map[string]*memoryDAG{}, backfills: map[string]ledger.BackfillRecord{}, pauses: map[string]ledger.SchedulePause{}, limits: map[string]*limitState{}, cursors: map[cursorKey]cursor{}}
}

var _ ledger.Ledger = (*Ledger)(nil)
var _ ledger.BatchFinisher = (*Ledger)(nil)

func (l *Ledger) dag(id string) *memoryDAG {
	d := l.dags[id]
	if d == nil {
		d = &memoryDAG{history: map[int64][]ledger.Attempt{}}
		l.dags[id] = d
	}
	return d
}

// Claim implements [ledger.Ledger].
func (l *Ledger) Claim(ctx context.Context, req ledger.ClaimRequest) (*ledger.Lease, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if b, ok := l.backfills[req.Backfill]; ok && b.Canceled {
		return nil, ledger.CanceledError(req.Backfill)
	}
	now := l.now()
	if err := req.CheckNotBefore(now); err != nil {
		return nil, err
	}
	return l.claim(req, now, l.versions(req.Backfill))
}

// versions returns, under l.mu, the other versions of the DAG of
// backfill id (ledger.BackfillRecord.Versions) that have a history,
// and the backfill's record; none for an unknown backfill.
func (l *Ledger) versions(id string) (v versions) {
	rec, ok := l.backfills[id]
	if !ok || rec.DAGName == "" {
		return v
	}
	records := make([]ledger.BackfillRecord, len(l.order))
	for i, id := range l.order {
		records[i] = l.backfills[id]
	}
	for _, id := range rec.Versions(records) {
		if d := l.dags[id]; d != nil {
			v.dags = append(v.dags, d)
		}
	}
	v.since = rec.Created
	return v
}

// versions are the other versions of a backfill's DAG, and when the
// backfill was created, by which a claim is judged
// (ledger.ClaimRequest.JudgeVersion).
type versions struct {
	dags  []*memoryDAG
	since time.Time
}

// ClaimNext implements [ledger.Ledger]. Claims take turns on the
// ledger's lock, so no job is ever being claimed by another call.
func (l *Ledger) ClaimNext(ctx context.Context, req ledger.NextRequest) ([]ledger.Grant, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if b, ok := l.backfills[req.Backfill]; ok && b.Canceled {
		return nil, ledger.CanceledError(req.Backfill)
	}
	key := cursorKey{req.DAG, req.Backfill, req.Descending}
	at, moved := l.cursors[key]
	moved = moved && at.revision > req.Revision
	now := l.now()
	want, err := l.allowance(req, now)
	if err != nil {
		return []ledger.Grant{{Err: err}}, nil // examined nothing: the cursor stays
	}
	v := l.versions(req.Backfill)
	var grants []ledger.Grant
	claimed := 0
	for _, j := range req.Jobs {
		if claimed == want {
			break
		}
		g := ledger.Grant{}
		if moved && !req.Before(at.start, j.Start()) {
			g.Err = ledger.PassedError(j)
		} else {
			g.Lease, g.Err = l.claim(req.Claim(j), now, v)
		}
		if g.Lease != nil {
			claimed++
		}
		grants = append(grants, g)
	}
	if last := grants[len(grants)-1]; moved && last.Lease == nil && !req.Before(at.start, req.Jobs[len(grants)-1].Start()) {
		// Every job was passed over: the cursor stays, rather than
		// move back to the last of them.
		return grants, nil
	}
	d := l.dag(req.DAG)
	d.revision++ // the cursor's move
	l.cursors[key] = cursor{start: req.Jobs[len(grants)-1].Start(), revision: d.revision}
	return grants, nil
}

// claim judges and claims, under l.mu, the partitions of req at now,
// and against the other versions v of its DAG.
func (l *Ledger) claim(req ledger.ClaimRequest, now time.Time, v versions) (*ledger.Lease, error) {
	d := l.dag(req.DAG)
	latest := make([]*ledger.Attempt, len(req.Partitions))
	for i, p := range req.Partitions {
		if h := d.history[p.Start.UnixNano()]; len(h) > 0 {
			latest[i] = &h[len(h)-1]
		}
		if err := req.Admits(latest[i], p, now); err != nil {
			return nil, err
		}
		for _, o := range v.dags {
			h := o.history[p.Start.UnixNano()]
			if len(h) == 0 || !h[len(h)-1].End.Equal(p.End) {
				continue // none, or a partition of other bounds
			}
			if err := req.AdmitsVersion(&h[len(h)-1], p, v.since, now); err != nil {
				return nil, err
			}
		}
	}
	if err := l.admitLimit(req, now); err != nil {
		return nil, err
	}
	d.revision++
	lease := &ledger.Lease{
		DAG: req.DAG, Backfill: req.Backfill, Worker: req.Worker, RunID: req.RunID,
		Partitions: slices.Clone(req.Partitions), Attempts: make([]int, len(req.Partitions)),
		Until: now.Add(req.Lease), Trigger: ledger.TriggerOf(req.Trigger, req.Backfill), Claimed: now.Truncate(time.Millisecond),
	}
	for i, p := range req.Partitions {
		number := 1
		if prev := latest[i]; prev != nil {
			number = prev.Number + 1
			if prev.State == ledger.StateRunning { // taken over after its lease expired
				prev.State, prev.Finished, prev.Revision = ledger.StateFailed, now, d.revision
				prev.Err = ledger.TakeoverReason(prev.LeaseUntil, req.Worker)
			}
		}
		key := p.Start.UnixNano()
		if _, ok := d.history[key]; !ok {
			d.unsorted = d.unsorted || (len(d.starts) > 0 && key < d.starts[len(d.starts)-1])
			d.starts = append(d.starts, key)
		}
		d.history[key] = append(d.history[key], ledger.Attempt{
			DAG: req.DAG, Backfill: req.Backfill, Start: p.Start.UTC(), End: p.End.UTC(), Key: p.Key(),
			RunID: req.RunID, Worker: req.Worker, Number: number, State: ledger.StateRunning,
			Started: now, LeaseUntil: lease.Until, Revision: d.revision, Trigger: lease.Trigger, CodeVersion: req.CodeVersion,
		})
		d.changes.add(memoryChange{rev: d.revision, start: key})
		lease.Attempts[i] = number
	}
	l.claimed(lease)
	return lease, nil
}

func (l *Ledger) leased(lease *ledger.Lease) ([]*ledger.Attempt, error) {
	d := l.dags[lease.DAG]
	if d == nil {
		return nil, fmt.Errorf("%w: unknown DAG %s", ledger.ErrFenced, lease.DAG)
	}
	out := make([]*ledger.Attempt, len(lease.Partitions))
	for i, p := range lease.Partitions {
		if h := d.history[p.Start.UnixNano()]; len(h) > 0 {
			out[i] = &h[len(h)-1]
		}
		if err := lease.CheckHeld(i, out[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Heartbeat implements [ledger.Ledger].
func (l *Ledger) Heartbeat(ctx context.Context, lease *ledger.Lease, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	attempts, err := l.leased(lease)
	if err != nil {
		return err
	}
	lease.Until = l.now().Add(d)
	for _, a := range attempts {
		a.LeaseUntil = lease.Until
	}
	return nil
}

// Finish implements [ledger.Ledger].
func (l *Ledger) Finish(ctx context.Context, lease *ledger.Lease, outcomes []ledger.Outcome) error {
	if err := lease.CheckOutcomes(outcomes); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.finish(lease, outcomes)
}

// FinishBatch implements [ledger.BatchFinisher]: each finish as Finish
// records it, under one hold of the ledger's lock, which also reads
// whether its backfill was canceled.
func (l *Ledger) FinishBatch(ctx context.Context, batch []ledger.Finish) []error {
	errs := make([]error, len(batch))
	for i, f := range batch {
		errs[i] = f.Lease.CheckOutcomes(f.Outcomes)
	}
	if err := ctx.Err(); err != nil {
		for i := range errs {
			errs[i] = cmp.Or(errs[i], err)
		}
		return errs
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, f := range batch {
		if errs[i] == nil {
			errs[i] = l.finish(f.Lease, f.Outcomes)
		}
		if b, ok := l.backfills[f.Lease.Backfill]; ok && errs[i] == nil {
			batch[i].Canceled = b.Canceled
		}
	}
	return errs
}

// FinishesAlone implements [ledger.BatchFinisher]: never, as nothing
// shares the ledger's lock.
func (l *Ledger) FinishesAlone(*ledger.Lease) bool { return false }

// finish records the outcomes of a lease, under l.mu.
func (l *Ledger) finish(lease *ledger.Lease, outcomes []ledger.Outcome) error {
	attempts, err := l.leased(lease)
	if err != nil {
		return err
	}
	d := l.dags[lease.DAG]
	d.revision++
	now := l.now()
	for i, a := range attempts {
		a.State, a.Err, a.Rows = outcomes[i].State, outcomes[i].Err, outcomes[i].Rows
		a.Finished, a.Revision = now, d.revision
		if ran := outcomes[i].Ran; ran > 0 && now.Add(-ran).After(a.Started) {
			a.Started = now.Add(-ran)
		}
		c := memoryChange{rev: d.revision, start: a.Start.UnixNano()}
		d.changes.add(c)
		if a.State == ledger.StateSucceeded {
			d.successes.add(c)
		}
	}
	return nil
}

// Release implements [ledger.Ledger].
func (l *Ledger) Release(ctx context.Context, lease *ledger.Lease) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	attempts, err := l.leased(lease)
	if err != nil {
		return err
	}
	// A lease naming a partition twice would withdraw its attempt and
	// the one before it, or, at a partition of one attempt, another
	// partition's start: no claim holds one attempt twice.
	seen := make(map[*ledger.Attempt]bool, len(attempts))
	for i, a := range attempts {
		if seen[a] {
			return fmt.Errorf("%w: %s named twice in the lease of worker %s", ledger.ErrFenced, lease.Partitions[i].Key(), lease.Worker)
		}
		seen[a] = true
	}
	d := l.dags[lease.DAG]
	d.revision++
	for _, p := range lease.Partitions {
		key := p.Start.UnixNano()
		h := d.history[key]
		if len(h) > 1 {
			d.history[key] = h[:len(h)-1]
			continue
		}
		delete(d.history, key)
		i, _ := slices.BinarySearch(d.sortedStarts(), key)
		d.starts = slices.Delete(d.starts, i, i+1)
	}
	return nil
}

// Latest implements [ledger.Ledger]. It copies attempts out in small batches, so
// that ranging over a large ledger holds the lock briefly and memory stays
// flat.
func (l *Ledger) Latest(ctx context.Context, dag string, from, to time.Time) iter.Seq2[ledger.Attempt, error] {
	const batchSize = 256
	return func(yield func(ledger.Attempt, error) bool) {
		batch := make([]ledger.Attempt, 0, batchSize)
		next, end := from.UnixNano(), to.UnixNano()
		for {
			if err := ctx.Err(); err != nil {
				yield(ledger.Attempt{}, err)
				return
			}
			batch = batch[:0]
			l.mu.Lock()
			if d := l.dags[dag]; d != nil {
				starts := d.sortedStarts()
				i, _ := slices.BinarySearch(starts, next)
				for ; i < len(starts) && starts[i] < end && len(batch) < batchSize; i++ {
					h := d.history[starts[i]]
					batch = append(batch, h[len(h)-1])
				}
			}
			l.mu.Unlock()
			for _, a := range batch {
				if !yield(a, nil) {
					return
				}
			}
			if len(batch) < batchSize {
				return
			}
			next = batch[len(batch)-1].Start.UnixNano() + 1
		}
	}
}

// History implements [ledger.Ledger].
func (l *Ledger) History(ctx context.Context, dag string, start time.Time) ([]ledger.Attempt, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if d := l.dags[dag]; d != nil {
		return slices.Clone(d.history[start.UnixNano()]), nil
	}
	return nil, nil
}

// Revision implements [ledger.Ledger].
func (l *Ledger) Revision(ctx context.Context, dag string) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if d := l.dags[dag]; d != nil {
		return d.revision, nil
	}
	return 0, nil
}

// RevisionIn implements [ledger.Ledger]: it reads the changes after after, from
// the log of changes.
func (l *Ledger) RevisionIn(ctx context.Context, dag string, from, to time.Time, after int64) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	d := l.dags[dag]
	if d == nil {
		return 0, nil
	}
	lo, hi := from.UnixNano(), to.UnixNano()
	for c := range d.changes.backward { // the latest change first
		if c.rev <= after {
			break
		}
		if c.start >= lo && c.start < hi && d.recorded(c) {
			return c.rev, nil
		}
	}
	return 0, nil
}

// RecentSuccesses implements [ledger.Ledger].
func (l *Ledger) RecentSuccesses(ctx context.Context, dag string, n int) ([]ledger.Attempt, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	d := l.dags[dag]
	if d == nil || n < 1 {
		return nil, nil
	}
	// The last n successes, and those sharing the revision of the n-th
	// (a chunk's), which the order by start may prefer.
	var picked []memoryChange
	for c := range d.successes.backward {
		if len(picked) >= n && c.rev != picked[len(picked)-1].rev {
			break
		}
		picked = append(picked, c)
	}
	slices.SortFunc(picked, func(a, b memoryChange) int {
		return cmp.Or(cmp.Compare(b.rev, a.rev), cmp.Compare(b.start, a.start))
	})
	out := make([]ledger.Attempt, 0, min(n, len(picked)))
	for _, c := range picked[:min(n, len(picked))] {
		// The attempt that finished at c.rev: a success changes no more,
		// so it is the one whose revision is c.rev, the last but for
		// later attempts.
		h := d.history[c.start]
		i := len(h) - 1
		for i > 0 && h[i].Revision != c.rev {
			i--
		}
		out = append(out, h[i])
	}
	return out, nil
}

// PutBackfill implements [ledger.Ledger].
func (l *Ledger) PutBackfill(ctx context.Context, b ledger.BackfillRecord) (ledger.BackfillRecord, error) {
	if err := ctx.Err(); err != nil {
		return ledger.BackfillRecord{}, err
	}
	if b.ID == "" {
		return ledger.BackfillRecord{}, fmt.Errorf("tranche: PutBackfill without an id")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if stored, ok := l.backfills[b.ID]; ok {
		if b.DAGName != "" && b.DAGName != stored.DAGName {
			stored.DAGName = b.DAGName // a label: renaming keeps the rest
			l.backfills[b.ID] = stored
		}
		return clone(stored), nil
	}
	if b.Created.IsZero() {
		b.Created = l.now()
	}
	b.Partitions = slices.Clone(b.Partitions)
	l.backfills[b.ID] = b
	l.order = append(l.order, b.ID)
	return clone(b), nil
}

// clone returns a copy of b that shares no memory with it.
func clone(b ledger.BackfillRecord) ledger.BackfillRecord {
	b.Partitions = slices.Clone(b.Partitions)
	return b
}

// Backfill implements [ledger.Ledger].
func (l *Ledger) Backfill(ctx context.Context, id string) (ledger.BackfillRecord, error) {
	if err := ctx.Err(); err != nil {
		return ledger.BackfillRecord{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.backfills[id]
	if !ok {
		return ledger.BackfillRecord{}, fmt.Errorf("%w %q", ledger.ErrUnknownBackfill, id)
	}
	return clone(b), nil
}

// Backfills implements [ledger.Ledger].
func (l *Ledger) Backfills(ctx context.Context) ([]ledger.BackfillRecord, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]ledger.BackfillRecord, len(l.order))
	for i, id := range l.order {
		out[i] = clone(l.backfills[id])
	}
	return out, nil
}

// CancelBackfill implements [ledger.Ledger].
func (l *Ledger) CancelBackfill(ctx context.Context, id string, opts ledger.CancelOptions) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.backfills[id]
	if !ok {
		return fmt.Errorf("%w %q", ledger.ErrUnknownBackfill, id)
	}
	if !b.Canceled {
		b.Canceled, b.CanceledAt = true, l.now()
	}
	b.StopRunning = b.StopRunning || opts.StopRunning
	l.backfills[id] = b
	return nil
}

// ResumeBackfill implements [ledger.Ledger].
func (l *Ledger) ResumeBackfill(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.backfills[id]
	if !ok {
		return fmt.Errorf("%w %q", ledger.ErrUnknownBackfill, id)
	}
	if b.Canceled {
		b.Canceled, b.StopRunning, b.ResumedAt = false, false, l.now()
		l.backfills[id] = b
	}
	return nil
}

// SetSchedulePause implements [ledger.Ledger].
func (l *Ledger) SetSchedulePause(ctx context.Context, dag string, p ledger.SchedulePause) (ledger.SchedulePause, error) {
	if err := ctx.Err(); err != nil {
		return ledger.SchedulePause{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	stored := l.pauses[dag]
	if stored.Paused == p.Paused {
		return stored, nil
	}
	now := l.now()
	p.Since, p.PausedAt = now, stored.PausedAt
	if p.Paused {
		p.PausedAt = now
	}
	l.pauses[dag] = p
	return p, nil
}

// SchedulePause implements [ledger.Ledger].
func (l *Ledger) SchedulePause(ctx context.Context, dag string) (ledger.SchedulePause, error) {
	if err := ctx.Err(); err != nil {
		return ledger.SchedulePause{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pauses[dag], nil
}
