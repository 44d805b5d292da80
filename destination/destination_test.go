package destination_test

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

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
		{"another DAG's older token", batch("e", 4), held, true},
		{"another DAG's newer token replaces", batch("e", 6), destination.Fence{DAG: "e", Token: 6}, false},
		{"another DAG's equal token replaces", batch("e", 5), destination.Fence{DAG: "e", Token: 5}, false},
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

func TestDeliveryID(t *testing.T) {
	b := tranche.Batch{Asset: "a", Partition: tranche.PartitionOf(tranche.Day, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), RunID: "r", Token: 3}
	if first, again := destination.DeliveryID(b), destination.DeliveryID(b); first != again {
		t.Fatalf("DeliveryID is not stable: %q, then %q", first, again)
	}
	for name, other := range map[string]tranche.Batch{
		"token": {Asset: "a", Partition: b.Partition, RunID: "r", Token: 4},
		"asset": {Asset: "b", Partition: b.Partition, RunID: "r", Token: 3},
		"key":   {Asset: "a", Partition: b.Partition.Next(), RunID: "r", Token: 3},
		"run":   {Asset: "a", Partition: b.Partition, RunID: "s", Token: 3},
	} {
		if destination.DeliveryID(other) == destination.DeliveryID(b) {
			t.Errorf("a batch with another %s has the same delivery id", name)
		}
	}
	// The rows are not part of the id: a retried delivery of one
	// attempt's write is the same delivery.
	if with := (tranche.Batch{Asset: "a", Partition: b.Partition, RunID: "r", Token: 3, Rows: []tranche.Row{{"x": 1}}}); destination.DeliveryID(with) != destination.DeliveryID(b) {
		t.Error("rows change the delivery id")
	}
	// Pinned: destinations store delivery ids, so the form never changes.
	if got := destination.DeliveryID(b); got != "0e62ac3387b7e2ad" {
		t.Errorf("DeliveryID = %q, want 0e62ac3387b7e2ad", got)
	}
}

// TestNewest checks the appending recipe's reader: of the deliveries an
// appending destination holds, each partition keeps one, the one a
// replacing destination would hold.
func TestNewest(t *testing.T) {
	d := func(key, dag string, token int64, id string, rows ...int) destination.Delivery[int] {
		return destination.Delivery[int]{Asset: "a", Partition: key, DAG: dag, Token: token, ID: id, Rows: rows}
	}
	got := destination.Newest([]destination.Delivery[int]{
		d("p", "v1", 1, "p1", 1, 2),
		d("q", "v1", 2, "q2", 5),
		d("p", "v1", 2, "p2", 3),    // a takeover
		d("p", "v1", 2, "p2", 3),    // redelivered
		d("p", "v1", 1, "p1", 1, 2), // the stalled first attempt, appended last
		d("q", "v1", 1, "q1", 4),    // stale
		d("r", "", 0, "r0", 6),
	})
	want := []destination.Delivery[int]{d("p", "v1", 2, "p2", 3), d("q", "v1", 2, "q2", 5), d("r", "", 0, "r0", 6)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Newest (-want +got):\n%s", diff)
	}
}
