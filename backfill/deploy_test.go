package backfill_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/memledger"
)

// deployDAG returns version v of a DAG named name whose asset "events"
// writes rows naming v into dest; a v other than "v1" adds an asset
// upstream, and so makes another identity, as a deploy does. The asset
// calls hold, when not nil, before it returns a partition's rows.
func deployDAG(t *testing.T, name, v string, dest *tranche.MemoryDestination, hold func(key string)) *tranche.DAG {
	t.Helper()
	events := tranche.Asset{Name: "events", Partitioning: tranche.Partitioning{Granularity: tranche.Day, Location: time.UTC, Column: "day"},
		Destinations: []tranche.Destination{dest},
		Materialize: func(ctx context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
			p, err := m.Partition()
			if err != nil {
				return nil, err
			}
			if hold != nil {
				hold(p.Key())
			}
			return []tranche.Row{{"day": p.Key(), "code": v}}, nil
		}}
	assets := []tranche.Asset{events}
	if v != "v1" {
		assets[0].Deps = []string{"source_" + v}
		assets = append(assets, tranche.Asset{Name: "source_" + v, Partitioning: tranche.Partitioning{Granularity: tranche.Day, Location: time.UTC},
			Materialize: func(context.Context, *tranche.Materialization) ([]tranche.Row, error) { return nil, nil }})
	}
	dag, err := tranche.NewDAG(assets...)
	if err != nil {
		t.Fatal(err)
	}
	if name != "" {
		dag.Name = name
	}
	return dag
}

// codeOf returns the code version whose rows each partition of w holds
// in dest ("" for none).
func codeOf(t *testing.T, dest *tranche.MemoryDestination, w tranche.TimePartitionWindow) map[string]string {
	t.Helper()
	out := map[string]string{}
	for p := range w.OldestFirst() {
		rows, _ := dest.Rows("events", p.Key())
		if len(rows) == 1 {
			out[p.Key()] = fmt.Sprint(rows[0]["code"])
		} else {
			out[p.Key()] = fmt.Sprint(len(rows), " rows")
		}
	}
	return out
}

