package release

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// consumerMain is a program a user writes: the root module and the
// SQLite ledger, a backfill of three days recorded in a ledger file.
const consumerMain = `package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/destination/files"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/ledger/sqlite"
)

func main() {
	if err := run(context.Background(), os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(ctx context.Context, dir string) error {
	ledger, err := sqlite.Open(ctx, filepath.Join(dir, "ledger.db"), nil)
	if err != nil {
		return err
	}
	defer ledger.Close()
	days, err := tranche.NewTimePartitionWindow(tranche.Day,
		time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 1, 3, 0, 0, 0, 0, time.UTC))
	if err != nil {
		return err
	}
	dag, err := tranche.NewDAG(tranche.Asset{
		Name:         "events",
		Partitioning: tranche.Partitioning{Granularity: tranche.Day, Location: time.UTC, Column: "day"},
		Destinations: []tranche.Destination{&files.Destination{Dir: dir}},
		Materialize: func(ctx context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
			p, err := m.Partition()
			return []tranche.Row{{"day": p.Key(), "n": 1}}, err
		},
	})
	if err != nil {
		return err
	}
	b := &backfill.Backfill{DAG: dag, Window: days, Ledger: ledger}
	report, err := b.Run(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("succeeded %d of %d\n", report.Succeeded, report.Total)
	return nil
}
`

// postgresMain is built only: running it needs a server.
const postgresMain = `package main

import (
	"context"
	"fmt"
	"os"

	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/postgres"
)

func main() {
	lg, err := postgres.Open(context.Background(), os.Getenv("TRANCHE_POSTGRES_URL"), nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer lg.Close()
	var _ ledger.Ledger = lg
}
`

// otelMain gives the OpenTelemetry hook to its runner; with no provider
// set, the hook is nil and the run completes as without one.
const otelMain = `package main

import (
	"context"
	"fmt"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/trancheotel"
)

func main() {
	dag, err := tranche.NewDAG()
	if err != nil {
		panic(err)
	}
	runner := tranche.Runner{OnEvent: trancheotel.NewHook(trancheotel.WithDAG("empty"))}
	res, err := runner.Run(context.Background(), dag, nil)
	fmt.Println(res.State, err)
}
`

// lakeMain is a program that writes one partition with the Parquet
// destination and reads it back.
const lakeMain = `package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/destination/parquet"
)

func main() {
	lake := &parquet.Destination{Dir: os.Args[1]}
	p := tranche.PartitionOf(tranche.Day, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	err := lake.Write(context.Background(), []tranche.Batch{{Asset: "events", Column: "day", Partition: p,
		Rows: []tranche.Row{{"day": p.Key(), "n": 1}, {"day": p.Key(), "n": 2}}}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	rows, err := lake.Rows("events", "day", p.Key())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("%d rows\n", len(rows))
}
`

