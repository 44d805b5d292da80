// Package destinationtest checks that a [tranche.Destination] keeps
// the destination contract (package destination), as ledger/ledgertest
// checks a ledger and testing/fstest an fs.FS: [Run] runs the suite as
// subtests of a test, and [TestDestination] runs it anywhere and returns
// what failed.
//
// The suite writes one asset, [Asset], partitioned by day in UTC on the
// column [Column], whose rows hold three values: the partition column (a
// time.Time inside the partition), "n" (an int64, unique within a write)
// and "note" (a string). A destination with declared tables or schemas
// declares that asset; a [Subject] says how the suite reads it back.
package destinationtest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/destination"
	"github.com/tranche-dev/tranche/internal/checkrec"
)

// The asset the suite writes and its partition column.
const (
	Asset  = "events"
	Column = "day"
)

// SeedEnv is the environment variable that replays the seed of the
// random sequence of writes that [Run] and [TestDestination] print.
const SeedEnv = "DESTINATIONTEST_SEED"

// A Subject is a destination under test and how the suite reads it back.
type Subject struct {
	// Destination is the destination under test, fresh: it holds
	// nothing of Asset.
	Destination tranche.Destination

	// Read returns the rows the destination holds for Asset's partition
	// p, in any order, each with at least "n" (any Go integer type, or a
	// float64 holding an integer, as JSON decodes it) and "note"; no
	// rows and a nil error for a partition never written or emptied.
	Read func(ctx context.Context, p tranche.TimePartition) ([]tranche.Row, error)

	// Close, if not nil, is called after the checks that used the
	// subject.
	Close func() error
}

// Run checks that a destination follows the destination contract, in
// subtests that each get a fresh subject from newSubject. Use it in a
// test of the destination:
//
//	func TestMyDestination(t *testing.T) {
//		destinationtest.Run(t, func(t *testing.T) destinationtest.Subject {
//			d := mine.Open(t.TempDir())
//			return destinationtest.Subject{Destination: d, Read: d.ReadEvents}
//		})
//	}
//
// The suite checks:
//   - a write replaces each of its partitions, and only those, and a
//     partition written with no rows holds none;
//   - the same attempt's write delivered twice lands once;
//   - a write is all or nothing: with one stale batch, or with a value
//     the destination refuses, no partition of it changes;
//   - a stale token is refused with an error matching
//     [tranche.ErrFenced], and a newer token, the same token again and
//     token 0 are admitted, token 0 keeping the fence;
//   - writes by another DAG identity are admitted or refused as
//     [destination.Fence.Admit] says;
//   - concurrent writers of the same partitions, each with a token of
//     its own: every refusal matches ErrFenced, the partitions end with
//     the newest token's rows, never a mixture;
//   - a write under a canceled context fails and changes nothing, and a
//     context canceled while a large write is under way leaves every
//     partition of it either as it was or as the write made it;
//   - a random sequence of writes (a seed it prints; [SeedEnv] replays
//     it) leaves, after each write, what a model holding each
//     partition's rows and [destination.Fence] says.
func Run(t *testing.T, newSubject func(t *testing.T) Subject) {
	t.Helper()
	for _, test := range destinationTests {
		t.Run(test.name, func(t *testing.T) {
			s := newSubject(t)
			if s.Destination == nil || s.Read == nil {
				t.Fatal("newSubject returned a Subject without a Destination or a Read")
			}
			if s.Close != nil {
				t.Cleanup(func() {
					if err := s.Close(); err != nil {
						t.Errorf("Close: %v", err)
					}
				})
			}
			test.run(&suite{t: testT{t}, ctx: t.Context(), s: s})
		})
	}
}

// TestDestination runs the checks of [Run] outside a test, each on a
// fresh subject from newSubject, and returns every failure, each
// prefixed by the name of its check, joined; nil when the destination
// keeps the contract. ctx bounds every call the checks make.
func TestDestination(ctx context.Context, newSubject func() (Subject, error)) error {
	var errs []error
	for _, test := range destinationTests {
		rec := checkrec.New("destinationtest", test.name)
		checkrec.Isolate(func() {
			s, err := newSubject()
			if err != nil || s.Destination == nil || s.Read == nil {
				rec.Fatalf("newSubject: %v (a Subject needs a Destination and a Read)", err)
			}
			if s.Close != nil {
				defer func() {
					if err := s.Close(); err != nil {
						rec.Errorf("Close: %v", err)
					}
				}()
			}
			cctx, cancel := context.WithCancel(ctx)
			defer cancel()
			test.run(&suite{t: rec, ctx: cctx, s: s})
		})
		errs = append(errs, rec.Errs()...)
	}
	return errors.Join(errs...)
}

