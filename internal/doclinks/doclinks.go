// Doclinks checks the doc links of every package of every module of the
// repository: each name in brackets in a doc comment, in any of the forms
// of a doc link (a name, Recv.Name, a package, pkg.Name, pkg.Recv.Name),
// must name something that exists, as go doc and pkgsite resolve it, or
// the link is shown as plain text and the reader is left with a name
// that leads nowhere.
//
//	go run ./internal/doclinks [ROOT]
//
// It prints one line per broken link (file:line: the link and why) and
// exits 1 if there is any. A link is broken when go/doc's parser for the
// package does not take it for a link although it has a link's form (a
// name not declared in the package, a package not imported), or when it
// names a package of the repository or of the standard library that does
// not declare the name. The doc comments read are those go/doc gives: the
// package's and every declaration's, unexported ones included (doc.AllDecls),
// in the files that are not tests. Links to other modules' packages are
// taken as they are: their names are not checked.
package main

import (
	"bufio"
	"cmp"
	"fmt"
	"go/ast"
	"go/build"
	"go/doc"
	"go/doc/comment"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode"
)

func main() {
	root := "."
	if len(os.Args) > 1 {
		root = os.Args[1]
	}
	broken, err := Check(root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "doclinks:", err)
		os.Exit(2)
	}
	for _, b := range broken {
		fmt.Println(b)
	}
	if len(broken) > 0 {
		fmt.Fprintf(os.Stderr, "doclinks: %d broken doc links\n", len(broken))
		os.Exit(1)
	}
}

// Broken is a doc link that does not resolve.
type Broken struct {
	Pos    token.Position // where the comment holding it starts
	Link   string         // the link as written, without its brackets
	Reason string
}

func (b Broken) String() string {
	return fmt.Sprintf("%s: [%s]: %s", b.Pos, b.Link, b.Reason)
}

// A checker holds the repository's modules and the symbols of the
// packages links point to, loaded once each.
type checker struct {
	modules map[string]string // a module's folder to its path
	syms    map[string]*doc.Package
}

// Check returns the broken doc links of every package under root, whose
// modules are the go.mod files under it.
func Check(root string) ([]Broken, error) {
	root, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	c := &checker{modules: map[string]string{}, syms: map[string]*doc.Package{}}
	var dirs []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			dirs = append(dirs, path)
			return nil
		}
		if d.Name() == "go.mod" {
			mod, err := modulePath(path)
			if err != nil {
				return err
			}
			c.modules[filepath.Dir(path)] = mod
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var broken []Broken
	for _, dir := range dirs {
		b, err := c.checkDir(dir)
		if err != nil {
			return nil, err
		}
		broken = append(broken, b...)
	}
	slices.SortFunc(broken, func(a, b Broken) int {
		return cmp.Or(cmp.Compare(a.Pos.Filename, b.Pos.Filename), cmp.Compare(a.Pos.Line, b.Pos.Line), cmp.Compare(a.Link, b.Link))
	})
	for i := range broken {
		if rel, err := filepath.Rel(root, broken[i].Pos.Filename); err == nil {
			broken[i].Pos.Filename = rel
		}
	}
	return broken, nil
}

