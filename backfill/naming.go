package backfill

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/tranche-dev/tranche"
)

// ErrUnnamedDAG is matched by the refusal of a backfill whose DAG has
// [tranche.NewDAG]'s default name while the ledger holds backfills of
// another DAG identity that looks like an earlier version of it: a DAG,
// also of a default name, whose assets that nothing depends on are all
// assets of this one (the deploy that adds an asset, the common one,
// changes the default name). Versions of a DAG are linked by name alone
// (see [ledger.ClaimRequest.JudgeVersion]), and unlinked, the old code's
// backfill, still running, would replace every partition the new code
// lands. Set tranche.DAG.Name where the DAG is built, the same in every
// version (the error names the earlier version's): the backfill then
// runs, and the old code's leaves what it lands.
var ErrUnnamedDAG = errors.New("tranche: DAG named by default, and an earlier version's name differs")

// moreLeaves is the last part of a default name of more than three
// leaves: "+2 more".
var moreLeaves = regexp.MustCompile(`^[0-9]+ more$`)

// defaultName is the name tranche.NewDAG gives dag: its assets that no
// other depends on, in the DAG's order, joined by "+", beyond three the
// first three and how many more (TestDefaultNameAsNewDAG holds them
// together).
func defaultName(dag *tranche.DAG) string {
	var order []string
	depended := map[string]bool{}
	for a := range dag.Assets() {
		order = append(order, a.Name)
		for _, d := range a.Deps {
			depended[d] = true
		}
	}
	var leaves []string
	for _, name := range order {
		if !depended[name] {
			leaves = append(leaves, name)
		}
	}
	if len(leaves) > 3 {
		return strings.Join(leaves[:3], "+") + fmt.Sprintf("+%d more", len(leaves)-3)
	}
	return strings.Join(leaves, "+")
}

// checkName refuses, with an error matching [ErrUnnamedDAG], to run a
// DAG of NewDAG's default name when the ledger holds a backfill of
// another identity whose recorded name reads as the default name of an
// earlier version: every asset it names is an asset of this DAG. A DAG
// named otherwise, or the first version of one, runs.
func (b *Backfill) checkName(ctx context.Context, cfg *config) error {
	if b.DAG.Name == "" || b.DAG.Name != defaultName(b.DAG) {
		return nil
	}
	records, err := b.reader().Backfills(ctx)
	if err != nil {
		return fmt.Errorf("tranche: reading the ledger's backfills: %w", err)
	}
	for _, r := range records {
		if r.DAG == cfg.dag || r.DAGName == "" || r.DAGName == b.DAG.Name || !namesAssetsOf(r.DAGName, b.DAG) {
			continue
		}
		return fmt.Errorf("%w: DAG %q (identity %s) has the name tranche.NewDAG gives it, and the ledger holds backfill %s of DAG %q (identity %s), whose assets this DAG holds: "+
			"if that is an earlier version of this DAG, set DAG.Name to %q here (and keep it in every version: a deploy that adds an asset changes the default name, and "+
			"versions are linked by name, so the old code's backfill would replace what this one lands); if it is another DAG, give this one a name of its own; nothing was run",
			ErrUnnamedDAG, b.DAG.Name, cfg.dag, r.ID, r.DAGName, r.DAG, r.DAGName)
	}
	return nil
}

// namesAssetsOf reports whether name reads as a default name (assets
// joined by "+", perhaps ending "+N more") whose every asset is one of
// dag's.
func namesAssetsOf(name string, dag *tranche.DAG) bool {
	parts := strings.Split(name, "+")
	if n := len(parts); n > 1 && moreLeaves.MatchString(parts[n-1]) {
		parts = parts[:n-1]
	}
	for _, p := range parts {
		if _, ok := dag.Asset(p); !ok {
			return false
		}
	}
	return true
}
