package ledger_test

import (
	"errors"
	"slices"
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

// TestJudgeVersion is the table of the rule of deploys: the verdict of a
// backfill's claim for each attempt of another version of its DAG at the
// partition, relative to the backfill's creation.
func TestJudgeVersion(t *testing.T) {
	since := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
	now := since.Add(time.Hour)
	p := tranche.PartitionOf(tranche.Day, since)
	other := func(s ledger.State, started, finished, until time.Time) *ledger.Attempt {
		return &ledger.Attempt{DAG: "new", State: s, Started: started, Finished: finished, LeaseUntil: until, Worker: "w", Number: 1}
	}
	before, after := since.Add(-time.Minute), since.Add(time.Minute)
	tests := []struct {
		name     string
		other    *ledger.Attempt
		policy   ledger.RerunPolicy
		backfill string
		want     ledger.Action
	}{
		{"none", nil, ledger.RerunFailed, "bf", ledger.ActionRun},
		{"succeeded after the backfill's creation", other(ledger.StateSucceeded, after, after, after), ledger.RerunFailed, "bf", ledger.ActionSkipSuperseded},
		{"succeeded at its creation", other(ledger.StateSucceeded, before, since, since), ledger.RerunNone, "bf", ledger.ActionSkipSuperseded},
		{"started before, succeeded after", other(ledger.StateSucceeded, before, after, after), ledger.RerunStale, "bf", ledger.ActionSkipSuperseded},
		{"succeeded before: a rollback created afterwards", other(ledger.StateSucceeded, before, before, before), ledger.RerunFailed, "bf", ledger.ActionRun},
		{"succeeded after, under RerunAll: a rollback", other(ledger.StateSucceeded, after, after, after), ledger.RerunAll, "bf", ledger.ActionRun},
		{"succeeded after, an ordinary run", other(ledger.StateSucceeded, after, after, after), ledger.RerunFailed, "", ledger.ActionRun},
		{"running, claimed after, live lease", other(ledger.StateRunning, after, time.Time{}, now.Add(time.Second)), ledger.RerunFailed, "bf", ledger.ActionSkipRunning},
		{"running, claimed after, lease expired", other(ledger.StateRunning, after, time.Time{}, now), ledger.RerunFailed, "bf", ledger.ActionRun},
		{"running, claimed before", other(ledger.StateRunning, before, time.Time{}, now.Add(time.Second)), ledger.RerunFailed, "bf", ledger.ActionRun},
		{"failed after", other(ledger.StateFailed, after, after, after), ledger.RerunFailed, "bf", ledger.ActionRun},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := ledger.ClaimRequest{Backfill: tt.backfill, Policy: tt.policy}
			if got := req.JudgeVersion(tt.other, since, now); got != tt.want {
				t.Errorf("JudgeVersion = %v; want %v", got, tt.want)
			}
			err := req.AdmitsVersion(tt.other, p, since, now)
			if (err == nil) != (tt.want == ledger.ActionRun) || (err != nil && !errors.Is(err, ledger.ErrNotClaimable)) {
				t.Errorf("AdmitsVersion = %v; want an error matching ErrNotClaimable exactly when the verdict is not ActionRun", err)
			}
			if got := errors.Is(err, ledger.ErrSuperseded); got != (tt.want == ledger.ActionSkipSuperseded) {
				t.Errorf("AdmitsVersion = %v: matches ErrSuperseded %v; want %v", err, got, !got)
			}
		})
	}
}

// TestVersions checks which identities a backfill's record links as
// versions of its DAG: those of the backfills of its name, not its own,
// each once; none for a DAG without a name.
func TestVersions(t *testing.T) {
	records := []ledger.BackfillRecord{
		{ID: "a", DAG: "v1", DAGName: "events"}, {ID: "b", DAG: "v2", DAGName: "events"}, {ID: "c", DAG: "v2", DAGName: "events"},
		{ID: "d", DAG: "v3", DAGName: "other"}, {ID: "e", DAG: "v4"}, {ID: "f", DAG: "v5", DAGName: "events"},
	}
	for _, tt := range []struct {
		rec  ledger.BackfillRecord
		want []string
	}{
		{records[0], []string{"v2", "v5"}},
		{records[1], []string{"v1", "v5"}},
		{records[3], nil},
		{records[4], nil},
	} {
		if got := tt.rec.Versions(records); !slices.Equal(got, tt.want) {
			t.Errorf("Versions of %s (%s %q) = %v; want %v", tt.rec.ID, tt.rec.DAG, tt.rec.DAGName, got, tt.want)
		}
	}
}
