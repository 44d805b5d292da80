package release

import (
	"archive/zip"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"
)

// repoRoot returns the repository's root, two folders up from this
// module, or skips the test when the tree is not a Git checkout (this
// module unpacked from its own zip, say).
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := git(t.Context(), root, "rev-parse", "--show-toplevel"); err != nil {
		t.Skipf("not in a Git checkout of tranche: %v", err)
	}
	return root
}

// releaseVersion returns the version the modules of the repository
// require each other at: the version the repository is prepared to
// release.
func releaseVersion(t *testing.T, mods []Module) string {
	t.Helper()
	for _, m := range mods {
		for _, r := range m.Requires {
			return r.Version
		}
	}
	t.Fatal("no module of the repository requires another")
	return ""
}

// TestRepositoryModules checks the repository as the release sees it:
// every module is in go.work, every module requires the others at one
// version and without a replace, and go.work gives the go.mod of exactly
// the versions required, from the modules' own folders.
func TestRepositoryModules(t *testing.T) {
	root := repoRoot(t)
	mods, err := Modules(root)
	if err != nil {
		t.Fatal(err)
	}
	version := releaseVersion(t, mods)
	if err := Check(mods, version); err != nil {
		t.Error(err)
	}

	data, err := os.ReadFile(filepath.Join(root, "go.work"))
	if err != nil {
		t.Fatal(err)
	}
	work, err := modfile.ParseWork("go.work", data, nil)
	if err != nil {
		t.Fatal(err)
	}
	var used, dirs []string
	for _, u := range work.Use {
		used = append(used, filepath.ToSlash(filepath.Clean(u.Path)))
	}
	for _, m := range mods {
		dirs = append(dirs, m.Dir)
	}
	slices.Sort(used)
	slices.Sort(dirs)
	if !slices.Equal(used, dirs) {
		t.Errorf("go.work uses %q; the repository's modules are %q: add a new module with go work use", used, dirs)
	}

	dirOf := map[string]string{}
	for _, m := range mods {
		dirOf[m.Path] = m.Dir
	}
	want := map[module.Version]string{}
	for _, m := range mods {
		for _, r := range m.Requires {
			want[r] = dirOf[r.Path]
		}
	}
	got := map[module.Version]string{}
	for _, r := range work.Replace {
		got[r.Old] = filepath.ToSlash(filepath.Clean(r.New.Path))
	}
	for v, dir := range want {
		if got[v] != dir {
			t.Errorf("go.work replaces %s %s with %q; want %q, the module's folder, so that the workspace builds before the release is tagged", v.Path, v.Version, got[v], dir)
		}
	}
	for v := range got {
		if _, ok := want[v]; !ok {
			t.Errorf("go.work replaces %s %s, which no module requires", v.Path, v.Version)
		}
	}
}

// tree writes files (path: content) under a new folder and returns it.
func tree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const (
	rootMod   = "module github.com/tranche-dev/tranche\n\ngo 1.26.0\n"
	nestedMod = "module github.com/tranche-dev/tranche/ledger/x\n\ngo 1.26.0\n\nrequire github.com/tranche-dev/tranche v0.1.0\n"
)

