package tranchecli

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tranche-dev/tranche"
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
	if assets := assetNames(c.p.DAGs[d.name]); len(assets) > 0 {
		// Its backfills claim under each asset's identity, which a limit
		// of the whole DAG's would not hold.
		return fmt.Errorf("tranche: DAG %s has assets of several granularities, whose backfills run asset by asset, each recorded under a DAG of its own (%s): limit those", d.name, strings.Join(assets, ", "))
	}
	lim, ok := l.(ledger.Limiter)
	if !ok {
		return fmt.Errorf("tranche: the ledger keeps no limits of DAGs (it is no ledger.Limiter)")
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

// assetNames returns the names of the DAGs under which a backfill of dag
// records its assets' partitions ("platform/events") when its assets
// have several granularities, and nil otherwise.
func assetNames(dag *tranche.DAG) []string {
	if dag == nil || !granularities.Several(dag) {
		return nil
	}
	var names []string
	for a := range dag.Assets() {
		if a.Partitioning.Granularity.IsValid() {
			names = append(names, dag.Name+"/"+a.Name)
		}
	}
	return names
}