var destinationTests = []struct {
	name string
	run  func(*suite)
}{
	{"Replace", testReplace},
	{"EmptyPartition", testEmptyPartition},
	{"Redelivery", testRedelivery},
	{"AllOrNothingStale", testAllOrNothingStale},
	{"AllOrNothingBadValue", testAllOrNothingBadValue},
	{"StaleToken", testStaleToken},
	{"TokenZero", testTokenZero},
	{"NewerDAG", testNewerDAG},
	{"ConcurrentWriters", testConcurrentWriters},
	{"CanceledContext", testCanceledContext},
	{"CanceledMidWrite", testCanceledMidWrite},
	{"Model", testModel},
}

// testingT is what the checks need of a test: *testing.T through testT,
// or a *checkrec.T, which collects failures for TestDestination.
type testingT interface {
	Helper()
	Logf(format string, args ...any)
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
}

type testT struct{ *testing.T }

type suite struct {
	t   testingT
	ctx context.Context
	s   Subject
}

var jan1 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// day returns the suite's i-th partition.
func day(i int) tranche.TimePartition { return tranche.PartitionOf(tranche.Day, jan1.AddDate(0, 0, i)) }

// content is a partition's rows as the suite compares them: "n:note",
// sorted by n.
type content []string

func (c content) String() string {
	if len(c) == 0 {
		return "no rows"
	}
	if len(c) > 6 {
		return fmt.Sprintf("%d rows [%s … %s]", len(c), strings.Join(c[:3], " "), c[len(c)-1])
	}
	return "[" + strings.Join(c, " ") + "]"
}

// rows returns n rows of partition p by writer w: n = w*100000 + i, so
// that the rows say which write put them.
func rows(p tranche.TimePartition, w, n int) ([]tranche.Row, content) {
	out := make([]tranche.Row, n)
	c := make(content, n)
	for i := range out {
		v := int64(w*100000 + i)
		note := "w" + strconv.Itoa(w)
		out[i] = tranche.Row{Column: p.Start.Add(time.Duration(i%1440) * time.Minute), "n": v, "note": note}
		c[i] = fmt.Sprintf("%d:%s", v, note)
	}
	slices.Sort(c)
	return out, c
}

// batch is writer w's batch of n rows for p, by an attempt of dag with
// the given token.
func batch(p tranche.TimePartition, w, n int, dag string, token int64) (tranche.Batch, content) {
	rs, c := rows(p, w, n)
	if token == 0 {
		dag = ""
	}
	return tranche.Batch{Asset: Asset, Column: Column, Partition: p, Rows: rs,
		RunID: "run-" + p.Key(), DAG: dag, Token: token}, c
}

// read returns what the destination holds of p.
func (s *suite) read(p tranche.TimePartition) content {
	s.t.Helper()
	rs, err := s.s.Read(s.ctx, p)
	if err != nil {
		s.t.Fatalf("Read(%s): %v", p.Key(), err)
	}
	c := make(content, 0, len(rs))
	for i, r := range rs {
		n, ok := integer(r["n"])
		note, nok := r["note"].(string)
		if !ok || !nok {
			s.t.Fatalf("Read(%s): row %d holds n %T %v and note %T %v; want an integer and a string", p.Key(), i, r["n"], r["n"], r["note"], r["note"])
		}
		c = append(c, fmt.Sprintf("%d:%s", n, note))
	}
	slices.Sort(c)
	return c
}

func integer(v any) (int64, bool) {
	switch v := v.(type) {
	case int64:
		return v, true
	case int:
		return int64(v), true
	case int32:
		return int64(v), true
	case uint32:
		return int64(v), true
	case uint64:
		return int64(v), v < 1<<63
	case float64:
		return int64(v), v == float64(int64(v))
	case interface{ Int64() (int64, error) }: // json.Number
		n, err := v.Int64()
		return n, err == nil
	}
	return 0, false
}

// expect fails unless p holds want.
func (s *suite) expect(what string, p tranche.TimePartition, want content) {
	s.t.Helper()
	if got := s.read(p); !slices.Equal(got, want) {
		s.t.Errorf("%s: partition %s holds %v; want %v", what, p.Key(), got, want)
	}
}

func (s *suite) write(bs ...tranche.Batch) error {
	return s.s.Destination.Write(s.ctx, bs)
}