// TestConsumer installs the repository's modules the way a user does, in
// a fresh module outside the repository with no replace and no
// workspace: it writes the modules at the release version the repository
// requires into a file-based module proxy, points GOPROXY at that proxy
// for tranche's modules (the module cache's download folder, then the
// usual proxy, serve the others), runs go get on each library module and
// builds and runs a program that uses the root and the SQLite ledger,
// and one that writes a partition with the Parquet destination. It
// also installs the examples and the tranche command with go install
// PATH@VERSION, which refuses a module with a replace directive, runs the
// command, and builds each nested module of the release on its own
// (GOWORK=off), against the released root rather than the repository's.
func TestConsumer(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the SQLite driver in a fresh module cache; skipped with -short")
	}
	if raceEnabled {
		t.Skip("runs only go commands, in which the race detector has nothing to watch")
	}
	root := repoRoot(t)
	ctx := t.Context()
	tmp := t.TempDir()
	snapshot, err := Snapshot(ctx, root, "", tmp)
	if err != nil {
		t.Fatal(err)
	}
	mods, err := Modules(snapshot)
	if err != nil {
		t.Fatal(err)
	}
	version := releaseVersion(t, mods)
	at, err := CommitTime(ctx, root, "")
	if err != nil {
		t.Fatal(err)
	}
	proxy := filepath.Join(tmp, "proxy")
	if _, err := WriteProxy(snapshot, version, proxy, at); err != nil {
		t.Fatal(err)
	}

	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command: %v", err)
	}
	cache, err := exec.Command(goCmd, "env", "GOMODCACHE", "GOPROXY").Output()
	if err != nil {
		t.Fatal(err)
	}
	modcache, upstream, _ := strings.Cut(strings.TrimSpace(string(cache)), "\n")
	// A module cache of its own, so that the release's zips never land in
	// the developer's cache, where a later GOWORK=off build would take
	// them for the published release.
	env := []string{
		"GOWORK=off",
		"GOTOOLCHAIN=local",
		"GOMODCACHE=" + filepath.Join(tmp, "modcache"),
		"GOPROXY=" + fileURL(proxy) + "," + fileURL(filepath.Join(modcache, "cache", "download")) + "," + upstream,
		"GONOSUMDB=github.com/tranche-dev/tranche", // not in the checksum database until it is published
		"GONOPROXY=", "GOPRIVATE=", "GOINSECURE=",
		// -trimpath makes the build cache key of a dependency its module
		// and version, not its folder, so the driver compiles once.
		"GOFLAGS=-modcacherw -trimpath -buildvcs=false",
		"GOBIN=" + filepath.Join(tmp, "bin"),
	}
	run := func(dir string, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, goCmd, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), env...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("in %s: go %s: %v\n%s", dir, strings.Join(args, " "), err, out.String())
		}
		return out.String()
	}

	app, err := os.MkdirTemp("", "tranche-consumer-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(app) })
	if rel, err := filepath.Rel(root, app); err == nil && filepath.IsLocal(rel) {
		t.Fatalf("the consumer %s is inside the repository %s", app, root)
	}
	run(app, "mod", "init", "example.com/consumer")
	libraries := []string{Root, Root + "/ledger/sqlite", Root + "/ledger/postgres", Root + "/trancheotel", Root + "/destination/parquet"}
	for _, m := range libraries {
		run(app, "get", m+"@"+version)
	}
	write(t, filepath.Join(app, "main.go"), consumerMain)
	write(t, filepath.Join(app, "cmd", "pg", "main.go"), postgresMain)
	write(t, filepath.Join(app, "cmd", "otel", "main.go"), otelMain)
	write(t, filepath.Join(app, "cmd", "lake", "main.go"), lakeMain)
	run(app, "mod", "tidy")
	gomod, err := os.ReadFile(filepath.Join(app, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range libraries {
		if !bytes.Contains(gomod, []byte("\t"+m+" "+version+"\n")) {
			t.Errorf("the consumer's go.mod does not require %s %s:\n%s", m, version, gomod)
		}
	}
	if bytes.Contains(gomod, []byte("replace")) {
		t.Errorf("the consumer's go.mod has a replace:\n%s", gomod)
	}
	// The build reads the modules from the module cache, not the repository.
	if dir := strings.TrimSpace(run(app, "list", "-m", "-f", "{{.Dir}}", Root)); !strings.HasPrefix(dir, filepath.Join(tmp, "modcache")) {
		t.Errorf("tranche builds from %s; want a folder of the module cache", dir)
	}
	run(app, "build", "-mod=readonly", "-o", filepath.Join(tmp, "consumer"), ".")
	run(app, "vet", "./...")
	run(app, "mod", "verify")
	cmd := exec.CommandContext(ctx, filepath.Join(tmp, "consumer"), t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil || string(out) != "succeeded 3 of 3\n" {
		t.Errorf("the consumer printed %q, %v; want \"succeeded 3 of 3\\n\"", out, err)
	}

	run(app, "build", "-mod=readonly", "-o", filepath.Join(tmp, "otel"), "./cmd/otel")
	if out, err := exec.CommandContext(ctx, filepath.Join(tmp, "otel")).CombinedOutput(); err != nil || string(out) != "succeeded <nil>\n" {
		t.Errorf("the OpenTelemetry program printed %q, %v; want \"succeeded <nil>\\n\"", out, err)
	}
	run(app, "build", "-mod=readonly", "-o", filepath.Join(tmp, "lake"), "./cmd/lake")
	out, err = exec.CommandContext(ctx, filepath.Join(tmp, "lake"), t.TempDir()).CombinedOutput()
	if err != nil || string(out) != "2 rows\n" {
		t.Errorf("the Parquet consumer printed %q, %v; want \"2 rows\\n\"", out, err)
	}

	// go install PATH@VERSION builds a module as its own main module, and
	// refuses one whose go.mod has a replace directive: the examples, and
	// the tranche command, which the README installs so.
	for _, m := range mods {
		if strings.HasPrefix(m.Dir, "examples/") || strings.HasPrefix(m.Dir, "cmd/") {
			run(app, "install", m.Path+"@"+version)
		}
	}
	// The installed command runs: its usage names serve, and it refuses
	// a ledger file that does not exist rather than create one.
	tranche := filepath.Join(tmp, "bin", "tranche")
	if out, err := exec.CommandContext(ctx, tranche, "help").CombinedOutput(); err != nil || !bytes.Contains(out, []byte("serve")) {
		t.Errorf("tranche help printed %q, %v; want its usage, naming serve", out, err)
	}
	missing := filepath.Join(t.TempDir(), "missing.db")
	out, err = exec.CommandContext(ctx, tranche, "ls", "--ledger", "sqlite:"+missing).CombinedOutput()
	if code := exitCode(err); code != 1 || !bytes.Contains(out, []byte("no such file")) {
		t.Errorf("tranche ls of a missing ledger exited %d, printing %q; want 1 and \"no such file\"", code, out)
	}
	if _, err := os.Stat(missing); err == nil {
		t.Errorf("tranche ls created %s", missing)
	}

	// Each nested module on its own, as GOWORK=off builds it in the
	// repository once the release is published: against the released
	// root, from the proxy. -mod=mod records the checksums its go.sum
	// lacks until the release procedure adds them.
	for _, m := range mods[1:] {
		run(filepath.Join(snapshot, filepath.FromSlash(m.Dir)), "build", "-mod=mod", "./...")
	}
}

// exitCode returns the exit code of a command's error: 0 for nil, -1 when
// it did not exit.
func exitCode(err error) int {
	var x *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &x):
		return x.ExitCode()
	}
	return -1
}

func write(t *testing.T, name, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// fileURL returns the file:// URL of an absolute path.
func fileURL(p string) string {
	return "file://" + filepath.ToSlash(p)
}
