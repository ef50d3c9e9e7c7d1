package kvbench

import (
	"math"
	"strconv"
)

// YCSB's constants for its zipfian generators (core/.../generator).
const (
	// ZipfianConstant is YCSB's default skew (zipfian_constant, theta).
	ZipfianConstant = 0.99
	// scrambledItems and scrambledZetan are ScrambledZipfianGenerator's
	// fixed item space (10^10) and its precomputed zeta(10^10, 0.99): the
	// generator draws from this huge zipfian space and hashes the result
	// into [0, n), so the popular keys are spread over the keyspace
	// instead of being the first ones.
	scrambledItems = 10_000_000_000
	scrambledZetan = 26.46902820178302
)

// fnv64 is YCSB's Utils.fnvhash64: FNV-1a over the 8 little-endian bytes
// of v, made non-negative (Java's Math.abs).
func fnv64(v uint64) uint64 {
	h := uint64(0xCBF29CE484222325)
	for range 8 {
		h ^= v & 0xff
		h *= 1099511628211
		v >>= 8
	}
	if int64(h) < 0 {
		h = uint64(-int64(h)) // Math.abs; MinInt64 stays (as in Java), never seen in practice
	}
	return h
}

// AppendKey appends the YCSB key of record number n: "user" followed by
// the decimal FNV hash of n (CoreWorkload.buildKeyName with
// insertorder=hashed, the default, and zeropadding 1), so that keys
// inserted in sequence are not in key order.
func AppendKey(b []byte, n uint64) []byte {
	b = append(b, "user"...)
	return strconv.AppendUint(b, fnv64(n), 10)
}

// Zipfian draws integers in [0, n) from a zipfian distribution with
// exponent theta, item 0 the most popular (YCSB's ZipfianGenerator, after
// Gray et al., "Quickly generating billion-record synthetic databases").
// It holds no random source: Next takes a uniform draw in [0, 1).
type Zipfian struct {
	n                                   uint64
	theta, alpha, zetan, eta, halfPowTh float64
}

// NewZipfian returns a generator over [0, n) with exponent theta (0 <
// theta < 1). It computes zeta(n, theta) in O(n).
func NewZipfian(n uint64, theta float64) *Zipfian {
	return newZipfianZeta(n, theta, zeta(n, theta))
}

func newZipfianZeta(n uint64, theta, zetan float64) *Zipfian {
	z := &Zipfian{n: n, theta: theta, zetan: zetan}
	z.alpha = 1 / (1 - theta)
	zeta2 := zeta(2, theta)
	z.eta = (1 - math.Pow(2/float64(n), 1-theta)) / (1 - zeta2/zetan)
	z.halfPowTh = 1 + math.Pow(0.5, theta)
	return z
}

// zeta is sum_{i=1..n} 1/i^theta.
func zeta(n uint64, theta float64) float64 {
	s := 0.0
	for i := uint64(1); i <= n; i++ {
		s += 1 / math.Pow(float64(i), theta)
	}
	return s
}

// Next maps the uniform draw u in [0, 1) to an item.
func (z *Zipfian) Next(u float64) uint64 {
	uz := u * z.zetan
	if uz < 1 {
		return 0
	}
	if uz < z.halfPowTh {
		return 1
	}
	v := uint64(float64(z.n) * math.Pow(z.eta*u-z.eta+1, z.alpha))
	if v >= z.n { // rounding at u close to 1
		v = z.n - 1
	}
	return v
}

// Scrambled is YCSB's ScrambledZipfianGenerator over [0, n): a zipfian
// draw over 10^10 items with theta 0.99, hashed into [0, n). The hot items
// are scattered over the range; the skew is close to a zipfian over n
// (hash collisions merge a few popular items).
type Scrambled struct {
	n uint64
	z *Zipfian
}

// NewScrambled returns the scrambled zipfian generator over [0, n).
func NewScrambled(n uint64) *Scrambled {
	return &Scrambled{n: n, z: newZipfianZeta(scrambledItems, ZipfianConstant, scrambledZetan)}
}

// Next maps the uniform draw u in [0, 1) to an item in [0, n).
func (s *Scrambled) Next(u float64) uint64 { return fnv64(s.z.Next(u)) % s.n }
