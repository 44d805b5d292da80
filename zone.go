package tranche

import (
	"time"

	"github.com/tranche-dev/tranche/internal/zone"
)

// Zones are part of what names a DAG, a backfill and a window, so the name
// of a location must mean the same calendar on every host. A zone database
// name does. Two kinds of location do not carry one:
//
//   - a fixed offset without a name, as time.Parse returns for
//     "2026-01-01T00:00:00+01:00" (or with any name the caller chose):
//     it is named by its offset, "+01:00" or "-03:30", and a zero offset
//     is "UTC";
//   - time.Local, the host's zone, named "Local" when TZ is not set: on a
//     host whose zone is a fixed offset (a UTC container) it is named by
//     that offset like any fixed zone; on a host with daylight saving time
//     it keeps the name "Local", which identities use as they find it and
//     the window text form refuses, since it would name another calendar
//     on another host. Load the zone by name with time.LoadLocation
//     instead.
//
// Bounds parsed from text ([ParseBound]) never carry time.Local: an offset
// gives [time.UTC] or the fixed zone named by that offset, on every host.

// The zone helpers, with their rules, live in internal/zone, which the
// backfill package shares.
func offsetZone(off int) *time.Location            { return zone.OffsetZone(off) }
func zoneName(loc *time.Location) string           { return zone.Name(loc) }
func sameZone(a, b *time.Location) bool            { return zone.Same(a, b) }
func loadZone(name string) (*time.Location, error) { return zone.Load(name) }
func portableZone(loc *time.Location) bool         { return zone.Portable(loc) }
