package backfill_test

import (
	"testing"
	"time"

	"github.com/tranche-dev/tranche/internal/proctest"
	"github.com/tranche-dev/tranche/ledger/memledger"
)

// The status, grid and plan of a backfill of a cron schedule's slots
// agree whether the in-memory ledger counts them or they are read from
// every latest attempt (the SQLite ledger's tests check the same of it).
func TestScheduleReadsAgree(t *testing.T) {
	var clock time.Time
	proctest.CheckScheduleReads(t, memledger.New(func() time.Time { return clock }), &clock)
}
