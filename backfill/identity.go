package backfill

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/internal/cronspec"
	"github.com/tranche-dev/tranche/internal/idhash"
	"github.com/tranche-dev/tranche/internal/zone"
	"github.com/tranche-dev/tranche/ledger"
)

// Identities name the same work the same way in every process, on every
// machine and in every release: each is a short hash of a canonical text
// form, with instants in UTC so that equal instants written in different
// zones name one thing. The forms are versioned ("v1"): changing one would
// orphan every ledger, so they are fixed by tests against literal values.

// DAGIdentity returns the identity of a DAG run in a granularity and
// location: a hash of its assets (names, dependencies, partitioning), the
// granularity and the zone's name. A ledger keys its history by it, so an
// ordinary run and a backfill of the same DAG share their history, and
// every id of a backfill ([ID], [RunID]) starts from it.
//
// A zone is named as the window text form names it: by its zone database
// name, and a fixed offset without one (as time.Parse returns) by the
// offset, "+01:00", or "UTC" for zero, so that an identity never depends
// on the host's zone (see [tranche.ParseBound]). time.Local, on a host
// with daylight saving time and without TZ set, has no portable name: it
// is named "Local"; load the zone by name instead.
//
// A cron schedule that fires once a day, or once an hour, on the days it
// fires is named by that cadence, its days (the day-of-month, month and
// day-of-week fields), its CRON_TZ zone and its excluded dates, not by its
// minute and hour: moving "0 2 * * *" to "0 1 * * *" keeps the DAG's
// identity, and so its history, which plans match to the new slots by
// their fire's date or hour (see [Backfill]). Other granularities,
// schedules of other cadences among them, are named by their text.
func DAGIdentity(dag *tranche.DAG, g tranche.TimeGranularity, loc *time.Location) string {
	var b strings.Builder
	b.WriteString("tranche/dag/v1\n")
	for a := range dag.Assets() {
		deps := slices.Clone(a.Deps)
		slices.Sort(deps)
		fmt.Fprintf(&b, "asset %q deps=%q", a.Name, deps)
		if p := a.Partitioning; p.Granularity.IsValid() {
			fmt.Fprintf(&b, " granularity=%s", identityText(p.Granularity))
			if p.Location != nil {
				fmt.Fprintf(&b, " location=%s", zone.Name(p.Location))
			}
			if !p.First.IsZero() {
				fmt.Fprintf(&b, " first=%s", utc(p.First))
			}
		}
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "granularity=%s zone=%s\n", identityText(g), zone.Name(loc))
	return idhash.Sum(b.String(), 16)
}

// identityText is the text that names g in a DAG identity: its String,
// or for a daily or hourly schedule, its cadence, days, zone and excluded
// dates (see cron.Spec.Identity), read from the form ParseCron parsed.
func identityText(g tranche.TimeGranularity) string {
	if spec := cronspec.Of(g); spec != nil {
		if id := spec.Identity(); id != "" {
			return id
		}
	}
	return g.String()
}

// ID returns the id of the backfill of the DAG identity dag over
// window w, run in chunks of chunk partitions (1 for one run per
// partition): the same three always name the same backfill, so running it
// again resumes it.
func ID(dag string, w tranche.TimePartitionWindow, chunk int) string {
	return idhash.Sum(fmt.Sprintf("tranche/backfill/v1\ndag=%s\nfrom=%s\nto=%s\nchunk=%d\n",
		dag, utc(w.Start()), utc(w.End()), max(chunk, 1)), 12)
}

// IDOf returns the id of the backfill of the DAG identity dag over
// the chosen partitions ps (see [Backfill.Partitions]), run in chunks of
// chunk partitions: the same set always names the same backfill, whatever
// the order or repetitions of ps, and never the backfill of a whole
// window, even one holding the same partitions.
func IDOf(dag string, ps []tranche.TimePartition, chunk int) string {
	starts := make([]time.Time, len(ps))
	for i, p := range ps {
		starts[i] = p.Start
	}
	return backfillIDOf(dag, starts, chunk)
}

// backfillIDOf is IDOf of the partitions starting at starts.
func backfillIDOf(dag string, starts []time.Time, chunk int) string {
	starts = slices.Clone(starts)
	slices.SortFunc(starts, time.Time.Compare)
	starts = slices.CompactFunc(starts, time.Time.Equal)
	h := sha256.New()
	fmt.Fprintf(h, "tranche/backfill-partitions/v1\ndag=%s\nchunk=%d\n", dag, max(chunk, 1))
	var buf []byte
	for _, t := range starts {
		buf = append(append(buf[:0], "partition="...), utc(t)...)
		h.Write(append(buf, '\n'))
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}

// RunID returns the run id of the DAG identity dag for the span
// [start, end): a partition's bounds, or a chunk's. Every attempt at the
// same span keeps it, so its data and checkpoints keep one namespace.
func RunID(dag string, start, end time.Time) string {
	// The form of the other ids, appended without fmt: a backfill makes
	// one per partition.
	var buf [128]byte
	b := append(buf[:0], "tranche/run/v1\ndag="...)
	b = append(b, dag...)
	b = append(b, "\nfrom="...)
	b = start.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, "\nto="...)
	b = end.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, '\n')
	return idhash.Sum(b, 16)
}

func utc(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// DAGNames returns the name of each DAG of records, by identity: the
// DAGName of its newest backfill that has one (records are oldest first,
// as [ledger.Reader.Backfills] returns them), so that a renamed DAG is
// shown by its new name beside its older backfills too. A DAG none of
// whose backfills has a name is left out.
func DAGNames(records []ledger.BackfillRecord) map[string]string {
	names := make(map[string]string)
	for _, r := range records {
		if r.DAGName != "" {
			names[r.DAG] = r.DAGName
		}
	}
	return names
}

// CodeVersion returns the code version of dag that its attempts record:
// the assets that declare one (tranche.Asset.CodeVersion), by name,
// each as NAME=VERSION, joined by commas ("clean=2,raw=v1"); "" when
// none does.
func CodeVersion(dag *tranche.DAG) string {
	var parts []string
	for a := range dag.Assets() {
		if a.CodeVersion != "" {
			parts = append(parts, a.Name+"="+a.CodeVersion)
		}
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}
