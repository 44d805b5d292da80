// Package integer reads the integers that rows hold, of any Go integer
// type, as the destinations store them: as int64.
package integer

import "math"

// Int64 returns v as an int64 when v is of a Go integer type and its
// value fits; false otherwise (a uint or uint64 above math.MaxInt64, or
// a value of another type).
func Int64(v any) (int64, bool) {
	switch n := v.(type) {
	case int:
		return int64(n), true
	case int64:
		return n, true
	case int32:
		return int64(n), true
	case int16:
		return int64(n), true
	case int8:
		return int64(n), true
	case uint8:
		return int64(n), true
	case uint16:
		return int64(n), true
	case uint32:
		return int64(n), true
	case uint:
		if uint64(n) <= math.MaxInt64 {
			return int64(n), true
		}
	case uint64:
		if n <= math.MaxInt64 {
			return int64(n), true
		}
	}
	return 0, false
}
