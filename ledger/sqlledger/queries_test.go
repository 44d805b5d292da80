package sqlledger

import (
	"regexp"
	"strconv"
	"testing"
)

// TestPlaceholdersInOrder holds every query to the rule PositionalRebind
// relies on: $1, $2, ... each used once, in order.
func TestPlaceholdersInOrder(t *testing.T) {
	l := &Ledger{dialect: &SQLite}
	queries := []string{l.qNow(), SQLite.qStart(), SQLite.qClaimFresh(), qDAGID, qInsertDAG, qRevision, qBackfill, qBackfills, SQLite.qCancelBackfill(), SQLite.qResumeBackfill(), qRevisionIn, qRecentSuccesses,
		qInsertBackfill, qTakeover, qFinishEach, qHistory, qAttempts, createSchemaTable, SQLite.qLockCursor(), qMoveCursor, qReleased, qVersions,
		qSetLimit, qReadLimit, qCountLimit, qCountGroupLimit, qDemand, qLapsedDemands, SQLite.qLockLimit(),
		`INSERT INTO tranche_schema (version, description, applied_ms) VALUES ($1, $2, $3)`}
	for _, n := range []int{1, 2, 7, batchRows} {
		queries = append(queries, SQLite.qInsertFresh(n, true), SQLite.qInsertFresh(n, false), SQLite.qFinish(n), qReadLatest(n, " FOR UPDATE OF p SKIP LOCKED"),
			qInsertAttempts(n), qAdvanceLatest(n), qHeartbeat(n), qDeletePartitions(n), qRewindLatest(n), qWithdraw(n), qClaimRound(n), qDropDemands(n))
	}
	re := regexp.MustCompile(`\$([0-9]+)`)
	for _, q := range queries {
		for i, m := range re.FindAllStringSubmatch(q, -1) {
			if m[1] != strconv.Itoa(i+1) {
				t.Errorf("placeholder %d is $%s; want $%d, each once and in order, in:\n%s", i+1, m[1], i+1, q)
				break
			}
		}
		if got := PositionalRebind(q); re.MatchString(got) {
			t.Errorf("PositionalRebind left a $n in %s", got)
		}
	}
}
