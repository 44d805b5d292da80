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

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/internal/proctest"
)

// The process tests run testdata/worker, schedulers of an hourly New
// York DAG on one SQLite ledger, as real processes under a clock that
// runs thousands of times the system's pace, across the spring-forward
// of 2024-03-10. The worker is built in a module of its own that joins
// the workspace: the root module does not require the SQLite driver.

// buildWorker builds the worker program and returns its path.
func buildWorker(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("starts processes: not with -short")
	}
	// The worker is built without -race: the race detector would watch
	// only this process, which starts, kills and reads.
	proctest.SkipRace(t)
	goCmd, work := workspace(t)
	dir := t.TempDir()
	src, err := os.ReadFile(filepath.Join("testdata", "worker", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "worker"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "worker", "main.go"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	joinWorkspace(t, goCmd, work, dir, "example.com/scheduleworker")
	bin := filepath.Join(dir, "scheduleworker")
	cmd := exec.Command(goCmd, "build", "-trimpath", "-o", bin, "./worker")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK="+filepath.Join(dir, "go.work"), "GOTOOLCHAIN=local")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the worker: %v\n%s", err, out)
	}
	return bin
}

// procClock is the clock the processes share.
type procClock struct {
	base, until time.Time
	epoch       time.Time
	rate        int64
}

func (c procClock) args() []string {
	return []string{"-base", c.base.Format(time.RFC3339), "-until", c.until.Format(time.RFC3339),
		"-epoch", strconv.FormatInt(c.epoch.UnixNano(), 10), "-rate", strconv.FormatInt(c.rate, 10)}
}

type slotHistory struct {
	Key      string `json:"key"`
	Attempts []struct {
		Worker string `json:"worker"`
		State  string `json:"state"`
		Err    string `json:"err"`
	} `json:"attempts"`
}

// readReport runs the worker's report and returns the histories by key.
func readReport(t *testing.T, bin, db string, c procClock) map[string]slotHistory {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"-report", "-db", db}, c.args()...)...)
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

// checkOnce checks that each of keys succeeded exactly once, by its last
// attempt, and that every earlier attempt was failed by a takeover: a
// worker that lost its lease (killed, or starved of the CPU on a loaded
// machine) records nothing.
func checkOnce(t *testing.T, slots map[string]slotHistory, keys []string) {
	t.Helper()
	for _, key := range keys {
		h, ok := slots[key]
		if !ok {
			t.Errorf("slot %s has no attempt", key)
			continue
		}
		n := len(h.Attempts)
		if h.Attempts[n-1].State != "succeeded" {
			t.Errorf("slot %s: last attempt %+v, want succeeded", key, h.Attempts[n-1])
		}
		for _, a := range h.Attempts[:n-1] {
			if a.State != "failed" || !strings.Contains(a.Err, "taken over") {
				t.Errorf("slot %s: attempt %+v before the last, want one failed by a takeover", key, a)
			}
		}
	}
}

// springKeys are the first slots from 2024-03-10 00:00 in New York,
// where 02:00 does not exist.
var springKeys = []string{"2024-03-10T00:00-05:00", "2024-03-10T01:00-05:00", "2024-03-10T03:00-04:00", "2024-03-10T04:00-04:00",
	"2024-03-10T05:00-04:00", "2024-03-10T06:00-04:00", "2024-03-10T07:00-04:00", "2024-03-10T08:00-04:00"}

func springClock(t *testing.T, rate int64, hours int) procClock {
	base, err := time.Parse(time.RFC3339, "2024-03-10T00:05:00-05:00")
	if err != nil {
		t.Fatal(err)
	}
	return procClock{base: base, until: base.Add(time.Duration(hours) * time.Hour), epoch: time.Now(), rate: rate}
}

// TestProcessReplicas runs three schedulers in one process, each with
// its own connections to one SQLite file: every slot runs once.
func TestProcessReplicas(t *testing.T) {
	bin := buildWorker(t)
	db := filepath.Join(t.TempDir(), "ledger.db")
	c := springClock(t, 7200, 8) // 8 hours in 4 seconds
	cmd := exec.Command(bin, append([]string{"-db", db, "-replicas", "3", "-worker", "r"}, c.args()...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("worker: %v\n%s", err, out)
	}
	slots := readReport(t, bin, db, c)
	checkOnce(t, slots, springKeys[:6]) // the slots that closed two hours or more before the end
	if _, ok := slots["2024-03-10T02:00-05:00"]; ok {
		t.Error("a slot at 02:00, which does not exist that day")
	}
	workers := map[string]bool{}
	for _, h := range slots {
		workers[h.Attempts[len(h.Attempts)-1].Worker] = true
	}
	t.Logf("slots ran by %d of the 3 replicas", len(workers))
}

// TestProcessReplicaKilled runs three scheduler processes on one SQLite
// file and SIGKILLs the one that runs the slot of 04:00 while it runs
// it: another takes the slot over once its lease (1 s) expires, and every
// slot succeeds once.
func TestProcessReplicaKilled(t *testing.T) {
	bin := buildWorker(t)
	dir := t.TempDir()
	db, audit := filepath.Join(dir, "ledger.db"), filepath.Join(dir, "audit")
	const slow = "2024-03-10T04:00-04:00"
	c := springClock(t, 3600, 10) // 10 hours in 10 seconds
	procs := map[int]*exec.Cmd{}
	outputs := map[int]*bytes.Buffer{}
	for i := range 3 {
		var out bytes.Buffer
		cmd := exec.Command(bin, append([]string{"-db", db, "-worker", fmt.Sprintf("p%d", i), "-audit", audit,
			"-slow", slow, "-slowtake", "3s"}, c.args()...)...)
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		procs[cmd.Process.Pid], outputs[cmd.Process.Pid] = cmd, &out
	}
	// Kill the process that starts the slow slot, while it runs it.
	victim, victimWorker := 0, ""
	deadline := time.Now().Add(30 * time.Second)
	for victim == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
		data, _ := os.ReadFile(audit)
		for _, line := range strings.Split(string(data), "\n") {
			f := strings.Fields(line)
			if len(f) == 4 && f[0] == "start" && f[1] == slow {
				victim, _ = strconv.Atoi(f[3])
				victimWorker = f[2]
				break
			}
		}
	}
	if victim == 0 {
		t.Fatal("no process started the slow slot")
	}
	if err := procs[victim].Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for pid, cmd := range procs {
		err := cmd.Wait()
		if pid != victim && err != nil {
			t.Errorf("worker %d: %v\n%s", pid, err, outputs[pid])
		}
	}
	slots := readReport(t, bin, db, c)
	checkOnce(t, slots, springKeys)
	h := slots[slow]
	if len(h.Attempts) < 2 || h.Attempts[0].Worker != victimWorker || h.Attempts[len(h.Attempts)-1].Worker == victimWorker {
		t.Errorf("slot %s: attempts %+v; want the killed %s's, taken over, then another's success", slow, h.Attempts, victimWorker)
	}
	// The audit: the killed worker started the slot, and never ended it.
	data, err := os.ReadFile(audit)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), "end "+slow+" "+victimWorker+" ") {
		t.Errorf("the killed worker ended the slot:\n%s", data)
	}
}

