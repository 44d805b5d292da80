package schedule_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tranche-dev/tranche/internal/proctest"
	"github.com/tranche-dev/tranche/internal/testskip"
	"github.com/tranche-dev/tranche/ledger"
)

// pgLedger returns the worker's flags for a fresh schema of the test
// server at TRANCHE_POSTGRES_URL, dropped when the test ends (by the
// worker's -report -drop), and skips the test without a server.
func pgLedger(t *testing.T, bin string, c procClock) []string {
	t.Helper()
	url := os.Getenv("TRANCHE_POSTGRES_URL")
	if url == "" {
		testskip.Skip(t, testskip.PostgreSQL, "TRANCHE_POSTGRES_URL is not set (ledger/postgres/testserver.sh start)")
	}
	args := []string{"-pg", url, "-schema", fmt.Sprintf("sched_%d_%d", os.Getpid(), time.Now().UnixNano()%1_000_000_000)}
	t.Cleanup(func() {
		if out, err := exec.Command(bin, append(append([]string{"-report", "-drop"}, args...), c.args()...)...).CombinedOutput(); err != nil {
			t.Logf("dropping the schema: %v\n%s", err, out)
		}
	})
	return args
}

// reportOf runs the worker's report on the ledger of args and returns
// the histories by key.
func reportOf(t *testing.T, bin string, args []string, c procClock) map[string]slotHistory {
	t.Helper()
	cmd := exec.Command(bin, append(append([]string{"-report"}, args...), c.args()...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("report: %v\n%s", err, stderr.Bytes())
	}
	slots := map[string]slotHistory{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var h slotHistory
		if err := json.Unmarshal(sc.Bytes(), &h); err != nil {
			t.Fatal(err)
		}
		slots[h.Key] = h
	}
	return slots
}

// TestProcessReplicasPostgres runs three scheduler processes on one
// PostgreSQL ledger, the spring-forward of TestProcessReplicaKilled, and
// breaks the one that runs the slot of 04:00 while it runs it: killed
// (SIGKILL), or paused (SIGSTOP) for three times its lease of 1 s and
// resumed (SIGCONT), a zombie. Another takes the slot over once the
// lease expires by the server's clock; every slot succeeds exactly once
// in the ledger, none is missed, and the auditing destination took one
// write of each, by its success, with its token: the zombie, resumed,
// finds its lease lapsed by its own clock and writes nothing.
func TestProcessReplicasPostgres(t *testing.T) {
	proctest.SkipRace(t)
	for _, fault := range []string{"killed", "paused"} {
		t.Run(fault, func(t *testing.T) { replicaFault(t, fault) })
	}
}

func replicaFault(t *testing.T, fault string) {
	bin := buildWorker(t)
	c := springClock(t, 3600, 10) // 10 hours in 10 seconds
	ledgerArgs := pgLedger(t, bin, c)
	audit := filepath.Join(t.TempDir(), "audit")
	const slow = "2024-03-10T04:00-04:00"
	procs := map[int]*exec.Cmd{}
	outputs := map[int]*bytes.Buffer{}
	for i := range 3 {
		var out bytes.Buffer
		cmd := exec.Command(bin, append(append([]string{"-worker", fmt.Sprintf("p%d", i), "-audit", audit, "-slow", slow, "-slowtake", "3s"},
			ledgerArgs...), c.args()...)...)
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		procs[cmd.Process.Pid], outputs[cmd.Process.Pid] = cmd, &out
	}
	t.Cleanup(func() {
		for _, cmd := range procs {
			cmd.Process.Signal(syscall.SIGCONT)
			cmd.Process.Kill()
		}
	})
	victim, victimWorker := 0, ""
	for deadline := time.Now().Add(30 * time.Second); victim == 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
		data, _ := os.ReadFile(audit)
		for line := range strings.SplitSeq(string(data), "\n") {
			if f := strings.Fields(line); len(f) == 4 && f[0] == "start" && f[1] == slow {
				victim, _ = strconv.Atoi(f[3])
				victimWorker = f[2]
				break
			}
		}
	}
	if victim == 0 {
		t.Fatal("no process started the slow slot")
	}
	switch fault {
	case "killed":
		if err := procs[victim].Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
	case "paused":
		if err := procs[victim].Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * time.Second)
		if err := procs[victim].Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
	}
	for pid, cmd := range procs {
		if err := cmd.Wait(); (pid != victim || fault == "paused") && err != nil {
			t.Errorf("worker %d: %v\n%s", pid, err, outputs[pid])
		}
	}
	slots := reportOf(t, bin, ledgerArgs, c)
	checkOnce(t, slots, springKeys)
	h := slots[slow]
	if len(h.Attempts) < 2 || h.Attempts[0].Worker != victimWorker || h.Attempts[len(h.Attempts)-1].Worker == victimWorker {
		t.Errorf("slot %s: attempts %+v; want the %s %s's, taken over, then another's success", slow, h.Attempts, fault, victimWorker)
	}
	// The audit: one write of each slot, by its success, at its token.
	data, err := os.ReadFile(audit)
	if err != nil {
		t.Fatal(err)
	}
	writes := map[string][]string{}
	for line := range strings.SplitSeq(string(data), "\n") {
		if f := strings.Fields(line); len(f) == 5 && f[0] == "write" {
			// The token's attempt number (its low bits).
			token, err := strconv.ParseInt(f[3], 10, 64)
			if err != nil {
				t.Fatalf("write line %q: %v", line, err)
			}
			writes[f[1]] = append(writes[f[1]], fmt.Sprintf("%s %d", f[2], ledger.TokenAttempt(token)))
		}
	}
	for _, key := range springKeys {
		h := slots[key]
		if len(h.Attempts) == 0 {
			continue // checkOnce said so
		}
		want := fmt.Sprintf("%s %d", h.Attempts[len(h.Attempts)-1].Worker, len(h.Attempts))
		if w := writes[key]; len(w) != 1 || w[0] != want {
			t.Errorf("slot %s: writes %v; want one, by its success (%s)", key, w, want)
		}
	}
	if strings.Contains(string(data), "end "+slow+" "+victimWorker+" ") && fault == "killed" {
		t.Errorf("the killed worker ended the slot:\n%s", data)
	}
	t.Logf("%s: slot %s ran by %d attempts (%s's first); %d slots, each written once", fault, slow, len(h.Attempts), victimWorker, len(slots))
}

// TestMain says, once the tests ran, which skipped for want of a
// PostgreSQL server and how to run them.
func TestMain(m *testing.M) { os.Exit(testskip.Main(m)) }
