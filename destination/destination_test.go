package destination_test

import (
	"errors"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/destination"
)

// TestAdmit pins the fencing rules of the package documentation, which
// every shipped destination keeps through Admit.
func TestAdmit(t *testing.T) {
	p := tranche.PartitionOf(tranche.Day, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	batch := func(dag string, token int64) tranche.Batch {
		return tranche.Batch{Asset: "a", Column: "day", Partition: p, DAG: dag, Token: token}
	}
	held := destination.Fence{DAG: "d", Token: 5}
	for _, tc := range []struct {
		name  string
		b     tranche.Batch
		want  destination.Fence
		stale bool
	}{
		{"newer", batch("d", 6), destination.Fence{DAG: "d", Token: 6}, false},
		{"the same attempt again", batch("d", 5), held, false},
		{"older", batch("d", 4), held, true},
		{"unfenced keeps the fence", batch("", 0), held, false},
		{"another DAG replaces", batch("e", 1), destination.Fence{DAG: "e", Token: 1}, false},
	} {
		got, err := held.Admit(tc.b)
		var stale *tranche.StaleWriteError
		switch {
		case tc.stale && (!errors.As(err, &stale) || !errors.Is(err, tranche.ErrFenced) || stale.Latest != 5 || stale.Key != p.Key()):
			t.Errorf("%s: %v; want a *StaleWriteError of latest token 5, matching ErrFenced", tc.name, err)
		case !tc.stale && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case got != tc.want:
			t.Errorf("%s: fence %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
