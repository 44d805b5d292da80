package integer

import (
	"math"
	"testing"
)

func TestInt64(t *testing.T) {
	tests := []struct {
		v    any
		want int64
		ok   bool
	}{
		{int(-3), -3, true},
		{int8(-128), -128, true},
		{int16(300), 300, true},
		{int32(-1 << 31), -1 << 31, true},
		{int64(math.MinInt64), math.MinInt64, true},
		{uint8(255), 255, true},
		{uint16(65535), 65535, true},
		{uint32(math.MaxUint32), math.MaxUint32, true},
		{uint(math.MaxInt64), math.MaxInt64, true},
		{uint(math.MaxInt64 + 1), 0, false},
		{uint64(math.MaxUint64), 0, false},
		{1.0, 0, false},
		{"1", 0, false},
		{nil, 0, false},
	}
	for _, tt := range tests {
		got, ok := Int64(tt.v)
		if got != tt.want || ok != tt.ok {
			t.Errorf("Int64(%T %v) = %d, %v; want %d, %v", tt.v, tt.v, got, ok, tt.want, tt.ok)
		}
	}
}
