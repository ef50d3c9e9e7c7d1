package redisnum

import (
	"math"
	"testing"
)

func TestParseTimeout(t *testing.T) {
	for _, c := range []struct {
		in string
		ms int64
		ok bool
	}{
		{"0", 0, true}, {"1", 1000, true}, {"1.5", 1500, true}, {"0.001", 1, true},
		{"0.0001", 1, true}, {"0.0019", 2, true}, {"-1", -1000, true}, {"-0.0001", 0, true},
		{"9223372036854775", 9223372036854775000, true}, {"9223372036854776", math.MinInt64, true},
		{"-9223372036854776", math.MinInt64, true}, {"1e20", math.MinInt64, true},
		{"inf", math.MinInt64, true}, {"-inf", math.MinInt64, true}, {"0x1p3", 8000, true},
		{"x", 0, false}, {"", 0, false}, {"1 ", 0, false}, {"nan", 0, false},
	} {
		ms, ok := ParseTimeout([]byte(c.in))
		if ms != c.ms || ok != c.ok {
			t.Errorf("ParseTimeout(%q) = %d, %v; want %d, %v", c.in, ms, ok, c.ms, c.ok)
		}
	}
}