// mustWrite fails unless the write is admitted.
func (s *suite) mustWrite(what string, bs ...tranche.Batch) {
	s.t.Helper()
	if err := s.write(bs...); err != nil {
		s.t.Fatalf("%s: Write = %v", what, err)
	}
}

// fenced fails unless err is a refusal of a stale write.
func (s *suite) fenced(what string, err error) {
	s.t.Helper()
	if !errors.Is(err, tranche.ErrFenced) {
		s.t.Errorf("%s: Write = %v; want an error matching tranche.ErrFenced", what, err)
	}
}

func testReplace(s *suite) {
	p, q, r := day(0), day(1), day(2)
	b1, c1 := batch(p, 1, 3, "dag", 1)
	s.mustWrite("first write", b1)
	s.expect("after the first write", p, c1)
	b2, c2 := batch(p, 2, 2, "dag", 2)
	bq, cq := batch(q, 2, 4, "dag", 2)
	s.mustWrite("a write of two partitions", b2, bq)
	s.expect("the write of two partitions", p, c2)
	s.expect("the write of two partitions", q, cq)
	br, cr := batch(r, 3, 1, "dag", 1)
	s.mustWrite("a write of a third partition", br)
	s.expect("a write of another partition", p, c2)
	s.expect("a write of another partition", q, cq)
	s.expect("a write of a third partition", r, cr)
	s.expect("a partition never written", day(3), nil)
}

func testEmptyPartition(s *suite) {
	p, q, r := day(0), day(1), day(2)
	bp, _ := batch(p, 1, 3, "dag", 1)
	bq, _ := batch(q, 1, 3, "dag", 1)
	s.mustWrite("first write", bp, bq)
	// A window's write: its middle partition has no rows.
	bp, cp := batch(p, 2, 2, "dag", 2)
	eq, _ := batch(q, 2, 0, "dag", 2)
	br, cr := batch(r, 2, 2, "dag", 2)
	s.mustWrite("a window with an empty partition", bp, eq, br)
	s.expect("a window's first partition", p, cp)
	s.expect("an empty partition written over rows", q, nil)
	s.expect("a window's last partition", r, cr)
	e, _ := batch(day(5), 3, 0, "dag", 1)
	s.mustWrite("an empty partition never written before", e)
	s.expect("an empty partition never written before", day(5), nil)
}

func testRedelivery(s *suite) {
	p := day(0)
	b, c := batch(p, 1, 3, "dag", 4)
	s.mustWrite("a write", b)
	if err := s.write(b); err != nil {
		s.t.Errorf("the same attempt's write delivered again: Write = %v; want it admitted", err)
	}
	s.expect("a write delivered twice", p, c)
	again, _ := batch(p, 1, 3, "dag", 4)
	other, _ := batch(p, 1, 3, "dag", 5)
	if destination.DeliveryID(b) == destination.DeliveryID(other) || destination.DeliveryID(b) != destination.DeliveryID(again) {
		s.t.Errorf("DeliveryID: %s and %s for token 4, %s for token 5; want one id per attempt", destination.DeliveryID(b), destination.DeliveryID(again), destination.DeliveryID(other))
	}
}

func testAllOrNothingStale(s *suite) {
	p, q := day(0), day(1)
	bp, cp := batch(p, 1, 2, "dag", 1)
	bq, cq := batch(q, 1, 2, "dag", 5)
	s.mustWrite("first write", bp, bq)
	np, _ := batch(p, 2, 3, "dag", 6)
	sq, _ := batch(q, 2, 3, "dag", 4) // stale: q holds token 5
	s.fenced("a write whose second partition is stale", s.write(np, sq))
	s.expect("a refused write's fresh partition", p, cp)
	s.expect("a refused write's stale partition", q, cq)
	// The fresh partition's fence did not move either: token 2 is still
	// admitted there.
	bp2, cp2 := batch(p, 3, 1, "dag", 2)
	s.mustWrite("a write at a token between the fence and the refused write's", bp2)
	s.expect("after the refused write", p, cp2)
}

func testAllOrNothingBadValue(s *suite) {
	p, q := day(0), day(1)
	bp, cp := batch(p, 1, 2, "dag", 1)
	bq, cq := batch(q, 1, 2, "dag", 1)
	s.mustWrite("first write", bp, bq)
	np, ncp := batch(p, 2, 2, "dag", 2)
	nq, _ := batch(q, 2, 3, "dag", 2)
	nq.Rows[2]["note"] = func() {} // a value no store holds
	err := s.write(np, nq)
	if err == nil {
		// A destination that keeps any Go value (in memory) takes it:
		// then the write landed whole.
		s.expect("a write the destination took", p, ncp)
		if got, err := s.s.Read(s.ctx, q); err != nil || len(got) != 3 {
			s.t.Errorf("a write the destination took: partition %s holds %d rows (%v); want the write's 3", q.Key(), len(got), err)
		}
		return
	}
	if errors.Is(err, tranche.ErrFenced) {
		s.t.Errorf("a write with a bad value = %v; want a refusal of the value, not a fence", err)
	}
	s.expect("a refused write's good partition", p, cp)
	s.expect("a refused write's bad partition", q, cq)
}

