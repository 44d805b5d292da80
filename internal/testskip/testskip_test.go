package testskip_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/tranche-dev/tranche/internal/testskip"
)

func TestMain(m *testing.M) { os.Exit(testskip.Main(m)) }

const childEnv = "TESTSKIP_CHILD"

// TestChildSkips is the child of TestMainReports: it skips as a
// PostgreSQL test and a Chromium test do on a machine without either.
func TestChildSkips(t *testing.T) {
	if os.Getenv(childEnv) == "" {
		t.Skip("the child of TestMainReports")
	}
	for _, name := range []string{"ledger", "schema", "role"} {
		t.Run(name, func(t *testing.T) {
			testskip.Skip(t, testskip.PostgreSQL, "TRANCHE_POSTGRES_URL is not set")
		})
	}
	t.Run("pages", func(t *testing.T) { testskip.Skip(t, testskip.Chromium, "no chromium") })
}

// TestMainReports runs this test binary as a child whose tests skip for
// want of PostgreSQL and Chromium: it exits 0, and its output ends with
// what was skipped and how to run it; under CI=true the child fails.
func TestMainReports(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		return
	}
	run := func(ci string) (string, error) {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestChildSkips$", "-test.count=1")
		cmd.Env = append(os.Environ(), childEnv+"=1", "CI="+ci, "TRANCHE_TESTSKIP_NO_TTY=1")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run("")
	if err != nil {
		t.Fatalf("the child failed: %v\n%s", err, out)
	}
	for _, want := range []string{
		"tranche: 4 tests skipped, not failed, in ",
		"3 for want of a PostgreSQL server (TRANCHE_POSTGRES_URL is not set): TestChildSkips/ledger, TestChildSkips/role, TestChildSkips/schema",
		`to run them: eval "$(ledger/postgres/testserver.sh start)"`,
		"1 for want of Chromium",
		"to run them: apt-get install chromium, or set CHROMIUM",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the child's output lacks %q:\n%s", want, out)
		}
	}
	if i := strings.LastIndex(out, "tranche: 4 tests skipped"); i < strings.LastIndex(out, "PASS") {
		t.Errorf("the report comes before the tests' end:\n%s", out)
	}
	if out, err := run("true"); err == nil || !strings.Contains(out, "TRANCHE_POSTGRES_URL is not set under CI") {
		t.Errorf("under CI=true the child passed or did not say why: %v\n%s", err, out)
	}
}
