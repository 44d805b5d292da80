package tranchecli_test

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/memledger"
	"github.com/tranche-dev/tranche/tranchecli"
)

// fastClock is a clock that reads base when first read and runs a day
// in day of the system's clock: it starts with the program that reads
// it, so that a slot due soon after base comes due after the scheduler
// began however late the machine starts it.
func fastClock(base time.Time, day time.Duration) (func() time.Time, func(time.Duration) <-chan time.Time) {
	rate := 24 * time.Hour / day
	var t0 time.Time
	var once sync.Once
	return func() time.Time {
			once.Do(func() { t0 = time.Now() })
			return base.Add(time.Since(t0) * rate)
		},
		func(d time.Duration) <-chan time.Time { return time.After(d / rate) }
}

// scheduling runs "schedule ARGS" on h's program under a clock from base
// that runs a day in day, until until says its output is enough, then
// stops it as a signal would and returns its exit code and output.
func scheduling(t *testing.T, h *harness, base time.Time, day time.Duration, until func(out string) bool, args ...string) (int, string, string) {
	t.Helper()
	now, after := fastClock(base, day)
	tranchecli.SetClock(h.p, now, after)
	var out, errs syncBuffer
	h.p.Stdout, h.p.Stderr = &out, &errs
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	code := make(chan int, 1)
	go func() { code <- h.p.Main(ctx, append([]string{"schedule"}, args...)) }()
	deadline := time.After(20 * time.Second)
	for !until(out.String()) {
		select {
		case c := <-code:
			return c, out.String(), errs.String()
		case <-deadline:
			cancel()
			<-code
			t.Fatalf("schedule %s: not done after 20 s; output:\n%s\nstderr:\n%s", strings.Join(args, " "), out.String(), errs.String())
		case <-time.After(5 * time.Millisecond):
		}
	}
	cancel()
	return <-code, out.String(), errs.String()
}

// slotLines returns, for each slot key, the words that follow it on the
// output's lines of DAG name ("started", "succeeded", "missed", ...), in
// order.
func slotLines(out, name string) map[string][]string {
	got := map[string][]string{}
	re := regexp.MustCompile(`(?m)^\S+  ` + regexp.QuoteMeta(name) + ` +(\d{4}-\d\d-\d\d\S*) (\w+)`)
	for _, m := range re.FindAllStringSubmatch(out, -1) {
		got[m[1]] = append(got[m[1]], m[2])
	}
	return got
}

func count(out, word string) int { return strings.Count(out, " "+word+" ") }