// TestDeployDuringBackfill runs the old DAG's backfill, held inside its
// first partition while the new DAG (another identity, one name) lands
// every partition, then lets it go on: the old backfill skips every
// partition the new DAG landed (its plan, its claims, its report, its
// events say so), its held write is refused by the fence, and every
// partition keeps the new code's rows. A rollback under RerunAll, and a
// backfill of the old DAG created after the deploy, replace them; DAGs
// whose names differ do not link, as before names linked them.
func TestDeployDuringBackfill(t *testing.T) {
	w := bfDays(t, 1, 6)
	for _, tt := range []struct {
		name           string
		oldName        string // the DAGs' names: "" keeps NewDAG's
		newName        string
		wantSuperseded int
	}{
		{"one name", "events", "events", 5},
		{"default names", "", "", 5}, // the added asset is upstream: both are named "events"
		{"other names", "events", "events-2", 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := t.Context()
				dest := &tranche.MemoryDestination{}
				l := memledger.New(nil)
				held, release := make(chan string, 1), make(chan struct{})
				var once sync.Once
				hold := func(key string) {
					once.Do(func() {
						held <- key
						<-release
					})
				}
				var mu sync.Mutex
				var skipped []error
				old := &backfill.Backfill{DAG: deployDAG(t, tt.oldName, "v1", dest, hold), Window: w, Ledger: l, Worker: "old",
					Order: backfill.NewestFirst, OnFailure: tranche.FailContinue,
					OnEvent: func(_ context.Context, e tranche.Event) {
						if e.Kind == backfill.KindPartitionSkipped {
							mu.Lock()
							skipped = append(skipped, e.Err)
							mu.Unlock()
						}
					}}
				type outcome struct {
					r   *backfill.Report
					err error
				}
				done := make(chan outcome, 1)
				go func() {
					r, err := old.Run(ctx)
					done <- outcome{r, err}
				}()
				first := <-held
				// Tokens count the ledger's milliseconds: the new DAG's
				// claims come later, as a deploy's do.
				time.Sleep(5 * time.Millisecond)
				newer := &backfill.Backfill{DAG: deployDAG(t, tt.newName, "v2", dest, nil), Window: w, Ledger: l, Worker: "new"}
				if r, err := newer.Run(ctx); err != nil || r.Succeeded != 6 {
					t.Fatalf("the new DAG's backfill = %v, %v; want every partition run", r, err)
				}
				close(release)
				o := <-done
				if o.err != nil && !errors.Is(o.err, tranche.ErrFenced) && tt.wantSuperseded > 0 {
					t.Logf("the old backfill: %v", o.err)
				}
				r := o.r
				if r.Superseded != tt.wantSuperseded {
					t.Errorf("the old backfill's report: %v, Superseded %d; want %d", r, r.Superseded, tt.wantSuperseded)
				}
				codes := codeOf(t, dest, w)
				if tt.wantSuperseded == 0 {
					// Not linked: the old code replaces the new's, as
					// before names linked versions.
					if r.Succeeded < 5 {
						t.Errorf("the old backfill of another name: %v; want it to run the partitions", r)
					}
					return
				}
				for k, code := range codes {
					if code != "v2" {
						t.Errorf("partition %s holds the rows of %s; want the new code's (v2) (%s was held)", k, code, first)
					}
				}
				mu.Lock()
				n := 0
				for _, err := range skipped {
					if errors.Is(err, ledger.ErrSuperseded) {
						n++
					}
				}
				mu.Unlock()
				if n != tt.wantSuperseded {
					t.Errorf("%d partition.skipped events with an error matching ErrSuperseded; want %d", n, tt.wantSuperseded)
				}

				// Its status: nothing succeeded under the old DAG, every
				// partition landed by a newer version, done.
				st, err := backfill.StatusOf(ctx, l, r.Backfill, time.Now())
				if err != nil {
					t.Fatal(err)
				}
				if st.Superseded != 6 || !st.Done() {
					t.Errorf("the old backfill's status: %v, Superseded %d, Done %v; want 6 landed by a newer version, done", st, st.Superseded, st.Done())
				}

				// Run again, the old backfill plans every partition as
				// landed by a newer version.
				old.OnEvent = nil
				p, err := old.Plan(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if p.Counts.SkipSuperseded != 6 || p.Counts.Run != 0 {
					t.Errorf("the old backfill's plan after the deploy: %v; want 6 landed by a newer version", p)
				}
				for item, err := range p.Items(ctx) {
					if err != nil {
						t.Fatal(err)
					}
					if item.Action != ledger.ActionSkipSuperseded {
						t.Errorf("plan: %s %q; want %q", item.Partition.Key(), item.Action, ledger.ActionSkipSuperseded)
					}
				}
				if r, err := old.Run(ctx); err != nil || r.Superseded != 6 || r.RanHere() != 0 || !r.Done() {
					t.Errorf("the old backfill run again = %v, %v; want 6 superseded, nothing run, done", r, err)
				}
				if codes := codeOf(t, dest, w); codes[first] != "v2" {
					t.Errorf("after the old backfill ran again: %v; want v2 everywhere", codes)
				}

				// A rollback: the old backfill under RerunAll replaces the
				// new code's rows.
				old.Rerun = "all"
				if r, err := old.Run(ctx); err != nil || r.Succeeded != 6 {
					t.Errorf("the rollback under RerunAll = %v, %v; want every partition run", r, err)
				}
				for k, code := range codeOf(t, dest, w) {
					if code != "v1" {
						t.Errorf("after the rollback, %s holds %s; want v1", k, code)
					}
				}
				// The new code lands days 7 and 8; a backfill of the old
				// DAG created afterwards is not bound by them.
				later := bfDays(t, 7, 8)
				newer.Window = later
				if r, err := newer.Run(ctx); err != nil || r.Succeeded != 2 {
					t.Fatalf("the new DAG's backfill of days 7 and 8 = %v, %v", r, err)
				}
				// Created a millisecond later: in the bubble the clock
				// moves only when the test waits.
				time.Sleep(time.Millisecond)
				fresh := &backfill.Backfill{DAG: old.DAG, Window: later, Ledger: l, Worker: "rollback"}
				if r, err := fresh.Run(ctx); err != nil || r.Superseded != 0 || r.Succeeded != 2 {
					t.Errorf("a backfill of the old DAG created after the deploy = %v, %v; want both partitions run", r, err)
				}
				for k, code := range codeOf(t, dest, later) {
					if code != "v1" {
						t.Errorf("after the later backfill of the old DAG, %s holds %s; want v1", k, code)
					}
				}
			})
		})
	}
}