func testStaleToken(s *suite) {
	p := day(0)
	b, c := batch(p, 1, 2, "dag", 3)
	s.mustWrite("token 3", b)
	for _, token := range []int64{2, 1} {
		old, _ := batch(p, 2, 2, "dag", token)
		err := s.write(old)
		s.fenced(fmt.Sprintf("token %d after token 3", token), err)
		if se, ok := errors.AsType[*tranche.StaleWriteError](err); ok && (se.Token != token || se.Latest != 3) {
			s.t.Errorf("token %d after token 3: %+v; want Token %d, Latest 3", token, se, token)
		}
		s.expect(fmt.Sprintf("a refused write of token %d", token), p, c)
	}
	same, cs := batch(p, 3, 1, "dag", 3)
	s.mustWrite("token 3 again (the same attempt)", same)
	s.expect("token 3 again", p, cs)
	newer, cn := batch(p, 4, 2, "dag", 9)
	s.mustWrite("token 9", newer)
	s.expect("token 9", p, cn)
	old, _ := batch(p, 5, 2, "dag", 8)
	s.fenced("token 8 after token 9", s.write(old))
	s.expect("a refused write of token 8", p, cn)
}

func testTokenZero(s *suite) {
	p := day(0)
	b, _ := batch(p, 1, 2, "dag", 5)
	s.mustWrite("token 5", b)
	z, cz := batch(p, 2, 3, "", 0)
	s.mustWrite("token 0 (outside a ledger) over token 5", z)
	s.expect("token 0 over token 5", p, cz)
	old, _ := batch(p, 3, 1, "dag", 4)
	s.fenced("token 4 after token 0 over token 5: the fence is kept", s.write(old))
	s.expect("a refused write after token 0", p, cz)
	same, cs := batch(p, 4, 1, "dag", 5)
	s.mustWrite("token 5 after token 0", same)
	s.expect("token 5 after token 0", p, cs)
	fresh, cf := batch(day(1), 5, 2, "", 0)
	s.mustWrite("token 0 on a partition never written", fresh)
	s.expect("token 0 on a partition never written", day(1), cf)
	b1, c1 := batch(day(1), 6, 1, "dag", 1)
	s.mustWrite("token 1 after token 0 alone", b1)
	s.expect("token 1 after token 0 alone", day(1), c1)
}

// testNewerDAG writes under two DAG identities, as a deploy does, and
// expects of each write what Admit says.
func testNewerDAG(s *suite) {
	p := day(0)
	var f destination.Fence
	var held content
	steps := []struct {
		dag   string
		token int64
	}{{"v1", 5}, {"v2", 1}, {"v2", 2}, {"v1", 4}, {"v1", 6}, {"v2", 1}, {"v2", 3}}
	for i, st := range steps {
		b, c := batch(p, i+1, 2, st.dag, st.token)
		what := fmt.Sprintf("step %d: %s token %d over %s token %d", i, st.dag, st.token, f.DAG, f.Token)
		next, want := f.Admit(b)
		err := s.write(b)
		switch {
		case want != nil:
			s.fenced(what+" (Admit refuses it)", err)
		case err != nil:
			s.t.Fatalf("%s: Write = %v; Admit admits it", what, err)
		default:
			f, held = next, c
		}
		s.expect(what, p, held)
	}
}

func testConcurrentWriters(s *suite) {
	p, q := day(0), day(1)
	const writers = 8
	for round := range 3 {
		base := int64(round * 100)
		var wg sync.WaitGroup
		errs := make([]error, writers)
		want := map[tranche.TimePartition]content{}
		for w := range writers {
			bp, cp := batch(p, round*writers+w+1, 20, "dag", base+int64(w)+1)
			bq, cq := batch(q, round*writers+w+1, 20, "dag", base+int64(w)+1)
			if w == writers-1 {
				want[p], want[q] = cp, cq
			}
			wg.Go(func() { errs[w] = s.write(bp, bq) })
		}
		wg.Wait()
		for w, err := range errs {
			switch {
			case w == writers-1 && err != nil:
				s.t.Errorf("round %d: the newest writer (token %d) = %v; nothing newer wrote", round, base+int64(w)+1, err)
			case err != nil && !errors.Is(err, tranche.ErrFenced):
				s.t.Errorf("round %d: writer of token %d = %v; want nil or an error matching ErrFenced", round, base+int64(w)+1, err)
			}
		}
		s.expect(fmt.Sprintf("round %d of %d concurrent writers", round, writers), p, want[p])
		s.expect(fmt.Sprintf("round %d of %d concurrent writers", round, writers), q, want[q])
	}
}

