// Package cronspec hands a schedule granularity's parsed form to the
// packages of this module that read more of it than its text: a DAG's
// identity (package backfill) and the matching of attempts to slots
// (internal/slotmatch). The root package parses a schedule once, in
// ParseCron, and keeps the result (cron.Intern); Of finds that result
// again by the schedule's text, so that no package parses it twice and
// the root's page spends no name on the accessor.
package cronspec

import (
	"strings"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/internal/cron"
)

// Of returns the parsed form of schedule g, or nil when g is not a
// schedule (see tranche.TimeGranularity.IsSchedule).
func Of(g tranche.TimeGranularity) *cron.Spec {
	if !g.IsSchedule() {
		return nil
	}
	text := strings.TrimSuffix(strings.TrimPrefix(g.String(), "cron("), ")")
	spec, err := cron.SpecOf(text)
	if err != nil {
		// ParseCron made text from a spec it had parsed.
		panic("tranche: reparsing a parsed cron schedule: " + err.Error())
	}
	return spec
}
