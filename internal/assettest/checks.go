package assettest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/ledger"
	"pgregory.net/rapid"
)

// Run runs every check on ledgers of newLedger, each a subtest.
func Run(t *testing.T, newLedger NewLedger) {
	for name, check := range map[string]func(*testing.T, NewLedger){
		"Backfill": Backfill, "RerunFailed": RerunFailed, "Stale": Stale, "Refusals": Refusals, "Workers": Workers, "FailStop": FailStop,
		"RerunAll": RerunAll, "PlanID": PlanID,
	} {
		t.Run(name, func(t *testing.T) { check(t, newLedger) })
	}
}

// Backfill backfills March 2026 of the platform: each asset's
// partitions run once (743 hours: March 8 has 23), each after what it
// reads succeeded in the ledger, recorded per asset; running it again
// runs nothing.
func Backfill(t *testing.T, newLedger NewLedger) {
	p := New(t, newLedger)
	ctx := context.Background()
	b := p.march("")
	plan, err := b.Plan(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantTotal := map[string]int{"events": 743, "rollup": 31, "report": 1, "model": 31}
	for _, ap := range plan.Assets {
		if ap.Counts.Total != wantTotal[ap.Asset] || ap.Counts.Run != ap.Counts.Total || ap.Blocked != 0 {
			t.Errorf("plan of %s: %+v, blocked %d; want %d to run", ap.Asset, ap.Counts, ap.Blocked, wantTotal[ap.Asset])
		}
	}
	rep, err := b.Run(ctx)
	if err != nil {
		t.Fatalf("run: %v (%v)", err, rep)
	}
	if rep.Succeeded != 806 || rep.Total != 806 || rep.Failed != 0 {
		t.Errorf("report %v: want 806 succeeded of 806", rep)
	}
	if rep.Plan == nil || rep.Plan.Counts.Total != 806 || rep.Plan.Counts.Run != 806 || len(rep.Assets) != 4 {
		t.Errorf("report's plan %+v, %d assets: want the first wave's: 806 partitions to run", rep.Plan, len(rep.Assets))
	}
	calls := p.takeCalls()
	seen := map[string]int{}
	for _, c := range calls {
		seen[c]++
		if seen[c] > 1 {
			t.Errorf("%s ran %d times", c, seen[c])
		}
	}
	for asset, n := range wantTotal {
		if got := count(calls, asset+" "); got != n {
			t.Errorf("%s ran %d partitions, want %d", asset, got, n)
		}
	}
	if len(p.readBad) > 0 {
		t.Errorf("read before they succeeded: %v", p.readBad)
	}
	// The ledger holds each asset's partitions under its identity.
	for asset, id := range p.ids {
		n := 0
		for a, err := range p.ledger.Latest(ctx, id, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)) {
			if err != nil {
				t.Fatal(err)
			}
			if a.State != ledger.StateSucceeded {
				t.Errorf("%s %s: %s", asset, a.Key, a.State)
			}
			n++
		}
		if n != wantTotal[asset] {
			t.Errorf("ledger holds %d partitions of %s, want %d", n, asset, wantTotal[asset])
		}
	}
	// The rollup of March 8 read its 23 hours.
	if rows, _ := p.out.Rows("rollup", "2026-03-08"); len(rows) != 1 || rows[0]["n"] != 23 {
		t.Errorf("rollup 2026-03-08: %v, want n 23", rows)
	}
	if rows, _ := p.out.Rows("report", "2026-03"); len(rows) != 1 || rows[0]["n"] != 743 {
		t.Errorf("report 2026-03: %v, want n 743", rows)
	}
	rep, err = p.march("").Run(ctx)
	if err != nil || rep.Succeeded != 0 || rep.Skipped != 806 {
		t.Errorf("again: %v, %v: want 806 skipped", rep, err)
	}
	if calls := p.takeCalls(); len(calls) != 0 {
		t.Errorf("again ran %v", calls)
	}
}