func testCanceledContext(s *suite) {
	p := day(0)
	b, c := batch(p, 1, 2, "dag", 1)
	s.mustWrite("first write", b)
	ctx, cancel := context.WithCancel(s.ctx)
	cancel()
	nb, _ := batch(p, 2, 2, "dag", 2)
	if err := s.s.Destination.Write(ctx, []tranche.Batch{nb}); !errors.Is(err, context.Canceled) {
		s.t.Errorf("a write under a canceled context = %v; want an error matching context.Canceled", err)
	}
	s.expect("a write under a canceled context", p, c)
}

func testCanceledMidWrite(s *suite) {
	const parts, perPart = 8, 2000
	var before []content
	var first, second []tranche.Batch
	var after []content
	for i := range parts {
		b, c := batch(day(i), 1, 2, "dag", 1)
		first, before = append(first, b), append(before, c)
		nb, nc := batch(day(i), 2, perPart, "dag", 2)
		second, after = append(second, nb), append(after, nc)
	}
	s.mustWrite("first write", first...)
	for _, delay := range []time.Duration{0, 200 * time.Microsecond, time.Millisecond, 5 * time.Millisecond} {
		ctx, cancel := context.WithCancel(s.ctx)
		done := make(chan error, 1)
		go func() { done <- s.s.Destination.Write(ctx, second) }()
		time.Sleep(delay)
		cancel()
		err := <-done
		landed := 0
		for i := range parts {
			got := s.read(day(i))
			switch {
			case slices.Equal(got, after[i]):
				landed++
			case !slices.Equal(got, before[i]):
				s.t.Errorf("canceled after %v: partition %s holds %v; want the write's rows or the earlier ones", delay, day(i).Key(), got)
			}
		}
		switch {
		case err == nil && landed != parts:
			s.t.Errorf("canceled after %v: Write = nil, but %d of %d partitions hold its rows", delay, landed, parts)
		case err != nil && landed != 0:
			s.t.Errorf("canceled after %v: Write = %v, but %d of %d partitions hold its rows", delay, err, landed, parts)
		}
		if err == nil {
			return // the write was faster than the cancel: the partitions are the write's now
		}
	}
}

// testModel applies a random sequence of writes to the destination and
// to a model of its partitions, each with its rows and its Fence, and
// compares them after each write.
func testModel(s *suite) {
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv(SeedEnv); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			s.t.Fatalf("%s=%q: %v", SeedEnv, v, err)
		}
		seed = n
	}
	s.t.Logf("the sequence of writes: seed %d (%s=%d replays it)", seed, SeedEnv, seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	type part struct {
		fence destination.Fence
		rows  content
	}
	const nparts = 4
	model := make([]part, nparts)
	for step := range 40 {
		// One to three adjacent partitions, as a chunk's window.
		lo := rng.IntN(nparts)
		hi := min(nparts, lo+1+rng.IntN(3))
		dag := []string{"v1", "v2"}[rng.IntN(2)]
		token := int64(rng.IntN(7))
		var bs []tranche.Batch
		next := slices.Clone(model)
		var refused error
		for i := lo; i < hi; i++ {
			b, c := batch(day(i), step+1, rng.IntN(4), dag, token)
			bs = append(bs, b)
			f, err := model[i].fence.Admit(b)
			refused = cmp.Or(refused, err)
			next[i] = part{fence: f, rows: c}
		}
		err := s.write(bs...)
		what := fmt.Sprintf("seed %d, step %d: %s token %d over days %d to %d", seed, step, dag, token, lo, hi-1)
		switch {
		case refused != nil:
			s.fenced(what+" (Admit refuses it)", err)
		case err != nil:
			s.t.Fatalf("%s: Write = %v; Admit admits it", what, err)
		default:
			model = next
		}
		for i := range nparts {
			if got := s.read(day(i)); !slices.Equal(got, model[i].rows) {
				s.t.Fatalf("%s: partition %s holds %v; want %v", what, day(i).Key(), got, model[i].rows)
			}
		}
	}
}
