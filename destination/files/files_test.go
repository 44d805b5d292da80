package files_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/destination/files"
	"github.com/tranche-dev/tranche/tranchetest"
)

// ctxT is the context of the tests' calls.
var ctxT = context.Background()

// jan1 is the first day of the tests' partitions.
var jan1 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// day returns the UTC day d days after 2025-12-31 (day(1) is 2026-01-01).
func day(d int) tranche.TimePartition {
	return tranche.PartitionOf(tranche.Day, jan1.AddDate(0, 0, d-1))
}

// dailyAsset returns a daily asset, column "day", that produces rows and
// writes them to dests.
func dailyAsset(name string, rows func(m *tranche.Materialization) []tranche.Row, dests ...tranche.Destination) tranche.Asset {
	a := tranchetest.Func(name, func(_ context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
		return rows(m), nil
	})
	a.Partitioning = tranche.Partitioning{Granularity: tranche.Day, Column: "day", AllowWindow: true}
	a.Destinations = dests
	return a
}

func fixed(rows ...tranche.Row) func(*tranche.Materialization) []tranche.Row {
	return func(*tranche.Materialization) []tranche.Row { return rows }
}

func readTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		rel, _ := filepath.Rel(dir, path)
		files[filepath.ToSlash(rel)] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func TestFilesDestination(t *testing.T) {
	dir := t.TempDir()
	dest := &files.Destination{Dir: dir}
	w, err := tranche.NewTimePartitionWindow(tranche.Day, jan1, jan1.AddDate(0, 0, 2)) // Jan 1..3
	if err != nil {
		t.Fatal(err)
	}
	rows := []tranche.Row{
		{"day": "2026-01-03", "views": 7, "page": "/a<b>&c"},
		{"day": "2026-01-01", "views": 1, "page": "/"},
		{"day": "2026-01-03", "views": 2, "page": "/x"},
	}
	hourly := tranchetest.Rows("hourly", []tranche.Row{{"hour": "2026-01-01T05:00Z"}})
	hourly.Partitioning = tranche.Partitioning{Granularity: tranche.Hour, Column: "hour"}
	hourly.Destinations = []tranche.Destination{dest}
	dim := tranchetest.Rows("dim/2", []tranche.Row{{"k": 1}})
	dim.Destinations = []tranche.Destination{dest}

	for range 2 { // the second run replaces every file
		res, err := new(tranche.Runner).Run(ctxT, tranchetest.NewDAG(t, dailyAsset("views", fixed(rows...), dest), dim), w)
		tranchetest.RequireSucceeded(t, res, err)
	}
	res, err := new(tranche.Runner).Run(ctxT, tranchetest.NewDAG(t, hourly), tranche.PartitionOf(tranche.Hour, jan1.Add(5*time.Hour)))
	tranchetest.RequireSucceeded(t, res, err)

	want := map[string]string{
		"views/day=2026-01-01/data.jsonl":            `{"day":"2026-01-01","page":"/","views":1}` + "\n",
		"views/day=2026-01-02/data.jsonl":            "",
		"views/day=2026-01-03/data.jsonl":            `{"day":"2026-01-03","page":"/a<b>&c","views":7}` + "\n" + `{"day":"2026-01-03","page":"/x","views":2}` + "\n",
		"dim%2F2/data.jsonl":                         `{"k":1}` + "\n",
		"hourly/hour=2026-01-01T05%3A00Z/data.jsonl": `{"hour":"2026-01-01T05:00Z"}` + "\n",
	}
	if diff := cmp.Diff(want, readTree(t, dir)); diff != "" {
		t.Errorf("files mismatch (-want +got):\n%s", diff)
	}
	if got := dest.Path("views", "day", "2026-01-02"); got != filepath.Join(dir, "views", "day=2026-01-02", "data.jsonl") {
		t.Errorf("Path = %s", got)
	}
}

