package schedule_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// workspace returns the go command and the repository's go.work, or
// skips the test when either is missing.
func workspace(t *testing.T) (goCmd, work string) {
	t.Helper()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command: %v", err)
	}
	out, err := exec.Command(goCmd, "env", "GOWORK").Output()
	if err != nil {
		t.Fatal(err)
	}
	work = strings.TrimSpace(string(out))
	if work == "" || work == "off" {
		t.Skip("the repository's workspace (go.work) is not in use")
	}
	return goCmd, work
}

// joinWorkspace makes dir a module named module in a workspace of its
// own: the repository's (work), with its paths made absolute, and dir.
func joinWorkspace(t *testing.T, goCmd, work, dir, module string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module "+module+"\n\ngo 1.26.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(goCmd, "work", "edit", "-json", work).Output()
	if err != nil {
		t.Fatalf("go work edit -json %s: %v", work, err)
	}
	var ws struct {
		Go      string
		Use     []struct{ DiskPath string }
		Replace []struct {
			Old, New struct{ Path, Version string }
		}
	}
	if err := json.Unmarshal(out, &ws); err != nil {
		t.Fatal(err)
	}
	repo := filepath.Dir(work)
	abs := func(p string) string {
		if filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(repo, p)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "go %s\n\nuse (\n\t.\n", ws.Go)
	for _, u := range ws.Use {
		fmt.Fprintf(&b, "\t%s\n", abs(u.DiskPath))
	}
	b.WriteString(")\n")
	for _, r := range ws.Replace {
		old := r.Old.Path
		if r.Old.Version != "" {
			old += " " + r.Old.Version
		}
		target := abs(r.New.Path)
		if r.New.Version != "" {
			target = r.New.Path + " " + r.New.Version
		}
		fmt.Fprintf(&b, "replace %s => %s\n", old, target)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.work"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}
