package postgres_test

import (
	"testing"
	"time"

	"github.com/tranche-dev/tranche/internal/proctest"
	"github.com/tranche-dev/tranche/ledger/postgres"
)

// The status, grid and plan of a backfill of a cron schedule's slots
// agree whether the PostgreSQL ledger counts them (a grid's cells and the
// search for a former schedule's attempts by width_bucket) or they are
// read from every latest attempt, over random schedules and histories.
func TestScheduleReadsAgree(t *testing.T) {
	var clock time.Time
	l := openFresh(t, serverURL(t), &postgres.Options{Now: func() time.Time { return clock }})
	proctest.CheckScheduleReads(t, l, &clock)
}