// TestProcessReplicaJoinsQueue runs three scheduler processes on one
// SQLite file, and on one PostgreSQL ledger; the one that takes the slot
// of 00:00 runs it for 12 s (12 hours of the clock), so that the later
// slots queue behind it (OverlapQueue). A fourth process joins with 8
// slots queued: it records none of them missed, and every slot, queued
// ones included, succeeds exactly once.
func TestProcessReplicaJoinsQueue(t *testing.T) {
	bin := buildWorker(t)
	c := springClock(t, 3600, 16) // 16 hours in 16 seconds, from the first subtest's start
	t.Run("sqlite", func(t *testing.T) {
		c.epoch = time.Now()
		joinQueue(t, bin, c, []string{"-db", filepath.Join(t.TempDir(), "ledger.db")})
	})
	t.Run("postgres", func(t *testing.T) {
		c.epoch = time.Now()
		joinQueue(t, bin, c, pgLedger(t, bin, c))
	})
}

func joinQueue(t *testing.T, bin string, c procClock, ledgerArgs []string) {
	audit := filepath.Join(t.TempDir(), "audit")
	const slow = "2024-03-10T00:00-05:00"
	var procs []*exec.Cmd
	var outputs []*bytes.Buffer
	launch := func(worker string) {
		var out bytes.Buffer
		cmd := exec.Command(bin, append(append([]string{"-worker", worker, "-audit", audit,
			"-slow", slow, "-slowtake", "12s"}, ledgerArgs...), c.args()...)...)
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		procs, outputs = append(procs, cmd), append(outputs, &out)
	}
	for i := range 3 {
		launch(fmt.Sprintf("p%d", i))
	}
	// The slow slot closes at 01:00 (0.92 s in) and runs to 12.92 s; the
	// next closes at 1.92 s, and one more every second: 8 are queued
	// from 8.92 s. The joiner has the 3.8 s left to begin (a loaded
	// machine took more than 1.8 s to start it and read the ledger).
	time.Sleep(time.Until(c.epoch.Add(9*time.Second + 100*time.Millisecond)))
	joined := time.Now()
	launch("joiner")
	for i, cmd := range procs {
		if err := cmd.Wait(); err != nil {
			t.Errorf("worker %d: %v\n%s", i, err, outputs[i])
		}
	}
	data, err := os.ReadFile(audit)
	if err != nil {
		t.Fatal(err)
	}
	log := string(data)
	// The audit's lines are in the order they were appended: the joiner
	// began before the slow slot ended.
	began, ended := -1, -1
	for i, line := range strings.Split(log, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 4 && f[0] == "started" && f[2] == "joiner":
			began = i
		case len(f) == 4 && f[0] == "end" && f[1] == slow:
			ended = i
		}
	}
	if began < 0 || ended < 0 || began > ended {
		t.Fatalf("the joiner did not begin while %s ran (joined %v after the epoch):\n%s", slow, joined.Sub(c.epoch), log)
	}
	if strings.Contains(log, "missed ") {
		t.Errorf("slots recorded missed:\n%s", log)
	}
	// Every slot that closed an hour or more before the end.
	loc, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for p := tranche.PartitionOf(tranche.Hour, c.base.In(loc)); !p.End.After(c.until.Add(-time.Hour)); p = p.Next() {
		keys = append(keys, p.Key())
	}
	queued := 0
	joinClock := c.base.Add(joined.Sub(c.epoch) * time.Duration(c.rate))
	for _, k := range keys[1:] {
		p, err := tranche.ParsePartitionKey(tranche.Hour, k, loc)
		if err != nil {
			t.Fatal(err)
		}
		if !p.End.After(joinClock) {
			queued++
		}
	}
	if queued < 8 {
		t.Errorf("%d slots queued when the joiner started; want 8", queued)
	}
	slots := reportOf(t, bin, ledgerArgs, c)
	checkOnce(t, slots, keys)
	t.Logf("%d slots queued when the joiner started, %v after the epoch; %d slots checked", queued, joined.Sub(c.epoch), len(keys))
}
