// Package release writes tranche's modules, at a release version, as a
// module proxy on disk: the layout the go command reads through
// GOPROXY=file:///DIR ($module/@v/list, $version.info, $version.mod and
// $version.zip), with zips made by golang.org/x/mod/zip as proxies make
// them. A consumer module outside the repository, pointed at such a
// proxy, sees exactly what it would see once the tags are pushed, so the
// release can be checked before it exists. See DEVELOPERS.md, "Releasing".
//
// It lives in its own module so that golang.org/x/mod stays out of the
// root go.mod.
package release

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
	modzip "golang.org/x/mod/zip"
)

// Root is the path of the repository's root module; every module of the
// repository has a path under it.
const Root = "github.com/tranche-dev/tranche"

// Module is one module of the repository.
type Module struct {
	Path string // the module path, such as github.com/tranche-dev/tranche/ledger/sqlite
	Dir  string // its folder, relative to the repository's root, "." for the root module
	Mod  []byte // its go.mod

	// Requires lists the module's requirements on other modules of the
	// repository, by path, with the versions its go.mod names.
	Requires []module.Version
}

// Tag returns the Git tag that releases the module at version: the
// version itself for the root module, "DIR/version" for a nested one.
func (m Module) Tag(version string) string {
	if m.Dir == "." {
		return version
	}
	return m.Dir + "/" + version
}

// Modules returns the modules in the tree rooted at dir, the root module
// first and the others sorted by path. It reads every go.mod below dir
// except those in testdata folders and folders whose name starts with "."
// or "_", which the go command ignores too.
func Modules(dir string) ([]Module, error) {
	var mods []Module
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); p != dir && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Name() != "go.mod" {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		f, err := modfile.Parse(p, data, nil)
		if err != nil {
			return err
		}
		if f.Module == nil {
			return fmt.Errorf("release: %s has no module line", p)
		}
		rel, err := filepath.Rel(dir, filepath.Dir(p))
		if err != nil {
			return err
		}
		m := Module{Path: f.Module.Mod.Path, Dir: filepath.ToSlash(rel), Mod: data}
		if want := path.Join(Root, m.Dir); m.Path != want {
			return fmt.Errorf("release: %s names module %s; want %s, its folder's path under %s", p, m.Path, want, Root)
		}
		for _, r := range f.Require {
			if r.Mod.Path == Root || strings.HasPrefix(r.Mod.Path, Root+"/") {
				m.Requires = append(m.Requires, r.Mod)
			}
		}
		if len(f.Replace) > 0 {
			return fmt.Errorf("release: %s has a replace directive (%s); a consumer's build ignores it, so the module must build from its requirements alone (go.work ties the repository's modules together)", p, f.Replace[0].Old.Path)
		}
		mods = append(mods, m)
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(mods, func(a, b Module) int {
		switch {
		case a.Dir == ".":
			return -1
		case b.Dir == ".":
			return 1
		}
		return strings.Compare(a.Path, b.Path)
	})
	if len(mods) == 0 || mods[0].Dir != "." {
		return nil, fmt.Errorf("release: no go.mod for %s at the root of %s", Root, dir)
	}
	return mods, nil
}

// Check reports every requirement of a module of mods on another that
// names a version other than version: released together, the modules
// must require each other at the version being released.
func Check(mods []Module, version string) error {
	if !semver.IsValid(version) || semver.Canonical(version) != version || semver.Major(version) != "v0" && semver.Major(version) != "v1" {
		return fmt.Errorf("release: version %q; want a canonical semantic version of major v0 or v1, such as v0.1.0", version)
	}
	var errs []error
	for _, m := range mods {
		for _, r := range m.Requires {
			if r.Version != version {
				errs = append(errs, fmt.Errorf("release: %s/go.mod requires %s %s; releasing %s, it must require %s",
					m.Dir, r.Path, r.Version, version, version))
			}
		}
	}
	return errors.Join(errs...)
}

