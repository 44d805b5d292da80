package tranchecli_test

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/memledger"
)

// TestStatusOfDAG: status of a registered DAG's name (or its identity)
// shows its latest run (a live slot, never a backfill's run), its latest
// backfill, and its scheduler: the last slot and when, the next due, the
// slots missed since, and "waiting for scheduler" once the next slot is
// overdue; ls lists the same in its DAGs section; the JSON holds it.
func TestStatusOfDAG(t *testing.T) {
	h := newHarness(t)
	var clock time.Time // zero: the wall clock
	l := memledger.New(func() time.Time {
		if clock.IsZero() {
			return time.Now()
		}
		return clock
	})
	h.l, h.p.Ledger = l, l
	h.must(0, append([]string{"run", "events", "--yes"}, week...)...)
	id := backfill.DAGIdentity(h.p.DAGs["events"], tranche.Day, time.UTC)

	// A live slot three days ago, started five minutes after its close;
	// no scheduler since. Three days before ten minutes ago, so that the
	// two slots after it are due (closed, and five minutes past) even in
	// the first minutes after midnight.
	slot := tranche.PartitionOf(tranche.Day, time.Now().UTC().Add(-10*time.Minute).AddDate(0, 0, -3))
	clock = slot.End.Add(5 * time.Minute)
	lease, err := l.Claim(context.Background(), ledger.ClaimRequest{DAG: id, Worker: "sched", RunID: "r", Partitions: []tranche.TimePartition{slot},
		Lease: time.Minute, Policy: ledger.RerunNone, Trigger: ledger.TriggerLive})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Finish(context.Background(), lease, []ledger.Outcome{{State: ledger.StateSucceeded}}); err != nil {
		t.Fatal(err)
	}
	clock = time.Time{}

	for _, arg := range []string{"events", id} {
		out := h.must(0, "status", arg)
		for _, want := range []string{
			"dag events (" + id + ")\n",
			"  latest run       " + slot.Key() + " succeeded, attempt 1 by sched (live), started ",
			"  latest backfill  ",
			"  scheduler        last slot " + slot.Key() + " succeeded (live) at ",
			"  scheduler        next slot " + slot.Next().Key() + " due " + slot.Next().End.Add(5*time.Minute).Format(time.RFC3339) + " (its close plus 5m0s); 2 slots due since with no run\n",
			"  scheduler        waiting for scheduler: slot " + slot.Next().Key() + " came due ",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("status %s lacks %q:\n%s", arg, want, out)
			}
		}
		if !regexp.MustCompile(`latest backfill  \w+ succeeded, 7/7 succeeded, created \S+ ago`).MatchString(out) {
			t.Errorf("status %s: the latest backfill's line:\n%s", arg, out)
		}
	}
	out := h.must(0, "ls")
	if !regexp.MustCompile(`(?m)^events \(` + id + `\)  +` + slot.Key() + ` succeeded \(live\)  +\w+ succeeded, 7/7 .*last ` + slot.Key() + `, .*, 2 missed: waiting for scheduler$`).MatchString(out) {
		t.Errorf("ls: the DAGs section lacks the events line:\n%s", out)
	}

	out = h.must(0, "status", "events", "--format", "json")
	schemas := readSchemas(t)
	var v any
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatal(err)
	}
	checkJSON(t, schemas, "{dag_status}", v, "$")
	var j struct {
		LatestRun struct{ Key, Trigger string } `json:"latest_run"`
		Scheduler struct {
			DelayMS int64 `json:"delay_ms"`
			Missed  int
			Waiting bool
		}
	}
	if err := json.Unmarshal([]byte(out), &j); err != nil {
		t.Fatal(err)
	}
	if j.LatestRun.Key != slot.Key() || j.LatestRun.Trigger != "live" || j.Scheduler.DelayMS != 300_000 || j.Scheduler.Missed != 2 || !j.Scheduler.Waiting {
		t.Errorf("status events --format json: %s", out)
	}
	if code, _, errs := h.run("status", "events", "--watch"); code != 2 || !strings.Contains(errs, "is a DAG") {
		t.Errorf("status events --watch: exit %d, %s; want 2 and a word on DAGs", code, errs)
	}
}

