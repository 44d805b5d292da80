package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestCheck runs the check on a module holding a link of every kind, good
// and broken, and compares the broken ones with those expected.
func TestCheck(t *testing.T) {
	broken, err := Check("testdata/mod")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, b := range broken {
		got = append(got, b.String())
	}
	want := []string{
		"a/a.go:2:1: [Bad]: not declared in a, nor a package it imports",
		"a/a.go:2:1: [b.Missing]: example.com/m/b does not declare Missing",
		"a/a.go:2:1: [fmt.Nope]: fmt does not declare Nope",
		"a/a.go:3:1: [T.Nope]: not declared in a, nor a package it imports",
		"a/a.go:3:1: [a.Own]: example.com/m/a does not declare Own",
		"a/a.go:3:1: [json.Marshal]: not declared in a, nor a package it imports",
		"a/a.go:14:1: [T.missing]: go doc links capitalized names only",
		"a/a.go:20:1: [unexported]: go doc links capitalized names only",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("broken links (-want +got):\n%s", diff)
	}
}

// TestRepository checks every package of every module of the repository,
// as .ci/run does with go run ./internal/doclinks.
func TestRepository(t *testing.T) {
	broken, err := Check("../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range broken {
		t.Error(b)
	}
}
