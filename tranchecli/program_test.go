package tranchecli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/address"
	"github.com/tranche-dev/tranche/ledger/memledger"
	"github.com/tranche-dev/tranche/tranchecli"
)

// faults is the set of partition keys the test DAG fails.
type faults struct {
	mu   sync.Mutex
	keys map[string]bool
}

func (f *faults) set(keys ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.keys = map[string]bool{}
	for _, k := range keys {
		f.keys[k] = true
	}
}

func (f *faults) fails(key string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.keys[key]
}

// eventsDAG is a daily DAG of one asset, which fails the partitions f
// names. Its partitioning names no zone: a window takes its bounds'.
func eventsDAG(t testing.TB, f *faults) *tranche.DAG {
	t.Helper()
	dag, err := tranche.NewDAG(tranche.Asset{
		Name:         "events",
		Partitioning: tranche.Partitioning{Granularity: tranche.Day},
		Materialize: func(ctx context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
			p, err := m.Partition()
			if err != nil {
				return nil, err
			}
			if f.fails(p.Key()) {
				return nil, fmt.Errorf("the source refused %s", p.Key())
			}
			return []tranche.Row{{"day": p.Key()}}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return dag
}

// cronDAG is a DAG on a daily schedule firing at 02:00 UTC.
func cronDAG(t testing.TB) *tranche.DAG {
	t.Helper()
	g, err := tranche.ParseCron("CRON_TZ=UTC 0 2 * * *")
	if err != nil {
		t.Fatal(err)
	}
	dag, err := tranche.NewDAG(tranche.Asset{
		Name:         "nightly",
		Partitioning: tranche.Partitioning{Granularity: g},
		Materialize: func(ctx context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
			return nil, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return dag
}

// harness is a Program over an in-memory ledger with its output kept.
type harness struct {
	t      testing.TB
	l      *memledger.Ledger
	faults *faults
	p      *tranchecli.Program
	out    bytes.Buffer
	err    bytes.Buffer
}

func newHarness(t testing.TB) *harness {
	h := &harness{t: t, l: memledger.New(nil), faults: &faults{}}
	h.p = &tranchecli.Program{
		Name:   "tr",
		Ledger: h.l,
		DAGs:   map[string]*tranche.DAG{"events": eventsDAG(t, h.faults), "nightly": cronDAG(t)},
		Worker: "w1",
		Stdin:  strings.NewReader(""),
		Stdout: &h.out,
		Stderr: &h.err,
	}
	return h
}

// run runs the program and returns its exit code, stdout and stderr.
func (h *harness) run(args ...string) (int, string, string) {
	h.t.Helper()
	h.out.Reset()
	h.err.Reset()
	code := h.p.Main(context.Background(), args)
	return code, h.out.String(), h.err.String()
}

// must runs the program and fails the test unless it exits with want.
func (h *harness) must(want int, args ...string) string {
	h.t.Helper()
	code, out, errs := h.run(args...)
	if code != want {
		h.t.Fatalf("tr %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, want, out, errs)
	}
	return out
}

// only returns the id of the one backfill of the ledger.
func (h *harness) only() string {
	h.t.Helper()
	bs, err := h.l.Backfills(context.Background())
	if err != nil || len(bs) != 1 {
		h.t.Fatalf("backfills: %v, %v; want one", bs, err)
	}
	return bs[0].ID
}

func (h *harness) backfills() int {
	h.t.Helper()
	bs, err := h.l.Backfills(context.Background())
	if err != nil {
		h.t.Fatal(err)
	}
	return len(bs)
}

var week = []string{"--from", "2026-01-01T00:00:00Z", "--to", "2026-01-08T00:00:00Z"}

func TestRunStatusHistory(t *testing.T) {
	h := newHarness(t)
	h.faults.set("2026-01-03", "2026-01-05")
	out := h.must(1, append([]string{"run", "events", "--yes", "--on-failure", "continue"}, week...)...)
	for _, want := range []string{"window      day 2026-01-01..2026-01-07 UTC (7 partitions)", "2026-01-07  run", "5 succeeded", "failed: 2026-01-05"} {
		if !strings.Contains(out, want) {
			t.Errorf("run's output lacks %q:\n%s", want, out)
		}
	}
	id := h.only()

	out = h.must(0, "status", id, "--color", "never")
	for _, want := range []string{
		"backfill " + id,
		"  state       failed\n",
		"  counts      5 succeeded, 0 running, 2 failed, 0 canceled, 0 pending\n",
		"cells: one per partition; rows: month\n2026-01  # # X # X # #\n",
		"# succeeded 5   X failed 2   > running 0   - canceled 0   . pending 0",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\x1b[") {
		t.Errorf("status without a terminal wrote escape codes:\n%q", out)
	}

	out = h.must(0, "status", "--partitions", id, "--color", "never")
	keys := regexp.MustCompile(`(?m)^  (2026-01-0\d)  (\w+)`).FindAllStringSubmatch(out, -1)
	var got []string
	for _, k := range keys {
		got = append(got, k[1]+" "+k[2])
	}
	want := "2026-01-07 succeeded,2026-01-06 succeeded,2026-01-05 failed,2026-01-04 succeeded,2026-01-03 failed,2026-01-02 succeeded,2026-01-01 succeeded"
	if strings.Join(got, ",") != want {
		t.Errorf("status --partitions lists %v; want %s\n%s", got, want, out)
	}

	// The failed days run again, and now succeed.
	h.faults.set()
	out = h.must(0, append([]string{"run", "events", "--yes"}, week...)...)
	if !strings.Contains(out, "run 2 (2 runs), skip: succeeded 5") {
		t.Errorf("the second run's plan:\n%s", out)
	}
	out = h.must(0, "history", id, "2026-01-05")
	if !regexp.MustCompile(`(?s)  1 +failed +w1 .*the source refused 2026-01-05.*\n  2 +succeeded +w1 `).MatchString(out) {
		t.Errorf("history of 2026-01-05:\n%s", out)
	}
	out = h.must(0, "history", id, "2026-01-06")
	if strings.Count(out, "succeeded") != 1 {
		t.Errorf("history of 2026-01-06 holds one success:\n%s", out)
	}
	if out := h.must(0, "ls"); !strings.Contains(out, id) || !strings.Contains(out, "day 2026-01-01..2026-01-07 UTC") {
		t.Errorf("ls:\n%s", out)
	}
}

func TestPlanWritesNothing(t *testing.T) {
	h := newHarness(t)
	out := h.must(0, append([]string{"plan", "events"}, week...)...)
	if !strings.Contains(out, "run 7 (7 runs)") {
		t.Errorf("plan:\n%s", out)
	}
	h.must(0, append([]string{"run", "events", "--dry-run"}, week...)...)
	if n := h.backfills(); n != 0 {
		t.Errorf("plan and --dry-run recorded %d backfills", n)
	}
}

func TestBadUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // in stderr
	}{
		{[]string{}, "usage: tr COMMAND"},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"ls", "--bogus"}, "flag provided but not defined: -bogus"},
		{[]string{"status"}, "status takes ID; got 0"},
		{[]string{"ls", "extra"}, "tr ls: ls takes no arguments; got 1\nusage: tr ls [flags] (see 'tr help ls')"},
		{[]string{"run", "events", "--yes", "--from", "2026-01-01", "--to", "2026-02-30"}, `tranche: bound "2026-02-30"`},
		{[]string{"run", "events", "--yes", "--from", "2026-01-08", "--to", "2026-01-06"}, `from 2026-01-08T00:00:00Z is not before to 2026-01-07T00:00:00Z`},
		{[]string{"run", "events", "--yes", "--rerun", "sometimes", "--from", "2026-01-01T00:00:00Z", "--to", "2026-01-08T00:00:00Z"}, `invalid value "sometimes" for flag -rerun`},
		{[]string{"run", "events", "--yes", "--on-failure", "panic", "--from", "2026-01-01T00:00:00Z", "--to", "2026-01-08T00:00:00Z"}, `invalid value "panic" for flag -on-failure`},
		{[]string{"run", "events", "--yes", "--max-concurrency", "0", "--from", "2026-01-01T00:00:00Z", "--to", "2026-01-08T00:00:00Z"}, "--max-concurrency 0: want 1 or more"},
		{[]string{"run", "events", "--yes", "--chunk", "0", "--from", "2026-01-01T00:00:00Z", "--to", "2026-01-08T00:00:00Z"}, "--chunk 0"},
		{[]string{"run", "events", "--yes", "--from", "2026-01-01T12:00:00Z", "--to", "2026-01-08T00:00:00Z"}, "boundar"},
		{[]string{"run", "events", "--yes"}, "no window: give --from and --to, or --slot"},
		{[]string{"plan", "events", "--max-partitions", "5", "--from", "2026-01-01T00:00:00Z", "--to", "2026-01-08T00:00:00Z"}, "holds 7 partitions, more than the limit of 5"},
		{[]string{"run", "events", "--yes", "--from", "2026-01-01T00:00:00Z"}, "without --to"},
		{[]string{"run", "nightly", "--yes", "--slot", "2026-01-05T03:00:00Z"}, "is not a fire time of"},
		{[]string{"run", "nightly", "--yes", "--slot", "2026-01-05T02:00:00Z", "--from", "2026-01-01"}, "--slot and --from/--to both given"},
		{[]string{"run", "events", "--yes", "--slot", "2026-01-05T00:00:00Z"}, `--slot names fire times of a cron schedule, and DAG "events" is partitioned by day; give --from and --to`},
		{[]string{"run", "nosuch", "--yes"}, `unknown DAG "nosuch"; this program has events, nightly`},
		{append([]string{"run", "events"}, week...), "standard input is not a terminal"},
		{[]string{"status", "x", "--interval", "0s"}, "--interval 0s"},
		{[]string{"status", "x", "--color", "sometimes"}, `invalid value "sometimes" for flag -color`},
		{[]string{"ls", "--format", "yaml"}, `unknown format "yaml"; want text or json`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			h := newHarness(t)
			code, _, errs := h.run(tc.args...)
			if code != 2 {
				t.Errorf("exit %d, want 2\n%s", code, errs)
			}
			if !strings.Contains(errs, tc.want) {
				t.Errorf("stderr lacks %q:\n%s", tc.want, errs)
			}
			if !strings.Contains(errs, "usage: tr") {
				t.Errorf("stderr shows no usage:\n%s", errs)
			}
			// The error and a line of usage, as for any bad usage, not
			// every flag's default (help COMMAND lists those).
			if strings.Contains(errs, "\nflags:") {
				t.Errorf("stderr lists every flag:\n%s", errs)
			}
			if n := h.backfills(); n != 0 {
				t.Errorf("bad usage recorded %d backfills", n)
			}
		})
	}
}

func TestUnknownBackfill(t *testing.T) {
	h := newHarness(t)
	for _, args := range [][]string{{"status", "nosuch"}, {"status", "nosuch", "--watch"}, {"history", "nosuch", "2026-01-01"}, {"cancel", "nosuch"}, {"resume", "nosuch"}} {
		code, _, errs := h.run(args...)
		want := "tr " + args[0] + ": no backfill or DAG \"nosuch\" in the ledger; 'tr ls' lists them\n"
		if code != 1 || errs != want {
			t.Errorf("tr %s: exit %d, stderr %q; want 1 and %q", strings.Join(args, " "), code, errs, want)
		}
	}
}

// TestBackfillIDPrefix names backfills by a start of their ids: one
// that names a single backfill is taken, one that names several is
// refused with them, and nothing is changed by a refusal.
func TestBackfillIDPrefix(t *testing.T) {
	h := newHarness(t)
	for _, id := range []string{"abcd123", "abde456", "abde789"} {
		if _, err := h.l.PutBackfill(context.Background(), ledger.BackfillRecord{ID: id, DAG: "d", Window: "day 2026-01-01..2026-01-02 UTC", Chunk: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if out := h.must(0, "status", "abcd"); !strings.Contains(out, "backfill abcd123\n") {
		t.Errorf("status abcd:\n%s", out)
	}
	if out := h.must(0, "cancel", "abcd1"); !strings.Contains(out, "Canceled backfill abcd123") {
		t.Errorf("cancel abcd1:\n%s", out)
	}
	code, _, errs := h.run("cancel", "abde")
	if code != 1 || !strings.Contains(errs, `"abde" is the start of 2 backfills' ids (abde456, abde789); give more of it`) {
		t.Errorf("cancel abde: exit %d, %s; want 1 naming both", code, errs)
	}
	// A start shorter than 4 characters names nothing, even one backfill.
	for _, short := range []string{"a", "abd", "abc"} {
		code, _, errs := h.run("cancel", short)
		if code != 1 || !strings.Contains(errs, "too short a start of an id") {
			t.Errorf("cancel %s: exit %d, %s; want 1, too short", short, code, errs)
		}
	}
	for _, id := range []string{"abde456", "abde789"} {
		if r, _ := h.l.Backfill(context.Background(), id); r.Canceled {
			t.Errorf("an ambiguous or short cancel canceled %s", id)
		}
	}
	// An empty id is bad usage, whatever the command.
	for _, args := range [][]string{{"status", ""}, {"cancel", ""}, {"resume", " "}, {"history", "", "2026-01-01"}} {
		if code, _, errs := h.run(args...); code != 2 || !strings.Contains(errs, "an empty ID") {
			t.Errorf("%q: exit %d, %s; want 2, an empty ID", args, code, errs)
		}
	}
}

func TestHistoryKeyOutsideBackfill(t *testing.T) {
	h := newHarness(t)
	h.must(0, append([]string{"run", "events", "--yes"}, week...)...)
	id := h.only()
	for key, want := range map[string]string{"2026-02-01": "not in the window", "Jan 1": `"Jan 1"`} {
		code, _, errs := h.run("history", id, key)
		if code != 1 || !strings.Contains(errs, want) {
			t.Errorf("history %s: exit %d, stderr %q; want 1 with %q", key, code, errs, want)
		}
	}
}

func TestSlots(t *testing.T) {
	h := newHarness(t)
	h.must(0, "run", "nightly", "--yes", "--slot", "2026-01-05T02:00:00Z", "--slot", "2026-01-09T02:00:00Z")
	id := h.only()
	out := h.must(0, "status", id)
	if !strings.Contains(out, "(2 chosen partitions, 1 per run)") || !strings.Contains(out, "2 succeeded") {
		t.Errorf("status of chosen slots:\n%s", out)
	}
	code, _, errs := h.run("history", id, "2026-01-06T02:00:00Z")
	if code != 1 || !strings.Contains(errs, "not one of the 2 chosen partitions") {
		t.Errorf("history of a slot not chosen: exit %d, %s", code, errs)
	}
}

// TestSlotAndRangeShareTheDAG: a slot run with --slot, whatever offset
// spells its fire time, is recorded under the DAG identity a range
// (--from, --to) of the same schedule is, so the range does not run it
// again: for a CRON_TZ schedule in the schedule's zone, and for one
// without in the DAG's location, else UTC, as the range reads it.
func TestSlotAndRangeShareTheDAG(t *testing.T) {
	tokyo, err := time.LoadLocation("Asia/Tokyo")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, expr string
		loc        *time.Location // the assets' Partitioning.Location
		slot, day  string
		key        string // the slot's key
	}{
		{"CRON_TZ in its own offset", "CRON_TZ=Asia/Tokyo 0 2 * * *", nil, "2026-10-03T02:00:00+09:00", "2026-10-03", "2026-10-03T02:00:00+09:00"},
		{"CRON_TZ in UTC", "CRON_TZ=Asia/Tokyo 0 2 * * *", nil, "2026-10-02T17:00:00Z", "2026-10-03", "2026-10-03T02:00:00+09:00"},
		{"CRON_TZ in another offset", "CRON_TZ=Asia/Tokyo 0 2 * * *", nil, "2026-10-02T12:00:00-05:00", "2026-10-03", "2026-10-03T02:00:00+09:00"},
		{"no CRON_TZ, no location", "0 2 * * *", nil, "2026-10-03T11:00:00+09:00", "2026-10-03", "2026-10-03T02:00:00Z"},
		{"no CRON_TZ, the DAG's location", "0 2 * * *", tokyo, "2026-10-02T17:00:00Z", "2026-10-03", "2026-10-03T02:00:00+09:00"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := tranche.ParseCron(tc.expr)
			if err != nil {
				t.Fatal(err)
			}
			dag, err := tranche.NewDAG(tranche.Asset{
				Name:         "loads",
				Partitioning: tranche.Partitioning{Granularity: g, Location: tc.loc},
				Materialize:  func(context.Context, *tranche.Materialization) ([]tranche.Row, error) { return nil, nil },
			})
			if err != nil {
				t.Fatal(err)
			}
			h := newHarness(t)
			h.p.DAGs["loads"] = dag
			h.must(0, "run", "loads", "--yes", "--slot", tc.slot)
			out := h.must(0, "run", "loads", "--yes", "--from", tc.day, "--to", tc.day)
			for _, want := range []string{"run 0 (0 runs), skip: succeeded 1", "  " + tc.key + "  skip: succeeded"} {
				if !strings.Contains(out, want) {
					t.Errorf("the range after the slot: output lacks %q:\n%s", want, out)
				}
			}
			var ls []struct {
				ID, DAG string
				DAGName string `json:"dag_name"`
			}
			if err := json.Unmarshal([]byte(h.must(0, "ls", "--format", "json")), &ls); err != nil {
				t.Fatal(err)
			}
			// The two may be one backfill: a window of one slot and that
			// slot chosen can share an id.
			if len(ls) == 0 {
				t.Fatal("ls lists no backfill")
			}
			for _, b := range ls {
				if b.DAG == "" || b.DAG != ls[0].DAG {
					t.Fatalf("ls: %+v; want backfills of one DAG identity", ls)
				}
			}
			for _, b := range ls {
				if out := h.must(0, "status", b.ID); !strings.Contains(out, "  dag         "+ls[0].DAGName+" ("+ls[0].DAG+")\n") {
					t.Errorf("status %s does not name the DAG %s:\n%s", b.ID, ls[0].DAG, out)
				}
			}
		})
	}
}

func TestCronWindow(t *testing.T) {
	h := newHarness(t)
	out := h.must(0, "plan", "nightly", "--from", "2026-01-01", "--to", "2026-01-03")
	if !strings.Contains(out, "(3 partitions)") {
		t.Errorf("plan of three days of a nightly schedule:\n%s", out)
	}
}

func TestCancelResume(t *testing.T) {
	h := newHarness(t)
	h.faults.set("2026-01-07") // newest first: the first partition fails and the backfill stops
	h.must(1, append([]string{"run", "events", "--yes"}, week...)...)
	id := h.only()
	h.must(0, "cancel", id, "--stop-running")
	r, err := h.l.Backfill(context.Background(), id)
	if err != nil || !r.Canceled || !r.StopRunning {
		t.Fatalf("after cancel --stop-running: %+v, %v", r, err)
	}
	if out := h.must(0, "status", id); !strings.Contains(out, "state       canceled") {
		t.Errorf("status of a canceled backfill:\n%s", out)
	}
	h.faults.set()
	out := h.must(0, "resume", id)
	resumed, _ := h.l.Backfill(context.Background(), id)
	canceledAt, resumedAt := resumed.CanceledAt, resumed.ResumedAt
	if !strings.Contains(out, "Resuming backfill "+id+" of DAG events") || !strings.Contains(out, "7 succeeded") {
		t.Errorf("resume:\n%s", out)
	}
	if out := h.must(0, "status", id); !strings.Contains(out, "state       succeeded") {
		t.Errorf("status after resume:\n%s", out)
	}

	// Finished: cancel says so and changes nothing, and so does resume
	// of a backfill that is not canceled; both exit 3.
	if out := h.must(3, "cancel", id); !strings.Contains(out, "is finished: all 7 partitions succeeded; nothing to cancel, nothing was changed") {
		t.Errorf("cancel of a finished backfill:\n%s", out)
	}
	if out := h.must(3, "resume", id); !strings.Contains(out, "is not canceled: nothing to resume; nothing was changed") {
		t.Errorf("resume of a backfill not canceled:\n%s", out)
	}
	if r, _ := h.l.Backfill(context.Background(), id); r.Canceled || !r.CanceledAt.Equal(canceledAt) || !r.ResumedAt.Equal(resumedAt) {
		t.Errorf("after the refused cancel and resume: %+v; want it as it was", r)
	}

	// A program that does not have the DAG resumes the backfill for
	// the workers that do.
	h.faults.set("2026-02-02")
	h.must(1, "run", "events", "--yes", "--from", "2026-02-01T00:00:00Z", "--to", "2026-02-03T00:00:00Z")
	bs, err := h.l.Backfills(context.Background())
	if err != nil || len(bs) != 2 {
		t.Fatalf("Backfills = %v, %v", bs, err)
	}
	id = bs[1].ID
	h.must(0, "cancel", id)
	if out := h.must(3, "cancel", id); !strings.Contains(out, "was canceled already at ") {
		t.Errorf("cancel of a canceled backfill:\n%s", out)
	}
	h.p.DAGs = nil
	out = h.must(0, "resume", id)
	if !strings.Contains(out, "is not registered in tr: the workers running it take it up") {
		t.Errorf("resume without the DAG:\n%s", out)
	}
	if r, _ := h.l.Backfill(context.Background(), id); r.Canceled {
		t.Errorf("resume without the DAG left the backfill canceled")
	}
}

func TestWatch(t *testing.T) {
	t.Run("succeeded", func(t *testing.T) {
		h := newHarness(t)
		h.must(0, append([]string{"run", "events", "--yes"}, week...)...)
		out := h.must(0, "status", h.only(), "--watch", "--interval", "10ms")
		if !strings.Contains(out, "succeeded  7/7 succeeded") || !strings.Contains(out, "succeeded.") {
			t.Errorf("watch of a finished backfill:\n%s", out)
		}
	})
	t.Run("failed", func(t *testing.T) {
		h := newHarness(t)
		h.faults.set("2026-01-07")
		h.must(1, append([]string{"run", "events", "--yes"}, week...)...)
		out := h.must(1, "status", h.only(), "--watch", "--interval", "10ms")
		if !strings.Contains(out, "ended failed, not succeeded") {
			t.Errorf("watch of a failed backfill:\n%s", out)
		}
	})
	t.Run("canceled", func(t *testing.T) {
		h := newHarness(t)
		h.faults.set("2026-01-07")
		h.must(1, append([]string{"run", "events", "--yes"}, week...)...)
		h.must(0, "cancel", h.only())
		h.must(1, "status", h.only(), "--watch", "--interval", "10ms")
	})
	t.Run("running", func(t *testing.T) {
		// A backfill that runs while it is watched: the watch prints
		// its progress and ends 0 when it succeeds.
		h := newHarness(t)
		release := make(chan struct{})
		started := make(chan struct{}, 7)
		dag, err := tranche.NewDAG(tranche.Asset{
			Name:         "slow",
			Partitioning: tranche.Partitioning{Granularity: tranche.Day, Location: time.UTC},
			Materialize: func(ctx context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
				started <- struct{}{}
				<-release
				return nil, nil
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		h.p.DAGs = map[string]*tranche.DAG{"slow": dag}
		done := make(chan int)
		go func() {
			var out, errs bytes.Buffer
			p := *h.p
			p.Stdout, p.Stderr = &out, &errs
			done <- p.Main(context.Background(), append([]string{"run", "slow", "--yes"}, week...))
		}()
		select {
		case <-started:
		case code := <-done:
			t.Fatalf("run ended before its first partition: exit %d", code)
		}
		id := h.only()
		watchOut := &syncBuffer{}
		watched := make(chan int)
		go func() {
			p := *h.p
			p.Stdout, p.Stderr = watchOut, watchOut
			watched <- p.Main(context.Background(), []string{"status", id, "--watch", "--interval", "5ms", "--format", "json"})
		}()
		for watchOut.String() == "" {
			time.Sleep(time.Millisecond)
		}
		close(release)
		if code := <-done; code != 0 {
			t.Fatalf("run: exit %d", code)
		}
		if code := <-watched; code != 0 {
			t.Fatalf("watch: exit %d\n%s", code, watchOut.String())
		}
		lines := strings.Split(strings.TrimSpace(watchOut.String()), "\n")
		if len(lines) < 2 || !strings.Contains(lines[0], `"state":"running"`) || !strings.Contains(lines[len(lines)-1], `"done":true`) {
			t.Errorf("watch lines:\n%s", watchOut.String())
		}
	})
}

// syncBuffer is a bytes.Buffer that one goroutine writes while another
// reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestConfirmNeedsTerminal: a reader that is not a terminal is refused
// even when it would answer y.
func TestConfirmNeedsTerminal(t *testing.T) {
	h := newHarness(t)
	h.p.Stdin = strings.NewReader("y\n")
	code, _, errs := h.run(append([]string{"run", "events"}, week...)...)
	if code != 2 || !strings.Contains(errs, "--yes") || h.backfills() != 0 {
		t.Errorf("exit %d, %d backfills, stderr %s", code, h.backfills(), errs)
	}
	// The null device is a character device, but no one answers there.
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	h.p.Stdin = null
	code, _, errs = h.run(append([]string{"run", "events"}, week...)...)
	if code != 2 || !strings.Contains(errs, "--yes") || h.backfills() != 0 {
		t.Errorf("stdin %s: exit %d, %d backfills, stderr %s", os.DevNull, code, h.backfills(), errs)
	}
}

func TestLedgerFromURL(t *testing.T) {
	l := memledger.New(nil)
	var opened []string
	p := &tranchecli.Program{
		Name: "tr",
		Open: func(ctx context.Context, url string) (ledger.Ledger, error) {
			opened = append(opened, url)
			if url != "mem:" {
				return nil, fmt.Errorf("unknown ledger URL %q", url)
			}
			return l, nil
		},
		Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{},
	}
	if code := p.Main(context.Background(), []string{"ls", "--ledger", "mem:"}); code != 0 {
		t.Errorf("ls --ledger mem: exit %d", code)
	}
	t.Setenv(tranchecli.LedgerEnv, "mem:")
	if code := p.Main(context.Background(), []string{"ls"}); code != 0 {
		t.Errorf("ls with $%s: exit %d", tranchecli.LedgerEnv, code)
	}
	errs := &bytes.Buffer{}
	p.Stderr = errs
	if code := p.Main(context.Background(), []string{"ls", "--ledger", "bad:"}); code != 1 || !strings.Contains(errs.String(), `"bad:"`) {
		t.Errorf("ls --ledger bad: exit %d, %s", code, errs)
	}
	t.Setenv(tranchecli.LedgerEnv, "")
	errs.Reset()
	if code := p.Main(context.Background(), []string{"ls"}); code != 2 || !strings.Contains(errs.String(), "give --ledger URL or set $TRANCHE_LEDGER") {
		t.Errorf("ls without a ledger: exit %d, %s", code, errs)
	}
	if want := "mem:,mem:,bad:"; strings.Join(opened, ",") != want {
		t.Errorf("opened %v, want %s", opened, want)
	}
}

func TestHelp(t *testing.T) {
	h := newHarness(t)
	out := h.must(0, "help")
	for _, c := range []string{"ls", "status", "history", "cancel", "resume", "plan", "run", "schedule"} {
		if !strings.Contains(out, "\n  "+c+" ") {
			t.Errorf("help lacks %s:\n%s", c, out)
		}
	}
	out = h.must(0, "help", "run")
	for _, f := range []string{"-from", "-to", "-slot", "-chunk", "-rerun", "-max-concurrency", "-on-failure", "-dry-run", "-yes", "DAGs: events, nightly"} {
		if !strings.Contains(out, f) {
			t.Errorf("help run lacks %s:\n%s", f, out)
		}
	}
	out = h.must(0, "help", "schedule")
	for _, f := range []string{"usage: tr schedule [flags] [DAG...]", "-delay", "-max-catch-up", "-catch-up-window", "-overlap policy", "-lease", "-worker name", "SIGTERM", "DAGs: events, nightly"} {
		if !strings.Contains(out, f) {
			t.Errorf("help schedule lacks %s:\n%s", f, out)
		}
	}
	// -h prints the whole usage, as help does, on standard output.
	if code, out, errs := h.run("run", "-h"); code != 0 || !strings.Contains(out, "-max-concurrency") || errs != "" {
		t.Errorf("run -h: exit %d, stdout:\n%s\nstderr:\n%s\nwant exit 0 and the flags on stdout", code, out, errs)
	}
}

// TestRunCanceledContext: a run whose context ends is reported failed.
func TestRunCanceledContext(t *testing.T) {
	h := newHarness(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	code := h.p.Main(ctx, append([]string{"run", "events", "--yes"}, week...))
	if code != 1 {
		t.Errorf("exit %d, want 1\n%s", code, h.err.String())
	}
	if !strings.Contains(h.err.String(), "context canceled") {
		t.Errorf("stderr does not say why:\n%s", h.err.String())
	}
}

// TestStatusAggregated: 60 days of hours are more than the grid's 800
// cells, so status draws a cell per day, in rows of months.
func TestStatusAggregated(t *testing.T) {
	h := newHarness(t)
	hourly, err := tranche.NewDAG(tranche.Asset{
		Name:         "hourly",
		Partitioning: tranche.Partitioning{Granularity: tranche.Hour},
		Materialize: func(ctx context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
			p, err := m.Partition()
			if err != nil {
				return nil, err
			}
			if p.Key() == "2026-01-10T05:00Z" {
				return nil, errors.New("down for an hour")
			}
			return nil, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	h.p.DAGs = map[string]*tranche.DAG{"hourly": hourly}
	h.must(1, "run", "hourly", "--yes", "--on-failure", "continue", "--max-concurrency", "4", "--from", "2026-01-01T00:00:00Z", "--to", "2026-03-02T00:00:00Z")
	out := h.must(0, "status", h.only(), "--color", "never")
	for _, want := range []string{
		"(1440 partitions, 1 per run)",
		"cells: one per day of hour partitions, showing the worst state in it; rows: month\n",
		"2026-01  # # # # # # # # # X # # # # # # # # # # # # # # # # # # # # #\n",
		"2026-02  # # # # # # # # # # # # # # # # # # # # # # # # # # # #\n",
		"2026-03  #\n",
		"# succeeded 1439   X failed 1",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
}

// watchedOutput is a program's standard output that tells when a line
// holding want has been written.
type watchedOutput struct {
	syncBuffer
	want string
	seen chan struct{}
	once sync.Once
}

func (w *watchedOutput) Write(p []byte) (int, error) {
	n, err := w.syncBuffer.Write(p)
	if strings.Contains(w.String(), w.want) {
		w.once.Do(func() { close(w.seen) })
	}
	return n, err
}

// TestRunFailStopKeepsOrder is issue 18, part 2, as an operator meets
// it: run --max-concurrency 2 over an hourly schedule whose second slot
// in the run's order fails at once, under the default --on-failure stop.
// The failure stops the slots after it, and only those: the first slot,
// still running when the second failed, succeeds. When each slot was
// claimed in its own goroutine, the second's claim could come first, and
// its failure stopped claims before the first slot was claimed, which
// then never ran.
func TestRunFailStopKeepsOrder(t *testing.T) {
	g, err := tranche.ParseCron("CRON_TZ=UTC 0 * * * *")
	if err != nil {
		t.Fatal(err)
	}
	slot := func(hour int) string {
		p, err := tranche.SlotAt(g, time.Date(2026, 1, 5, hour, 0, 0, 0, time.UTC))
		if err != nil {
			t.Fatal(err)
		}
		return p.Key()
	}
	window := []string{"--from", "2026-01-05T00:00:00Z", "--to", "2026-01-05T05:00:00Z"} // 6 slots, both fires included
	for _, tc := range []struct {
		order         string
		flags         []string
		first, second int   // hours of the first two slots in the run's order
		after         []int // the hours the failure stops
	}{
		{"newest first", nil, 5, 4, []int{3, 2, 1, 0}}, // the default
		{"oldest first", []string{"--order", "oldest-first"}, 0, 1, []int{2, 3, 4, 5}},
	} {
		first, second := slot(tc.first), slot(tc.second)
		t.Run(tc.order, func(t *testing.T) {
			for try := range 10 {
				out := &watchedOutput{want: " " + second + " failed (", seen: make(chan struct{})}
				var mu sync.Mutex
				var ran []string
				dag, err := tranche.NewDAG(tranche.Asset{
					Name:         "hourly",
					Partitioning: tranche.Partitioning{Granularity: g},
					Materialize: func(ctx context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
						p, err := m.Partition()
						if err != nil {
							return nil, err
						}
						mu.Lock()
						ran = append(ran, p.Key())
						mu.Unlock()
						switch p.Key() {
						case first:
							// The program prints a slot's failure once the
							// failure is recorded and claims have stopped
							// (its progress line comes from the backfill's
							// OnEvent, after both): waiting for that line
							// makes the second slot's failure overtake the
							// first slot, every try.
							select {
							case <-out.seen:
							case <-time.After(5 * time.Second):
								return nil, errors.New("the second slot's failure was not printed")
							}
						case second:
							return nil, errors.New("the source is down")
						}
						return []tranche.Row{{"slot": p.Key()}}, nil
					},
				})
				if err != nil {
					t.Fatal(err)
				}
				h := newHarness(t)
				h.p.DAGs = map[string]*tranche.DAG{"hourly": dag}
				h.p.Stdout = out
				args := append(append([]string{"run", "hourly", "--yes", "--max-concurrency", "2"}, tc.flags...), window...)
				code := h.p.Main(context.Background(), args)
				h.p.Stdout = &h.out
				if code != 1 {
					t.Fatalf("try %d: exit %d, want 1\nstdout:\n%s\nstderr:\n%s", try, code, out.String(), h.err.String())
				}
				for _, want := range []string{"(6 partitions)", "1 succeeded here, 1 failed here, 0 skipped, 0 done elsewhere, 4 not run", "failed: " + second + ": "} {
					if !strings.Contains(out.String(), want) {
						t.Errorf("try %d: run's output lacks %q:\n%s", try, want, out.String())
					}
				}
				if want := "1 partition failed (first " + second + ": "; !strings.Contains(h.err.String(), want) {
					t.Errorf("try %d: stderr lacks %q:\n%s", try, want, h.err.String())
				}
				mu.Lock()
				slices.Sort(ran)
				if want := []string{min(first, second), max(first, second)}; !slices.Equal(ran, want) {
					t.Errorf("try %d: materialized %v; want %v only", try, ran, want)
				}
				mu.Unlock()

				var status struct {
					Partitions []struct{ Key, State string }
				}
				if err := json.Unmarshal([]byte(h.must(0, "status", h.only(), "--partitions", "--format", "json")), &status); err != nil {
					t.Fatal(err)
				}
				want := map[string]string{first: "succeeded", second: "failed"}
				for _, hour := range tc.after {
					want[slot(hour)] = "pending"
				}
				got := map[string]string{}
				for _, p := range status.Partitions {
					got[p.Key] = p.State
				}
				if !maps.Equal(got, want) {
					t.Fatalf("try %d: status --partitions: %v; want %v", try, got, want)
				}
			}
		})
	}
}

// TestOpenLedgerAccess checks what each subcommand opens the ledger for
// through Program.OpenLedger, and that the address reaches it parsed:
// the read commands for reading only, cancel for writing, and the
// commands that run backfills for creating.
func TestOpenLedgerAccess(t *testing.T) {
	var f faults
	mem := memledger.New(nil)
	var got []string
	p := &tranchecli.Program{
		OpenLedger: func(ctx context.Context, addr address.Address, access address.Access) (ledger.Reader, error) {
			got = append(got, addr.Scheme+":"+addr.Path+" "+access.String())
			return mem, nil
		},
		DAGs:   map[string]*tranche.DAG{"events": eventsDAG(t, &f)},
		Stdout: new(bytes.Buffer), Stderr: new(bytes.Buffer), Stdin: strings.NewReader(""),
	}
	week := []string{"--from", "2026-01-01T00:00:00Z", "--to", "2026-01-03T00:00:00Z"}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"ls"}, "read"},
		{[]string{"status", "abc"}, "read"},
		{[]string{"history", "abc", "2026-01-01"}, "read"},
		{append([]string{"plan", "events"}, week...), "read"},
		{[]string{"cancel", "abc"}, "write"},
		{[]string{"resume", "abc"}, "create"},
		{append([]string{"run", "events", "--yes"}, week...), "create"},
	} {
		got = nil
		p.Main(t.Context(), append(tt.args, "--ledger", "SQLITE:x.db"))
		if want := []string{"sqlite:x.db " + tt.want}; !slices.Equal(got, want) {
			t.Errorf("%s opened %q; want %q", strings.Join(tt.args, " "), got, want)
		}
	}
	got = nil
	var stderr bytes.Buffer
	p.Stderr = &stderr
	if code := p.Main(t.Context(), []string{"ls", "--ledger", "x.db"}); code != 2 || len(got) != 0 || !strings.Contains(stderr.String(), "did you mean sqlite:x.db?") {
		t.Errorf("ls of a bare path: exit %d, opened %q; want 2, nothing opened, and the address it may mean:\n%s", code, got, stderr.String())
	}
}

// TestReadCommandsOnReader gives the commands a reader alone, with no
// method that writes, as sqlite.OpenLedger returns for reading: ls,
// plan, status and history run on it, and a write command given one for
// writing refuses, saying why.
func TestReadCommandsOnReader(t *testing.T) {
	var f faults
	mem := memledger.New(nil)
	dag := eventsDAG(t, &f)
	week := []string{"--from", "2026-01-01T00:00:00Z", "--to", "2026-01-03T00:00:00Z"}
	run := &tranchecli.Program{Ledger: mem, DAGs: map[string]*tranche.DAG{"events": dag},
		Stdout: new(bytes.Buffer), Stderr: new(bytes.Buffer), Stdin: strings.NewReader("")}
	if code := run.Main(t.Context(), append([]string{"run", "events", "--yes"}, week...)); code != 0 {
		t.Fatalf("run: exit %d\n%s", code, run.Stderr)
	}
	records, err := mem.Backfills(t.Context())
	if err != nil || len(records) != 1 {
		t.Fatalf("Backfills = %v, %v; want one", records, err)
	}
	id := records[0].ID
	type readerOnly struct{ ledger.Reader }
	for _, args := range [][]string{{"ls"}, append([]string{"plan", "events"}, week...), {"status", id}, {"history", id, "2026-01-01"}} {
		var stdout, stderr bytes.Buffer
		p := &tranchecli.Program{
			OpenLedger: func(ctx context.Context, addr address.Address, access address.Access) (ledger.Reader, error) {
				return readerOnly{mem}, nil
			},
			DAGs: map[string]*tranche.DAG{"events": dag}, Stdout: &stdout, Stderr: &stderr, Stdin: strings.NewReader(""),
		}
		if code := p.Main(t.Context(), append(args, "--ledger", "sqlite:x.db")); code != 0 || stdout.Len() == 0 {
			t.Errorf("%s on a reader alone: exit %d, %d bytes out; want 0 and its answer\n%s", strings.Join(args, " "), code, stdout.Len(), stderr.String())
		}
	}
	var stderr bytes.Buffer
	p := &tranchecli.Program{
		OpenLedger: func(ctx context.Context, addr address.Address, access address.Access) (ledger.Reader, error) {
			return readerOnly{mem}, nil
		},
		Stdout: new(bytes.Buffer), Stderr: &stderr, Stdin: strings.NewReader(""),
	}
	if code := p.Main(t.Context(), []string{"cancel", id, "--ledger", "sqlite:x.db"}); code == 0 || !strings.Contains(stderr.String(), "cannot write") {
		t.Errorf("cancel given a reader alone: exit %d; want a refusal saying it cannot write\n%s", code, stderr.String())
	}
}
