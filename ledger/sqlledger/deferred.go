package sqlledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/tranche-dev/tranche/ledger"
)

// Work deferred to a finish (see the package documentation): the
// ledger keeps it in memory, in the process that claimed the partition,
// from the write to the finish; a worker killed in between leaves
// neither, and the partition is run again by whoever takes it over.

// TxFunc is work run inside a transaction of the ledger: tx is the
// transaction, conn the connection it runs on, for a driver's own API
// (conn.Raw), such as PostgreSQL's COPY through pgx. It must not commit
// or roll back tx, and may run more than once, each time in a new
// transaction, when the dialect calls a failure retryable.
type TxFunc func(ctx context.Context, conn *sql.Conn, tx *sql.Tx) error

// Deferred is work for [Ledger.Defer]: it runs when Finish records the
// success of the attempt whose fencing token is Token at the partition
// starting at Start, under the lease of run RunID.
type Deferred struct {
	RunID string
	Start time.Time
	Token int64 // the lease's fencing token at the partition (ledger.Lease.Tokens), a batch's Token
	Work  TxFunc
}

// leaseKey names a partition's attempt under a lease, by its token.
type leaseKey struct {
	run   string
	start int64
	token int64
}

// deferredWork is work deferred under a key.
type deferredWork struct {
	key  string
	work TxFunc
}

// held records a lease this ledger granted, from its claim until its
// finish (or until a heartbeat found it taken over), with the work
// deferred to its finish: only leases held here may defer work, so that
// work is never left waiting for a finish that another ledger records.
func (l *Ledger) held(lease *ledger.Lease) {
	l.dmu.Lock()
	defer l.dmu.Unlock()
	if l.leases == nil {
		l.leases = map[leaseKey][]deferredWork{}
	}
	tokens := lease.Tokens()
	for i, p := range lease.Partitions {
		l.leases[leaseKey{lease.RunID, p.Start.Unix(), tokens[i]}] = nil
	}
}

// pending returns the work deferred to the finish of lease's succeeded
// partitions, partition by partition in lease order, or nil when there
// is none.
func (l *Ledger) pending(lease *ledger.Lease, outcomes []ledger.Outcome) [][]deferredWork {
	l.dmu.Lock()
	defer l.dmu.Unlock()
	var out [][]deferredWork
	tokens := lease.Tokens()
	for i, p := range lease.Partitions {
		if outcomes[i].State != ledger.StateSucceeded {
			continue
		}
		if w := l.leases[leaseKey{lease.RunID, p.Start.Unix(), tokens[i]}]; len(w) > 0 {
			if out == nil {
				out = make([][]deferredWork, len(lease.Partitions))
			}
			out[i] = slices.Clone(w)
		}
	}
	return out
}

// forget forgets a lease, with the work deferred to its finish.
func (l *Ledger) forget(lease *ledger.Lease) {
	l.dmu.Lock()
	defer l.dmu.Unlock()
	tokens := lease.Tokens()
	for i, p := range lease.Partitions {
		if i < len(tokens) {
			delete(l.leases, leaseKey{lease.RunID, p.Start.Unix(), tokens[i]})
		}
	}
}

// Defer hands work to the ledger, to run inside the transaction in which
// [Ledger.Finish] records the success of each item's attempt, after the
// fence: the work commits with the record of success, or not at all.
// Work deferred under the same key for the same attempt replaces the
// earlier (a destination rewriting a partition on an asset's retry); work
// under different keys runs in the order it was first deferred. A
// finish that records another outcome, a fenced finish, and a heartbeat
// that finds the lease taken over discard the work; a finish that failed
// without deciding anything (a lost connection) keeps it for the call
// tried again.
//
// Defer accepts all the items or none: it fails, deferring nothing, when
// an item's attempt is not held under a lease this ledger granted and
// has not finished (the run's backfill uses another ledger, or the
// partition was finished already).
func (l *Ledger) Defer(key string, items []Deferred) error {
	l.dmu.Lock()
	defer l.dmu.Unlock()
	keys := make([]leaseKey, len(items))
	for i, it := range items {
		if it.Work == nil {
			return fmt.Errorf("tranche: %s: deferring %s: no work", l.name, key)
		}
		keys[i] = leaseKey{it.RunID, it.Start.Unix(), it.Token}
		if _, ok := l.leases[keys[i]]; !ok {
			return fmt.Errorf("%w: %s: %s cannot commit with partition %s, token %d of run %s: no lease of this ledger holds it (the backfill records its partitions in another ledger, or the partition was finished already); give the destination the ledger the backfill uses",
				ErrNotLeased, l.name, key, it.Start.UTC().Format(time.RFC3339), it.Token, it.RunID)
		}
	}
	for i, it := range items {
		ws := l.leases[keys[i]]
		if j := slices.IndexFunc(ws, func(w deferredWork) bool { return w.key == key }); j >= 0 {
			ws[j].work = it.Work
			continue
		}
		l.leases[keys[i]] = append(ws, deferredWork{key: key, work: it.Work})
	}
	return nil
}