func TestFilesDestinationRefusesWholeWrite(t *testing.T) {
	dir := t.TempDir()
	dest := &files.Destination{Dir: dir}
	w, err := tranche.NewTimePartitionWindow(tranche.Day, jan1, jan1.AddDate(0, 0, 2))
	if err != nil {
		t.Fatal(err)
	}
	good := []tranche.Row{{"day": "2026-01-01", "v": 1}, {"day": "2026-01-03", "v": 3}}
	res, err := new(tranche.Runner).Run(ctxT, tranchetest.NewDAG(t, dailyAsset("a", fixed(good...), dest)), w)
	tranchetest.RequireSucceeded(t, res, err)
	before := readTree(t, dir)

	// Partition 2026-01-03's second row cannot be encoded: nothing at all
	// is replaced, and no temporary file is left.
	bad := []tranche.Row{{"day": "2026-01-01", "v": 10}, {"day": "2026-01-03", "v": 30}, {"day": "2026-01-03", "v": make(chan int)}}
	res, err = new(tranche.Runner).Run(ctxT, tranchetest.NewDAG(t, dailyAsset("a", fixed(bad...), dest)), w)
	if err == nil || !strings.Contains(err.Error(), `asset "a", partition 2026-01-03, row 1: json: unsupported type: chan int`) {
		t.Fatalf("Run error = %v", err)
	}
	tranchetest.RequireState(t, res, tranche.StateFailed)
	if diff := cmp.Diff(before, readTree(t, dir)); diff != "" {
		t.Errorf("a refused write changed the files (-before +after):\n%s", diff)
	}
}

func TestFilesDestinationBadInput(t *testing.T) {
	for _, tc := range []struct {
		name    string
		dest    *files.Destination
		batches []tranche.Batch
		want    string
	}{
		{"no dir", &files.Destination{}, []tranche.Batch{{Asset: "a"}}, "empty Dir"},
		{"no asset", &files.Destination{Dir: t.TempDir()}, []tranche.Batch{{}}, "needs an asset name"},
		{"no column", &files.Destination{Dir: t.TempDir()}, []tranche.Batch{{Asset: "a", Partition: day(1)}}, "needs an asset name and, for a partition, a column"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.dest.Write(ctxT, tc.batches); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Write = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestFilesDestinationEscapes(t *testing.T) {
	dest := &files.Destination{Dir: "root"}
	for _, tc := range []struct{ asset, column, key, want string }{
		{"a", "", "", "root/a/data.jsonl"},
		{"..", "", "", "root/%2E./data.jsonl"},
		{"a b", "c:d", "2026-W01", "root/a%20b/c%3Ad=2026-W01/data.jsonl"},
		{"x", "hour", "2026-11-01T01:00-05:00", "root/x/hour=2026-11-01T01%3A00-05%3A00/data.jsonl"},
		{"x", "hour", "2026-03-29T01:00+01:00", "root/x/hour=2026-03-29T01%3A00+01%3A00/data.jsonl"},
	} {
		if got := filepath.ToSlash(dest.Path(tc.asset, tc.column, tc.key)); got != tc.want {
			t.Errorf("Path(%q, %q, %q) = %s, want %s", tc.asset, tc.column, tc.key, got, tc.want)
		}
	}
	if !slices.Contains([]string{"files:root"}, dest.String()) {
		t.Errorf("String() = %s", dest.String())
	}
}

// cancelAfter is a context canceled once Err has been asked n times, to
// stop a write between encoding its batches and renaming them.
type cancelAfter struct {
	context.Context
	n int
}

func (c *cancelAfter) Err() error {
	if c.n--; c.n < 0 {
		return context.Canceled
	}
	return nil
}

func TestFilesDestinationCanceledBeforeRenames(t *testing.T) {
	dir := t.TempDir()
	dest := &files.Destination{Dir: dir}
	batches := func(v int) []tranche.Batch {
		return []tranche.Batch{
			{Asset: "a", Column: "day", Partition: day(1), Rows: []tranche.Row{{"v": v}}},
			{Asset: "a", Column: "day", Partition: day(2), Rows: []tranche.Row{{"v": v}}},
		}
	}
	if err := dest.Write(ctxT, batches(1)); err != nil {
		t.Fatal(err)
	}
	before := readTree(t, dir)
	// Err is asked once per batch, then once before the renames.
	if err := dest.Write(&cancelAfter{Context: ctxT, n: 2}, batches(2)); !errors.Is(err, context.Canceled) {
		t.Fatalf("Write = %v, want context.Canceled", err)
	}
	if diff := cmp.Diff(before, readTree(t, dir)); diff != "" {
		t.Errorf("a write canceled before its renames changed the files (-before +after):\n%s", diff)
	}
}
