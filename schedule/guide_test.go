package schedule_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// guidePath is the scheduling guide, whose Go blocks TestGuide builds.
const guidePath = "../docs/scheduling.md"

// guideBlock is one ```go block of the guide.
type guideBlock struct {
	line   int    // the guide's line of the block's first line of code
	params string // the names it assumes, from a <!-- guide: ... --> comment before it
	code   []string
}

var guideParams = regexp.MustCompile(`^<!-- guide: (.*) -->$`)

func guideBlocks(t *testing.T, text []byte) []guideBlock {
	t.Helper()
	var blocks []guideBlock
	var cur *guideBlock
	prev := ""
	sc := bufio.NewScanner(bytes.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur == nil && line == "```go":
			cur = &guideBlock{line: n + 1}
			if m := guideParams.FindStringSubmatch(prev); m != nil {
				cur.params = m[1]
			}
		case cur != nil && line == "```":
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			cur.code = append(cur.code, line)
		}
		if strings.TrimSpace(line) != "" {
			prev = line
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if cur != nil {
		t.Fatalf("%s:%d: a ```go block that never ends", guidePath, cur.line-1)
	}
	return blocks
}

// guideImports are the packages a block may use without importing them,
// by the name it uses.
var guideImports = map[string]string{
	"backfill":  "github.com/tranche-dev/tranche/backfill",
	"context":   "context",
	"fmt":       "fmt",
	"ledger":    "github.com/tranche-dev/tranche/ledger",
	"memledger": "github.com/tranche-dev/tranche/ledger/memledger",
	"schedule":  "github.com/tranche-dev/tranche/schedule",
	"slog":      "log/slog",
	"synctest":  "testing/synctest",
	"testing":   "testing",
	"time":      "time",
	"tranche":   "github.com/tranche-dev/tranche",
}

// source returns the block as a Go file of package pkg: a program as it
// stands when it declares package main, otherwise its statements as the
// body of a function taking the names the block assumes and returning an
// error, importing what it uses. A line directive makes the compiler
// report the guide's lines.
func (b guideBlock) source(pkg string) ([]byte, error) {
	directive := fmt.Sprintf("//line scheduling.md:%d\n", b.line)
	if slices.ContainsFunc(b.code, func(l string) bool { return strings.HasPrefix(l, "package main") }) {
		return []byte(directive + strings.Join(b.code, "\n") + "\n"), nil
	}
	fn := func(end string) string {
		return fmt.Sprintf("package %s\n\nfunc block(%s) error {\n%s%s\n%s}\n", pkg, b.params, directive, strings.Join(b.code, "\n"), end)
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "scheduling.md", fn(""), 0)
	if err != nil {
		return nil, err
	}
	end := "return nil\n"
	if stmts := f.Decls[0].(*ast.FuncDecl).Body.List; len(stmts) > 0 {
		if _, ok := stmts[len(stmts)-1].(*ast.ReturnStmt); ok {
			end = ""
		}
	}
	used := map[string]bool{}
	for _, id := range f.Unresolved {
		used[id.Name] = true
	}
	var spec []string
	for name, p := range guideImports {
		if used[name] {
			spec = append(spec, fmt.Sprintf("%q", p))
		}
	}
	slices.Sort(spec)
	src := fn(end)
	if len(spec) > 0 {
		src = strings.Replace(src, "\n\n", "\n\nimport (\n\t"+strings.Join(spec, "\n\t")+"\n)\n\n", 1)
	}
	return []byte(src), nil
}

// TestGuide builds and vets every Go block of docs/scheduling.md, as
// TestREADME does the README's: each block is a package of a module in a
// temporary folder that joins the repository's workspace, a program when
// it declares package main, else the body of a function whose parameters
// a <!-- guide: NAME TYPE, ... --> comment before it declares.
func TestGuide(t *testing.T) {
	text, err := os.ReadFile(guidePath)
	if err != nil {
		t.Fatal(err)
	}
	blocks := guideBlocks(t, text)
	if len(blocks) < 6 {
		t.Fatalf("%s has %d Go blocks; the test expects its examples", guidePath, len(blocks))
	}
	if testing.Short() {
		t.Skip("builds a module: not with -short")
	}
	goCmd, work := workspace(t)
	dir := t.TempDir()
	for i, b := range blocks {
		pkg := fmt.Sprintf("block%02d", i+1)
		src, err := b.source(pkg)
		if err != nil {
			t.Errorf("%s:%d: the block does not parse as statements: %v", guidePath, b.line, err)
			continue
		}
		if err := os.MkdirAll(filepath.Join(dir, pkg), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, pkg, "guide.go"), src, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if t.Failed() {
		return
	}
	joinWorkspace(t, goCmd, work, dir, "example.com/guide")
	for _, args := range [][]string{{"build", "./..."}, {"vet", "./..."}} {
		cmd := exec.Command(goCmd, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK="+filepath.Join(dir, "go.work"), "GOTOOLCHAIN=local")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("go %s of %s's Go blocks: %v\n%s", strings.Join(args, " "), guidePath, err, out)
		}
	}
}

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
