package ledgertest

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tranche-dev/tranche/ledger"
)

func testBackfills(s *ledgerSuite) {
	checkBackfills := func(what string, want ...ledger.BackfillRecord) {
		s.t.Helper()
		bs, err := s.l.Backfills(s.ctx)
		if err != nil {
			s.t.Fatalf("Backfills = %v", err)
		}
		if len(bs) != len(want) {
			s.t.Fatalf("%s: Backfills = %+v; want %+v", what, bs, want)
		}
		for i := range want {
			checkBackfill(s.t, fmt.Sprintf("%s: Backfills[%d]", what, i), bs[i], want[i])
		}
	}
	checkBackfills("a new ledger")

	t0 := s.clock.Now()
	b1 := ledger.BackfillRecord{ID: "bf-one", DAG: suiteDAG, Window: "2024-03-01/2024-03-31", Chunk: 1}
	got, err := s.l.PutBackfill(s.ctx, b1)
	if err != nil {
		s.t.Fatalf("PutBackfill = %v", err)
	}
	b1.Created = t0 // a zero Created becomes the ledger's now
	checkBackfill(s.t, "PutBackfill of a new backfill", got, b1)

	s.clock.Advance(time.Minute)
	b2 := ledger.BackfillRecord{ID: "bf-two", DAG: "tranchetest-other-dag", Window: "2024", Chunk: 7, Created: t0.Add(30 * time.Second)}
	if got, err := s.l.PutBackfill(s.ctx, b2); err != nil {
		s.t.Fatalf("PutBackfill = %v", err)
	} else {
		checkBackfill(s.t, "PutBackfill with a Created time", got, b2) // a given Created is kept
	}

	s.clock.Advance(time.Minute)
	again := b1
	again.Window, again.Chunk, again.Created = "2020", 99, time.Time{}
	if got, err := s.l.PutBackfill(s.ctx, again); err != nil {
		s.t.Fatalf("PutBackfill of a known id = %v", err)
	} else {
		checkBackfill(s.t, "PutBackfill of a known id", got, b1) // the stored record, unchanged
	}
	if got, err := s.l.Backfill(s.ctx, b1.ID); err != nil {
		s.t.Fatalf("Backfill(%q) = %v", b1.ID, err)
	} else {
		checkBackfill(s.t, "Backfill", got, b1)
	}
	if _, err := s.l.Backfill(s.ctx, "bf-unknown"); !errors.Is(err, ledger.ErrUnknownBackfill) {
		s.t.Errorf("Backfill of an unknown id = %v; want an error matching ErrUnknownBackfill", err)
	}
	b3 := ledger.BackfillRecord{ID: "bf-three", DAG: suiteDAG, Window: "2025"}
	if _, err := s.l.PutBackfill(s.ctx, b3); err != nil {
		s.t.Fatal(err)
	}
	b3.Created = s.clock.Now()
	checkBackfills("three backfills", b1, b2, b3) // oldest first

	if err := s.l.CancelBackfill(s.ctx, b1.ID, ledger.CancelOptions{}); err != nil {
		s.t.Fatalf("CancelBackfill = %v", err)
	}
	if err := s.l.CancelBackfill(s.ctx, b1.ID, ledger.CancelOptions{}); err != nil {
		s.t.Fatalf("CancelBackfill twice = %v; want nil", err)
	}
	b1.Canceled, b1.CanceledAt = true, s.clock.Now()
	if got, err := s.l.Backfill(s.ctx, b1.ID); err != nil {
		s.t.Fatal(err)
	} else {
		checkBackfill(s.t, "Backfill after CancelBackfill", got, b1)
	}
	if got, err := s.l.PutBackfill(s.ctx, again); err != nil {
		s.t.Fatal(err)
	} else {
		checkBackfill(s.t, "PutBackfill after CancelBackfill", got, b1) // still canceled
	}
	if err := s.l.CancelBackfill(s.ctx, "bf-unknown", ledger.CancelOptions{StopRunning: true}); !errors.Is(err, ledger.ErrUnknownBackfill) {
		s.t.Errorf("CancelBackfill of an unknown id = %v; want an error matching ErrUnknownBackfill", err)
	}
	if _, err := s.l.PutBackfill(s.ctx, ledger.BackfillRecord{DAG: suiteDAG}); err == nil {
		s.t.Errorf("PutBackfill without an id succeeded")
	}
	checkBackfills("after cancel and refusals", b1, b2, b3) // only b1 canceled, nothing added
}

