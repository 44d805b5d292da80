package ledgertest

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"pgregory.net/rapid"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/ledger"
)

// testLatestReader checks a ledger that is a [ledger.LatestReader] or
// a [ledger.BriefReader] against the answers derived from Latest and
// History, over random histories of claims, takeovers and finishes, each
// of a DAG of its own: CountLatest's groups, FindLatest's attempts in
// both orders and ChangedIn's partitions, for random ranges, instants
// and revisions, and LatestBriefs' briefs of each range. A ledger
// without either interface passes.
func testLatestReader(s *ledgerSuite) {
	lr, ok := s.l.(ledger.LatestReader)
	br, briefs := s.l.(ledger.BriefReader)
	if !ok && !briefs {
		return
	}
	history := 0
	check := func(rt *rapid.T) {
		history++
		dag := fmt.Sprintf("%s-latest-%d", suiteDAG, history)
		const n = 12 // partitions part(0) to part(11)
		var leases []*ledger.Lease
		steps := rapid.IntRange(1, 24).Draw(rt, "steps")
		for range steps {
			switch rapid.IntRange(0, 3).Draw(rt, "op") {
			case 0, 1: // a claim of one or two adjacent partitions
				i := rapid.IntRange(0, n-1).Draw(rt, "partition")
				ps := parts(i)
				if i+1 < n && rapid.Bool().Draw(rt, "chunk") {
					ps = parts(i, i+1)
				}
				r := req(rapid.SampledFrom([]string{alpha, beta, gamma}).Draw(rt, "worker"), ps...)
				r.DAG = dag
				r.Policy = rapid.SampledFrom([]ledger.RerunPolicy{ledger.RerunFailed, ledger.RerunAll}).Draw(rt, "policy")
				r.Revision = 1 << 40 // RerunAll reruns every success
				lease, err := s.l.Claim(s.ctx, r)
				switch {
				case err == nil:
					leases = append(leases, lease)
				case !errors.Is(err, ledger.ErrNotClaimable):
					rt.Fatalf("%s = %v", describeReq(r), err)
				}
			case 2: // a finish, fenced if taken over
				if len(leases) == 0 {
					continue
				}
				k := rapid.IntRange(0, len(leases)-1).Draw(rt, "lease")
				lease := leases[k]
				leases = slices.Delete(leases, k, k+1)
				out := make([]ledger.Outcome, len(lease.Partitions))
				for i := range out {
					out[i] = ledger.Outcome{State: rapid.SampledFrom([]ledger.State{ledger.StateSucceeded, ledger.StateFailed, ledger.StateCanceled}).Draw(rt, "outcome")}
				}
				if err := s.l.Finish(s.ctx, lease, out); err != nil && !errors.Is(err, ledger.ErrFenced) {
					rt.Fatalf("Finish(%s) = %v", describeLease(lease), err)
				}
			case 3: // time passes: leases expire
				s.clock.Advance(time.Duration(rapid.IntRange(0, 90).Draw(rt, "seconds")) * time.Second)
			}
		}
		rev, err := s.l.Revision(s.ctx, dag)
		if err != nil {
			rt.Fatal(err)
		}

		// Ranges: cuts between partitions, each pair of adjacent cuts a
		// range, some left out; the outer ones reach past every
		// partition.
		cuts := rapid.SliceOfNDistinct(rapid.IntRange(-1, n+1), 2, 6, rapid.ID[int]).Draw(rt, "cuts")
		slices.Sort(cuts)
		at := func(c int) time.Time { return suiteFirst.Add(time.Duration(c) * time.Hour) }
		var ranges []ledger.Range
		for k := 1; k < len(cuts); k++ {
			if k == 1 || rapid.Bool().Draw(rt, "keep") {
				ranges = append(ranges, ledger.Range{From: at(cuts[k-1]), To: at(cuts[k])})
			}
		}
		if rapid.IntRange(0, 3).Draw(rt, "many") == 0 {
			// Many small ranges, more than one statement of SQL names, as
			// a chunked plan counts its chunks: each hour in twenty of
			// three minutes, only the first holding a partition, up to
			// 280 ranges; some hours left out, as the slots a backfill
			// did not choose, whose attempts lie between the ranges.
			ranges = ranges[:0]
			for h := -1; h <= n; h++ {
				if h > -1 && !rapid.Bool().Draw(rt, "keep hour") {
					continue
				}
				for m := range 20 {
					from := at(h).Add(time.Duration(m) * 3 * time.Minute)
					ranges = append(ranges, ledger.Range{From: from, To: from.Add(3 * time.Minute)})
				}
			}
		}
		latest := make([][]ledger.Attempt, len(ranges)) // by range, from Latest
		for i, r := range ranges {
			for a, err := range s.l.Latest(s.ctx, dag, r.From, r.To) {
				if err != nil {
					rt.Fatal(err)
				}
				latest[i] = append(latest[i], a)
			}
		}
		if briefs {
			for i, r := range ranges {
				var got []ledger.Brief
				for b, err := range br.LatestBriefs(s.ctx, dag, r.From, r.To) {
					if err != nil {
						rt.Fatalf("LatestBriefs = %v", err)
					}
					got = append(got, b)
				}
				want := make([]ledger.Brief, len(latest[i]))
				for k, a := range latest[i] {
					want[k] = ledger.BriefOf(a)
				}
				if !slices.EqualFunc(got, want, sameBrief) {
					rt.Fatalf("LatestBriefs(%s, %s) =\n%+v\nwant, as Latest reads:\n%+v", r.From, r.To, got, want)
				}
			}
		}
		if !ok {
			return
		}

		count := ledger.CountRequest{DAG: dag, Ranges: ranges,
			Now:      s.clock.Now().Add(time.Duration(rapid.IntRange(-90, 90).Draw(rt, "now offset")) * time.Second),
			Revision: int64(rapid.IntRange(0, int(rev)+1).Draw(rt, "revision"))}
		var derived []ledger.LatestCount
		for i := range ranges {
			for _, a := range latest[i] {
				derived = append(derived, ledger.CountOf(i, a, count))
			}
		}
		got, err := lr.CountLatest(s.ctx, count)
		if err != nil {
			rt.Fatalf("CountLatest = %v", err)
		}
		if want := mergeCounts(derived); !slices.Equal(mergeCounts(got), want) {
			rt.Fatalf("CountLatest(%+v) = %+v; want %+v, as Latest reads", count, mergeCounts(got), want)
		}
		for i, c := range got {
			if c.N < 1 || slices.ContainsFunc(got[i+1:], func(d ledger.LatestCount) bool { d.N = c.N; return d == c }) {
				rt.Fatalf("CountLatest(%+v) = %+v: group %+v is empty or given twice", count, got, c)
			}
		}

		// The states a backfill's status asks for (running; failed and
		// canceled, with Newest), which a ledger may read through an
		// index of their own, as often as any others.
		find := ledger.FindRequest{DAG: dag, Ranges: ranges,
			States: rapid.OneOf(
				rapid.Just([]ledger.State{ledger.StateRunning}),
				rapid.Just([]ledger.State{ledger.StateFailed, ledger.StateCanceled}),
				rapid.SliceOfDistinct(rapid.SampledFrom([]ledger.State{ledger.StateRunning, ledger.StateSucceeded, ledger.StateFailed, ledger.StateCanceled}), rapid.ID[ledger.State]),
			).Draw(rt, "states"),
			Newest: rapid.IntRange(0, 3).Draw(rt, "newest")}
		var want []ledger.Attempt
		for i := range ranges {
			for _, a := range latest[i] {
				if slices.Contains(find.States, a.State) {
					want = append(want, a)
				}
			}
		}
		if find.Newest > 0 {
			slices.SortStableFunc(want, ledger.FinishedLater)
			want = want[:min(find.Newest, len(want))]
		}
		var found []ledger.Attempt
		for a, err := range lr.FindLatest(s.ctx, find) {
			if err != nil {
				rt.Fatalf("FindLatest = %v", err)
			}
			found = append(found, a)
		}
		if !slices.EqualFunc(found, want, sameAttempt) {
			rt.Fatalf("FindLatest(%+v) =\n%+v\nwant, as Latest reads:\n%+v", find, found, want)
		}

		after := int64(rapid.IntRange(0, int(rev)+1).Draw(rt, "after"))
		from, to := at(cuts[0]), at(cuts[len(cuts)-1])
		var changed []time.Time
		for i := range n {
			p := part(i)
			if !(ledger.Range{From: from, To: to}).Contains(p.Start) {
				continue
			}
			h, err := s.l.History(s.ctx, dag, p.Start)
			if err != nil {
				rt.Fatal(err)
			}
			if slices.ContainsFunc(h, func(a ledger.Attempt) bool { return a.Revision > after }) {
				changed = append(changed, p.Start)
			}
		}
		starts, err := lr.ChangedIn(s.ctx, dag, from, to, after)
		if err != nil {
			rt.Fatalf("ChangedIn = %v", err)
		}
		if !slices.EqualFunc(starts, changed, time.Time.Equal) {
			rt.Fatalf("ChangedIn(%s, %s, after %d) = %v; want %v, as History reads", from, to, after, starts, changed)
		}
	}
	if t, ok := s.t.(testT); ok {
		rapid.Check(t.T, check)
	} else {
		rapid.Check(rapidTB{s.t, "LatestReader"}, check)
	}
	if ok {
		testNewestTies(s, lr)
	}
}