// Snapshot copies the files of the repository at repo into a new folder
// under tmp and returns it: at revision rev when rev is not empty (as git
// archive exports it, which is what the go command serves from a tag),
// otherwise the working tree's files that a commit would hold (tracked
// and untracked, less those .gitignore names), so that a check before a
// release sees uncommitted changes but not build output.
func Snapshot(ctx context.Context, repo, rev, tmp string) (string, error) {
	out, err := os.MkdirTemp(tmp, "snapshot-")
	if err != nil {
		return "", err
	}
	if rev != "" {
		archive, err := git(ctx, repo, "-c", "core.autocrlf=input", "-c", "core.eol=lf", "archive", "--format=tar", rev)
		if err != nil {
			return "", err
		}
		return out, untar(bytes.NewReader(archive), out)
	}
	list, err := git(ctx, repo, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	if err != nil {
		return "", err
	}
	for name := range strings.SplitSeq(strings.TrimSuffix(string(list), "\x00"), "\x00") {
		if name == "" {
			continue
		}
		src := filepath.Join(repo, filepath.FromSlash(name))
		info, err := os.Lstat(src)
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted, not yet committed
		}
		if err != nil {
			return "", err
		}
		if !info.Mode().IsRegular() {
			continue // the module zip holds regular files only
		}
		if err := copyFile(src, filepath.Join(out, filepath.FromSlash(name)), info.Mode().Perm()); err != nil {
			return "", err
		}
	}
	return out, nil
}

// CommitTime returns the time of the repository's commit rev ("HEAD"
// when empty), the time a proxy gives the version.
func CommitTime(ctx context.Context, repo, rev string) (time.Time, error) {
	if rev == "" {
		rev = "HEAD"
	}
	out, err := git(ctx, repo, "log", "-1", "--format=%cI", rev)
	if err != nil {
		return time.Time{}, err
	}
	return time.Parse(time.RFC3339, strings.TrimSpace(string(out)))
}

// WriteProxy writes every module of the tree at dir (a [Snapshot]) at
// version into the proxy folder out, with time t in the .info files, and
// returns the modules written. It refuses, writing nothing, modules that
// require each other at another version ([Check]) and a go.mod with a
// replace directive. A nested module without a LICENSE gets the root's,
// as the go command gives one when it serves a nested module from a
// repository.
func WriteProxy(dir, version, out string, t time.Time) ([]Module, error) {
	mods, err := Modules(dir)
	if err != nil {
		return nil, err
	}
	if err := Check(mods, version); err != nil {
		return nil, err
	}
	license, err := os.ReadFile(filepath.Join(dir, "LICENSE"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	for _, m := range mods[1:] {
		target := filepath.Join(dir, filepath.FromSlash(m.Dir), "LICENSE")
		if _, err := os.Stat(target); license != nil && errors.Is(err, fs.ErrNotExist) {
			if err := os.WriteFile(target, license, 0o644); err != nil {
				return nil, err
			}
		}
	}
	for _, m := range mods {
		if err := writeModule(dir, out, m, version, t); err != nil {
			return nil, err
		}
	}
	return mods, nil
}

// writeModule writes one module's list, .info, .mod and .zip.
func writeModule(dir, out string, m Module, version string, t time.Time) error {
	escaped, err := module.EscapePath(m.Path)
	if err != nil {
		return err
	}
	ev, err := module.EscapeVersion(version)
	if err != nil {
		return err
	}
	vdir := filepath.Join(out, filepath.FromSlash(escaped), "@v")
	if err := os.MkdirAll(vdir, 0o755); err != nil {
		return err
	}
	mv := module.Version{Path: m.Path, Version: version}
	var zip bytes.Buffer
	if err := modzip.CreateFromDir(&zip, mv, filepath.Join(dir, filepath.FromSlash(m.Dir))); err != nil {
		return fmt.Errorf("release: %s: %w", m.Path, err)
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, t.UTC()})
	if err != nil {
		return err
	}
	for name, data := range map[string][]byte{
		ev + ".zip":  zip.Bytes(),
		ev + ".mod":  m.Mod,
		ev + ".info": info,
	} {
		if err := os.WriteFile(filepath.Join(vdir, name), data, 0o644); err != nil {
			return err
		}
	}
	// The list names every version the proxy serves; a second release
	// written into the same folder adds to it.
	list, err := os.ReadFile(filepath.Join(vdir, "list"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	versions := strings.Fields(string(list))
	if !slices.Contains(versions, version) {
		versions = append(versions, version)
	}
	semver.Sort(versions)
	return os.WriteFile(filepath.Join(vdir, "list"), []byte(strings.Join(versions, "\n")+"\n"), 0o644)
}

func git(ctx context.Context, repo string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = repo
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("release: git %s in %s: %w: %s", strings.Join(args, " "), repo, err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

func copyFile(src, dst string, perm fs.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// untar extracts the regular files of a tar stream into dir.
func untar(r io.Reader, dir string) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		name := filepath.FromSlash(path.Clean(h.Name))
		if !filepath.IsLocal(name) {
			return fmt.Errorf("release: archive entry %q is outside the repository", h.Name)
		}
		dst := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fs.FileMode(h.Mode).Perm())
		if err != nil {
			return err
		}
		if _, err := io.Copy(f, tr); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
}
