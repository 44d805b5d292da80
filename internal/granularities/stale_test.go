package granularities_test

import (
	"testing"
	"time"

	"github.com/tranche-dev/tranche/internal/granularities"
	"github.com/tranche-dev/tranche/ledger"
)

func TestStale(t *testing.T) {
	at := func(min int) time.Time { return time.Date(2026, 3, 9, 1, min, 0, 0, time.UTC) }
	run := func(state ledger.State, started, finished int) *ledger.Attempt {
		return &ledger.Attempt{State: state, Started: at(started), Finished: at(finished)}
	}
	type up struct {
		key string
		a   *ledger.Attempt
	}
	own := run(ledger.StateSucceeded, 10, 11)
	cases := []struct {
		name string
		own  *ledger.Attempt
		ups  []up
		want string
	}{
		{"read after it landed", own, []up{{"05:00", run(ledger.StateSucceeded, 1, 2)}}, ""},
		{"landed again after", own, []up{{"05:00", run(ledger.StateSucceeded, 1, 2)}, {"06:00", run(ledger.StateSucceeded, 20, 21)}}, "stale: upstream events 06:00 rematerialized"},
		// Ended while the partition ran: it may have read the rows
		// before the new ones landed.
		{"ended while it ran", own, []up{{"05:00", run(ledger.StateSucceeded, 9, 10)}, {"06:00", run(ledger.StateSucceeded, 2, 11)}}, "stale: upstream events 06:00 rematerialized"},
		{"ended as it began", own, []up{{"05:00", run(ledger.StateSucceeded, 5, 10)}}, ""},
		{"the newest named", own, []up{{"05:00", run(ledger.StateSucceeded, 30, 40)}, {"06:00", run(ledger.StateSucceeded, 20, 21)}, {"07:00", run(ledger.StateSucceeded, 20, 35)}}, "stale: upstream events 05:00 rematerialized"},
		{"a failed rerun upstream", own, []up{{"05:00", run(ledger.StateFailed, 20, 21)}}, ""},
		{"never run upstream", own, []up{{"05:00", nil}}, ""},
		{"own failed", run(ledger.StateFailed, 10, 11), []up{{"05:00", run(ledger.StateSucceeded, 20, 21)}}, ""},
		{"own never run", nil, []up{{"05:00", run(ledger.StateSucceeded, 20, 21)}}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := granularities.NewStale(c.own)
			for _, u := range c.ups {
				if s.Newer(u.a) {
					s.Name("events", u.key)
				}
			}
			if got := s.Why(); got != c.want {
				t.Errorf("Why = %q, want %q", got, c.want)
			}
		})
	}
}