// modulePath reads the module line of a go.mod file.
func modulePath(gomod string) (string, error) {
	f, err := os.Open(gomod)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`), nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", fmt.Errorf("%s: no module line", gomod)
}

// importPath returns the import path of a folder of the repository, and
// false for a folder outside every module.
func (c *checker) importPath(dir string) (string, bool) {
	for d := dir; ; d = filepath.Dir(d) {
		if mod, ok := c.modules[d]; ok {
			rel, err := filepath.Rel(d, dir)
			if err != nil || rel == "." {
				return mod, err == nil
			}
			return mod + "/" + filepath.ToSlash(rel), true
		}
		if filepath.Dir(d) == d {
			return "", false
		}
	}
}

// dirOf returns the folder of an import path of the repository or of
// the standard library, and false for any other.
func (c *checker) dirOf(path string) (string, bool) {
	best, bestMod := "", ""
	for dir, mod := range c.modules {
		if (path == mod || strings.HasPrefix(path, mod+"/")) && len(mod) > len(bestMod) {
			best, bestMod = dir, mod
		}
	}
	if bestMod != "" {
		return filepath.Join(best, filepath.FromSlash(strings.TrimPrefix(strings.TrimPrefix(path, bestMod), "/"))), true
	}
	if first, _, _ := strings.Cut(path, "/"); !strings.Contains(first, ".") {
		return filepath.Join(build.Default.GOROOT, "src", filepath.FromSlash(path)), true
	}
	return "", false
}

// parseDir parses the non-test Go files of dir that belong to its main
// package (files of another package, such as a generator under
// //go:build ignore, are left out), and returns nil when it has none.
func parseDir(fset *token.FileSet, dir string) ([]*ast.File, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	byPkg := map[string][]*ast.File{}
	var names []string
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		if ignored(f) {
			continue
		}
		pkg := f.Name.Name
		if byPkg[pkg] == nil {
			names = append(names, pkg)
		}
		byPkg[pkg] = append(byPkg[pkg], f)
	}
	if len(names) == 0 {
		return nil, nil
	}
	// The package with the most files is the folder's; another is a
	// stray file, such as a program run by go generate.
	slices.SortFunc(names, func(a, b string) int { return cmp.Compare(len(byPkg[b]), len(byPkg[a])) })
	return byPkg[names[0]], nil
}

// ignored reports whether the file is built under no configuration
// (//go:build ignore).
func ignored(f *ast.File) bool {
	for _, g := range f.Comments {
		if g.Pos() >= f.Package {
			break
		}
		for _, c := range g.List {
			if strings.HasPrefix(c.Text, "//go:build") && strings.Contains(c.Text, "ignore") {
				return true
			}
		}
	}
	return false
}

// symbols returns the exported documentation of the package at path, as
// links from other packages see it, or nil for a package not found.
func (c *checker) symbols(path string) *doc.Package {
	if p, ok := c.syms[path]; ok {
		return p
	}
	c.syms[path] = nil
	dir, ok := c.dirOf(path)
	if !ok {
		return nil
	}
	fset := token.NewFileSet()
	files, err := parseDir(fset, dir)
	if err != nil || files == nil {
		return nil
	}
	p, err := doc.NewFromFiles(fset, files, path)
	if err != nil {
		return nil
	}
	c.syms[path] = p
	return p
}

// checkDir returns the broken links of the package in dir.
func (c *checker) checkDir(dir string) ([]Broken, error) {
	path, ok := c.importPath(dir)
	if !ok {
		return nil, nil
	}
	fset := token.NewFileSet()
	files, err := parseDir(fset, dir)
	if err != nil || files == nil {
		return nil, err
	}
	pkg, err := doc.NewFromFiles(fset, files, path, doc.AllDecls|doc.PreserveAST)
	if err != nil {
		return nil, err
	}
	var broken []Broken
	check := func(pos token.Pos, text string) {
		if text == "" {
			return
		}
		for _, b := range c.checkComment(pkg, text) {
			b.Pos = linkLine(fset.Position(pos), b.Link)
			broken = append(broken, b)
		}
	}
	check(packageDocPos(files), pkg.Doc)
	values := func(vs []*doc.Value) {
		for _, v := range vs {
			check(v.Decl.Pos(), v.Doc)
		}
	}
	funcs := func(fs []*doc.Func) {
		for _, f := range fs {
			check(f.Decl.Pos(), f.Doc)
		}
	}
	values(pkg.Consts)
	values(pkg.Vars)
	funcs(pkg.Funcs)
	for _, t := range pkg.Types {
		check(t.Decl.Pos(), t.Doc)
		values(t.Consts)
		values(t.Vars)
		funcs(t.Funcs)
		funcs(t.Methods)
	}
	return broken, nil
}

// linkLine returns the position of the line that holds "[link" in a
// comment, the nearest before the declaration at pos (at or after it for
// a package comment, which pos starts), or pos itself if none does.
func linkLine(pos token.Position, link string) token.Position {
	data, err := os.ReadFile(pos.Filename)
	if err != nil {
		return pos
	}
	lines := strings.Split(string(data), "\n")
	has := func(i int) bool {
		l := strings.TrimSpace(lines[i])
		return strings.Contains(l, "["+link)
	}
	for i := min(pos.Line-1, len(lines)-1); i >= 0 && i >= pos.Line-200; i-- {
		if has(i) {
			return token.Position{Filename: pos.Filename, Line: i + 1, Column: 1}
		}
	}
	for i := max(pos.Line-1, 0); i < len(lines); i++ {
		if has(i) {
			return token.Position{Filename: pos.Filename, Line: i + 1, Column: 1}
		}
	}
	return pos
}

// packageDocPos is where the package comment is, or the first file's
// package clause.
func packageDocPos(files []*ast.File) token.Pos {
	for _, f := range files {
		if f.Doc != nil {
			return f.Doc.Pos()
		}
	}
	return files[0].Package
}

// checkComment returns the broken links of one doc comment of pkg: the
// texts in brackets that a parser taking every name for a symbol reads
// as links and pkg's own parser does not, and the links to a package of
// the repository or the standard library that does not declare the name.
func (c *checker) checkComment(pkg *doc.Package, text string) []Broken {
	// every takes for a link whatever has a link's form: a capitalized
	// name, with a receiver or a package or not, and a package named by
	// an import path. A lowercase word alone is prose ("s[i]") unless the
	// package declares it: go doc never links an unexported name.
	every := &comment.Parser{
		LookupPackage: func(name string) (string, bool) { return "", pathLike(name) },
		LookupSym:     func(string, string) bool { return true },
	}
	candidates := map[string]int{}
	for l := range docLinks(every.Parse(text)) {
		t := linkText(l)
		if word := strings.TrimPrefix(t, "*"); !strings.ContainsAny(word, "./") && !unicode.IsUpper(rune(word[0])) && !declared(pkg, word) {
			continue // prose, as in s[i]
		}
		candidates[t]++
	}
	var broken []Broken
	for l := range docLinks(pkg.Parser().Parse(text)) {
		t := linkText(l)
		candidates[t]--
		// A link naming a package (its own too, as [tranche.Name] in
		// package tranche) is a link whatever name follows: the name is
		// looked up here.
		other := pkg
		if l.ImportPath != "" && l.ImportPath != pkg.ImportPath {
			if _, ok := c.dirOf(l.ImportPath); !ok {
				continue // another module's package: not checked
			}
			other = c.symbols(l.ImportPath)
		}
		switch {
		case other == nil:
			broken = append(broken, Broken{Link: t, Reason: fmt.Sprintf("package %s not found", l.ImportPath)})
		case l.Name != "" && !other.Parser().LookupSym(l.Recv, l.Name):
			name := l.Name
			if l.Recv != "" {
				name = l.Recv + "." + name
			}
			broken = append(broken, Broken{Link: t, Reason: fmt.Sprintf("%s does not declare %s", other.ImportPath, name)})
		}
	}
	for t, n := range candidates {
		reason := fmt.Sprintf("not declared in %s, nor a package it imports", pkg.Name)
		last := t[strings.LastIndexAny(t, "./*")+1:]
		if last != "" && !unicode.IsUpper(rune(last[0])) && !strings.Contains(t, "/") {
			reason = "go doc links capitalized names only"
		}
		for range n {
			broken = append(broken, Broken{Link: t, Reason: reason})
		}
	}
	return broken
}

// declared reports whether the package declares name at its top level,
// exported or not.
func declared(pkg *doc.Package, name string) bool {
	for _, vs := range [][]*doc.Value{pkg.Consts, pkg.Vars} {
		for _, v := range vs {
			if slices.Contains(v.Names, name) {
				return true
			}
		}
	}
	for _, f := range pkg.Funcs {
		if f.Name == name {
			return true
		}
	}
	for _, t := range pkg.Types {
		if t.Name == name {
			return true
		}
		for _, f := range t.Funcs {
			if f.Name == name {
				return true
			}
		}
		for _, vs := range [][]*doc.Value{t.Consts, t.Vars} {
			for _, v := range vs {
				if slices.Contains(v.Names, name) {
					return true
				}
			}
		}
	}
	return false
}

// pathLike reports whether s could be a package's name or import path:
// letters, digits and . _ - / ~, and a letter first.
func pathLike(s string) bool {
	if s == "" || !unicode.IsLetter(rune(s[0])) {
		return false
	}
	return !strings.ContainsFunc(s, func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && !strings.ContainsRune("._-/~", r)
	})
}

// docLinks yields the doc links of a parsed comment.
func docLinks(d *comment.Doc) func(func(*comment.DocLink) bool) {
	return func(yield func(*comment.DocLink) bool) {
		var walk func([]comment.Text) bool
		walk = func(ts []comment.Text) bool {
			for _, t := range ts {
				switch t := t.(type) {
				case *comment.DocLink:
					if !yield(t) {
						return false
					}
				case *comment.Link:
					if !walk(t.Text) {
						return false
					}
				}
			}
			return true
		}
		for _, b := range d.Content {
			switch b := b.(type) {
			case *comment.Paragraph:
				if !walk(b.Text) {
					return
				}
			case *comment.Heading:
				if !walk(b.Text) {
					return
				}
			case *comment.List:
				for _, item := range b.Items {
					for _, ib := range item.Content {
						if p, ok := ib.(*comment.Paragraph); ok && !walk(p.Text) {
							return
						}
					}
				}
			}
		}
	}
}

// linkText is a link's text as written between its brackets.
func linkText(l *comment.DocLink) string {
	var b strings.Builder
	for _, t := range l.Text {
		switch t := t.(type) {
		case comment.Plain:
			b.WriteString(string(t))
		case comment.Italic:
			b.WriteString(string(t))
		}
	}
	return b.String()
}
