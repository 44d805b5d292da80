package tranchecli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/internal/granularities"
	"github.com/tranche-dev/tranche/ledger"
)

// A backfill of a DAG of several granularities is recorded as a backfill
// of each asset, whose ids derive from the id its plan shows
// (backfill.AssetBackfills): status, cancel and resume take that id too,
// and act on every asset's backfill.

// assetBackfills returns the backfills of the assets of the backfill of
// several granularities whose whole id is arg, or none when arg names a
// backfill of the ledger or no such backfill.
func (c *call) assetBackfills(ctx context.Context, l ledger.Reader, arg string) ([]ledger.BackfillRecord, error) {
	if _, err := l.Backfill(ctx, arg); !errors.Is(err, ledger.ErrUnknownBackfill) {
		return nil, nil // a backfill's id, or an error resolve reports
	}
	return backfill.AssetBackfills(ctx, l, arg)
}

// assetsLine names the backfills of assets: "platform/events 1a2b3c4d5e6f, ...".
func assetsLine(assets []ledger.BackfillRecord) string {
	names := make([]string, len(assets))
	for i, a := range assets {
		names[i] = a.DAGName + " " + a.ID
	}
	return strings.Join(names, ", ")
}

// mixedStatus writes the status of each asset's backfill of the backfill
// of several granularities id: in text one after the other, in JSON one
// object holding them in "assets".
func (c *call) mixedStatus(ctx context.Context, l ledger.Reader, id string, assets []ledger.BackfillRecord) error {
	if c.opt.watch {
		return badUsage("--watch follows one backfill; %s runs its assets as backfills of their own: %s", id, assetsLine(assets))
	}
	json := c.opt.format == formatJSON
	if json {
		fmt.Fprintf(c.stdout, "{\"backfill\":%q,\"assets\":[", id)
	} else {
		fmt.Fprintf(c.stdout, "Backfill %s runs each asset of its DAG as a backfill of its own (%d):\n", id, len(assets))
	}
	for i, a := range assets {
		switch {
		case json && i > 0:
			fmt.Fprint(c.stdout, ",")
		case !json:
			fmt.Fprintf(c.stdout, "\n%s (backfill %s)\n", a.DAGName, a.ID)
		}
		if err := c.statusOne(ctx, l, a.ID); err != nil {
			return err
		}
	}
	if json {
		fmt.Fprintln(c.stdout, "]}")
	}
	return nil
}

// mixedCancel cancels every asset's backfill of the backfill of several
// granularities id that is neither canceled already nor finished.
func (c *call) mixedCancel(ctx context.Context, l ledger.Ledger, id string, assets []ledger.BackfillRecord) error {
	var canceled []ledger.BackfillRecord
	for _, a := range assets {
		if a.Canceled && (a.StopRunning || !c.opt.stopRunning) {
			continue
		}
		s, err := backfill.StatusOf(ctx, l, a.ID, time.Now())
		if err != nil {
			return err
		}
		if s.Done() {
			continue
		}
		if err := l.CancelBackfill(ctx, a.ID, ledger.CancelOptions{StopRunning: c.opt.stopRunning}); err != nil {
			return err
		}
		canceled = append(canceled, a)
	}
	if len(canceled) == 0 {
		fmt.Fprintf(c.stdout, "Backfill %s is canceled already or finished, in each of its assets' backfills (%s): nothing was changed.\n", id, assetsLine(assets))
		return exitErr(exitNothing)
	}
	then := fmt.Sprintf("its running partitions finish. '%s resume %s' lets it go on", c.name, id)
	if c.opt.stopRunning {
		then = "they stop its running partitions at their next heartbeat"
	}
	fmt.Fprintf(c.stdout, "Canceled backfill %s through its assets' backfills (%s): workers claim nothing more for it; %s.\n", id, assetsLine(canceled), then)
	return nil
}

// mixedResume resumes every canceled asset's backfill of the backfill
// of several granularities id, and runs the backfill here when its DAG
// is registered.
func (c *call) mixedResume(ctx context.Context, l ledger.Ledger, id string, assets []ledger.BackfillRecord) error {
	resumed := 0
	for _, a := range assets {
		if a.Canceled {
			if err := l.ResumeBackfill(ctx, a.ID); err != nil {
				return err
			}
			resumed++
		}
	}
	if resumed == 0 {
		fmt.Fprintf(c.stdout, "Backfill %s is not canceled in any of its assets' backfills (%s): nothing to resume; nothing was changed.\n", id, assetsLine(assets))
		return exitErr(exitNothing)
	}
	b, name := c.registeredMixed(id, assets)
	if b == nil {
		fmt.Fprintf(c.stdout, "Resumed backfill %s through its assets' backfills (%s). Its DAG is not registered in %s: the workers running it take it up.\n", id, assetsLine(assets), c.name)
		return nil
	}
	return c.resumeHere(ctx, l, b, id, name, b.Window.String())
}

// registeredMixed returns the backfill of several granularities id over
// a registered DAG, its Ledger unset, and the DAG's name, or nil when
// none is found: its window is the span its assets' backfills cover, in
// one of its assets' granularities.
func (c *call) registeredMixed(id string, assets []ledger.BackfillRecord) (*backfill.Backfill, string) {
	var from, to time.Time
	for _, a := range assets {
		w, err := tranche.ParseTimePartitionWindow(a.Window)
		if err != nil {
			return nil, ""
		}
		if from.IsZero() || w.Start().Before(from) {
			from = w.Start()
		}
		if w.End().After(to) {
			to = w.End()
		}
	}
	for _, name := range c.dagNames() {
		dag := c.p.DAGs[name]
		if dag == nil || !granularities.Several(dag) {
			continue
		}
		for a := range dag.Assets() {
			w, err := tranche.WindowBetween(a.Partitioning.Granularity, from, to)
			if err != nil {
				continue
			}
			b := &backfill.Backfill{
				DAG: dag, Window: w, Runner: c.p.Runner, Worker: c.p.Worker, ChunkSize: assets[0].Chunk,
				Rerun: c.opt.rerun, OnFailure: c.opt.onFailure, Concurrency: c.opt.maxConcurrency, Lease: c.opt.lease,
			}
			if got, err := b.ID(); err == nil && got == id {
				return b, name
			}
		}
	}
	return nil, ""
}
