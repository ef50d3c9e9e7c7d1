package redisnum

import "math"

// Sortable maps a score to 8 bytes whose unsigned order is the numeric
// order (-0 and +0 map to the same value).
func Sortable(f float64) uint64 {
	if f == 0 {
		f = 0 // -0 -> +0
	}
	b := math.Float64bits(f)
	if b>>63 == 1 {
		return ^b
	}
	return b | 1<<63
}

// Unsortable inverts Sortable.
func Unsortable(u uint64) float64 {
	if u>>63 == 1 {
		return math.Float64frombits(u &^ (1 << 63))
	}
	return math.Float64frombits(^u)
}