// TestSchedule runs the program's schedule subcommand under a clock that
// runs a day in 300 ms, from 18:00: each day runs as
// it closes, a line as it starts and one as it ends, recorded in the
// ledger as an ordinary run; a cancel stops it with exit 0 and a
// summary.
func TestSchedule(t *testing.T) {
	h := newHarness(t)
	base := time.Date(2026, 1, 9, 18, 0, 0, 0, time.UTC)
	code, out, errs := scheduling(t, h, base, 300*time.Millisecond, func(out string) bool { return count(out, "succeeded") >= 3 }, "events")
	if code != 0 || errs != "" {
		t.Fatalf("exit %d, stderr:\n%s", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if !regexp.MustCompile(`^2026-01-09T18:\d\d:\d\dZ  events  scheduling day slots in UTC as w1 \(delay 0s, catch-up 5, overlap queue, lease 30s\): next 2026-01-09, due 2026-01-10T00:00:00Z$`).MatchString(lines[0]) {
		t.Errorf("first line %q; want the DAG's slots, the first due", lines[0])
	}
	last := lines[len(lines)-1]
	if !regexp.MustCompile(`^\S+  events  stopped \(context canceled\): [34] succeeded, 0 failed, 0 interrupted, 0 missed, 0 skipped, 0 done elsewhere$`).MatchString(last) {
		t.Errorf("last line %q; want the summary", last)
	}
	got := slotLines(out, "events")
	for _, key := range []string{"2026-01-09", "2026-01-10", "2026-01-11"} {
		if diff := cmp.Diff([]string{"started", "succeeded"}, got[key]); diff != "" {
			t.Errorf("lines of %s (-want +got):\n%s\n%s", key, diff, out)
		}
	}
	for _, want := range []string{"  events  2026-01-10 started (live, attempt 1)\n", "  events  2026-01-10 succeeded in "} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// A line's time is the scheduler's: a slot starts after its close,
	// and well before the next (a millisecond is five minutes of the
	// clock, so a loaded machine may start it hours of it late).
	if m := regexp.MustCompile(`(?m)^(\S+)  events  2026-01-10 started`).FindStringSubmatch(out); m == nil || !strings.HasPrefix(m[1], "2026-01-11T") {
		t.Errorf("2026-01-10 started at %v; want on 2026-01-11, after its close", m)
	}
	recorded := map[string]string{}
	for a, err := range h.l.Latest(context.Background(), backfill.DAGIdentity(h.p.DAGs["events"], tranche.Day, time.UTC), base.Add(-24*time.Hour), base.Add(3*24*time.Hour)) {
		if err != nil {
			t.Fatal(err)
		}
		recorded[a.Key] = fmt.Sprintf("%s by %s, backfill %q, %d rows", a.State, a.Worker, a.Backfill, a.Rows)
	}
	for _, key := range []string{"2026-01-09", "2026-01-10", "2026-01-11"} {
		if want := `succeeded by w1, backfill "", 0 rows`; recorded[key] != want {
			t.Errorf("ledger: %s %s; want %s", key, recorded[key], want)
		}
	}
}

// TestScheduleCatchUp: a program that ran the 1st of January last
// starts again on the 10th at noon, under a clock that runs a day in 10
// s (so that no day closes meanwhile): the flags choose which of the
// eight missed days run, and the older ones are reported missed,
// recorded canceled for a backfill to run.
func TestScheduleCatchUp(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		ran    string // the days that run, "02..09" for 2026-01-02 to 2026-01-09
		missed string
	}{
		{args: nil, ran: "05..09", missed: "02..04"},
		{args: []string{"--max-catch-up", "2"}, ran: "08..09", missed: "02..07"},
		{args: []string{"--max-catch-up", "0"}, missed: "02..09"},
		{args: []string{"--catch-up-window", "48h"}, ran: "08..09", missed: "02..07"},
		// 2026-01-09 is due at 13:00, an hour (420 ms) after the start:
		// it runs live.
		{args: []string{"--delay", "13h"}, ran: "04..09", missed: "02..03"},
	} {
		t.Run(strings.Join(append([]string{"schedule"}, tc.args...), " "), func(t *testing.T) {
			h := newHarness(t)
			dag := h.p.DAGs["events"]
			first := tranche.PartitionOf(tranche.Day, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			// A scheduler's run, not one by hand: a manual run counts
			// for its own slot, not for where a catch-up starts. It
			// ended at the 1st's close by the ledger's clock too, which
			// judges whether later slots came due while a scheduler ran
			// (the scheduler's clock here is in the ledger's past).
			var ledgerClock atomic.Pointer[time.Time]
			ledgerClock.Store(&first.End)
			h.l = memledger.New(func() time.Time {
				if t := ledgerClock.Load(); t != nil {
					return *t
				}
				return time.Now()
			})
			h.p.Ledger = h.l
			id := backfill.DAGIdentity(dag, tranche.Day, time.UTC)
			lease, err := h.l.Claim(context.Background(), ledger.ClaimRequest{DAG: id, Worker: "w0", RunID: "r", Partitions: []tranche.TimePartition{first},
				Lease: time.Minute, Policy: ledger.RerunNone, Trigger: ledger.TriggerLive})
			if err != nil {
				t.Fatal(err)
			}
			if err := h.l.Finish(context.Background(), lease, []ledger.Outcome{{State: ledger.StateSucceeded}}); err != nil {
				t.Fatal(err)
			}
			ledgerClock.Store(nil)
			ran, missed := days(tc.ran), days(tc.missed)
			base := time.Date(2026, 1, 10, 12, 0, 0, 0, time.UTC)
			code, out, errs := scheduling(t, h, base, 10*time.Second, func(out string) bool {
				return count(out, "succeeded") == len(ran) && count(out, "missed:") == len(missed)
			}, append([]string{"events"}, tc.args...)...)
			if code != 0 || errs != "" {
				t.Fatalf("exit %d, stderr:\n%s", code, errs)
			}
			want := map[string][]string{}
			for _, k := range ran {
				want[k] = []string{"started", "succeeded"}
			}
			for _, k := range missed {
				want[k] = []string{"missed"}
			}
			if diff := cmp.Diff(want, slotLines(out, "events")); diff != "" {
				t.Errorf("lines per day (-want +got):\n%s\n%s", diff, out)
			}
			if len(missed) > 0 && !strings.Contains(out, "  events  "+missed[0]+" missed: it came due before the catch-up window; 'tr run' backfills it\n") {
				t.Errorf("the missed line does not say what to do:\n%s", out)
			}
			for a, err := range h.l.Latest(context.Background(), id, first.End, base) {
				if err != nil {
					t.Fatal(err)
				}
				if wantState := map[bool]string{true: "canceled", false: "succeeded"}[slices.Contains(missed, a.Key)]; string(a.State) != wantState {
					t.Errorf("ledger: %s %s; want %s", a.Key, a.State, wantState)
				}
			}
		})
	}
}

// days returns the keys of January 2026's days "02..09" spans.
func days(span string) []string {
	if span == "" {
		return nil
	}
	var from, to int
	if _, err := fmt.Sscanf(span, "%d..%d", &from, &to); err != nil {
		panic(err)
	}
	var keys []string
	for d := from; d <= to; d++ {
		keys = append(keys, fmt.Sprintf("2026-01-%02d", d))
	}
	return keys
}

// TestScheduleReplicas: two processes of the program (here two Programs
// on one ledger, under one clock) schedule the same DAG: each day runs
// once, by one or the other, and the other says who ran it.
func TestScheduleReplicas(t *testing.T) {
	l := memledger.New(nil)
	now, after := fastClock(time.Date(2026, 1, 9, 18, 0, 0, 0, time.UTC), 300*time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	outs := make([]*syncBuffer, 2)
	codes := make(chan int, 2)
	for i := range outs {
		h := newHarness(t)
		h.p.Ledger, h.p.Worker = l, fmt.Sprintf("w%d", i+1)
		tranchecli.SetClock(h.p, now, after)
		outs[i] = &syncBuffer{}
		h.p.Stdout, h.p.Stderr = outs[i], outs[i]
		// A lease of 3 s: a replica that found a day held looks again a
		// second later, not the default ten.
		go func() { codes <- h.p.Main(ctx, []string{"schedule", "--lease", "3s", "events"}) }()
	}
	// Both days must be over in both replicas: one that found a day held
	// says it was done elsewhere only when it looks again, a heartbeat
	// later, which a loaded machine may put after the next day's end.
	over := func(out string) bool {
		for _, day := range []string{"2026-01-09", "2026-01-10"} {
			if !regexp.MustCompile(`  ` + day + ` (succeeded|done elsewhere)`).MatchString(out) {
				return false
			}
		}
		return true
	}
	deadline := time.Now().Add(30 * time.Second)
	for !over(outs[0].String()) || !over(outs[1].String()) {
		if time.Now().After(deadline) {
			t.Fatalf("2026-01-09 and 2026-01-10 not over in both after 30 s:\n%s\n%s", outs[0], outs[1])
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	for range outs {
		if code := <-codes; code != 0 {
			t.Errorf("exit %d", code)
		}
	}
	for _, key := range []string{"2026-01-09", "2026-01-10"} {
		var ran []int
		for i, out := range outs {
			switch words := slotLines(out.String(), "events")[key]; {
			case slices.Equal(words, []string{"started", "succeeded"}):
				ran = append(ran, i)
			case len(words) == 0 || words[len(words)-1] != "done":
				t.Errorf("w%d's lines of %s: %v; want it started and succeeded, or done elsewhere", i+1, key, words)
			}
		}
		if len(ran) != 1 {
			t.Errorf("%s ran in %d replicas; want 1:\n%s\n%s", key, len(ran), outs[0], outs[1])
		}
	}
}

// TestScheduleFlags: the flags reach the schedulers, which the first
// line of each DAG repeats; without a DAG named, every DAG of the program
// is scheduled.
func TestScheduleFlags(t *testing.T) {
	h := newHarness(t)
	base := time.Date(2026, 1, 9, 18, 0, 0, 0, time.UTC)
	code, out, errs := scheduling(t, h, base, time.Minute, func(out string) bool { return strings.Count(out, " scheduling ") == 2 },
		"--worker", "edge-1", "--overlap", "skip", "--lease", "2m", "--delay", "90m", "--max-catch-up", "0", "--catch-up-window", "36h")
	if code != 0 || errs != "" {
		t.Fatalf("exit %d, stderr:\n%s", code, errs)
	}
	for _, want := range []string{
		"  events   scheduling day slots in UTC as edge-1 (delay 1h30m0s, catch-up none within 36h0m0s, overlap skip, lease 2m0s): next 2026-01-09, due 2026-01-10T01:30:00Z\n",
		"  nightly  scheduling cron(CRON_TZ=UTC 0 2 * * *) slots in UTC as edge-1 (delay 1h30m0s, catch-up none within 36h0m0s, overlap skip, lease 2m0s): next 2026-01-10T02:00:00Z, due 2026-01-10T03:30:00Z\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestScheduleBadUsage: a bad command line is refused in two lines, exit
// 2, before the ledger is opened.
func TestScheduleBadUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--overlap", "sometimes"}, `invalid value "sometimes" for flag -overlap: tranche: unknown overlap policy "sometimes"; accepted: queue, buffer-one, skip, concurrent, cancel-other`},
		{[]string{"--max-catch-up", "-1"}, "--max-catch-up -1: want 0 (none) or more"},
		{[]string{"--delay", "-1h"}, "--delay -1h0m0s: want 0 or more"},
		{[]string{"--catch-up-window", "-1s"}, "--catch-up-window -1s: want 0 (no bound by time) or more"},
		{[]string{"--lease", "0s"}, "--lease 0s: want more than 0"},
		{[]string{"hourly"}, `unknown DAG "hourly"; this program has events, nightly`},
		{[]string{"events", "events"}, `DAG "events" named twice`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			opened := false
			p := &tranchecli.Program{Name: "tr", DAGs: newHarness(t).p.DAGs, Stdout: &syncBuffer{}, Stderr: &syncBuffer{},
				Open: func(context.Context, string) (ledger.Ledger, error) { opened = true; return memledger.New(nil), nil }}
			t.Setenv(tranchecli.LedgerEnv, "mem:")
			code := p.Main(context.Background(), append([]string{"schedule"}, tc.args...))
			errs := p.Stderr.(*syncBuffer).String()
			want := "tr schedule: " + tc.want + "\nusage: tr schedule [flags] [DAG...] (see 'tr help schedule')\n"
			if code != 2 || errs != want || opened {
				t.Errorf("exit %d, ledger opened %v, stderr:\n%s\nwant exit 2, not opened, and:\n%s", code, opened, errs, want)
			}
		})
	}
	p := &tranchecli.Program{Name: "tr", Ledger: memledger.New(nil), Stdout: &syncBuffer{}, Stderr: &syncBuffer{}}
	if code := p.Main(context.Background(), []string{"schedule"}); code != 2 || !strings.Contains(p.Stderr.(*syncBuffer).String(), "schedule needs the DAGs of a program built with the package tranchecli, and tr has none") {
		t.Errorf("schedule in a program without DAGs: exit %d, %s", code, p.Stderr)
	}
}

// TestScheduleRefused: a DAG the scheduler refuses (a schedule that
// fires in New York for slots in Berlin) fails the command, exit 1, and
// stops the other DAGs' schedulers rather than run a part of what was
// asked.
func TestScheduleRefused(t *testing.T) {
	h := newHarness(t)
	g, err := tranche.ParseCron("CRON_TZ=America/New_York 0 2 * * *")
	if err != nil {
		t.Fatal(err)
	}
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	mixed, err := tranche.NewDAG(tranche.Asset{
		Name:         "mixed",
		Partitioning: tranche.Partitioning{Granularity: g, Location: berlin},
		Materialize:  func(context.Context, *tranche.Materialization) ([]tranche.Row, error) { return nil, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	h.p.DAGs["mixed"] = mixed
	code, out, errs := scheduling(t, h, time.Date(2026, 1, 9, 18, 0, 0, 0, time.UTC), time.Minute, func(string) bool { return false }, "events", "mixed")
	if want := "tr schedule: DAG mixed: scheduler: schedule cron(CRON_TZ=America/New_York 0 2 * * *) fires in America/New_York, and the slots follow Europe/Berlin; give one zone\n"; code != 1 || errs != want {
		t.Errorf("exit %d, stderr:\n%s\nwant exit 1 and:\n%s", code, errs, want)
	}
	if strings.Contains(out, " started ") {
		t.Errorf("a slot ran:\n%s", out)
	}
}

// TestScheduleInterrupted: a slot running when the command is stopped is
// canceled and left to its lease, not recorded failed; the command still
// exits 0, its end being the ordinary way to stop it.
func TestScheduleInterrupted(t *testing.T) {
	h := newHarness(t)
	slow, err := tranche.NewDAG(tranche.Asset{
		Name:         "slow",
		Partitioning: tranche.Partitioning{Granularity: tranche.Day, Location: time.UTC},
		Materialize: func(ctx context.Context, _ *tranche.Materialization) ([]tranche.Row, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	h.p.DAGs["slow"] = slow
	base := time.Date(2026, 1, 9, 23, 0, 0, 0, time.UTC)
	code, out, errs := scheduling(t, h, base, time.Second, func(out string) bool { return strings.Contains(out, " started ") }, "slow")
	if code != 0 || errs != "" {
		t.Fatalf("exit %d, stderr:\n%s", code, errs)
	}
	if !strings.Contains(out, "  slow  2026-01-09 interrupted: canceled: context canceled\n") ||
		!strings.Contains(out, "stopped (context canceled): 0 succeeded, 0 failed, 1 interrupted") {
		t.Errorf("output:\n%s", out)
	}
	var got []string
	for a, err := range h.l.Latest(context.Background(), backfill.DAGIdentity(slow, tranche.Day, time.UTC), base.Add(-24*time.Hour), base.Add(24*time.Hour)) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%s %s by %s", a.Key, a.State, a.Worker))
	}
	if want := []string{"2026-01-09 running by w1"}; !slices.Equal(got, want) {
		t.Errorf("ledger: %v; want %v, left to its lease", got, want)
	}
}
