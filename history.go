package tranche

import (
	"fmt"
	"strings"

	"github.com/tranche-dev/tranche/internal/cron"
)

// A moved schedule keeps its history. A cron schedule that fires once a
// day on the days it fires ("0 2 * * 1-5"), or once in every hour of them
// ("5 * * * *"), shares its DAG identity with every schedule of the same
// cadence, days, zone and excluded dates (see DAGIdentity): after
// "0 2 * * *" moves to "0 1 * * *", the ledger holds the old slots under
// the same identity. A plan matches a slot to the latest attempt at its
// own start and to the latest attempt at every slot that fired on the
// same local date (daily) or in the same local hour (hourly), and takes
// the one changed last (by revision): a day an old slot covered is not
// planned again. (Where a zone moves its clock by half an hour, as Lord
// Howe does, hourly schedules of different minutes fire in different
// hours around the change: a slot that shares its hour with no slot of
// the old schedule runs.) Other granularities match attempts by start
// alone.

// identityText is the text that names g in a DAG identity: its String,
// or for a daily or hourly schedule, its cadence, days, zone and excluded
// dates.
func (g TimeGranularity) identityText() string {
	if !g.IsSchedule() || g.cron.cadence == cron.Irregular {
		return g.String()
	}
	c := g.cron
	var b strings.Builder
	fmt.Fprintf(&b, "schedule(%s; days %s", c.cadence, c.days)
	if c.zone != nil {
		fmt.Fprintf(&b, "; zone %s", c.zone)
	}
	if _, except, ok := strings.Cut(c.text, "; except "); ok {
		b.WriteString("; except " + except)
	}
	b.WriteByte(')')
	return b.String()
}