// TestDeployAddingLeafUnnamed is issue 30's deploy that adds an asset
// nothing depends on, both versions under NewDAG's default name: the
// old code's backfill is held inside its first partition; the new
// code's backfill refuses to run (ErrUnnamedDAG, naming the old name)
// and lands nothing, since unlinked, the old backfill would replace what
// it lands; named as the old version is, the new code lands every
// partition, and the old backfill, resumed, leaves them.
func TestDeployAddingLeafUnnamed(t *testing.T) {
	// The deploy's claims come later by the ledger's clock, which a
	// second's step puts beyond the old code's claim without a sleep.
	var ahead atomic.Int64
	l := memledger.New(func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) })
	dest := &tranche.MemoryDestination{}
	w := bfDays(t, 1, 8)
	held, release := make(chan string, 1), make(chan struct{})
	var once sync.Once
	old := deployDAG(t, "", "v1", dest, func(key string) {
		once.Do(func() { held <- key; <-release })
	})
	oldRun := make(chan error, 1)
	go func() {
		_, err := (&backfill.Backfill{DAG: old, Window: w, Ledger: l, Worker: "old", OnFailure: tranche.FailContinue}).Run(t.Context())
		oldRun <- err
	}()
	<-held
	ahead.Store(int64(time.Second))

	newDAG := func() *tranche.DAG {
		d := deployDAG(t, "", "v2", dest, nil)
		leaf := tranche.Asset{Name: "summary", Deps: []string{"events"}, Partitioning: tranche.Partitioning{Granularity: tranche.Day, Location: time.UTC},
			Materialize: func(context.Context, *tranche.Materialization) ([]tranche.Row, error) { return nil, nil }}
		assets := append(slices.Collect(d.Assets()), leaf)
		d, err := tranche.NewDAG(assets...)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	unnamed := newDAG()
	if unnamed.Name == old.Name {
		t.Fatalf("the new DAG's default name %q is the old one's; the test needs a deploy that changes it", unnamed.Name)
	}
	rep, err := (&backfill.Backfill{DAG: unnamed, Window: w, Ledger: l, Worker: "new"}).Run(t.Context())
	if !errors.Is(err, backfill.ErrUnnamedDAG) || !strings.Contains(err.Error(), fmt.Sprintf("set DAG.Name to %q", old.Name)) {
		t.Fatalf("Run of the new code under its default name = %v, %v; want ErrUnnamedDAG saying to name it %q", rep, err, old.Name)
	}

	named := newDAG()
	named.Name = old.Name
	rep, err = (&backfill.Backfill{DAG: named, Window: w, Ledger: l, Worker: "new"}).Run(t.Context())
	if err != nil || rep.Succeeded != 8 {
		t.Fatalf("Run of the new code named %q = %+v, %v; want 8 partitions", named.Name, rep, err)
	}
	close(release)
	if err := <-oldRun; err != nil && !errors.Is(err, tranche.ErrFenced) {
		t.Errorf("the old backfill: %v", err)
	}
	for key, code := range codeOf(t, dest, w) {
		if code != "v2" {
			t.Errorf("partition %s holds %s", key, code)
		}
	}
}
