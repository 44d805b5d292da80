package schedule

import (
	"context"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/internal/slotmatch"
	"github.com/tranche-dev/tranche/ledger"
)

// latest returns the latest attempt of dag matching each of parts
// (sorted by start, not necessarily adjacent), nil where none does, by
// the rule a backfill's plan matches them by (package slotmatch).
func latest(ctx context.Context, l ledger.Reader, dag string, m slotmatch.Matcher, parts []tranche.TimePartition) ([]*ledger.Attempt, error) {
	out := make([]*ledger.Attempt, len(parts))
	return out, m.ReadLatest(ctx, l, dag, parts, out)
}
