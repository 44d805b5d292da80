package sqlite_test

import (
	"testing"
	"time"

	"github.com/tranche-dev/tranche/internal/proctest"
	"github.com/tranche-dev/tranche/ledger/sqlite"
)

// The status, grid and plan of a backfill of a cron schedule's slots
// agree whether the SQLite ledger counts them or they are read from
// every latest attempt, over random schedules and histories (the
// in-memory ledger's twin is in package backfill).
func TestScheduleReadsAgree(t *testing.T) {
	var clock time.Time
	l := openTemp(t, &sqlite.Options{Now: func() time.Time { return clock }})
	proctest.CheckScheduleReads(t, l, &clock)
}