// testConcurrentPutBackfill puts each of several backfills from many
// workers at once, as workers started together do: every put succeeds and
// all see one record, the first stored.
func testConcurrentPutBackfill(s *ledgerSuite) {
	const workers, backfills = 8, 16
	got := make([][]ledger.BackfillRecord, workers)
	contend(workers, func(w int) {
		for i := range backfills {
			b := ledger.BackfillRecord{ID: fmt.Sprintf("bf-%02d", i), DAG: suiteDAG, Window: fmt.Sprint(w), Chunk: w}
			stored, err := s.l.PutBackfill(s.ctx, b)
			if err != nil {
				s.t.Errorf("worker %d: PutBackfill(%s) = %v", w, b.ID, err)
				return
			}
			got[w] = append(got[w], stored)
		}
	})
	if s.t.Failed() {
		return
	}
	bs, err := s.l.Backfills(s.ctx)
	if err != nil {
		s.t.Fatalf("Backfills = %v", err)
	}
	if len(bs) != backfills {
		s.t.Fatalf("Backfills after concurrent puts = %d records; want %d:\n%+v", len(bs), backfills, bs)
	}
	for _, stored := range bs {
		i, _ := strconv.Atoi(strings.TrimPrefix(stored.ID, "bf-"))
		for w := range workers {
			checkBackfill(s.t, fmt.Sprintf("worker %d: PutBackfill(%s)", w, stored.ID), got[w][i], stored)
		}
	}
}

func checkBackfill(t testingT, what string, got, want ledger.BackfillRecord) {
	t.Helper()
	if got.ID != want.ID || got.DAG != want.DAG || got.DAGName != want.DAGName || got.Window != want.Window || got.Chunk != want.Chunk ||
		!got.Created.Equal(want.Created) || got.Canceled != want.Canceled ||
		!got.CanceledAt.Equal(want.CanceledAt) || !got.ResumedAt.Equal(want.ResumedAt) || got.StopRunning != want.StopRunning ||
		!slices.EqualFunc(got.Partitions, want.Partitions, time.Time.Equal) {
		t.Errorf("%s = %+v; want %+v", what, got, want)
	}
}

// testBackfillDAGName checks that a backfill keeps its DAG's name, a
// label: PutBackfill of the known id with another name renames it and
// changes nothing else, and with none keeps the name.
func testBackfillDAGName(s *ledgerSuite) {
	b := ledger.BackfillRecord{ID: "bf-named", DAG: suiteDAG, DAGName: "events", Window: "2024-03-01/2024-03-31", Chunk: 1, Created: s.clock.Now()}
	got, err := s.l.PutBackfill(s.ctx, b)
	if err != nil {
		s.t.Fatalf("PutBackfill = %v", err)
	}
	checkBackfill(s.t, "PutBackfill of a named backfill", got, b)
	if err := s.l.CancelBackfill(s.ctx, b.ID, ledger.CancelOptions{}); err != nil {
		s.t.Fatal(err)
	}
	canceled, err := s.l.Backfill(s.ctx, b.ID)
	if err != nil {
		s.t.Fatal(err)
	}
	renamed := b
	renamed.DAGName, renamed.Window = "clicks", "2020" // the window is not the record's to change
	got, err = s.l.PutBackfill(s.ctx, renamed)
	want := canceled
	want.DAGName = "clicks"
	if err != nil {
		s.t.Fatalf("PutBackfill renaming = %v", err)
	}
	checkBackfill(s.t, "PutBackfill renaming the DAG", got, want)
	for _, name := range []string{"", "clicks"} {
		again := b
		again.DAGName = name
		if got, err := s.l.PutBackfill(s.ctx, again); err != nil {
			s.t.Fatal(err)
		} else {
			checkBackfill(s.t, fmt.Sprintf("PutBackfill with name %q", name), got, want)
		}
	}
	if got, err := s.l.Backfill(s.ctx, b.ID); err != nil {
		s.t.Fatal(err)
	} else {
		checkBackfill(s.t, "Backfill after the rename", got, want)
	}
}

