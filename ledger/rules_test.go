package ledger_test

import (
	"errors"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/ledger"
)

// TestJudge is the claim rules' table: the action for each latest
// attempt and policy, and Admits refusing exactly what Judge does not
// admit, with an error matching ErrNotClaimable.
func TestJudge(t *testing.T) {
	now := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
	p := tranche.PartitionOf(tranche.Day, now)
	at := func(s ledger.State, lease time.Time, rev int64) *ledger.Attempt {
		return &ledger.Attempt{State: s, LeaseUntil: lease, Revision: rev, Worker: "w", Number: 1}
	}
	tests := []struct {
		name   string
		latest *ledger.Attempt
		policy ledger.RerunPolicy
		rev    int64
		want   ledger.Action
	}{
		{"no attempt", nil, ledger.RerunNone, 0, ledger.ActionRun},
		{"running, live lease", at(ledger.StateRunning, now.Add(time.Second), 1), ledger.RerunAll, 9, ledger.ActionSkipRunning},
		{"running, lease expired now", at(ledger.StateRunning, now, 1), ledger.RerunNone, 0, ledger.ActionRun},
		{"succeeded, rerun failed", at(ledger.StateSucceeded, time.Time{}, 1), ledger.RerunFailed, 9, ledger.ActionSkipSucceeded},
		{"succeeded, rerun all, before the plan", at(ledger.StateSucceeded, time.Time{}, 5), ledger.RerunAll, 5, ledger.ActionRun},
		{"succeeded, rerun all, after the plan", at(ledger.StateSucceeded, time.Time{}, 6), ledger.RerunAll, 5, ledger.ActionSkipSucceeded},
		{"failed, rerun none", at(ledger.StateFailed, time.Time{}, 1), ledger.RerunNone, 0, ledger.ActionSkipRecorded},
		{"failed, default policy", at(ledger.StateFailed, time.Time{}, 1), "", 0, ledger.ActionRun},
		{"canceled, rerun failed", at(ledger.StateCanceled, time.Time{}, 1), ledger.RerunFailed, 0, ledger.ActionRun},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := ledger.ClaimRequest{Policy: tt.policy, Revision: tt.rev}
			if got := req.Judge(tt.latest, now); got != tt.want {
				t.Errorf("Judge = %v; want %v", got, tt.want)
			}
			err := req.Admits(tt.latest, p, now)
			if (err == nil) != (tt.want == ledger.ActionRun) || (err != nil && !errors.Is(err, ledger.ErrNotClaimable)) {
				t.Errorf("Admits = %v; want nil exactly when Judge admits, else ErrNotClaimable", err)
			}
		})
	}
}
