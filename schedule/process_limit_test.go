package schedule_test

import (
	"bytes"
	"cmp"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
)

// TestProcessLimitLiveFirst is the goal of issue 29: two scheduler
// processes and two backfill worker processes (Concurrency 2 each) of one
// DAG share a ledger whose limit for the DAG is 2. Each backfill
// partition takes 1 s, a live slot 20 ms, and an hour of the schedule
// 1.5 s. Every live slot starts within one backfill partition's duration
// of its close (plus the scheduler's claim poll, 100 ms, and a margin
// for a loaded machine), measured by the system's clock the processes
// share; never more than 2 runs overlap; every slot succeeds once, and
// the backfill goes on beside them. Without the limit 5 runs overlap;
// with the limit but no demand (live slots not first) a slot waits for
// the backfill workers, which poll as often.
func TestProcessLimitLiveFirst(t *testing.T) {
	for _, ledgerKind := range []string{"postgres", "sqlite"} {
		t.Run(ledgerKind, func(t *testing.T) {
			bin := buildWorker(t)
			dir := t.TempDir()
			base, err := time.Parse(time.RFC3339, "2024-01-10T00:30:00-05:00")
			if err != nil {
				t.Fatal(err)
			}
			const rate, hours = 2400, 10 // an hour in 1.5 s
			c := procClock{base: base, until: base.Add(hours * time.Hour), epoch: time.Now(), rate: rate}
			var ledgerArgs []string
			if ledgerKind == "postgres" {
				ledgerArgs = pgLedger(t, bin, c)
			} else {
				ledgerArgs = []string{"-db", filepath.Join(dir, "ledger.db")}
			}
			if out, err := exec.Command(bin, append(append([]string{"-setlimit", "2"}, ledgerArgs...), c.args()...)...).CombinedOutput(); err != nil {
				t.Fatalf("setting the limit: %v\n%s", err, out)
			}
			const bfTake = time.Second
			timing := filepath.Join(dir, "timing")
			c.epoch = time.Now().Add(500 * time.Millisecond) // the processes start meanwhile
			window := base.Add(-72*time.Hour-30*time.Minute).Format(time.RFC3339) + "/" + base.Add(-24*time.Hour-30*time.Minute).Format(time.RFC3339)
			var cmds []*exec.Cmd
			var outs []*bytes.Buffer
			for i := range 4 {
				args := []string{"-worker", fmt.Sprintf("s%d", i), "-timing", timing, "-lease", "1s", "-heartbeat", "300ms"}
				if i >= 2 {
					args = []string{"-worker", fmt.Sprintf("b%d", i-2), "-timing", timing, "-lease", "2s", "-backfill", window,
						"-concurrency", "2", "-bftake", bfTake.String()}
				}
				var out bytes.Buffer
				cmd := exec.Command(bin, append(append(args, ledgerArgs...), c.args()...)...)
				cmd.Stdout, cmd.Stderr = &out, &out
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				cmds, outs = append(cmds, cmd), append(outs, &out)
			}
			t.Cleanup(func() {
				for _, cmd := range cmds {
					cmd.Process.Kill()
				}
			})
			for i, cmd := range cmds {
				if err := cmd.Wait(); err != nil {
					t.Errorf("process %d: %v\n%s", i, err, outs[i])
				}
			}
			defer func() {
				if t.Failed() {
					for i, out := range outs {
						t.Logf("process %d's output:\n%s", i, out)
					}
				}
			}()

			runs := readTiming(t, timing)
			var slots []tranche.TimePartition
			for p := tranche.PartitionOf(tranche.Hour, base); !p.End.After(c.until.Add(-90 * time.Minute)); p = p.Next() {
				slots = append(slots, p)
			}
			var keys []string
			var lags []time.Duration
			bound := bfTake + 100*time.Millisecond + 500*time.Millisecond
			for _, p := range slots {
				keys = append(keys, p.Key())
				r, ok := runs[p.Key()]
				if !ok {
					t.Errorf("slot %s never started", p.Key())
					continue
				}
				closed := c.epoch.Add(p.End.Sub(base) / rate)
				lag := r[0].start.Sub(closed)
				lags = append(lags, lag)
				if lag > bound {
					t.Errorf("slot %s started %v after its close; want at most a backfill partition's %v, the claim poll and a margin: %v", p.Key(), lag, bfTake, bound)
				}
			}
			checkOnce(t, reportOf(t, bin, ledgerArgs, c), keys)
			var all []timedRun
			backfilled := 0
			for key, rs := range runs {
				all = append(all, rs...)
				if !slices.Contains(keys, key) && rs[0].who[0] == 'b' {
					backfilled++
				}
			}
			if most := overlap(all); most > 2 {
				t.Errorf("%d runs overlapped; want at most the limit, 2", most)
			}
			if backfilled < 4 {
				t.Errorf("the backfill ran %d partitions beside the schedule; want it to go on", backfilled)
			}
			if len(lags) == 0 {
				return
			}
			slices.Sort(lags)
			t.Logf("lags: %v", lags)
			t.Logf("%s: %d live slots, lag from close to start median %v, max %v (bound %v); %d backfill partitions started beside them",
				ledgerKind, len(lags), lags[len(lags)/2], lags[len(lags)-1], bound, backfilled)
		})
	}
}