// sameBrief reports whether two briefs agree, their instants compared
// as instants.
func sameBrief(a, b ledger.Brief) bool {
	return a.Start.Equal(b.Start) && a.State == b.State && a.Started.Equal(b.Started) && a.Finished.Equal(b.Finished) && a.LeaseUntil.Equal(b.LeaseUntil)
}

// testNewestTies checks FindLatest's Newest where failures finished at
// the same instant, over more ranges than a ledger may read apart: the
// tie is broken by the later partition first, whether or not a range
// holds it, so that a ledger reading the span of the ranges in pages
// must resume a page after the last row it read, not after its instant.
func testNewestTies(s *ledgerSuite, lr ledger.LatestReader) {
	dag := suiteDAG + "-newest-ties"
	for i := range 4 { // part(0) to part(3) fail at one instant
		r := req(alpha, part(i))
		r.DAG = dag
		lease, err := s.l.Claim(s.ctx, r)
		if err != nil {
			s.t.Fatalf("%s = %v", describeReq(r), err)
		}
		if err := s.l.Finish(s.ctx, lease, []ledger.Outcome{{State: ledger.StateFailed, Err: "down"}}); err != nil {
			s.t.Fatalf("Finish(%s) = %v", describeLease(lease), err)
		}
	}
	// The ranges of part(0) and part(2), then 30 empty ones after
	// every partition.
	ranges := []ledger.Range{{From: part(0).Start, To: part(0).End}, {From: part(2).Start, To: part(2).End}}
	for k := range 30 {
		from := part(20).Start.Add(time.Duration(k) * time.Minute)
		ranges = append(ranges, ledger.Range{From: from, To: from.Add(time.Minute)})
	}
	for newest, want := range map[int][]int{1: {2}, 2: {2, 0}, 3: {2, 0}} {
		var got []int
		for a, err := range lr.FindLatest(s.ctx, ledger.FindRequest{DAG: dag, Ranges: ranges,
			States: []ledger.State{ledger.StateFailed, ledger.StateCanceled}, Newest: newest}) {
			if err != nil {
				s.t.Fatalf("FindLatest(newest %d) = %v", newest, err)
			}
			got = append(got, int(a.Start.Sub(part(0).Start)/time.Hour))
		}
		if !slices.Equal(got, want) {
			s.t.Errorf("FindLatest of the %d newest failures, finished at one instant, among part(0) and part(2) = partitions %v; want %v (the later partition first)", newest, got, want)
		}
	}
}

