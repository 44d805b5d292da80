package tranche_test

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

// readmeBlock is one ```go block of README.md or of a guide in docs/.
type readmeBlock struct {
	file   string // the Markdown file, relative to the repository's root
	line   int    // the file's line of the block's first line of code
	params string // the names it assumes, from a <!-- readme: ... --> (or <!-- guide: ... -->) comment before it
	code   []string
}

// readmeParams is the comment that declares, as a parameter list, the
// names a block uses without declaring them: <!-- readme: ... --> or,
// as the guides first wrote it, <!-- guide: ... -->.
var readmeParams = regexp.MustCompile(`^<!-- (?:readme|guide): (.*) -->$`)

// readmeBlocks returns the ```go blocks of the Markdown text of file.
func readmeBlocks(t *testing.T, file string, text []byte) []readmeBlock {
	t.Helper()
	var blocks []readmeBlock
	var cur *readmeBlock
	prev := ""
	sc := bufio.NewScanner(bytes.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur == nil && line == "```go":
			cur = &readmeBlock{file: file, line: n + 1}
			if m := readmeParams.FindStringSubmatch(prev); m != nil {
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
		t.Fatalf("%s:%d: a ```go block that never ends", file, cur.line-1)
	}
	return blocks
}

// readmeImports are the packages a block may use without importing
// them, by the name it uses.
var readmeImports = map[string]string{
	"column":      "github.com/tranche-dev/tranche/destination/column",
	"context":     "context",
	"errors":      "errors",
	"eventlog":    "github.com/tranche-dev/tranche/eventlog",
	"files":       "github.com/tranche-dev/tranche/destination/files",
	"filepath":    "path/filepath",
	"fmt":         "fmt",
	"io":          "io",
	"json":        "encoding/json",
	"log":         "log",
	"os":          "os",
	"parquet":     "github.com/tranche-dev/tranche/destination/parquet",
	"postgres":    "github.com/tranche-dev/tranche/ledger/postgres",
	"slog":        "log/slog",
	"sqlite":      "github.com/tranche-dev/tranche/ledger/sqlite",
	"strings":     "strings",
	"time":        "time",
	"tranche":     "github.com/tranche-dev/tranche",
	"tranchetest": "github.com/tranche-dev/tranche/tranchetest",
	"backfill":    "github.com/tranche-dev/tranche/backfill",
	"ledger":      "github.com/tranche-dev/tranche/ledger",
	"memledger":   "github.com/tranche-dev/tranche/ledger/memledger",
	"ledgertest":  "github.com/tranche-dev/tranche/ledger/ledgertest",
	"trancheotel": "github.com/tranche-dev/tranche/trancheotel",
	"schedule":    "github.com/tranche-dev/tranche/schedule",
	"synctest":    "testing/synctest",
	"testing":     "testing",
	"http":        "net/http",
	"trancheweb":  "github.com/tranche-dev/tranche/trancheweb",
	"tranchecli":  "github.com/tranche-dev/tranche/tranchecli",
}

var importLine = regexp.MustCompile(`^import "([^"]+)"$`)

// source returns the block as a Go file of package pkg: a program as it
// stands when it declares package main, otherwise its statements as the
// body of a function taking the names the block assumes and returning
// an error. The block's import lines become the file's imports, and the
// packages it uses from readmeImports are imported too. Line directives
// make the compiler report the Markdown file's lines.
func (b readmeBlock) source(pkg string) ([]byte, error) {
	directive := fmt.Sprintf("//line %s:%d\n", b.file, b.line)
	if slices.ContainsFunc(b.code, func(l string) bool { return strings.HasPrefix(l, "package main") }) {
		return []byte(directive + strings.Join(b.code, "\n") + "\n"), nil
	}
	var imports []string
	body := slices.Clone(b.code)
	for i, l := range body {
		if m := importLine.FindStringSubmatch(l); m != nil {
			imports = append(imports, m[1])
			body[i] = "" // keeps the lines where they are in the file
		}
	}
	fn := func(end string) string {
		return fmt.Sprintf("package %s\n\nfunc block(%s) error {\n%s%s\n%s}\n", pkg, b.params, directive, strings.Join(body, "\n"), end)
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, b.file, fn(""), 0)
	if err != nil {
		return nil, err
	}
	end := "return nil\n"
	if stmts := f.Decls[0].(*ast.FuncDecl).Body.List; len(stmts) > 0 && terminating(stmts[len(stmts)-1]) {
		end = "" // a return after it would be unreachable
	}
	used := map[string]bool{}
	for _, id := range f.Unresolved {
		used[id.Name] = true
	}
	var spec []string
	seen := map[string]bool{}
	for _, p := range imports {
		name := p[strings.LastIndex(p, "/")+1:]
		seen[name] = true
		if used[name] {
			spec = append(spec, fmt.Sprintf("%q", p))
		} else {
			spec = append(spec, fmt.Sprintf("_ %q", p)) // a block that shows only the import line
		}
	}
	for name, p := range readmeImports {
		if used[name] && !seen[name] {
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

// terminating reports whether s ends a function, as the spec's
// terminating statements do, for the statements the blocks end with.
func terminating(s ast.Stmt) bool {
	switch s := s.(type) {
	case *ast.ReturnStmt:
		return true
	case *ast.ForStmt:
		if s.Cond != nil {
			return false
		}
		hasBreak := false
		ast.Inspect(s.Body, func(n ast.Node) bool {
			if b, ok := n.(*ast.BranchStmt); ok && b.Tok == token.BREAK {
				hasBreak = true
			}
			return !hasBreak
		})
		return !hasBreak
	case *ast.BlockStmt:
		return len(s.List) > 0 && terminating(s.List[len(s.List)-1])
	case *ast.IfStmt:
		return s.Else != nil && terminating(s.Body) && terminating(s.Else)
	}
	return false
}

// TestREADME builds and vets every Go block of README.md and of every
// guide in docs/ (docs/*.md, so that a new guide is covered without a
// new test), so that what a user copies compiles as written. Each block
// is a package of one module in a temporary folder that joins the
// repository's workspace: a block with package main is a program; the
// others are the body of a function whose parameters are the names the
// block assumes, declared by a <!-- readme: NAME TYPE, ... --> comment
// (or <!-- guide: ... -->) on the line before the block. A block that
// ends without a return gets one (return nil). Errors name the Markdown
// file's lines. All the blocks build in one go build and one go vet.
func TestREADME(t *testing.T) {
	guides, err := filepath.Glob(filepath.Join("docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	var blocks []readmeBlock
	for _, file := range append([]string{"README.md"}, guides...) {
		text, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		fileBlocks := readmeBlocks(t, filepath.ToSlash(file), text)
		if file == "README.md" && len(fileBlocks) < 1 {
			t.Fatalf("README.md has no Go block; the test expects its tour")
		}
		blocks = append(blocks, fileBlocks...)
	}

	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command: %v", err)
	}
	out, err := exec.Command(goCmd, "env", "GOWORK").Output()
	if err != nil {
		t.Fatal(err)
	}
	work := strings.TrimSpace(string(out))
	if work == "" || work == "off" {
		t.Skip("the blocks build in the repository's workspace (go.work), which is not in use")
	}

	dir := t.TempDir()
	pkgs := make([]string, len(blocks))
	for i, b := range blocks {
		pkgs[i] = fmt.Sprintf("%s/block%02d", docPackage(b.file), i+1)
		src, err := b.source(filepath.Base(pkgs[i]))
		if err != nil {
			t.Errorf("%s:%d: the block does not parse as statements: %v", b.file, b.line, err)
			continue
		}
		if err := os.MkdirAll(filepath.Join(dir, pkgs[i]), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, pkgs[i], "block.go"), src, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if t.Failed() {
		return
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/readme\n\ngo 1.26.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	writeWorkspace(t, goCmd, work, dir)

	for _, args := range [][]string{{"build", "./..."}, {"vet", "./..."}} {
		cmd := exec.Command(goCmd, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK="+filepath.Join(dir, "go.work"), "GOTOOLCHAIN=local")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("go %s of the Go blocks of README.md and docs/*.md: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	if t.Failed() {
		for i, b := range blocks {
			src, _ := os.ReadFile(filepath.Join(dir, pkgs[i], "block.go"))
			t.Logf("%s:%d, as built:\n%s", b.file, b.line, src)
		}
	}
}

// docPackage is the folder of a Markdown file's blocks: readme for
// README.md, docs_NAME for docs/NAME.md, with any character a package
// path would not take replaced by an underscore.
func docPackage(file string) string {
	name := strings.TrimSuffix(strings.ReplaceAll(strings.ToLower(file), "/", "_"), ".md")
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' {
			return r
		}
		return '_'
	}, name)
}

// writeWorkspace writes dir/go.work: the repository's workspace (work)
// with its paths made absolute, and dir's module.
func writeWorkspace(t *testing.T, goCmd, work, dir string) {
	t.Helper()
	out, err := exec.Command(goCmd, "work", "edit", "-json", work).Output()
	if err != nil {
		t.Fatalf("go work edit -json %s: %v", work, err)
	}
	var ws struct {
		Go  string
		Use []struct{ DiskPath string }
		// Replace is the workspace's replace block.
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
		target := r.New.Path
		if r.New.Version != "" {
			target += " " + r.New.Version
		} else {
			target = abs(target)
		}
		fmt.Fprintf(&b, "replace %s => %s\n", old, target)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.work"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}
