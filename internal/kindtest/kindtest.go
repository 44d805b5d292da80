// Package kindtest finds the event kinds a package declares, for the
// tests that check each has its level beside its definition.
package kindtest

import (
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"strconv"
	"testing"
)

// Declared returns the values of the constants of type Kind (or
// tranche.Kind) that the package in dir declares, test files left out.
// It fails t when it finds none, so that a moved declaration cannot leave
// a test checking nothing.
func Declared(t testing.TB, dir string) []string {
	t.Helper()
	bp, err := build.ImportDir(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var kinds []string
	for _, name := range bp.GoFiles {
		f, err := parser.ParseFile(fset, dir+"/"+name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				if !isKind(vs.Type) {
					continue
				}
				for _, v := range vs.Values {
					lit, ok := v.(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						t.Fatalf("%s: a Kind constant whose value is not a string literal", fset.Position(v.Pos()))
					}
					s, _ := strconv.Unquote(lit.Value)
					kinds = append(kinds, s)
				}
			}
		}
	}
	if len(kinds) == 0 {
		t.Fatalf("%s declares no constant of type Kind", dir)
	}
	return kinds
}

func isKind(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name == "Kind"
	case *ast.SelectorExpr:
		x, ok := e.X.(*ast.Ident)
		return ok && x.Name == "tranche" && e.Sel.Name == "Kind"
	}
	return false
}