func TestWriteProxy(t *testing.T) {
	dir := tree(t, map[string]string{
		"go.mod":                 rootMod,
		"LICENSE":                "the license\n",
		"a.go":                   "package tranche\n",
		"ledger/x/go.mod":        nestedMod,
		"ledger/x/x.go":          "package x\n",
		"testdata/m/go.mod":      "module example.com/ignored\n",
		"internal/p/p.go":        "package p\n",
		"ledger/x/sub/nested.go": "package sub\n",
	})
	out := t.TempDir()
	at := time.Date(2026, 12, 1, 7, 0, 0, 0, time.FixedZone("CET", 3600))
	mods, err := WriteProxy(dir, "v0.1.0", out, at)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, m := range mods {
		paths = append(paths, m.Path+" "+m.Tag("v0.1.0"))
	}
	if want := []string{"github.com/tranche-dev/tranche v0.1.0", "github.com/tranche-dev/tranche/ledger/x ledger/x/v0.1.0"}; !slices.Equal(paths, want) {
		t.Errorf("modules and tags %q; want %q", paths, want)
	}

	wantFiles := map[string][]string{
		// A folder with a go.mod of its own is left out, as the go
		// command leaves it out, testdata included.
		"github.com/tranche-dev/tranche":          {"LICENSE", "a.go", "go.mod", "internal/p/p.go"},
		"github.com/tranche-dev/tranche/ledger/x": {"LICENSE", "go.mod", "sub/nested.go", "x.go"},
	}
	for _, m := range mods {
		vdir := filepath.Join(out, filepath.FromSlash(m.Path), "@v")
		list, err := os.ReadFile(filepath.Join(vdir, "list"))
		if err != nil || string(list) != "v0.1.0\n" {
			t.Errorf("%s: list %q, %v; want \"v0.1.0\\n\"", m.Path, list, err)
		}
		var info struct {
			Version string
			Time    time.Time
		}
		data, err := os.ReadFile(filepath.Join(vdir, "v0.1.0.info"))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, &info); err != nil || info.Version != "v0.1.0" || !info.Time.Equal(at) {
			t.Errorf("%s: info %s (%v); want version v0.1.0 at %v", m.Path, data, err, at)
		}
		mod, err := os.ReadFile(filepath.Join(vdir, "v0.1.0.mod"))
		if err != nil || string(mod) != string(m.Mod) {
			t.Errorf("%s: .mod %q, %v; want its go.mod", m.Path, mod, err)
		}
		zipPath := filepath.Join(vdir, "v0.1.0.zip")
		if _, err := modzip.CheckZip(module.Version{Path: m.Path, Version: "v0.1.0"}, zipPath); err != nil {
			t.Errorf("%s: zip: %v", m.Path, err)
		}
		z, err := zip.OpenReader(zipPath)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, f := range z.File {
			names = append(names, strings.TrimPrefix(f.Name, m.Path+"@v0.1.0/"))
		}
		z.Close()
		slices.Sort(names)
		if want := wantFiles[m.Path]; !slices.Equal(names, want) {
			t.Errorf("%s: zip holds %q; want %q", m.Path, names, want)
		}
	}

	// A second version adds itself to the list.
	if err := os.WriteFile(filepath.Join(dir, "ledger/x/go.mod"), []byte(strings.Replace(nestedMod, "v0.1.0", "v0.2.0", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := WriteProxy(dir, "v0.2.0", out, at); err != nil {
		t.Fatal(err)
	}
	if list, err := os.ReadFile(filepath.Join(out, "github.com/tranche-dev/tranche/@v/list")); err != nil || string(list) != "v0.1.0\nv0.2.0\n" {
		t.Errorf("list after v0.2.0: %q, %v", list, err)
	}
}

func TestWriteProxyRefuses(t *testing.T) {
	for _, tc := range []struct {
		name    string
		files   map[string]string
		version string
		says    string
	}{
		{"another version", map[string]string{"go.mod": rootMod, "ledger/x/go.mod": nestedMod}, "v0.2.0",
			"ledger/x/go.mod requires github.com/tranche-dev/tranche v0.1.0; releasing v0.2.0, it must require v0.2.0"},
		{"a replace", map[string]string{"go.mod": rootMod, "ledger/x/go.mod": nestedMod + "replace github.com/tranche-dev/tranche => ../..\n"}, "v0.1.0",
			"has a replace directive (github.com/tranche-dev/tranche)"},
		{"a module outside its folder's path", map[string]string{"go.mod": rootMod, "ledger/y/go.mod": nestedMod}, "v0.1.0",
			"names module github.com/tranche-dev/tranche/ledger/x; want github.com/tranche-dev/tranche/ledger/y"},
		{"no root module", map[string]string{"ledger/x/go.mod": nestedMod}, "v0.1.0", "no go.mod for github.com/tranche-dev/tranche at the root"},
		{"a version that is not canonical", map[string]string{"go.mod": rootMod}, "v0.1", `version "v0.1"; want a canonical semantic version`},
		{"a major version that needs a /v2 path", map[string]string{"go.mod": rootMod}, "v2.0.0", `version "v2.0.0"; want a canonical semantic version of major v0 or v1`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := t.TempDir()
			_, err := WriteProxy(tree(t, tc.files), tc.version, out, time.Now())
			if err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("WriteProxy = %v; want an error saying %q", err, tc.says)
			}
			if entries, _ := os.ReadDir(out); len(entries) > 0 {
				t.Errorf("a refused release wrote %d entries into the proxy", len(entries))
			}
		})
	}
}

// TestSnapshot checks that a snapshot of the working tree holds the
// files a commit would, and one at a revision what git archive exports.
func TestSnapshot(t *testing.T) {
	dir := tree(t, map[string]string{
		".gitignore":  "/build/\n",
		"go.mod":      rootMod,
		"a.go":        "package tranche\n",
		"build/x.out": "build output\n",
	})
	ctx := t.Context()
	for _, args := range [][]string{
		{"init", "-q"}, {"add", "."},
		{"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "first"},
	} {
		if _, err := git(ctx, dir, args...); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "b.go"), []byte("package tranche // uncommitted\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "a.go")); err != nil {
		t.Fatal(err)
	}
	files := func(dir string) []string {
		var names []string
		filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				rel, _ := filepath.Rel(dir, p)
				names = append(names, filepath.ToSlash(rel))
			}
			return err
		})
		slices.Sort(names)
		return names
	}
	work, err := Snapshot(ctx, dir, "", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := files(work), []string{".gitignore", "b.go", "go.mod"}; !slices.Equal(got, want) {
		t.Errorf("working-tree snapshot holds %q; want %q", got, want)
	}
	head, err := Snapshot(ctx, dir, "HEAD", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := files(head), []string{".gitignore", "a.go", "go.mod"}; !slices.Equal(got, want) {
		t.Errorf("HEAD snapshot holds %q; want %q", got, want)
	}
	if _, err := CommitTime(ctx, dir, ""); err != nil {
		t.Error(err)
	}
}
