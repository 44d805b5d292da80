// Package zone names time zones the way identities and text forms of
// tranche need: the same calendar under the same name on every host.
package zone

import (
	"errors"
	"time"

	"github.com/tranche-dev/tranche/internal/calendar"
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

// OffsetZone returns the canonical location of the fixed UTC offset off
// (seconds east): time.UTC for zero, else a zone named by the offset.
func OffsetZone(off int) *time.Location {
	if off == 0 {
		return time.UTC
	}
	return time.FixedZone(OffsetName(off), off)
}

// OffsetName writes off as "+01:00", "-03:30", or with seconds
// ("+00:19:32") when it is not a whole number of minutes; "UTC" for zero.
func OffsetName(off int) string {
	if off == 0 {
		return "UTC"
	}
	b := make([]byte, 0, len("+00:00:00"))
	sign := byte('+')
	if off < 0 {
		sign, off = '-', -off
	}
	b = append(b, sign)
	b = append2(b, off/3600)
	b = append(b, ':')
	b = append2(b, off/60%60)
	if s := off % 60; s != 0 {
		b = append(b, ':')
		b = append2(b, s)
	}
	return string(b)
}

// ParseOffsetName inverts OffsetName for a nonzero offset: "+01:00",
// "-03:30", "+00:19:32".
func ParseOffsetName(s string) (off int, ok bool) {
	if (len(s) != len("+00:00") && len(s) != len("+00:00:00")) || (s[0] != '+' && s[0] != '-') || s[3] != ':' {
		return 0, false
	}
	h, ok1 := calendar.Digits(s[1:3])
	m, ok2 := calendar.Digits(s[4:6])
	sec, ok3 := 0, true
	if len(s) > 6 {
		if s[6] != ':' {
			return 0, false
		}
		sec, ok3 = calendar.Digits(s[7:9])
	}
	if !ok1 || !ok2 || !ok3 || h > 23 || m > 59 || sec > 59 {
		return 0, false
	}
	off = h*3600 + m*60 + sec
	if off == 0 {
		return 0, false // a zero offset is named UTC
	}
	if s[0] == '-' {
		off = -off
	}
	return off, true
}

// Name returns the name of loc that identities and text forms use: its
// own name when it has one, and for a location without a name, or for
// time.Local, the name of its fixed offset (see the comment above).
func Name(loc *time.Location) string {
	if loc == nil {
		return "UTC"
	}
	name := loc.String()
	if name != "" && name != "Local" {
		return name
	}
	if off, ok := FixedOffset(loc); ok {
		return OffsetName(off)
	}
	return name
}

// FixedOffset reports whether loc keeps one offset for all time, and which.
func FixedOffset(loc *time.Location) (int, bool) {
	sp := calendar.SpanAt(loc, 0)
	return int(sp.Offset), sp.Start == calendar.Beginning && sp.End == calendar.Forever
}

// Same reports whether a and b name the same zone.
func Same(a, b *time.Location) bool { return a == b || Name(a) == Name(b) }

// Load returns the location of a zone as the text forms write it: a
// zone database name, "UTC", or a fixed offset ("+01:00"). It refuses
// "Local" and "", which name the host's zone.
func Load(name string) (*time.Location, error) {
	if off, ok := ParseOffsetName(name); ok {
		return OffsetZone(off), nil
	}
	if name == "" || name == "Local" {
		return nil, ErrHostZone
	}
	return time.LoadLocation(name)
}

// ErrHostZone refuses a zone name that means the host's zone.
var ErrHostZone = errors.New("it names the host's zone (time.Local), another calendar on another host; name the zone, as in Europe/Berlin, or write a fixed offset, as in +01:00")

// Portable reports whether loc's Name means the same calendar on
// every host.
func Portable(loc *time.Location) bool {
	name := Name(loc)
	if _, ok := ParseOffsetName(name); ok || name == "UTC" {
		return true
	}
	if name == "" || name == "Local" {
		return false
	}
	_, err := time.LoadLocation(name)
	return err == nil
}

func append2(b []byte, v int) []byte {
	return append(b, byte('0'+v/10), byte('0'+v%10))
}