// rapidTB is the testingT of TestLedger as the rapid.TB that rapid.Check
// reports to, named after its check.
type rapidTB struct {
	testingT
	name string
}

func (r rapidTB) Name() string                     { return r.name }
func (r rapidTB) Logf(format string, args ...any)  {}
func (r rapidTB) Log(args ...any)                  {}
func (r rapidTB) Skipf(format string, args ...any) { r.Fatalf("skipped: "+format, args...) }
func (r rapidTB) Skip(args ...any)                 { r.Fatal(append([]any{"skipped: "}, args...)...) }
func (r rapidTB) SkipNow()                         { r.Fatal("skipped") }
func (r rapidTB) Error(args ...any)                { r.Errorf("%s", fmt.Sprint(args...)) }
func (r rapidTB) FailNow()                         { r.Fatal("failed") }
func (r rapidTB) Fail()                            { r.Errorf("failed") }

// testNewestFailures checks FindLatest's newest failures of a narrow
// range in a DAG that failed thousands of times elsewhere, after the
// range's failure: a ledger that reads the DAG's failures newest first
// must not stop before it reaches the range's. A ledger without the
// interface passes.
func testNewestFailures(s *ledgerSuite) {
	lr, ok := s.l.(ledger.LatestReader)
	if !ok {
		return
	}
	const elsewhere = 5000
	dag := suiteDAG + "-newest-failures"
	one := func(ps []tranche.TimePartition, state ledger.State) {
		s.t.Helper()
		r := req(alpha, ps...)
		r.DAG = dag
		lease := s.claim(r)
		outcomes := make([]ledger.Outcome, len(ps))
		for i := range outcomes {
			outcomes[i] = ledger.Outcome{State: state, Err: "boom"}
		}
		s.finish(lease, outcomesAny(outcomes)...)
	}
	one(parts(0), ledger.StateFailed) // the range's failure, the oldest
	s.clock.Advance(time.Second)
	var ps []tranche.TimePartition
	for i := range elsewhere {
		ps = append(ps, part(10+i))
	}
	one(ps, ledger.StateFailed)
	var got []string
	for a, err := range lr.FindLatest(s.ctx, ledger.FindRequest{DAG: dag, Ranges: []ledger.Range{{From: part(0).Start, To: part(2).Start}},
		States: []ledger.State{ledger.StateFailed, ledger.StateCanceled}, Newest: 3}) {
		if err != nil {
			s.t.Fatalf("FindLatest = %v", err)
		}
		got = append(got, a.Key)
	}
	if !slices.Equal(got, []string{part(0).Key()}) {
		t := got
		if len(t) > 5 {
			t = t[:5]
		}
		s.t.Errorf("FindLatest of the newest failures of [%s, %s) = %d attempts %v; want the one failure there, %s, though %d newer lie elsewhere",
			part(0).Key(), part(2).Key(), len(got), t, part(0).Key(), elsewhere)
	}
}