// TestPauseSchedule: pause DAG records the pause in the ledger, by whom
// and why; status and ls say paused, by whom and since when, the JSON
// holds it, and "waiting for scheduler" is not said of a paused
// schedule; unpause DAG resumes it. Pausing a paused schedule, or
// resuming one that is not, changes nothing (exit 3).
func TestPauseSchedule(t *testing.T) {
	h := newHarness(t)
	l := memledger.New(nil)
	h.l, h.p.Ledger = l, l
	h.must(0, append([]string{"run", "events", "--yes"}, week...)...)
	id := backfill.DAGIdentity(h.p.DAGs["events"], tranche.Day, time.UTC)
	slot := tranche.PartitionOf(tranche.Day, time.Now().UTC().AddDate(0, 0, -3))
	lease, err := l.Claim(context.Background(), ledger.ClaimRequest{DAG: id, Worker: "sched", RunID: "r", Partitions: []tranche.TimePartition{slot},
		Lease: time.Minute, Policy: ledger.RerunNone, Trigger: ledger.TriggerLive})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Finish(context.Background(), lease, []ledger.Outcome{{State: ledger.StateSucceeded}}); err != nil {
		t.Fatal(err)
	}
	out := h.must(0, "pause", "events", "--by", "alice", "--note", "source down")
	if !strings.Contains(out, "Paused the schedule of DAG events") {
		t.Errorf("pause: %s", out)
	}
	p, err := l.SchedulePause(context.Background(), id)
	if err != nil || !p.Paused || p.By != "alice" || p.Note != "source down" {
		t.Fatalf("the ledger's pause: %+v, %v", p, err)
	}
	if out := h.must(3, "pause", id, "--by", "bob"); !strings.Contains(out, "paused already, by alice") {
		t.Errorf("pause again: %s", out)
	}
	out = h.must(0, "status", "events")
	if !strings.Contains(out, `  scheduler        PAUSED by alice since `+p.Since.UTC().Format(time.RFC3339)) || !strings.Contains(out, `"source down"`) ||
		strings.Contains(out, "waiting for scheduler") {
		t.Errorf("status while paused:\n%s", out)
	}
	if out := h.must(0, "ls"); !regexp.MustCompile(`(?m)^events \(` + id + `\) .*PAUSED by alice 0s ago; last `).MatchString(out) {
		t.Errorf("ls while paused:\n%s", out)
	}
	out = h.must(0, "status", "events", "--format", "json")
	var v any
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatal(err)
	}
	checkJSON(t, readSchemas(t), "{dag_status}", v, "$")
	if !strings.Contains(out, `"paused":{"by":"alice","note":"source down","since":"`) || strings.Contains(out, `"waiting":true`) {
		t.Errorf("status --format json while paused: %s", out)
	}
	if out := h.must(0, "unpause", "events", "--by", "bob"); !strings.Contains(out, "Resumed the schedule of DAG events") {
		t.Errorf("resume: %s", out)
	}
	if p, _ := l.SchedulePause(context.Background(), id); p.Paused || p.By != "bob" {
		t.Errorf("the ledger's pause after resume: %+v", p)
	}
	if out := h.must(3, "unpause", "events"); !strings.Contains(out, "is not paused") {
		t.Errorf("resume again: %s", out)
	}
	if out := h.must(0, "status", "events"); strings.Contains(out, "PAUSED") {
		t.Errorf("status after the resume:\n%s", out)
	}
}

// TestLimitCommand: limit DAG N records the DAG's limit in the ledger,
// by whom and why; limit DAG shows it, status says it with its runs and
// says that backfills wait when a slot waits, the JSON holds it; setting
// the same limit changes nothing (exit 3), limit DAG 0 removes it, and a
// limit that is no number is bad usage.
func TestLimitCommand(t *testing.T) {
	h := newHarness(t)
	l := memledger.New(nil)
	h.l, h.p.Ledger = l, l
	h.must(0, append([]string{"run", "events", "--yes"}, week...)...)
	id := backfill.DAGIdentity(h.p.DAGs["events"], tranche.Day, time.UTC)
	if out := h.must(0, "limit", "events"); !strings.Contains(out, "no limit") {
		t.Errorf("limit of a DAG without one: %s", out)
	}
	out := h.must(0, "limit", "events", "1", "--by", "alice", "--note", "the warehouse is small")
	if !strings.Contains(out, "to 1 run at once across every process") {
		t.Errorf("limit: %s", out)
	}
	got, err := l.Limit(context.Background(), id)
	if err != nil || got.Max != 1 || got.By != "alice" || got.Note != "the warehouse is small" {
		t.Fatalf("the ledger's limit: %+v, %v", got, err)
	}
	if out := h.must(3, "limit", id, "1"); !strings.Contains(out, "nothing was changed") {
		t.Errorf("limit again: %s", out)
	}
	// A run holds the limit, and a live slot waits for it.
	p := func(days int) tranche.TimePartition {
		return tranche.PartitionOf(tranche.Day, time.Now().UTC().AddDate(0, 0, days))
	}
	if _, err := l.Claim(context.Background(), ledger.ClaimRequest{DAG: id, Worker: "w", RunID: "r", Partitions: []tranche.TimePartition{p(-30)},
		Lease: time.Minute, Policy: ledger.RerunAll}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Claim(context.Background(), ledger.ClaimRequest{DAG: id, Worker: "s", RunID: "s", Partitions: []tranche.TimePartition{p(-1)},
		Lease: time.Minute, Policy: ledger.RerunNone, Trigger: ledger.TriggerLive}); !errors.Is(err, ledger.ErrLimited) {
		t.Fatalf("a live slot's claim at the limit = %v; want ErrLimited", err)
	}
	out = h.must(0, "status", "events")
	if !strings.Contains(out, `  limit            at most 1 run at once across every process, set by alice 0s ago ("the warehouse is small"); 1 running, 1 slot waiting to go first: backfills are waiting for the DAG's limit`) {
		t.Errorf("status under a limit:\n%s", out)
	}
	out = h.must(0, "status", "events", "--format", "json")
	var v any
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatal(err)
	}
	checkJSON(t, readSchemas(t), "{dag_status}", v, "$")
	if !strings.Contains(out, `"limit":{"max":1,"by":"alice","note":"the warehouse is small","since":"`) || !strings.Contains(out, `"running":1,"waiting_slots":1}`) {
		t.Errorf("status --format json under a limit: %s", out)
	}
	h.must(2, "limit", "events", "many")
	if out := h.must(0, "limit", "events", "0"); !strings.Contains(out, "Removed the limit of DAG events") {
		t.Errorf("limit 0: %s", out)
	}
	if out := h.must(0, "status", "events"); strings.Contains(out, "  limit ") {
		t.Errorf("status after the limit was removed:\n%s", out)
	}
}