func testCanceledBackfill(s *ledgerSuite) {
	if _, err := s.l.PutBackfill(s.ctx, ledger.BackfillRecord{ID: suiteBackfill, DAG: suiteDAG}); err != nil {
		s.t.Fatal(err)
	}
	running := s.claim(req(alpha, part(0)))
	if err := s.l.CancelBackfill(s.ctx, suiteBackfill, ledger.CancelOptions{}); err != nil {
		s.t.Fatal(err)
	}
	s.refuse(req(beta, part(1)), "")
	// Running partitions may finish.
	if err := s.l.Heartbeat(s.ctx, running, suiteLease); err != nil {
		s.t.Errorf("Heartbeat of a canceled backfill's running lease = %v; want nil", err)
	}
	s.finish(running, ledger.StateCanceled)
	s.refuse(req(beta, part(0)), "")
	// Other backfills and ordinary runs go on.
	r := req(beta, part(1))
	r.Backfill = ""
	s.claim(r)
	r = req(beta, part(2))
	r.Backfill = "tranchetest-another-backfill"
	s.claim(r)
}

// testResumeBackfill cancels and resumes a backfill: claims are refused
// while it is canceled and granted once it is resumed, and the record
// keeps when it was last canceled and last resumed.
func testResumeBackfill(s *ledgerSuite) {
	if err := s.l.ResumeBackfill(s.ctx, "bf-unknown"); !errors.Is(err, ledger.ErrUnknownBackfill) {
		s.t.Errorf("ResumeBackfill of an unknown id = %v; want an error matching ErrUnknownBackfill", err)
	}
	b := ledger.BackfillRecord{ID: suiteBackfill, DAG: suiteDAG, Window: "2024-03-01/2024-03-31", Chunk: 1, Created: s.clock.Now()}
	if _, err := s.l.PutBackfill(s.ctx, b); err != nil {
		s.t.Fatal(err)
	}
	check := func(what string) {
		s.t.Helper()
		got, err := s.l.Backfill(s.ctx, b.ID)
		if err != nil {
			s.t.Fatalf("%s: Backfill = %v", what, err)
		}
		checkBackfill(s.t, what+": Backfill", got, b)
	}
	resume := func(what string) {
		s.t.Helper()
		if err := s.l.ResumeBackfill(s.ctx, b.ID); err != nil {
			s.t.Fatalf("%s: ResumeBackfill = %v", what, err)
		}
	}
	cancel := func(what string, stopRunning bool) {
		s.t.Helper()
		if err := s.l.CancelBackfill(s.ctx, b.ID, ledger.CancelOptions{StopRunning: stopRunning}); err != nil {
			s.t.Fatalf("%s: CancelBackfill = %v", what, err)
		}
	}

	s.clock.Advance(time.Minute)
	resume("a backfill never canceled")
	check("ResumeBackfill of a backfill never canceled") // changes nothing

	s.clock.Advance(time.Minute)
	cancel("first cancel", false)
	b.Canceled, b.CanceledAt = true, s.clock.Now()
	check("CancelBackfill")
	s.clock.Advance(time.Minute)
	cancel("second cancel", false)
	check("CancelBackfill of a canceled backfill") // keeps the first time
	s.refuse(req(alpha, part(0)), "")
	s.clock.Advance(time.Minute)
	cancel("cancel with stopRunning", true)
	b.StopRunning = true // and keeps the first time
	check("CancelBackfill with stopRunning of a canceled backfill")
	s.clock.Advance(time.Minute)
	cancel("cancel without stopRunning", false)
	check("CancelBackfill without stopRunning of a backfill canceled with") // StopRunning stays

	s.clock.Advance(time.Minute)
	resume("resume")
	b.Canceled, b.StopRunning, b.ResumedAt = false, false, s.clock.Now()
	check("ResumeBackfill") // StopRunning cleared
	s.finish(s.claim(req(alpha, part(0))), succeeded)
	s.clock.Advance(time.Minute)
	resume("second resume")
	check("ResumeBackfill of a resumed backfill") // keeps the first time

	s.clock.Advance(time.Minute)
	cancel("cancel after a resume", true)
	b.Canceled, b.CanceledAt, b.StopRunning = true, s.clock.Now(), true
	check("CancelBackfill with stopRunning after a resume")
	s.refuse(req(beta, part(1)), "")
	s.clock.Advance(time.Minute)
	resume("resume after the second cancel")
	b.Canceled, b.StopRunning, b.ResumedAt = false, false, s.clock.Now()
	check("ResumeBackfill after the second cancel")
	s.finish(s.claim(req(beta, part(1))), succeeded)

	if got, err := s.l.PutBackfill(s.ctx, ledger.BackfillRecord{ID: b.ID, DAG: suiteDAG, Window: "2020"}); err != nil {
		s.t.Fatal(err)
	} else {
		checkBackfill(s.t, "PutBackfill of a resumed backfill", got, b) // the stored record
	}
	if bs, err := s.l.Backfills(s.ctx); err != nil || len(bs) != 1 {
		s.t.Fatalf("Backfills = %+v, %v; want the one backfill", bs, err)
	} else {
		checkBackfill(s.t, "Backfills", bs[0], b)
	}
}