// ErrNotLeased refuses work deferred for an attempt that no lease of the
// ledger holds; see [Ledger.Defer].
var ErrNotLeased = errors.New("sqlledger: attempt not leased by this ledger")

// DeferredError is the failure of work deferred to a finish
// ([Ledger.Defer]). The ledger rolled back the transaction, so neither
// the work nor the success was recorded, and then recorded the
// partitions failed with the work's error, unless Recorded is false (the
// database could not be reached). It unwraps to the work's error.
type DeferredError struct {
	Ledger    string
	Partition string // the key of the partition whose work failed
	Recorded  bool   // whether the partitions were recorded failed
	Err       error
}

func (e *DeferredError) Error() string {
	s := fmt.Sprintf("tranche: %s: finishing partition %s: the work deferred to its commit failed, so its success was not recorded", e.Ledger, e.Partition)
	if e.Recorded {
		s += " (recorded failed)"
	}
	return s + ": " + e.Err.Error()
}

func (e *DeferredError) Unwrap() error { return e.Err }

// workError marks the failure of deferred work inside a finish's
// transaction, apart from the ledger's own statements.
type workError struct {
	partition string
	err       error
}

func (e *workError) Error() string { return e.err.Error() }
func (e *workError) Unwrap() error { return e.err }

// finishDeferred records outcomes that include successes with deferred
// work: one transaction on one connection, with the fence first (the
// UPDATE that changes only attempts the lease's worker still runs), then
// the work of every succeeded partition, then the commit. When the work
// fails, the partitions are recorded failed with its error instead.
func (l *Ledger) finishDeferred(ctx context.Context, op string, dagID int64, lease *ledger.Lease, outcomes []ledger.Outcome, work [][]deferredWork) error {
	var fenced error
	err := l.retry(ctx, op, func() error {
		fenced = nil
		conn, err := l.db.Conn(ctx)
		if err != nil {
			return err
		}
		defer conn.Close()
		tx, err := conn.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if fenced = l.finishAll(ctx, tx, dagID, lease, outcomes); fenced != nil {
			_ = tx.Rollback()
			return fenced
		}
		for i, ws := range work {
			for _, w := range ws {
				if err := w.work(ctx, conn, tx); err != nil {
					_ = tx.Rollback()
					return &workError{partition: lease.Partitions[i].Key(), err: err}
				}
			}
		}
		return tx.Commit()
	})
	if fenced != nil && errors.Is(err, ledger.ErrFenced) {
		return l.whyFenced(ctx, op, lease, fenced)
	}
	we, ok := errors.AsType[*workError](err)
	if !ok {
		return err
	}
	// The work failed, and with it the transaction: record why, so that
	// the partitions do not stay running until their leases expire.
	failed := make([]ledger.Outcome, len(outcomes))
	msg := fmt.Sprintf("partition %s: %v", we.partition, we.err)
	for i := range failed {
		failed[i] = ledger.Outcome{State: ledger.StateFailed, Err: msg}
	}
	rerr := l.finishPlain(ctx, op, dagID, lease, failed)
	if errors.Is(rerr, ledger.ErrFenced) {
		return rerr // taken over meanwhile: the work is moot
	}
	return &DeferredError{Ledger: l.name, Partition: we.partition, Recorded: rerr == nil, Err: we.err}
}

// DB returns the database the ledger writes to, as given to [Open]: the
// database of a destination that shares the ledger's transactions.
func (l *Ledger) DB() *sql.DB { return l.db }
