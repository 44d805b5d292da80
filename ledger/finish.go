package ledger

import (
	"context"
	"errors"
)

// A BatchFinisher is a [Leaser] that records the outcomes of many leases
// in one call, so that a worker running short partitions pays one
// round trip and one commit for many of them rather than one each. It
// is optional, as the ...Context interfaces of database/sql/driver are
// to a driver: [FinishBatch] asks a ledger for it with a type assertion
// and calls [Leaser.Finish] once a lease when the ledger lacks it.
type BatchFinisher interface {
	// FinishBatch records each finish as [Leaser.Finish] would, and
	// returns one error for each, in order, nil where it was recorded.
	// It sets the Canceled field of each finish it recorded, as that
	// field says.
	// Each finish is fenced alone, as Finish fences it: one whose lease
	// no longer holds every partition fails with [ErrFenced] and records
	// nothing, while the others of the batch are recorded. The outcomes
	// of one finish are recorded all or none; those of different
	// finishes may be recorded by one transaction or by several. A
	// finish that Finish would record in a transaction of its own, with
	// writes the ledger was handed for it (a destination sharing the
	// ledger's transactions), is recorded so still.
	FinishBatch(ctx context.Context, batch []Finish) []error

	// FinishesAlone reports whether the ledger records the finish of
	// lease in a transaction of its own, with writes it was handed for
	// the lease's partitions (a destination sharing its transactions),
	// so that a worker gains nothing by holding the finish back for a
	// batch, and should record it as soon as it can, alone (a batch of
	// one).
	FinishesAlone(lease *Lease) bool
}

// Finish is one lease's finish in a [BatchFinisher.FinishBatch]: what
// [Leaser.Finish] is given.
type Finish struct {
	Lease    *Lease
	Outcomes []Outcome // Outcomes[i] for Lease.Partitions[i]

	// Canceled is set by FinishBatch, once the finish is recorded, to
	// whether the lease's backfill was canceled (and not resumed) at
	// that moment, so that a worker learns of a cancellation from the
	// call that ends each of its runs, one it makes anyway, and starts
	// nothing more of the backfill. Always false for a lease of no
	// backfill.
	Canceled bool
}

// FinishBatch records the finishes of batch in l: through
// [BatchFinisher.FinishBatch] when l implements it, and otherwise
// through [Leaser.Finish], one lease at a time, reading the record of
// each backfill of the leases recorded once to set [Finish.Canceled].
// It returns one error for each finish, nil where it was recorded.
func FinishBatch(ctx context.Context, l Ledger, batch []Finish) []error {
	if bf, ok := l.(BatchFinisher); ok {
		errs := bf.FinishBatch(ctx, batch)
		if len(errs) == len(batch) {
			return errs
		}
		// A ledger that broke the contract: say so for every finish
		// rather than guess which were recorded.
		out := make([]error, len(batch))
		for i := range out {
			out[i] = errBatchLength
		}
		return out
	}
	errs := make([]error, len(batch))
	canceled := map[string]bool{}
	for i, f := range batch {
		errs[i] = l.Finish(ctx, f.Lease, f.Outcomes)
		if errs[i] == nil && f.Lease.Backfill != "" {
			canceled[f.Lease.Backfill] = false
		}
	}
	for id := range canceled {
		// A record that cannot be read says nothing: the worker's next
		// claim or heartbeat reads it again.
		if b, err := l.Backfill(ctx, id); err == nil {
			canceled[id] = b.Canceled
		}
	}
	for i := range batch {
		if errs[i] == nil {
			batch[i].Canceled = canceled[batch[i].Lease.Backfill]
		}
	}
	return errs
}

var errBatchLength = errors.New("tranche: FinishBatch returned a number of errors other than the finishes'")