// RerunFailed fails three hours of March 8: the day, the month
// and the seven model days that read the day are blocked, the rest
// runs; the rerun of failed partitions runs exactly the three hours and
// what they block, each once, in dependency order.
func RerunFailed(t *testing.T, newLedger NewLedger) {
	p := New(t, newLedger)
	ctx := context.Background()
	for _, h := range []string{"05", "06", "07"} {
		p.fail["events 2026-03-08T"+h+":00-04:00"] = true
	}
	rep, err := p.march("").Run(ctx)
	if err == nil {
		t.Fatalf("no error from a backfill with failures: %v", rep)
	}
	if rep.Failed != 3 || rep.Succeeded != 806-3-1-1-7 || rep.NotRun != 9 {
		t.Errorf("report %v: want 3 failed, 794 succeeded, 9 not run (blocked)", rep)
	}
	p.takeCalls()
	plan, err := p.march("").Plan(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for it, err := range plan.Items(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		if it.Action != ledger.ActionSkipSucceeded {
			lines = append(lines, it.Asset+" "+it.Partition.Key()+" "+string(it.Action)+" "+it.Reason)
		}
	}
	want := []string{
		"events 2026-03-08T05:00-04:00 run failed",
		"events 2026-03-08T06:00-04:00 run failed",
		"events 2026-03-08T07:00-04:00 run failed",
		"rollup 2026-03-08 run pending; after events 2026-03-08T05:00-04:00",
	}
	for d := 9; d <= 15; d++ {
		want = append(want, fmt.Sprintf("model 2026-03-%02d run pending; after rollup 2026-03-08", d))
	}
	want = append(want, "report 2026-03 run pending; after rollup 2026-03-08")
	if !slices.Equal(lines, want) {
		t.Errorf("plan:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	clear(p.fail)
	rep, err = p.march("").Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	calls := p.takeCalls()
	if rep.Succeeded != 12 || len(calls) != 12 {
		t.Errorf("rerun: %v, calls %v: want the 3 hours, the day, the month and 7 model days", rep, calls)
	}
	order := map[string]int{}
	for i, c := range calls {
		order[strings.Fields(c)[0]] = max(order[strings.Fields(c)[0]], i)
	}
	if i := slices.Index(calls, "rollup 2026-03-08"); i < order["events"] || i > slices.Index(calls, "report 2026-03") {
		t.Errorf("out of dependency order: %v", calls)
	}
	if len(p.readBad) > 0 {
		t.Errorf("read before they succeeded: %v", p.readBad)
	}
}

// Stale reruns three hours of March 8 after March landed: the
// day, the month and the model days that read the day are stale; the
// plan says why, and a backfill with rerun policy stale runs exactly
// them, in dependency order; another finds nothing stale.
func Stale(t *testing.T, newLedger NewLedger) {
	p := New(t, newLedger)
	ctx := context.Background()
	if _, err := p.march("").Run(ctx); err != nil {
		t.Fatal(err)
	}
	hours := p.backfill(tranche.Hour, time.Date(2026, 3, 8, 5, 0, 0, 0, p.NY), time.Date(2026, 3, 8, 7, 0, 0, 0, p.NY), ledger.RerunAll)
	rep, err := hours.Run(ctx)
	if err != nil || rep.Succeeded != 3 {
		t.Fatalf("rerun of 3 hours: %v, %v", rep, err)
	}
	p.takeCalls()
	for _, rerun := range []ledger.RerunPolicy{"", ledger.RerunStale} {
		plan, err := p.march(rerun).Plan(ctx)
		if err != nil {
			t.Fatal(err)
		}
		stale := map[string]int{}
		for _, ap := range plan.Assets {
			stale[ap.Asset] = ap.Stale
		}
		if want := map[string]int{"events": 0, "rollup": 1, "report": 1, "model": 7}; rerun == ledger.RerunStale && !equalMaps(stale, want) ||
			rerun == "" && !equalMaps(stale, map[string]int{"events": 0, "rollup": 1, "report": 0, "model": 0}) {
			t.Errorf("rerun %q: stale %v", rerun, stale)
		}
		for it, err := range plan.Items(ctx) {
			if err != nil {
				t.Fatal(err)
			}
			if it.Asset == "rollup" && it.Partition.Key() == "2026-03-08" {
				if !strings.HasPrefix(it.Reason, "stale: upstream events 2026-03-08T0") || !strings.HasSuffix(it.Reason, " rematerialized") {
					t.Errorf("rerun %q: rollup 2026-03-08: %s %q", rerun, it.Action, it.Reason)
				}
				if want := map[ledger.RerunPolicy]ledger.Action{"": ledger.ActionSkipSucceeded, ledger.RerunStale: ledger.ActionRun}[rerun]; it.Action != want {
					t.Errorf("rerun %q: rollup 2026-03-08: %s, want %s", rerun, it.Action, want)
				}
			}
		}
	}
	rep, err = p.march(ledger.RerunStale).Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	calls := p.takeCalls()
	want := []string{"rollup 2026-03-08"}
	if len(calls) != 9 || calls[0] != want[0] || count(calls, "report 2026-03") != 1 || count(calls, "model ") != 7 || rep.Succeeded != 9 {
		t.Errorf("stale rerun ran %v (%v): want the day, then the month and model days 9 to 15", calls, rep)
	}
	if rows, _ := p.out.Rows("report", "2026-03"); len(rows) != 1 || rows[0]["n"] != 743 {
		t.Errorf("report 2026-03: %v, want n 743", rows)
	}
	if rep, err := p.march(ledger.RerunStale).Run(ctx); err != nil || rep.Succeeded != 0 {
		t.Errorf("stale again: %v, %v: want nothing run", rep, err)
	}
}

func equalMaps(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// Refusals checks that a backfill of several granularities needs
// Runner.Read, and refuses chosen partitions; a window's model days
// whose week reaches before it, never landed, are blocked, named.
func Refusals(t *testing.T, newLedger NewLedger) {
	p := New(t, newLedger)
	ctx := context.Background()
	w, _ := tranche.NewTimePartitionWindow(tranche.Day, time.Date(2026, 3, 10, 0, 0, 0, 0, p.NY), time.Date(2026, 3, 12, 0, 0, 0, 0, p.NY))
	_, err := (&backfill.Backfill{DAG: p.dag, Window: w, Ledger: p.ledger}).Run(ctx)
	if err == nil || !strings.Contains(err.Error(), "Runner.Read") {
		t.Errorf("without Read: %v", err)
	}
	_, err = (&backfill.Backfill{DAG: p.dag, Window: w, Ledger: p.ledger, Runner: p.runner, Partitions: []tranche.TimePartition{w.Oldest()}}).Run(ctx)
	if err == nil || !strings.Contains(err.Error(), "chosen partitions") {
		t.Errorf("chosen: %v", err)
	}
	plan, err := p.backfill(tranche.Day, w.Start(), w.Newest().Start, "").Plan(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for it, err := range plan.Items(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		if it.Asset == "model" && it.Partition.Key() == "2026-03-10" {
			if it.Action != backfill.ActionBlocked || it.Reason != "needs rollup 2026-03-03 (never run; outside the window)" {
				t.Errorf("model 2026-03-10: %s %q", it.Action, it.Reason)
			}
		}
		if it.Asset == "report" {
			t.Errorf("report %s planned: the month is not inside the window", it.Partition.Key())
		}
	}
}

// Workers runs March with three workers at once, each running the same
// backfill: every asset partition runs once across them, none reads a
// partition before the ledger holds it succeeded, and each worker
// returns once March is done.
func Workers(t *testing.T, newLedger NewLedger) {
	p := New(t, newLedger)
	ctx := context.Background()
	errs := make(chan error, 3)
	for _, w := range []string{"w1", "w2", "w3"} {
		b := p.march("")
		b.Worker = w
		go func() {
			rep, err := b.Run(ctx)
			if err == nil && rep.Succeeded+rep.Elsewhere+rep.Skipped != 806 {
				err = fmt.Errorf("worker %s: %v: not all done", b.Worker, rep)
			}
			errs <- err
		}()
	}
	for range 3 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	calls := p.takeCalls()
	seen := map[string]int{}
	for _, c := range calls {
		if seen[c]++; seen[c] > 1 {
			t.Errorf("%s ran %d times", c, seen[c])
		}
	}
	if len(calls) != 806 {
		t.Errorf("%d asset partitions ran, want 806", len(calls))
	}
	if len(p.readBad) > 0 {
		t.Errorf("read before they succeeded: %v", p.readBad)
	}
}

// Property draws partitions of every asset of March to fail, runs March
// under FailContinue and checks against a model of the mappings that
// exactly the partitions whose every transitive upstream partition
// succeeded ran, each once, and the rest were blocked; then, the
// failures gone, that the rerun of failed partitions runs exactly the
// rest, each once, in dependency order, and March is complete.
func Property(t *testing.T, newLedger NewLedger) {
	rapid.Check(t, func(rt *rapid.T) {
		p := New(t, newLedger)
		ctx := context.Background()
		var hours, days []tranche.TimePartition
		for h := tranche.PartitionOf(tranche.Hour, time.Date(2026, 3, 1, 0, 0, 0, 0, p.NY)); h.Start.Month() == 3; h = h.Next() {
			hours = append(hours, h)
		}
		for d := tranche.PartitionOf(tranche.Day, hours[0].Start); d.Start.Month() == 3; d = d.Next() {
			days = append(days, d)
		}
		failing := map[string]bool{}
		for _, i := range rapid.SliceOfNDistinct(rapid.IntRange(0, len(hours)-1), 0, 4, rapid.ID[int]).Draw(rt, "hours") {
			failing["events "+hours[i].Key()] = true
		}
		for _, asset := range []string{"rollup", "model"} {
			for _, i := range rapid.SliceOfNDistinct(rapid.IntRange(0, len(days)-1), 0, 2, rapid.ID[int]).Draw(rt, asset) {
				failing[asset+" "+days[i].Key()] = true
			}
		}
		if rapid.Bool().Draw(rt, "report") {
			failing["report 2026-03"] = true
		}
		// The model: which asset partitions land, given failing.
		ok := map[string]bool{}
		for _, h := range hours {
			ok["events "+h.Key()] = !failing["events "+h.Key()]
		}
		monthOK := true
		for i, d := range days {
			k := "rollup " + d.Key()
			ok[k] = !failing[k]
			for _, h := range hours {
				if !h.Start.Before(d.Start) && h.Start.Before(d.End) {
					ok[k] = ok[k] && ok["events "+h.Key()]
				}
			}
			monthOK = monthOK && ok[k]
			m := "model " + d.Key()
			ok[m] = !failing[m]
			for j := max(0, i-7); j < i; j++ {
				ok[m] = ok[m] && ok["rollup "+days[j].Key()]
			}
		}
		ok["report 2026-03"] = !failing["report 2026-03"] && monthOK
		wantFirst, wantRest := 0, 0
		for _, v := range ok {
			if v {
				wantFirst++
			} else {
				wantRest++
			}
		}
		p.mu.Lock()
		p.fail = failing
		p.mu.Unlock()
		rep, _ := p.march("").Run(ctx)
		calls := p.takeCalls()
		seen := map[string]bool{}
		for _, c := range calls {
			if seen[c] {
				rt.Fatalf("%s ran twice", c)
			}
			seen[c] = true
		}
		for k, v := range ok {
			if v && !seen[k] {
				rt.Fatalf("%s did not run, though all it reads landed", k)
			}
		}
		if rep.Succeeded != wantFirst {
			rt.Fatalf("%d succeeded, want %d (%v)", rep.Succeeded, wantFirst, rep)
		}
		p.mu.Lock()
		p.fail = map[string]bool{}
		p.mu.Unlock()
		rep, err := p.march("").Run(ctx)
		if err != nil {
			rt.Fatal(err)
		}
		calls = p.takeCalls()
		if len(calls) != wantRest || rep.Succeeded != wantRest {
			rt.Fatalf("the rerun ran %d (%v), want the %d that had not landed", len(calls), rep, wantRest)
		}
		for _, c := range calls {
			if ok[c] {
				rt.Fatalf("the rerun ran %s, which had landed", c)
			}
		}
		if len(p.readBad) > 0 {
			rt.Fatalf("read before they succeeded: %v", p.readBad)
		}
	})
}

// FailStop fails an hour of March under the default failure policy,
// stop: no asset after the hours' wave starts, the backfill returns the
// failure, and running it again with the hour fixed finishes March.
func FailStop(t *testing.T, newLedger NewLedger) {
	p := New(t, newLedger)
	ctx := context.Background()
	p.fail["events 2026-03-20T10:00-04:00"] = true
	b := p.march("")
	b.OnFailure = tranche.FailStop
	b.Concurrency = 1
	rep, err := b.Run(ctx)
	if err == nil || rep.Failed != 1 {
		t.Fatalf("a failed hour under FailStop: %v, %v", rep, err)
	}
	for _, c := range p.takeCalls() {
		if !strings.HasPrefix(c, "events ") {
			t.Errorf("%s ran after an hour failed under FailStop", c)
		}
	}
	clear(p.fail)
	rep, err = p.march("").Run(ctx)
	if err != nil || rep.Succeeded+rep.Skipped != 806 {
		t.Errorf("March again: %v, %v", rep, err)
	}
}

// RerunAll backfills March, then backfills it again under RerunAll:
// every asset's partitions run once more, each wave after the one before
// it, rather than the later waves waiting on partitions of an earlier one
// that the plan judged to run again (rerun all) once that wave had run.
func RerunAll(t *testing.T, newLedger NewLedger) {
	p := New(t, newLedger)
	ctx := context.Background()
	if rep, err := p.march("").Run(ctx); err != nil || rep.Succeeded != 806 {
		t.Fatalf("March: %v, %v", rep, err)
	}
	p.takeCalls()
	rep, err := p.march(ledger.RerunAll).Run(ctx)
	if err != nil || rep.Succeeded != 806 || rep.NotRun != 0 {
		t.Errorf("March again under RerunAll: %v, %v; want 806 succeeded", rep, err)
	}
	want := map[string]int{"events": 743, "rollup": 31, "report": 1, "model": 31}
	got := map[string]int{}
	for _, c := range p.takeCalls() {
		got[strings.Fields(c)[0]]++
	}
	if !equalMaps(got, want) {
		t.Errorf("ran %v under RerunAll; want %v", got, want)
	}
	if len(p.readBad) > 0 {
		t.Errorf("read before they succeeded: %v", p.readBad)
	}
}

// PlanID checks that the id a backfill's plan shows reaches the
// backfills of its assets, as an operator who copies it expects: before
// anything ran it names nothing; canceled by it
// (backfill.CancelBackfill) while the first wave runs, no later wave
// starts, every asset's backfill (backfill.AssetBackfills, one an asset,
// under the asset's identity) is canceled, and a run of it starts
// nothing; resumed by it (backfill.ResumeBackfill), a run lands the
// rest, through the same asset backfills.
func PlanID(t *testing.T, newLedger NewLedger) {
	p := New(t, newLedger)
	ctx := context.Background()
	b := p.march(ledger.RerunFailed)
	plan, err := b.Plan(ctx)
	if err != nil {
		t.Fatal(err)
	}
	id := plan.Backfill
	if got, err := backfill.AssetBackfills(ctx, p.ledger, id); err != nil || len(got) != 0 {
		t.Errorf("AssetBackfills before a run = %v, %v; want none", got, err)
	}
	if err := backfill.CancelBackfill(ctx, p.ledger, id, ledger.CancelOptions{}); !errors.Is(err, ledger.ErrUnknownBackfill) {
		t.Errorf("CancelBackfill before a run = %v; want one matching ErrUnknownBackfill", err)
	}
	var once sync.Once
	b.OnEvent = func(ctx context.Context, e tranche.Event) {
		if e.Kind == backfill.KindPartitionSucceeded {
			once.Do(func() {
				if err := backfill.CancelBackfill(ctx, p.ledger, id, ledger.CancelOptions{}); err != nil {
					t.Errorf("CancelBackfill(%s) while it runs: %v", id, err)
				}
			})
		}
	}
	if _, err := b.Run(ctx); !errors.Is(err, backfill.ErrBackfillCanceled) {
		t.Errorf("Run canceled by the plan's id = %v; want one matching ErrBackfillCanceled", err)
	}
	calls := p.takeCalls()
	if n := len(calls) - count(calls, "events "); n != 0 || len(calls) == 0 {
		t.Errorf("canceled in the first wave: %d calls, %d of them of later waves; want some, none of later waves", len(calls), n)
	}
	records, err := backfill.AssetBackfills(ctx, p.ledger, id)
	if err != nil {
		t.Fatal(err)
	}
	byAsset := map[string]ledger.BackfillRecord{}
	for _, r := range records {
		asset := strings.TrimPrefix(r.DAGName, "platform/")
		byAsset[asset] = r
		if !r.Canceled || r.DAG != p.ids[asset] {
			t.Errorf("asset backfill %s of %s: canceled %v, DAG %s; want canceled, DAG %s", r.ID, r.DAGName, r.Canceled, r.DAG, p.ids[asset])
		}
	}
	if len(records) != 4 || len(byAsset) != 4 {
		t.Errorf("AssetBackfills = %d records of %d assets; want one of each of the 4", len(records), len(byAsset))
	}
	b.OnEvent = nil
	if _, err := b.Run(ctx); !errors.Is(err, backfill.ErrBackfillCanceled) {
		t.Errorf("Run of the canceled backfill = %v; want one matching ErrBackfillCanceled", err)
	}
	if calls := p.takeCalls(); len(calls) != 0 {
		t.Errorf("a run of the canceled backfill ran %d partitions: %v", len(calls), calls[:min(5, len(calls))])
	}
	if err := backfill.ResumeBackfill(ctx, p.ledger, id); err != nil {
		t.Fatal(err)
	}
	rep, err := b.Run(ctx)
	if err != nil {
		t.Fatalf("Run once resumed: %v", err)
	}
	calls = p.takeCalls()
	if got, want := [3]int{count(calls, "rollup "), count(calls, "report "), count(calls, "model ")}, [3]int{31, 1, 31}; got != want {
		t.Errorf("resumed: rollup, report and model ran %v partitions; want %v", got, want)
	}
	for _, a := range rep.Assets {
		if a.Report != nil && a.Report.Backfill != byAsset[a.Asset].ID {
			t.Errorf("asset %s ran as backfill %s; want %s, which the plan's id reaches", a.Asset, a.Report.Backfill, byAsset[a.Asset].ID)
		}
	}
	if again, err := backfill.AssetBackfills(ctx, p.ledger, id); err != nil || len(again) != 4 {
		t.Errorf("AssetBackfills after the run = %d, %v; want the same 4", len(again), err)
	}
}
