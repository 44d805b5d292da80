package tranche

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// SlotsAt returns the slots of schedule g that the fire times close, as
// [SlotAt] does for one, oldest first and each once: the partitions of a
// backfill of chosen slots (see backfill.Backfill.Partitions), as Dagu's repeated
// --slot names them. A time that is not a fire time is refused with the
// nearest fire times before and after it; every such time is reported.
// Each slot is in its fire's location: give the fires in one location.
func SlotsAt(g TimeGranularity, fires ...time.Time) ([]TimePartition, error) {
	if len(fires) == 0 {
		return nil, fmt.Errorf("tranche: SlotsAt of no fire time: name at least one")
	}
	ps := make([]TimePartition, 0, len(fires))
	var errs []error
	for _, fire := range fires {
		p, err := SlotAt(g, fire)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		ps = append(ps, p)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return sortPartitions(ps), nil
}

// sortPartitions sorts ps by start and drops repetitions, in place.
func sortPartitions(ps []TimePartition) []TimePartition {
	slices.SortFunc(ps, func(a, b TimePartition) int { return a.Start.Compare(b.Start) })
	return slices.CompactFunc(ps, func(a, b TimePartition) bool { return a.Start.Equal(b.Start) })
}
