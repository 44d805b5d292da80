package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestOperatingGuide builds and vets every Go block of
// docs/operating.md, each a program of its own, in this module, which
// requires both ledgers and tranchecli, so that the guide's code stays
// what compiles.
func TestOperatingGuide(t *testing.T) {
	text, err := os.ReadFile("../../docs/operating.md")
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	for rest := string(text); ; {
		_, after, ok := strings.Cut(rest, "```go\n")
		if !ok {
			break
		}
		block, tail, ok := strings.Cut(after, "```\n")
		if !ok {
			t.Fatal("docs/operating.md: a ```go block that never ends")
		}
		blocks, rest = append(blocks, block), tail
	}
	if len(blocks) == 0 {
		t.Fatal("docs/operating.md has no Go block")
	}
	for i, b := range blocks {
		// A folder of this module, so that its requirements resolve.
		dir, err := os.MkdirTemp(".", "guide-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{{"build", "-o", os.DevNull}, {"vet"}} {
			cmd := exec.Command("go", append(args, "./"+filepath.Base(dir))...)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("go %s of docs/operating.md's Go block %d: %v\n%s", args[0], i+1, err, out)
			}
		}
	}
}
