package backfill

import (
	"fmt"

	"github.com/tranche-dev/tranche/ledger"
)

// RerunPolicy decides which recorded partitions a backfill runs again. It
// is the ledger's type ([ledger.RerunPolicy], which a ledger judges
// claims by), named here with its values so that a Backfill with every
// policy set needs only this package and tranche; ledger's names remain
// the same values.
type RerunPolicy = ledger.RerunPolicy

// The rerun policies, as [ledger.RerunNone] and its kin.
const (
	RerunNone   = ledger.RerunNone   // only partitions with no recorded run
	RerunFailed = ledger.RerunFailed // also those whose latest run failed or was canceled; the default
	RerunAll    = ledger.RerunAll    // every partition once more
	RerunStale  = ledger.RerunStale  // what RerunFailed runs, and those whose latest success ran other code
)

// Order is the order a backfill runs its partitions in.
type Order int

const (
	// NewestFirst runs the newest partition first, so that an
	// interrupted backfill leaves recent data in place. The default.
	NewestFirst Order = iota
	// OldestFirst runs the oldest partition first.
	OldestFirst
)

// String returns "newest-first" or "oldest-first", the text
// MarshalText writes.
func (o Order) String() string {
	if o == OldestFirst {
		return "oldest-first"
	}
	return "newest-first"
}

// MarshalText implements [encoding.TextMarshaler]: "newest-first" or
// "oldest-first", so that JSON, YAML and flag.TextVar take an order.
func (o Order) MarshalText() ([]byte, error) {
	switch o {
	case NewestFirst:
		return []byte("newest-first"), nil
	case OldestFirst:
		return []byte("oldest-first"), nil
	}
	return nil, fmt.Errorf("tranche: unknown order %d; accepted: newest-first, oldest-first", int(o))
}

// UnmarshalText implements [encoding.TextUnmarshaler]: "newest-first"
// ("" too) or "oldest-first".
func (o *Order) UnmarshalText(text []byte) error {
	switch string(text) {
	case "", "newest-first":
		*o = NewestFirst
	case "oldest-first":
		*o = OldestFirst
	default:
		return fmt.Errorf("tranche: unknown order %q; accepted: newest-first, oldest-first", text)
	}
	return nil
}