// timedRun is a run as the -timing log shows it.
type timedRun struct {
	who        string
	start, end time.Time // end zero: the log has none
}

// readTiming reads a -timing log: the runs of each key, in the order
// they started.
func readTiming(t *testing.T, path string) map[string][]timedRun {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	runs := map[string][]timedRun{}
	for line := range strings.SplitSeq(strings.TrimSpace(string(data)), "\n") {
		f := strings.Fields(line)
		if len(f) != 4 {
			t.Fatalf("timing line %q", line)
		}
		ns, err := strconv.ParseInt(f[3], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		at := time.Unix(0, ns)
		switch rs := runs[f[1]]; f[0] {
		case "start":
			runs[f[1]] = append(rs, timedRun{who: f[2], start: at})
		case "end":
			for i := len(rs) - 1; i >= 0; i-- {
				if rs[i].who == f[2] && rs[i].end.IsZero() {
					rs[i].end = at
					break
				}
			}
		}
	}
	for _, rs := range runs {
		slices.SortFunc(rs, func(a, b timedRun) int { return a.start.Compare(b.start) })
	}
	return runs
}

// overlap returns the most runs that ran at one instant; a run without
// an end runs to the last instant the log shows.
func overlap(runs []timedRun) int {
	type edge struct {
		at    time.Time
		delta int
	}
	var last time.Time
	for _, r := range runs {
		for _, t := range []time.Time{r.start, r.end} {
			if t.After(last) {
				last = t
			}
		}
	}
	var edges []edge
	for _, r := range runs {
		end := r.end
		if end.IsZero() {
			end = last
		}
		edges = append(edges, edge{r.start, 1}, edge{end, -1})
	}
	slices.SortFunc(edges, func(a, b edge) int { return cmp.Or(a.at.Compare(b.at), a.delta-b.delta) })
	n, most := 0, 0
	for _, e := range edges {
		n += e.delta
		most = max(most, n)
	}
	return most
}

// TestProcessLimitMixed is TestProcessLimitLiveFirst for a DAG of two
// granularities (hourly events, a daily rollup of them, each asset
// recorded under an identity of its own) limited as a whole: the limit of
// 2 is set on both identities in one group (as tranche limit platform 2
// does), two scheduler processes run both assets live, an hour's run
// taking 1 s of its 1.5 s, and two backfill worker processes backfill
// two days of both before them, an hour in 0.25 s, a day in 2 s. Never
// more than 2 runs of the DAG overlap, of either asset, live or
// backfilled (a limit of each identity alone lets the two days run beside
// a live hour: 3); every live hour starts within a day's run of its
// close, and the rollup days run.
func TestProcessLimitMixed(t *testing.T) {
	for _, ledgerKind := range []string{"postgres", "sqlite"} {
		t.Run(ledgerKind, func(t *testing.T) {
			bin := buildWorker(t)
			dir := t.TempDir()
			base, err := time.Parse(time.RFC3339, "2024-01-10T00:30:00-05:00")
			if err != nil {
				t.Fatal(err)
			}
			const rate, hours = 2400, 12 // an hour in 1.5 s
			c := procClock{base: base, until: base.Add(hours * time.Hour), epoch: time.Now(), rate: rate}
			first := time.Date(2024, 1, 8, 0, 0, 0, 0, base.Location())
			mixed := []string{"-mixed", "-first", first.Format(time.RFC3339)}
			var ledgerArgs []string
			if ledgerKind == "postgres" {
				ledgerArgs = pgLedger(t, bin, c)
			} else {
				ledgerArgs = []string{"-db", filepath.Join(dir, "ledger.db")}
			}
			ledgerArgs = append(ledgerArgs, mixed...)
			if out, err := exec.Command(bin, append(append([]string{"-setlimit", "2"}, ledgerArgs...), c.args()...)...).CombinedOutput(); err != nil {
				t.Fatalf("setting the limit: %v\n%s", err, out)
			}
			const bfTake, rollTake = 250 * time.Millisecond, 2 * time.Second
			timing := filepath.Join(dir, "timing")
			c.epoch = time.Now().Add(500 * time.Millisecond) // the processes start meanwhile
			// The 8th and the 9th: 48 hours, then their days.
			window := first.Format(time.RFC3339) + "/" + first.AddDate(0, 0, 2).Format(time.RFC3339)
			var cmds []*exec.Cmd
			var outs []*bytes.Buffer
			for i := range 4 {
				args := []string{"-worker", fmt.Sprintf("s%d", i), "-timing", timing, "-lease", "3s", "-heartbeat", "300ms", "-take", "1s"}
				if i >= 2 {
					args = []string{"-worker", fmt.Sprintf("b%d", i-2), "-timing", timing, "-lease", "3s", "-backfill", window,
						"-concurrency", "2", "-bftake", bfTake.String(), "-rolltake", rollTake.String()}
				}
				var out bytes.Buffer
				cmd := exec.Command(bin, append(append(args, ledgerArgs...), c.args()...)...)
				cmd.Stdout, cmd.Stderr = &out, &out
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				cmds, outs = append(cmds, cmd), append(outs, &out)
			}
			t.Cleanup(func() {
				for _, cmd := range cmds {
					cmd.Process.Kill()
				}
			})
			for i, cmd := range cmds {
				if err := cmd.Wait(); err != nil {
					t.Errorf("process %d: %v\n%s", i, err, outs[i])
				}
			}
			defer func() {
				if t.Failed() {
					for i, out := range outs {
						t.Logf("process %d's output:\n%s", i, out)
					}
				}
			}()

			runs := readTiming(t, timing)
			bound := rollTake + 100*time.Millisecond + 500*time.Millisecond
			var lags []time.Duration
			for p := tranche.PartitionOf(tranche.Hour, base); !p.End.After(c.until.Add(-90 * time.Minute)); p = p.Next() {
				r, ok := runs[p.Key()]
				if !ok {
					t.Errorf("slot %s never started", p.Key())
					continue
				}
				lag := r[0].start.Sub(c.epoch.Add(p.End.Sub(base) / rate))
				lags = append(lags, lag)
				if lag > bound {
					t.Errorf("slot %s started %v after its close; want at most %v", p.Key(), lag, bound)
				}
			}
			var all []timedRun
			days, backfilled := 0, 0
			for key, rs := range runs {
				all = append(all, rs...)
				if strings.HasPrefix(key, "rollup-") {
					days++
				} else if rs[0].who[0] == 'b' {
					backfilled++
				}
			}
			most := overlap(all)
			if most > 2 {
				t.Errorf("%d runs of the DAG's two assets overlapped; want at most its limit, 2", most)
			}
			if days < 2 || backfilled < 4 {
				t.Errorf("%d rollup days ran, %d backfilled hours; want the backfill's 2 days, and its hours beside the schedule", days, backfilled)
			}
			slices.Sort(lags)
			if len(lags) > 0 {
				t.Logf("%s: %d live hours, lag median %v, max %v (bound %v); %d backfilled hours, %d rollup days; at most %d runs at once",
					ledgerKind, len(lags), lags[len(lags)/2], lags[len(lags)-1], bound, backfilled, days, most)
			}
		})
	}
}
