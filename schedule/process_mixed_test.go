package schedule_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestProcessMixedGranularities runs two schedulers in one worker
// process, each with its own connections, of hourly events and their
// daily rollup in New York, on a SQLite file and on PostgreSQL, from
// 2024-03-09 22:05 to 2024-03-10 04:30 EDT (rate 3600), the hour 23:00
// taking two hours (to 03:00 EDT). Every hour runs once. The rollup of
// the 9th, due at midnight: waits, and runs once, after that hour
// ended; with WaitUpstream 1h, is recorded missed; with RunLate too,
// runs at 01:00 without the hour, and, with RerunStale, again once it
// landed, once, whichever scheduler finds it stale.
func TestProcessMixedGranularities(t *testing.T) {
	bin := buildWorker(t)
	base, err := time.Parse(time.RFC3339, "2024-03-09T22:05:00-05:00")
	if err != nil {
		t.Fatal(err)
	}
	c := procClock{base: base, until: base.Add(5*time.Hour + 25*time.Minute), rate: 3600}
	cases := []struct {
		name  string
		flags []string
		// rollups: the rollup's runs, "after" the slow hour ended or
		// "before"; state: the day's attempts.
		rollups []string
		states  []string
	}{
		{"waits", nil, []string{"after"}, []string{"succeeded"}},
		{"missed", []string{"-waitupstream", "1h"}, nil, []string{"canceled"}},
		{"late, then stale", []string{"-waitupstream", "1h", "-runlate", "-rerunstale"}, []string{"before", "after"}, []string{"succeeded", "succeeded"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Run("sqlite", func(t *testing.T) {
				c.epoch = time.Now()
				mixedProcess(t, bin, c, tc.flags, []string{"-db", filepath.Join(t.TempDir(), "ledger.db")}, tc.rollups, tc.states)
			})
			t.Run("postgres", func(t *testing.T) {
				c.epoch = time.Now()
				mixedProcess(t, bin, c, tc.flags, pgLedger(t, bin, c), tc.rollups, tc.states)
			})
		})
	}
}

func mixedProcess(t *testing.T, bin string, c procClock, flags, ledgerArgs, wantRollups, wantStates []string) {
	audit := filepath.Join(t.TempDir(), "audit")
	const slow = "2024-03-09T23:00-05:00"
	args := append(append([]string{"-mixed", "-replicas", "2", "-worker", "m", "-audit", audit, "-slow", slow, "-slowtake", "2s"}, flags...), ledgerArgs...)
	if out, err := exec.Command(bin, append(args, c.args()...)...).CombinedOutput(); err != nil {
		t.Fatalf("worker: %v\n%s", err, out)
	}
	data, err := os.ReadFile(audit)
	if err != nil {
		t.Fatal(err)
	}
	log := string(data)
	ended := false
	var rollups []string
	for i, line := range strings.Split(log, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 4 && f[0] == "end" && f[1] == slow:
			ended = true
		case len(f) == 4 && f[0] == "rollup":
			if f[1] != "2024-03-09" {
				t.Errorf("audit line %d: %q; want the rollup of 2024-03-09", i, line)
			}
			rollups = append(rollups, map[bool]string{false: "before", true: "after"}[ended])
		}
	}
	if !slices.Equal(rollups, wantRollups) {
		t.Errorf("rollups: %q (before or after %s ended); want %q:\n%s", rollups, slow, wantRollups, log)
	}
	days := reportOf(t, bin, append([]string{"-mixed", "-asset", "rollup"}, ledgerArgs...), c)
	var states []string
	for _, a := range days["2024-03-09"].Attempts {
		states = append(states, a.State)
	}
	if !slices.Equal(states, wantStates) || len(days) != 1 {
		t.Errorf("rollup's days: %+v; want 2024-03-09 alone, its attempts %q", days, wantStates)
	}
	checkOnce(t, reportOf(t, bin, append([]string{"-mixed", "-asset", "events"}, ledgerArgs...), c),
		[]string{"2024-03-09T22:00-05:00", slow,
			"2024-03-10T00:00-05:00", "2024-03-10T01:00-05:00", "2024-03-10T03:00-04:00"})
}
