package fencing

import "testing"

func TestNext(t *testing.T) {
	const ms = int64(1_800_000_000_000)
	token := func(claimedMS int64, attempt int64) int64 { return claimedMS<<20 | attempt }
	tests := []struct {
		name         string
		heldDAG      string
		held         int64
		dag          string
		token        int64
		wantAdmitted bool
		wantDAG      string
		wantHeld     int64
	}{
		{"unfenced write keeps the fence", "a", token(ms, 2), "a", 0, true, "a", token(ms, 2)},
		{"first fenced write", "", 0, "a", token(ms, 1), true, "a", token(ms, 1)},
		{"same attempt again", "a", token(ms, 2), "a", token(ms, 2), true, "a", token(ms, 2)},
		{"newer attempt", "a", token(ms, 2), "a", token(ms+5, 3), true, "a", token(ms+5, 3)},
		{"older attempt", "a", token(ms+5, 3), "a", token(ms, 2), false, "a", token(ms+5, 3)},
		// The ledger's clock stepped back between two claims of one
		// identity: the attempt numbers still order them.
		{"newer attempt, clock stepped back", "a", token(ms, 2), "a", token(ms-60_000, 3), true, "a", token(ms-60_000, 3)},
		{"older attempt, clock stepped back", "a", token(ms-60_000, 3), "a", token(ms, 2), false, "a", token(ms-60_000, 3)},
		// Across identities (a deploy), the claims' instants order them.
		{"deploy's newer claim", "a", token(ms, 7), "b", token(ms+1, 1), true, "b", token(ms+1, 1)},
		{"old identity's stale claim", "b", token(ms+1, 1), "a", token(ms, 7), false, "b", token(ms+1, 1)},
		{"release before claim instants", "a", 4, "b", token(ms, 1), true, "b", token(ms, 1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dag, held, admitted := Next(tt.heldDAG, tt.held, tt.dag, tt.token)
			if admitted != tt.wantAdmitted || dag != tt.wantDAG || held != tt.wantHeld {
				t.Errorf("Next(%q, %d, %q, %d) = %q, %d, %v; want %q, %d, %v",
					tt.heldDAG, tt.held, tt.dag, tt.token, dag, held, admitted, tt.wantDAG, tt.wantHeld, tt.wantAdmitted)
			}
		})
	}
}
