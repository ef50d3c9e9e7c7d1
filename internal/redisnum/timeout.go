package redisnum

import (
	"math"
	"math/big"
)

// ParseTimeout reads a blocking command's timeout, in seconds, as Redis's
// getTimeoutFromObjectOrReply does: a long double (ParseLongDouble) times
// 1000, computed in x87 extended precision, rounded up and converted to a
// 64-bit integer, where a value out of range becomes -2^63. It returns
// milliseconds (0: wait forever); ok=false if b is not a number. A
// negative result is the caller's to refuse ("timeout is negative").
func ParseTimeout(b []byte) (ms int64, ok bool) {
	if n, ok := ParseInt(b); ok {
		// Exact in extended precision; out of range the conversion yields
		// -2^63.
		if n > math.MaxInt64/1000 || n < math.MinInt64/1000 {
			return math.MinInt64, true
		}
		return n * 1000, true
	}
	f, ok := ParseLongDouble(b)
	if !ok {
		return 0, false
	}
	if f.IsInf() {
		return math.MinInt64, true
	}
	p := new(big.Float).SetPrec(64).SetMode(big.ToNearestEven).Mul(f, big.NewFloat(1000))
	i, acc := p.Int(nil) // truncated towards zero
	if acc == big.Below {
		i.Add(i, big.NewInt(1)) // p was positive and not whole: ceil
	}
	if !i.IsInt64() {
		return math.MinInt64, true
	}
	return i.Int64(), true
}
