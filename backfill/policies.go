package backfill

import "fmt"

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
