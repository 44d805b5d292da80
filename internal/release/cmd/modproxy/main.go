// Command modproxy writes tranche's modules at a release version as a
// module proxy on disk, so that a consumer can be built against the
// release before its tags are pushed:
//
//	go run ./internal/release/cmd/modproxy -version v0.1.0 -out /tmp/proxy
//	GOPROXY=file:///tmp/proxy,$(go env GOPROXY) GONOSUMDB=github.com/tranche-dev/tranche go get github.com/tranche-dev/tranche/ledger/sqlite@v0.1.0
//
// Without -rev it takes the working tree's files that a commit would
// hold; with -rev (a tag or commit) the files git archive exports at that
// revision, which is what the go command serves once the tag is pushed.
// It prints each module's path and the tag that releases it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"

	"github.com/tranche-dev/tranche/internal/release"
)

func main() {
	version := flag.String("version", "", "the release version, such as v0.1.0")
	out := flag.String("out", "", "the proxy folder to write (created if missing)")
	repo := flag.String("repo", ".", "the repository's root")
	rev := flag.String("rev", "", "a Git revision to release instead of the working tree")
	flag.Parse()
	if *version == "" || *out == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: modproxy -version v0.1.0 -out DIR [-repo DIR] [-rev REV]")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *repo, *rev, *version, *out); err != nil {
		fmt.Fprintln(os.Stderr, "modproxy:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, repo, rev, version, out string) error {
	tmp, err := os.MkdirTemp("", "modproxy-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	snapshot, err := release.Snapshot(ctx, repo, rev, tmp)
	if err != nil {
		return err
	}
	t, err := release.CommitTime(ctx, repo, rev)
	if err != nil {
		return err
	}
	abs, err := filepath.Abs(out)
	if err != nil {
		return err
	}
	mods, err := release.WriteProxy(snapshot, version, abs, t)
	if err != nil {
		return err
	}
	for _, m := range mods {
		fmt.Printf("%s@%s\ttag %s\n", m.Path, version, m.Tag(version))
	}
	fmt.Printf("GOPROXY=file://%s\n", filepath.ToSlash(abs))
	return nil
}
