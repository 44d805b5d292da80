package backfill

import (
	"context"
	"errors"
	"fmt"

	"github.com/tranche-dev/tranche/internal/idhash"
	"github.com/tranche-dev/tranche/ledger"
)

// A backfill of several granularities is recorded in the ledger as the
// backfills of its assets, one each, whose ids are derived from its own
// (the id its plan shows, [Backfill.ID]): AssetBackfills finds them from
// that id, and CancelBackfill and ResumeBackfill act on them all. Each
// is recorded over the asset's partitions in the window, before any
// runs, so that a cancel reaches the assets of waves not begun.

// assetBackfillID returns the id of the backfill of asset's partitions
// run by the backfill of several granularities id.
func assetBackfillID(id, asset string) string {
	return idhash.Sum(fmt.Sprintf("tranche/backfill-asset/v1\nbackfill=%s\nasset=%s\n", id, asset), 12)
}

// recordAssets records the backfill of each asset of units that has
// partitions in the window, under its id derived from cfg.id, resuming
// each first when resume is set. It fails with ErrBackfillCanceled when
// one of them is canceled.
func (b *Backfill) recordAssets(ctx context.Context, cfg *config, units []*assetUnit, resume bool) error {
	var canceled error
	for _, u := range units {
		if u.n == 0 {
			continue
		}
		w := u.window
		id := assetBackfillID(cfg.id, u.name)
		if resume {
			if err := b.Ledger.ResumeBackfill(ctx, id); err != nil && !errors.Is(err, ledger.ErrUnknownBackfill) {
				return fmt.Errorf("tranche: resuming backfill %s of asset %q: %w", id, u.name, err)
			}
		}
		r, err := b.Ledger.PutBackfill(ctx, ledger.BackfillRecord{ID: id, DAG: u.id, DAGName: u.dag.Name, Window: w.String(), Chunk: cfg.chunk})
		if err != nil {
			return fmt.Errorf("tranche: recording backfill %s of asset %q: %w", id, u.name, err)
		}
		if r.Canceled && canceled == nil {
			canceled = fmt.Errorf("%w: %s (asset %q, backfill %s)", ErrBackfillCanceled, cfg.id, u.name, id)
		}
	}
	return canceled
}

// AssetBackfills returns the records of the backfills of the assets of
// the backfill of several granularities whose id is id (as its plan
// shows it), in the ledger's order, or none when id is not one or
// nothing of it ran. Each is an ordinary backfill of one asset's
// partitions ([StatusOf] reads its status).
func AssetBackfills(ctx context.Context, l ledger.Reader, id string) ([]ledger.BackfillRecord, error) {
	records, err := l.Backfills(ctx)
	if err != nil {
		return nil, err
	}
	var out []ledger.BackfillRecord
	for _, r := range records {
		// Its name is the DAG's, "/", and the asset's; either may hold
		// a "/", so every split is tried.
		for i := range len(r.DAGName) {
			if r.DAGName[i] == '/' && assetBackfillID(id, r.DAGName[i+1:]) == r.ID {
				out = append(out, r)
				break
			}
		}
	}
	return out, nil
}

// CancelBackfill cancels backfill id in l as [ledger.Writer.CancelBackfill]
// does, and, for the id of a backfill of several granularities, every
// backfill of its assets ([AssetBackfills]): a worker running any of
// them claims nothing more. It fails with an error matching
// [ledger.ErrUnknownBackfill] when id is neither.
func CancelBackfill(ctx context.Context, l ledger.Ledger, id string, opts ledger.CancelOptions) error {
	return eachAssetBackfill(ctx, l, id, func(id string) error { return l.CancelBackfill(ctx, id, opts) })
}

// ResumeBackfill undoes CancelBackfill in l as
// [ledger.Writer.ResumeBackfill] does, for backfill id or every backfill
// of the assets of the backfill of several granularities id; it runs
// nothing ([Backfill.Resume] runs a backfill).
func ResumeBackfill(ctx context.Context, l ledger.Ledger, id string) error {
	return eachAssetBackfill(ctx, l, id, func(id string) error { return l.ResumeBackfill(ctx, id) })
}

// eachAssetBackfill calls do with id, or, when l records no backfill id,
// with the id of each backfill of its assets.
func eachAssetBackfill(ctx context.Context, l ledger.Ledger, id string, do func(string) error) error {
	err := do(id)
	if !errors.Is(err, ledger.ErrUnknownBackfill) {
		return err
	}
	assets, rerr := AssetBackfills(ctx, l, id)
	if rerr != nil {
		return errors.Join(err, rerr)
	}
	if len(assets) == 0 {
		return err
	}
	for _, a := range assets {
		if err := do(a.ID); err != nil {
			return err
		}
	}
	return nil
}
