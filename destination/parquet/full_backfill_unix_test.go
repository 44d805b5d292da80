//go:build unix

package parquet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/memledger"
)

// fullBackfillEnv, when set to a lake, makes TestFullDiskBackfill the
// child that backfills into it.
const fullBackfillEnv = "TRANCHE_PARQUET_FULL_BACKFILL_CHILD"

// fullBackfillDays is the backfill's size: every tenth partition's part
// file (fullRows(2)) is past the child's file-size limit.
const fullBackfillDays = 1000

func bigDay(i int) bool { return i%10 == 0 }

// fullBackfillResult is what the child reports.
type fullBackfillResult struct {
	First, Second struct{ Succeeded, Failed int }
	Unnamed       []string // failures of the first run that name no full disk
	Wrong         []string // partitions whose history is not one failure (the big ones) then one success
}

// TestFullDiskBackfill backfills 1,000 daily partitions into a Parquet
// lake, four at a time, in a child process whose files cannot grow past
// 16 KiB (RLIMIT_FSIZE, SIGXFSZ ignored): every tenth partition's part
// file is too big, and fails with an error naming the full disk (EFBIG),
// recorded failed in the ledger, never lost. The child then lifts its
// limit, as a disk given room, and runs the same backfill again without
// a restart: it runs those partitions, and only those. Every partition
// ends succeeded exactly once, and the lake holds each whole, with no
// temporary file.
func TestFullDiskBackfill(t *testing.T) {
	if dir := os.Getenv(fullBackfillEnv); dir != "" {
		fullBackfillChild(dir)
		return
	}
	if testing.Short() {
		t.Skip("runs a child process")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestFullDiskBackfill$")
	cmd.Env = append(os.Environ(), fullBackfillEnv+"="+dir)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	var r fullBackfillResult
	if err := json.Unmarshal([]byte(strings.SplitN(string(out), "\n", 2)[0]), &r); err != nil {
		t.Fatalf("child printed %q: %v", out, err)
	}
	big := fullBackfillDays / 10
	if r.First.Succeeded != fullBackfillDays-big || r.First.Failed != big || r.Second.Succeeded != big || r.Second.Failed != 0 {
		t.Errorf("runs: under the limit %+v, then %+v; want %d succeeded and %d failed, then the %d run again", r.First, r.Second, fullBackfillDays-big, big, big)
	}
	for _, s := range append(r.Unnamed[:min(len(r.Unnamed), 5)], r.Wrong[:min(len(r.Wrong), 5)]...) {
		t.Errorf("%s (of %d failures naming no full disk, %d partitions with a wrong history)", s, len(r.Unnamed), len(r.Wrong))
	}
	d := &Destination{Dir: dir}
	for i := range fullBackfillDays {
		p := day(i)
		rows, err := d.Rows("events", "day", p.Key())
		want := len(fullRows(p, 1))
		if bigDay(i) {
			want = len(fullRows(p, 2))
		}
		if err != nil || len(rows) != want {
			t.Errorf("partition %s: %d rows, %v; want %d", p.Key(), len(rows), err, want)
		}
	}
	fullNoTemp(t, dir)
	t.Logf("under the limit: %+v; with room again: %+v", r.First, r.Second)
}

func fullBackfillChild(dir string) {
	signal.Ignore(syscall.SIGXFSZ)
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		panic(err)
	}
	unlimited := lim.Cur
	lim.Cur = fullLimit
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		panic(err)
	}
	first := day(0)
	dag, err := tranche.NewDAG(tranche.Asset{
		Name:         "events",
		Partitioning: tranche.Partitioning{Granularity: tranche.Day, Location: time.UTC, Column: "day"},
		Destinations: []tranche.Destination{&Destination{Dir: dir}},
		Materialize: func(_ context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
			p, err := m.Partition()
			if err != nil {
				return nil, err
			}
			size := 1
			if bigDay(int(p.Start.Sub(first.Start) / (24 * time.Hour))) {
				size = 2
			}
			rows := fullRows(p, size)
			for _, r := range rows {
				r["day"] = p.Key()
			}
			return rows, nil
		},
	})
	if err != nil {
		panic(err)
	}
	w, err := tranche.NewTimePartitionWindow(tranche.Day, first.Start, day(fullBackfillDays-1).Start)
	if err != nil {
		panic(err)
	}
	l := memledger.New(nil)
	b := &backfill.Backfill{DAG: dag, Window: w, Ledger: l, Concurrency: 4, OnFailure: tranche.FailContinue}
	var out fullBackfillResult
	ctx := context.Background()
	r1, _ := b.Run(ctx)
	out.First.Succeeded, out.First.Failed = r1.Succeeded, r1.Failed
	for _, f := range r1.Failures {
		if !errors.Is(f.Err, syscall.EFBIG) || !strings.Contains(f.Err.Error(), "disk is full") {
			out.Unnamed = append(out.Unnamed, f.Key+": "+f.Err.Error())
		}
	}
	// Room again, in the same process.
	lim.Cur = unlimited
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		panic(err)
	}
	r2, _ := b.Run(ctx)
	out.Second.Succeeded, out.Second.Failed = r2.Succeeded, r2.Failed
	id := backfill.DAGIdentity(dag, tranche.Day, time.UTC)
	for i := range fullBackfillDays {
		p := day(i)
		h, err := l.History(ctx, id, p.Start)
		ok := err == nil && len(h) > 0 && h[len(h)-1].State == ledger.StateSucceeded
		if bigDay(i) {
			ok = ok && len(h) == 2 && h[0].State == ledger.StateFailed
		} else {
			ok = ok && len(h) == 1
		}
		if !ok {
			out.Wrong = append(out.Wrong, fmt.Sprintf("partition %s: history %+v, %v; want one success, after one failure if its file was too big", p.Key(), h, err))
		}
	}
	data, _ := json.Marshal(out)
	fmt.Println(string(data))
}
