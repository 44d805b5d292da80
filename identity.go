package tranche

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Identities name the same work the same way in every process, on every
// machine and in every release: each is a short hash of a canonical text
// form, with instants in UTC so that equal instants written in different
// zones name one thing. The forms are versioned ("v1"): changing one would
// orphan every ledger, so they are fixed by tests against literal values.

// DAGIdentity returns the identity of a DAG run in a granularity and
// location: a hash of its assets (names, dependencies, partitioning), the
// granularity and the zone's name. A ledger keys its history by it, so an
// ordinary run and a backfill of the same DAG share their history.
//
// A zone is named as the window text form names it: by its zone database
// name, and a fixed offset without one (as time.Parse returns) by the
// offset, "+01:00", or "UTC" for zero, so that an identity never depends
// on the host's zone (see [ParseBound]). time.Local, on a host with
// daylight saving time and without TZ set, has no portable name: it is
// named "Local"; load the zone by name instead.
//
// A cron schedule that fires once a day, or once an hour, on the days it
// fires is named by that cadence, its days (the day-of-month, month and
// day-of-week fields), its CRON_TZ zone and its excluded dates, not by its
// minute and hour: moving "0 2 * * *" to "0 1 * * *" keeps the DAG's
// identity, and so its history, which plans match to the new slots by
// their fire's date or hour (see the package backfill). Other granularities,
// schedules of other cadences among them, are named by their text.
func DAGIdentity(dag *DAG, g TimeGranularity, loc *time.Location) string {
	var b strings.Builder
	b.WriteString("tranche/dag/v1\n")
	for a := range dag.Assets() {
		deps := slices.Clone(a.Deps)
		slices.Sort(deps)
		fmt.Fprintf(&b, "asset %q deps=%q", a.Name, deps)
		if p := a.Partitioning; p.Granularity.IsValid() {
			fmt.Fprintf(&b, " granularity=%s", p.Granularity.identityText())
			if p.Location != nil {
				fmt.Fprintf(&b, " location=%s", zoneName(p.Location))
			}
			if !p.First.IsZero() {
				fmt.Fprintf(&b, " first=%s", p.First.UTC().Format(time.RFC3339Nano))
			}
		}
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "granularity=%s zone=%s\n", g.identityText(), zoneName(loc))
	return shortHash(b.String(), 16)
}

func utc(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func shortHash(s string, n int) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:n]
}
