package schedule_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestProcessMixedGranularities runs two schedulers in one worker
// process, each with its own connections, of hourly events and their
// daily rollup in New York, on a SQLite file and on PostgreSQL, from
// 2024-03-09 20:05 to 2024-03-10 05:00 (rate 3600), the hour 23:00
// taking two hours. The rollup of the 9th, due at midnight, runs once,
// after that hour ended and before 05:00, never at midnight; every
// hour runs once.
func TestProcessMixedGranularities(t *testing.T) {
	bin := buildWorker(t)
	base, err := time.Parse(time.RFC3339, "2024-03-09T20:05:00-05:00")
	if err != nil {
		t.Fatal(err)
	}
	c := procClock{base: base, until: base.Add(8*time.Hour + 55*time.Minute), rate: 3600}
	t.Run("sqlite", func(t *testing.T) {
		c.epoch = time.Now()
		mixedProcess(t, bin, c, []string{"-db", filepath.Join(t.TempDir(), "ledger.db")})
	})
	t.Run("postgres", func(t *testing.T) {
		c.epoch = time.Now()
		mixedProcess(t, bin, c, pgLedger(t, bin, c))
	})
}

func mixedProcess(t *testing.T, bin string, c procClock, ledgerArgs []string) {
	audit := filepath.Join(t.TempDir(), "audit")
	const slow = "2024-03-09T23:00-05:00"
	args := append([]string{"-mixed", "-replicas", "2", "-worker", "m", "-audit", audit, "-slow", slow, "-slowtake", "2s"}, ledgerArgs...)
	if out, err := exec.Command(bin, append(args, c.args()...)...).CombinedOutput(); err != nil {
		t.Fatalf("worker: %v\n%s", err, out)
	}
	data, err := os.ReadFile(audit)
	if err != nil {
		t.Fatal(err)
	}
	log := string(data)
	slowEnd, rollups := -1, 0
	for i, line := range strings.Split(log, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 4 && f[0] == "end" && f[1] == slow:
			slowEnd = i
		case len(f) == 4 && f[0] == "rollup":
			rollups++
			if f[1] != "2024-03-09" || slowEnd < 0 {
				t.Errorf("audit line %d: %q; want the rollup of 2024-03-09 after %s ended", i, line, slow)
			}
		}
	}
	if rollups != 1 {
		t.Errorf("%d rollups; want 1:\n%s", rollups, log)
	}
	report := func(asset string) map[string]slotHistory {
		return reportOf(t, bin, append([]string{"-mixed", "-asset", asset}, ledgerArgs...), c)
	}
	days := report("rollup")
	checkOnce(t, days, []string{"2024-03-09"})
	if len(days) != 1 {
		t.Errorf("rollup's days: %v; want 2024-03-09 alone", days)
	}
	checkOnce(t, report("events"), []string{"2024-03-09T20:00-05:00", "2024-03-09T21:00-05:00", "2024-03-09T22:00-05:00", slow,
		"2024-03-10T00:00-05:00", "2024-03-10T01:00-05:00", "2024-03-10T03:00-04:00"})
}
