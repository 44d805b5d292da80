package tranche_test

import (
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/tranche-dev/tranche"
)

// TestPropertyMappingsTile: for any two granularities (schedules too) and
// zone, the partitions a downstream partition maps to are genuine
// upstream partitions, consecutive (no gap, no overlap), and cover it:
// exactly, from its start to its end, when the upstream nests in it (a
// day's hours, a month's days), as one partition holding it when it
// nests in the upstream, and from the one holding its start to the one
// holding its last second otherwise. A trailing window is Lookback's
// window at the partition's last second, and with an offset ends before
// the upstream partition holding that second.
func TestPropertyMappingsTile(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		loc := drawZone(t)
		gd := drawGranularity(t)
		gu := drawGranularity(t)
		// A year of minutes is half a million partitions: keep a
		// downstream partition to at most ~20,000 upstream ones.
		if nominal(gd)/nominal(gu) > 20_000 {
			gu = gd
		}
		lookback := rapid.Int64Range(1, min(30, budget(gu))).Draw(t, "lookback")
		offset := rapid.Int64Range(0, min(30, budget(gu)-lookback)).Draw(t, "offset")
		// Far enough from 1972 for the trailing window to start after it.
		d := tranche.PartitionOf(gd, drawInstantAfter(t, loc, "t", minInstant+(lookback+offset+1)*nominal(gu)+nominal(gd)))
		lastSecond := d.End.Add(-time.Second)
		got := tranche.MappedPartitions(tranche.Mapping{}, gu, d)
		consecutive(t, gu, got)
		if got[0].Start.After(d.Start) || !got[len(got)-1].End.After(lastSecond) {
			t.Fatalf("%v of %v: %v to %v does not cover it", gu, d, got[0], got[len(got)-1])
		}
		switch {
		case tranche.Nests(gu, gd):
			if !got[0].Start.Equal(d.Start) || !got[len(got)-1].End.Equal(d.End) {
				t.Fatalf("%v nests in %v, but %v's partitions run from %v to %v", gu, gd, d, got[0], got[len(got)-1])
			}
			for _, p := range got {
				samePartition(t, "the downstream partition holding "+p.Key(), d, tranche.PartitionOf(gd, p.Start))
				samePartition(t, "the downstream partition holding the end of "+p.Key(), d, tranche.PartitionOf(gd, p.End.Add(-time.Second)))
			}
		case tranche.Nests(gd, gu):
			if len(got) != 1 {
				t.Fatalf("%v nests in %v, but %v maps to %d partitions", gd, gu, d, len(got))
			}
		}
		// A trailing window.
		tr := tranche.MappedPartitions(tranche.Mapping{Lookback: int(lookback), Offset: int(offset)}, gu, d)
		consecutive(t, gu, tr)
		w, err := tranche.Lookback(lastSecond, int(lookback), int(offset), gu)
		if err != nil {
			t.Fatal(err)
		}
		if want := slices.Collect(w.OldestFirst()); len(want) != len(tr) || !want[0].Equal(tr[0]) || !want[len(want)-1].Equal(tr[len(tr)-1]) {
			t.Fatalf("trailing %d offset %d of %v: %v, Lookback gives %v", lookback, offset, d, tr, w)
		}
		if current := tranche.PartitionOf(gu, lastSecond); offset > 0 && tr[len(tr)-1].End.After(current.Start) {
			t.Fatalf("trailing %d offset %d of %v ends at %v, after the current %v starts", lookback, offset, d, tr[len(tr)-1].End, current)
		}
	})
}

// consecutive fails unless ps are partitions of g, each ending where the
// next starts.
func consecutive(t *rapid.T, g tranche.TimeGranularity, ps []tranche.TimePartition) {
	t.Helper()
	if len(ps) == 0 {
		t.Fatalf("no partitions of %v", g)
	}
	for i, p := range ps {
		samePartition(t, "the partition holding "+p.Key(), tranche.PartitionOf(g, p.Start), p)
		if i > 0 && !ps[i-1].End.Equal(p.Start) {
			t.Fatalf("%v then %v: a gap or an overlap", ps[i-1], p)
		}
	}
}