// testBackfillRecordFields puts records with every field set: a backfill
// of chosen partitions, and one canceled and resumed before it was put.
func testBackfillRecordFields(s *ledgerSuite) {
	t0 := s.clock.Now()
	chosen := ledger.BackfillRecord{ID: "bf-chosen", DAG: suiteDAG, Window: "hour 2024-03-01T00:00Z..2024-03-02T00:00Z", Chunk: 1,
		Partitions: []time.Time{part(0).Start, part(3).Start.In(suiteIST), part(4).Start, part(24).Start}}
	got, err := s.l.PutBackfill(s.ctx, chosen)
	if err != nil {
		s.t.Fatalf("PutBackfill of chosen partitions = %v", err)
	}
	chosen.Created = t0
	checkBackfill(s.t, "PutBackfill of chosen partitions", got, chosen)
	got.Partitions[0] = suiteTo // the caller's copy
	if got, err := s.l.Backfill(s.ctx, chosen.ID); err != nil {
		s.t.Fatal(err)
	} else {
		checkBackfill(s.t, "Backfill of chosen partitions", got, chosen)
	}

	marked := ledger.BackfillRecord{ID: "bf-marked", DAG: suiteDAG, Window: "2024", Chunk: 2, Created: t0.Add(-time.Hour),
		Canceled: true, CanceledAt: t0.Add(-30 * time.Minute), ResumedAt: t0.Add(-40 * time.Minute), StopRunning: true}
	if got, err := s.l.PutBackfill(s.ctx, marked); err != nil {
		s.t.Fatal(err)
	} else {
		checkBackfill(s.t, "PutBackfill with CanceledAt, ResumedAt and StopRunning", got, marked)
	}
	bs, err := s.l.Backfills(s.ctx)
	if err != nil || len(bs) != 2 {
		s.t.Fatalf("Backfills = %+v, %v; want two", bs, err)
	}
	checkBackfill(s.t, "Backfills[0]", bs[0], chosen)
	checkBackfill(s.t, "Backfills[1]", bs[1], marked)
}