// outcomesAny returns os as finish takes them.
func outcomesAny(os []ledger.Outcome) []any {
	out := make([]any, len(os))
	for i, o := range os {
		out[i] = o
	}
	return out
}

// mergeCounts sums the groups of counts that agree on all but N and
// returns them sorted by range, state, Live and Above, dropping empty
// ones: the canonical form of an answer of
// [ledger.LatestReader.CountLatest], for comparing answers.
func mergeCounts(counts []ledger.LatestCount) []ledger.LatestCount {
	key := func(c ledger.LatestCount) ledger.LatestCount { c.N = 0; return c }
	sum := map[ledger.LatestCount]int{}
	for _, c := range counts {
		sum[key(c)] += c.N
	}
	out := make([]ledger.LatestCount, 0, len(sum))
	for k, n := range sum {
		if n != 0 {
			k.N = n
			out = append(out, k)
		}
	}
	b := func(v bool) int {
		if v {
			return 1
		}
		return 0
	}
	slices.SortFunc(out, func(x, y ledger.LatestCount) int {
		return cmp.Or(cmp.Compare(x.Range, y.Range), cmp.Compare(x.State, y.State), cmp.Compare(b(x.Live), b(y.Live)), cmp.Compare(b(x.Above), b(y.Above)))
	})
	return out
}
