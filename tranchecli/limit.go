package tranchecli

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/internal/granularities"
	"github.com/tranche-dev/tranche/ledger"
)

func limitFlags(c *call, fs *flag.FlagSet) {
	fs.StringVar(&c.opt.note, "note", "", "why, recorded with the limit and shown by status and the pages")
	fs.StringVar(&c.opt.by, "by", defaultBy(), "who, recorded with the limit")
}

// runLimit shows, or with N sets, the limit of a DAG's runs at once
// across every process (ledger.Limiter); 0 removes it.
func runLimit(ctx context.Context, c *call) error {
	l, err := c.writer(ctx)
	if err != nil {
		return err
	}
	d, ok, err := c.findDAG(ctx, l, c.args[0])
	switch {
	case err != nil:
		return err
	case !ok:
		return &unknownError{fmt.Sprintf("no DAG %q: give a DAG's name or identity, as '%s ls' lists them", c.args[0], c.name)}
	}
	lim, ok := l.(ledger.Limiter)
	if !ok {
		return fmt.Errorf("tranche: the ledger keeps no limits of DAGs (it is no ledger.Limiter)")
	}
	if dag := c.p.DAGs[d.name]; dag != nil && granularities.Several(dag) {
		return c.limitMixed(ctx, l, lim, d, dag)
	}
	before, err := lim.Limit(ctx, d.id)
	if err != nil {
		return err
	}
	if len(c.args) == 1 {
		fmt.Fprintf(c.stdout, "DAG %s: %s\n", d.label(), limitLine(before, time.Now()))
		return nil
	}
	n, err := strconv.Atoi(c.args[1])
	if err != nil || n < 0 {
		return &usageErr{fmt.Errorf("%s: want a number of runs, 0 or more (0 removes the limit)", c.args[1])}
	}
	if n == before.Max {
		fmt.Fprintf(c.stdout, "DAG %s: %s; nothing was changed.\n", d.label(), limitLine(before, time.Now()))
		return exitErr(exitNothing)
	}
	after, err := lim.SetLimit(ctx, d.id, ledger.Limit{Max: n, By: c.opt.by, Note: c.opt.note})
	if err != nil {
		return err
	}
	if n == 0 {
		fmt.Fprintf(c.stdout, "Removed the limit of DAG %s, %s at once: its schedulers, backfills and runs by hand claim without waiting for each other.\n",
			d.label(), counted(before.Max, "run"))
		return nil
	}
	fmt.Fprintf(c.stdout, "Limited DAG %s to %s at once across every process: a due slot goes ahead of every backfill partition not yet started; runs in flight finish. Now %s.\n",
		d.label(), counted(n, "run"), limitLine(after, time.Now()))
	return nil
}

// limitLine says a DAG's limit in a line: the limit, who set it, what
// runs and what waits.
func limitLine(lim ledger.Limit, now time.Time) string {
	if lim.Max == 0 {
		return "no limit of runs at once"
	}
	line := fmt.Sprintf("at most %s at once across every process, set by %s %s ago", counted(lim.Max, "run"), lim.By, age(now.Sub(lim.Since)))
	if lim.Note != "" {
		line += fmt.Sprintf(" (%q)", lim.Note)
	}
	line += fmt.Sprintf("; %d running", lim.Running)
	if lim.Waiting > 0 {
		line += fmt.Sprintf(", %s waiting to go first", counted(lim.Waiting, "slot"))
	}
	if lim.Running >= lim.Max || lim.Waiting > 0 {
		line += ": backfills are waiting for the DAG's limit"
	}
	return line
}

// limitMixed shows, or with N sets, the limit of a DAG of several
// granularities: one limit of the runs of all its assets at once, each
// recorded under a DAG identity of its own, set on each identity in a
// group named by the DAG (ledger.Limit.Group).
func (c *call) limitMixed(ctx context.Context, l ledger.Reader, lim ledger.Limiter, d dagRef, dag *tranche.DAG) error {
	ids, names, err := assetIdentities(ctx, l, dag, d.loc)
	if err != nil {
		return err
	}
	before, err := lim.Limit(ctx, ids[0])
	if err != nil {
		return err
	}
	assets := fmt.Sprintf("its %d assets, each recorded under a DAG of its own (%s)", len(names), strings.Join(names, ", "))
	if len(c.args) == 1 {
		fmt.Fprintf(c.stdout, "DAG %s: %s, across %s\n", d.label(), limitLine(before, time.Now()), assets)
		return nil
	}
	n, err := strconv.Atoi(c.args[1])
	if err != nil || n < 0 {
		return &usageErr{fmt.Errorf("%s: want a number of runs, 0 or more (0 removes the limit)", c.args[1])}
	}
	group := dag.Name
	if n == 0 {
		group = ""
	}
	same := true
	for _, id := range ids {
		got, err := lim.Limit(ctx, id)
		if err != nil {
			return err
		}
		same = same && got.Max == n && got.Group == group
	}
	if same {
		fmt.Fprintf(c.stdout, "DAG %s: %s, across %s; nothing was changed.\n", d.label(), limitLine(before, time.Now()), assets)
		return exitErr(exitNothing)
	}
	var after ledger.Limit
	for _, id := range ids {
		if after, err = lim.SetLimit(ctx, id, ledger.Limit{Max: n, By: c.opt.by, Note: c.opt.note, Group: group}); err != nil {
			return err
		}
	}
	if n == 0 {
		fmt.Fprintf(c.stdout, "Removed the limit of DAG %s, %s at once across %s: its schedulers, backfills and runs by hand claim without waiting for each other.\n",
			d.label(), counted(before.Max, "run"), assets)
		return nil
	}
	fmt.Fprintf(c.stdout, "Limited DAG %s to %s at once across every process and %s: a due slot of any asset goes ahead of every backfill partition not yet started; runs in flight finish. Now %s.\n",
		d.label(), counted(n, "run"), assets, limitLine(after, time.Now()))
	return nil
}

// assetIdentities returns the DAG identities under which the assets of
// dag, a DAG of several granularities, are recorded (backfill.AssetDAG):
// each in its partitioning's zone (else loc, else UTC), and any other
// that the ledger's backfills of the asset recorded (another window's
// zone), with the assets' names ("platform/events").
func assetIdentities(ctx context.Context, l ledger.Reader, dag *tranche.DAG, loc *time.Location) (ids, names []string, _ error) {
	records, err := l.Backfills(ctx)
	if err != nil {
		return nil, nil, err
	}
	for a := range dag.Assets() {
		g := a.Partitioning.Granularity
		if !g.IsValid() {
			continue
		}
		one, err := backfill.AssetDAG(dag, a.Name, nil)
		if err != nil {
			return nil, nil, err
		}
		zone := cmp.Or(a.Partitioning.Location, loc, time.UTC)
		if id := backfill.DAGIdentity(one, g, zone); !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
		for _, r := range records {
			if r.DAGName == one.Name && !slices.Contains(ids, r.DAG) {
				ids = append(ids, r.DAG)
			}
		}
		names = append(names, one.Name)
	}
	if len(ids) == 0 {
		return nil, nil, fmt.Errorf("tranche: DAG %s has no partitioned asset to limit", dag.Name)
	}
	return ids, names, nil
}
