package ledgertest

import (
	"time"

	"github.com/tranche-dev/tranche/ledger"
)

func testSchedulePause(s *ledgerSuite) {
	get := func(dag string) ledger.SchedulePause {
		s.t.Helper()
		p, err := s.l.SchedulePause(s.ctx, dag)
		if err != nil {
			s.t.Fatalf("SchedulePause(%q) = %v", dag, err)
		}
		return p
	}
	set := func(what string, p ledger.SchedulePause, want ledger.SchedulePause) {
		s.t.Helper()
		got, err := s.l.SetSchedulePause(s.ctx, suiteDAG, p)
		if err != nil {
			s.t.Fatalf("%s: SetSchedulePause = %v", what, err)
		}
		if !samePause(got, want) {
			s.t.Errorf("%s: SetSchedulePause returned %+v; want %+v", what, got, want)
		}
		if read := get(suiteDAG); !samePause(read, want) {
			s.t.Errorf("%s: SchedulePause = %+v; want %+v", what, read, want)
		}
	}
	if p := get(suiteDAG); p != (ledger.SchedulePause{}) {
		s.t.Errorf("SchedulePause of a DAG never paused = %+v; want the zero value", p)
	}
	set("resuming a schedule never paused", ledger.SchedulePause{By: "ops"}, ledger.SchedulePause{})

	paused := s.clock.Now()
	// The request's times are the ledger's to set.
	set("pausing", ledger.SchedulePause{Paused: true, By: "alice", Note: "source down", Since: paused.Add(-time.Hour)},
		ledger.SchedulePause{Paused: true, By: "alice", Note: "source down", Since: paused, PausedAt: paused})
	if p := get("tranchetest-other-dag"); p != (ledger.SchedulePause{}) {
		s.t.Errorf("SchedulePause of another DAG = %+v; want the zero value", p)
	}
	s.clock.Advance(time.Minute)
	set("pausing again", ledger.SchedulePause{Paused: true, By: "bob", Note: "again"},
		ledger.SchedulePause{Paused: true, By: "alice", Note: "source down", Since: paused, PausedAt: paused})
	s.clock.Advance(time.Minute)
	resumed := s.clock.Now()
	set("resuming", ledger.SchedulePause{By: "bob", Note: "source back"},
		ledger.SchedulePause{By: "bob", Note: "source back", Since: resumed, PausedAt: paused})
	s.clock.Advance(time.Minute)
	set("resuming again", ledger.SchedulePause{By: "carol"},
		ledger.SchedulePause{By: "bob", Note: "source back", Since: resumed, PausedAt: paused})
	again := s.clock.Now()
	set("pausing after a resume", ledger.SchedulePause{Paused: true, By: "carol"},
		ledger.SchedulePause{Paused: true, By: "carol", Since: again, PausedAt: again})
}

// samePause compares pauses, their times to the millisecond a SQL
// ledger keeps.
func samePause(a, b ledger.SchedulePause) bool {
	ms := func(t time.Time) int64 {
		if t.IsZero() {
			return 0
		}
		return t.UnixMilli()
	}
	return a.Paused == b.Paused && a.By == b.By && a.Note == b.Note && ms(a.Since) == ms(b.Since) && ms(a.PausedAt) == ms(b.PausedAt)
}
